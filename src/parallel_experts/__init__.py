"""Parallel Experts: reproduction of "Temporal Recurrence Favors Fewer Layers" (arXiv 2609.12531)."""
