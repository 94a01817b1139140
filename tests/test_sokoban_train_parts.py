"""GAE against a hand computation; evaluation plays every level exactly once."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from test_sokoban_env import ONE_BOX, TWO_BOXES, level

from parallel_experts.sokoban import env as sokoban_env
from parallel_experts.sokoban import evaluate
from parallel_experts.sokoban.train import gae


def test_gae_by_hand():
    # One environment, three steps, the episode ends after step 1 (index 1).
    rewards = jnp.array([[1.0], [2.0], [3.0]])
    values = jnp.array([[0.5], [1.0], [1.5]])
    dones = jnp.array([[0.0], [1.0], [0.0]])
    last_value = jnp.array([2.0])
    gamma, lam = 0.9, 0.8
    # t=2: delta = 3 + 0.9*2 - 1.5 = 3.3; A2 = 3.3
    # t=1: done, delta = 2 - 1 = 1; A1 = 1 (nothing flows back across the episode end)
    # t=0: delta = 1 + 0.9*1.0 - 0.5 = 1.4; A0 = 1.4 + 0.9*0.8*1 = 2.12
    advantages, returns = gae(rewards, values, dones, last_value, gamma, lam)
    np.testing.assert_allclose(advantages[:, 0], [2.12, 1.0, 3.3], rtol=1e-6)
    np.testing.assert_allclose(returns[:, 0], [2.62, 2.0, 4.8], rtol=1e-6)


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
