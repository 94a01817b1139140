"""Jumanji's Sokoban-v0, fed by our level sets instead of its Hugging Face download.

Two changes to the real environment, both no-ops on Boxoban's 4-box levels: a level is complete when every
box is on a target (Jumanji counts exactly four, which rooms with fewer boxes never reach), and the reward
can be the authors' variant that replaces every negative reward by -0.01 (PRE_RL/drc/utils.py). Training draws a random
level at every reset (auto-reset under vmap, as the authors' wrapper does); evaluation starts each level of
a set exactly once (`level_states`).
"""

from __future__ import annotations

import copy

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jumanji.environments.routing.sokoban import Sokoban as JumanjiSokoban
from jumanji.environments.routing.sokoban.constants import (BOX, LEVEL_COMPLETE_BONUS, SINGLE_BOX_BONUS, STEP_BONUS,
                                                            TARGET)
from jumanji.environments.routing.sokoban.generator import Generator
from jumanji.environments.routing.sokoban.reward import RewardFn
from jumanji.environments.routing.sokoban.types import State
from jumanji.wrappers import VmapAutoResetWrapper

from parallel_experts.config.errors import ConfigError, PipelineError

REWARDS = ("dense", "clipped")
CLIPPED_NEGATIVE_REWARD = -0.01  # the authors' PRE_RL wrapper (PRE_RL/drc/utils.py)


def boxes(state: State) -> chex.Array:
    return jnp.sum(state.variable_grid == BOX)


def boxes_on_targets(state: State) -> chex.Array:
    return jnp.sum((state.variable_grid == BOX) & (state.fixed_grid == TARGET))


class DenseReward(RewardFn):
    """Jumanji's dense reward (+1 per box onto a target, -1 per box off, +10 on completion, -0.1 per step),
    with completion meaning every box on a target; `clipped` replaces negative rewards by -0.01."""

    def __init__(self, clipped: bool = False):
        self.clipped = clipped

    def __call__(self, state: State, action: chex.Array, next_state: State) -> chex.Array:
        on_targets = boxes_on_targets(next_state)
        reward = (
            SINGLE_BOX_BONUS * (on_targets - boxes_on_targets(state))
            + LEVEL_COMPLETE_BONUS * (on_targets == boxes(next_state))
            + STEP_BONUS
        )
        return jnp.where(reward < 0, CLIPPED_NEGATIVE_REWARD, reward) if self.clipped else reward


class Sokoban(JumanjiSokoban):
    """Sokoban-v0 whose levels may hold any number of boxes."""

    def level_complete(self, state: State) -> chex.Array:
        return boxes_on_targets(state) == boxes(state)

    def _get_extras(self, state: State) -> dict:
        on_targets = boxes_on_targets(state)
        return {"prop_correct_boxes": on_targets / boxes(state), "solved": on_targets == boxes(state)}


def level_state(levels: chex.Array, index: chex.Array, key: chex.PRNGKey) -> State:
    """The initial state of level `index` of a (n, H, W, 2) level array (channel 0 variable, 1 fixed)."""
    level = levels[index]
    variable, fixed = level[..., 0], level[..., 1]
    return State(
        key=key,
        fixed_grid=fixed,
        variable_grid=variable,
        agent_location=jnp.argwhere(variable == 3, size=1)[0].astype(jnp.int32),
        step_count=jnp.array(0, jnp.int32),
    )


class LevelSampler(Generator):
    """Draws a level uniformly at random from a fixed set at every reset."""

    def __init__(self, levels: np.ndarray):
        super().__init__()
        self.levels = jnp.asarray(levels, jnp.uint8)

    def __call__(self, rng_key: chex.PRNGKey) -> State:
        key, index_key = jax.random.split(rng_key)
        index = jax.random.randint(index_key, (), 0, self.levels.shape[0])
        return level_state(self.levels, index, key)


def make_env(levels: np.ndarray, reward: str = "clipped", time_limit: int = 120) -> Sokoban:
    """Sokoban-v0 on `levels` (drawn at random on reset) with the named reward."""
    if reward not in REWARDS:
        raise ConfigError(f"reward: expected one of {', '.join(REWARDS)}, got {reward!r}")
    _check_levels(levels)
    return Sokoban(generator=LevelSampler(levels), reward_fn=DenseReward(clipped=reward == "clipped"),
                   time_limit=time_limit)


def with_levels(env: Sokoban, levels: chex.Array) -> Sokoban:
    """`env` drawing from `levels` instead. Called inside a compiled function on a level table passed as its
    argument, it keeps the table out of the program (a constant of 180 MB at paper scale otherwise). A shallow
    copy: Jumanji's constructor builds the specs with jnp, which cannot run while tracing."""
    env = copy.copy(env)
    env.generator = LevelSampler(levels)
    return env


def batched(env: Sokoban) -> VmapAutoResetWrapper:
    """Many environments under vmap; a finished episode restarts at once on a newly drawn level."""
    return VmapAutoResetWrapper(env)


def level_states(env: Sokoban, levels: np.ndarray, key: chex.PRNGKey) -> tuple[State, chex.Array]:
    """Every level of `levels` once, in order, as a batch of initial states and their observations."""
    _check_levels(levels)
    levels = jnp.asarray(levels, jnp.uint8)
    keys = jax.random.split(key, levels.shape[0])
    states = jax.vmap(level_state, in_axes=(None, 0, 0))(levels, jnp.arange(levels.shape[0]), keys)
    return states, jax.vmap(env._state_to_observation)(states).grid


def view(grid: chex.Array, size: int) -> chex.Array:
    """What the agent sees: the top-left size×size cells of (..., 10, 10, 2) grids (all of it at size 10).

    A demo-scale reduction: rooms smaller than Jumanji's 10×10 are padded with walls at the bottom and right
    (`levels.pad_to`), so a view of the room's size drops only constant wall cells and saves their compute."""
    return grid[..., :size, :size, :]


def check_view(levels: np.ndarray, size: int) -> None:
    """Fail fast if a view of `size` would hide anything but walls."""
    outside = np.ones(levels.shape[1:3], bool)
    outside[:size, :size] = False
    hidden = levels[:, outside]
    if not ((hidden[..., 1] == 1) & (hidden[..., 0] == 0)).all():
        level = int(np.argwhere(~((hidden[..., 1] == 1) & (hidden[..., 0] == 0)).all(axis=1))[0][0])
        raise ConfigError(f"view {size}: level {level} has more than walls outside its top-left {size}×{size} "
                         "cells; use a larger view (10 sees everything)")


def _check_levels(levels: np.ndarray) -> None:
    shape = tuple(np.shape(levels))
    if len(shape) != 4 or shape[1:] != (10, 10, 2):
        raise PipelineError(f"levels: expected shape (n, 10, 10, 2) (Jumanji's grid; pad smaller rooms), got {shape}")
    if shape[0] == 0:
        raise PipelineError("levels: the level set is empty")
