"""Showing results: the report catalogue, the claims page, the index, HTML rendering and plots. No JAX."""
