"""The registry of paper items: each figure and table of the paper with its named target, title and what a config
needs for it (`items`, one table), and the reports, notebooks and captions a config defines from it (`catalogue`).
Read by the workflow's rules, the planner and the pages, so it sits below planning and reporting. No JAX."""
