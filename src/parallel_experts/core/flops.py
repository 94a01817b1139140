"""A model's FLOPs at any (depth, experts, width) from twelve counts of small models of its family.

Where F = a + b·L + c·E + e·L·E with a, b, c, e quadratic in the width (a shared encoder and head, per-level and
per-expert work), the counts at (L, E) ∈ {1, 2}² and three widths give F exactly everywhere (tests compare the
fit with the whole model's count to 1e-5). Each domain counts its own programs (`sokoban.flops`, `lm.flops`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

TRAIN_PASSES = 3  # forward + backward ≈ 3 forward passes (sokoban-bench counts 3.19 for a whole A2C update)


def fitted(measure, depth: int, experts: int, width: int, widths: Sequence[int]) -> float:
    """F(depth, experts, width) from F at (L, E) ∈ {1, 2}² and three `widths`: exact wherever F = a + b·L + c·E
    + e·L·E with a, b, c, e quadratic in the width (shared encoder and head, per-level and per-expert work)."""
    per_width = []
    for w in widths:
        f11, f21, f12, f22 = (measure(l, e, w) for l, e in ((1, 1), (2, 1), (1, 2), (2, 2)))
        e = f22 - f21 - f12 + f11
        b, c = f21 - f11 - e, f12 - f11 - e
        per_width.append((f11 - b - c - e, b, c, e))
    a, b, c, e = (quadratic(widths, [coefficients[i] for coefficients in per_width], width) for i in range(4))
    return a + b * depth + c * experts + e * depth * experts


def quadratic(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """The parabola through three points, at x (Lagrange)."""
    return sum(y * math.prod((x - xj) / (xi - xj) for xj in xs if xj != xi) for xi, y in zip(xs, ys))
