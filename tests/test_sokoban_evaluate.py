"""Solve rates: every level of a set played exactly once, greedy and sampled."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jumanji_referee import ONE_BOX, TWO_BOXES, level

from parallel_experts.sokoban import env as sokoban_env
from parallel_experts.sokoban import evaluate
from parallel_experts.sokoban.levels import LevelSet


class AlwaysRight(eqx.Module):
    """A stand-in policy: pushes right. Solves ONE_BOX in one step, never solves a level needing other moves."""

    bias: jax.Array = eqx.field(default_factory=lambda: jnp.array([0.0, 5.0, 0.0, 0.0]))

    def initial_state(self, height, width):
        return jnp.zeros(())

    def __call__(self, grid, hidden):
        return self.bias, jnp.zeros(()), hidden + 1


def test_every_level_is_evaluated_exactly_once_in_order():
    # 7 levels, evaluated in chunks of 3: [ONE_BOX, X, ONE_BOX, X, ...] where X needs a move down first.
    needs_down = level("#####", "#@  #", "# $.#", "#####")
    levels = np.stack([ONE_BOX if i % 2 == 0 else needs_down for i in range(7)])
    env = sokoban_env.make_env(levels, reward="clipped", time_limit=5)
    result = evaluate.evaluate(AlwaysRight(), env, levels, chunk=3)
    assert result.sizes == {"mode": 2, "level": 7}
    assert result["level"].values.tolist() == list(range(7))
    greedy = result.sel(mode="greedy")
    assert greedy["solved"].values.tolist() == [i % 2 == 0 for i in range(7)]
    assert greedy["episode_length"].values.tolist() == [1 if i % 2 == 0 else 5 for i in range(7)]
    np.testing.assert_allclose(greedy["episode_return"].values[::2], 10.9, rtol=1e-6)
    np.testing.assert_allclose(greedy["episode_return"].values[1::2], -0.05, rtol=1e-5)

def test_sampled_mode_uses_the_policy_distribution():
    levels = np.stack([TWO_BOXES] * 40)
    env = sokoban_env.make_env(levels, reward="dense", time_limit=3)
    result = evaluate.evaluate(AlwaysRight(bias=jnp.zeros(4)), env, levels)
    # A uniform policy plays different moves on identical levels; greedy plays the same everywhere.
    assert len(set(result.sel(mode="sampled")["episode_return"].values.round(3))) > 1
    assert len(set(result.sel(mode="greedy")["episode_return"].values.round(3))) == 1


def test_push_attrs_state_the_mean_push_count_of_the_solved_levels():
    levels = np.stack([ONE_BOX] * 4)
    plain = LevelSet(levels, "four levels", ("f",), np.zeros(4, np.int32), np.arange(4, dtype=np.int32))
    assert evaluate.push_attrs(plain) == {}
    assert evaluate.push_attrs(plain.with_pushes(np.array([2, 3, 5]))) == {
        "mean_optimal_pushes": pytest.approx(10 / 3), "optimal_pushes_levels": 3}


def test_a_uniformly_random_policy_solves_a_one_push_level_a_quarter_of_the_time():
    levels = np.stack([ONE_BOX] * 800)  # one step: only "right" (1 of 4 actions) solves it
    env = sokoban_env.make_env(levels, reward="clipped", time_limit=1)
    assert evaluate.chance_solve_rate(env, levels) == pytest.approx(0.25, abs=0.05)  # 4.6 standard errors
