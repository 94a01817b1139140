"""Showing results: the claims page, the index, HTML rendering and plots; what pages exist is the target registry's
(parallel_experts.targets). No JAX."""
