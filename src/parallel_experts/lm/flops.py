"""XLA's count of the FLOPs of one token of a language model with a full window: counted on the lowered program,
or fitted from its family (`core.flops`) where many models of one family are priced (the planner, which takes this
module as a `planning.costs.FlopCounter`: `family` and `forward`)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import numpy as np

from parallel_experts.core import budget, flop_counts
from parallel_experts.core.definitions import FAMILIES
from parallel_experts.core.flops import fitted
from parallel_experts.lm import models
from parallel_experts.lm.settings import LmSettings, ModelConfig

LM_HEADS = (2, 4, 6)  # the query heads (× the head width) an LM model's count is fitted at


def family(model: ModelConfig, window: int):
    """The models one fit covers: the grid's heads (K = H/2 of one head width) at every width; None otherwise."""
    head = model.width // model.q_heads
    if model.width != head * model.q_heads or model.q_heads != 2 * model.kv_heads:
        return None
    return dataclasses.replace(model, depth=1, experts=1, width=2 * head, q_heads=2, kv_heads=1), window


@functools.cache
def forward(model: ModelConfig, window: int, fit: bool = False) -> float:
    """Forward FLOPs of one token of `model` with a full window, fitted from its family or counted."""
    if not fit or family(model, window) is None:
        return _model_flops(model, window)
    head = model.width // model.q_heads

    def at(depth, experts, width):
        q = width // head
        return _model_flops(dataclasses.replace(model, depth=depth, experts=experts, width=width, q_heads=q,
                                                kv_heads=q // 2), window)
    return fitted(at, model.depth, model.experts, model.width, [head * q for q in LM_HEADS])


@functools.cache
def _model_flops(model: ModelConfig, window: int) -> float:
    return flop_counts.counted(("lm token", model, window), lambda: models.token_flops(model, window))


# ------------------------------------------------------------------------------------------------- jobs


def allocation_flops(settings: LmSettings) -> Callable[[budget.Allocation], np.ndarray]:
    """XLA-counted forward FLOPs of one token at an allocation, (window, family) for every window of the config
    and both families in the order of the datasets' `family` coordinate, for the allocations report."""

    def flops(a: budget.Allocation) -> np.ndarray:
        return np.array([[forward(ModelConfig(a.depth, a.experts, a.width, a.q_heads, a.kv_heads,
                                              vocab=settings.vocabulary, recurrent=recurrent, dtype=settings.dtype),
                                  window)
                          for recurrent in sorted(FAMILIES)] for window in settings.windows])
    return flops


def flops_per(settings: LmSettings) -> str:
    """What `allocation_flops` counts, in words."""
    return "token with its attention window full (each window of the config, each family)"
