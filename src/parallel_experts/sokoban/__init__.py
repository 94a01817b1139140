"""Sokoban: Boxoban levels, Jumanji's Sokoban-v0, Parallel Experts agents, A2C training and evaluation."""
