"""Reading results into judgements: statistics and verdict rules, the per-domain analyses, the expert count and the
systems tables. No JAX: it reads what the domains wrote."""
