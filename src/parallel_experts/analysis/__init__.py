"""Reading results into judgements: statistics and verdict rules, the per-domain analyses, the expert count, the
systems tables and each claim's decision (findings). No JAX: it reads what the domains wrote."""
