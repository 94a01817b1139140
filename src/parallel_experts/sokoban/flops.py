"""XLA's count of the FLOPs of one environment step of a Sokoban agent: counted on the lowered program, or fitted
from its family (`core.flops`) where many agents of one family are priced (the planner, which takes this module
as a `planning.costs.FlopCounter`: `family` and `forward`)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

from parallel_experts.core import budget, flop_counts
from parallel_experts.core.flops import fitted
from parallel_experts.sokoban.agent import agent_step_flops
from parallel_experts.sokoban.settings import AgentConfig, SokobanSettings

SOKOBAN_WIDTHS = (4, 8, 12)  # the widths a Sokoban model's count is fitted at


def family(agent: AgentConfig, view: int):
    """The models one fit covers (None: an agent counted as it is; a limited radius couples the experts of a
    level unevenly)."""
    return None if agent.radius is not None else (dataclasses.replace(agent, depth=1, experts=1, width=1), view)


@functools.cache
def forward(agent: AgentConfig, view: int, fit: bool = False) -> float:
    """Forward FLOPs of one environment step of `agent` on a view×view grid, fitted from its family or counted."""
    if not fit or family(agent, view) is None:
        return _agent_flops(agent, view)
    return fitted(lambda l, e, w: _agent_flops(dataclasses.replace(agent, depth=l, experts=e, width=w), view),
                   agent.depth, agent.experts, agent.width, SOKOBAN_WIDTHS)


@functools.cache
def _agent_flops(agent: AgentConfig, view: int) -> float:
    return flop_counts.counted(("sokoban step", agent, view), lambda: agent_step_flops(agent, view, view))


def allocation_flops(settings: SokobanSettings) -> Callable[[budget.Allocation], float]:
    """XLA-counted FLOPs of one step of the recurrent ConvLSTM agent (the one that defines the Sokoban budgets)
    at an allocation, on the view the config trains on, for the allocations report."""
    view = settings.train.view

    def flops(a: budget.Allocation) -> float:
        return forward(AgentConfig(a.depth, a.experts, a.width, encoder_channels=settings.encoder_channels), view)
    return flops


def flops_per(settings: SokobanSettings) -> str:
    """What `allocation_flops` counts, in words."""
    view = settings.train.view
    return f"environment step of one environment on the {view}×{view} view the config trains on"
