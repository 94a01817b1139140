"""The names of the aggregation rules and of the ring's radius, without JAX: what a run's settings name and check,
and what an analysis reads back. The rules themselves are in `experts`."""

from __future__ import annotations

AGGREGATIONS = ("sqrt_sum", "mean", "routed_mean", "routed_sqrt_sum")


def is_routed(rule: str) -> bool:
    return rule.startswith("routed_")


def full_radius(experts: int) -> int:
    """The smallest ring radius that reaches every one of `experts` experts: ⌊E/2⌋."""
    return experts // 2
