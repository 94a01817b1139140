"""Our level sources and reward variants inside the real Jumanji Sokoban-v0."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import BOXOBAN
from jumanji.environments.routing.sokoban import Sokoban as JumanjiSokoban
from jumanji.environments.routing.sokoban.reward import DenseReward as JumanjiDenseReward
from jumanji_referee import ONE_BOX, TWO_BOXES, level

from parallel_experts.config.errors import ConfigError, PipelineError
from parallel_experts.sokoban import env as sokoban_env

UP, RIGHT, DOWN, LEFT = 0, 1, 2, 3
BOXOBAN_TEST = "unfiltered/test/000.txt"


def boxoban_levels(shared, count):
    text = (shared / BOXOBAN_TEST).read_text().split(";")[1: count + 1]
    return np.stack([level(*block.strip("\n").splitlines()[1:11]) for block in text])


@pytest.fixture
def shared():
    if not BOXOBAN.exists():
        pytest.skip(f"needs the Boxoban files at {BOXOBAN}")
    return BOXOBAN


def play(env, lvl, actions):
    state = sokoban_env.level_state(jnp.asarray(lvl[None]), 0, jax.random.PRNGKey(0))
    rewards, timesteps = [], []
    for action in actions:
        state, timestep = env.step(state, jnp.int32(action))
        rewards.append(float(timestep.reward))
        timesteps.append(timestep)
    return state, rewards, timesteps


def test_one_push_solves_a_one_box_level_with_the_clipped_and_dense_rewards():
    clipped = sokoban_env.make_env(ONE_BOX[None], reward="clipped")
    _, rewards, (timestep,) = play(clipped, ONE_BOX, [RIGHT])
    assert rewards == [pytest.approx(10.9)] and timestep.last() and bool(timestep.extras["solved"])
    dense = sokoban_env.make_env(ONE_BOX[None], reward="dense")
    assert play(dense, ONE_BOX, [LEFT])[1] == [pytest.approx(-0.1)]  # into a wall: a step, no move


def test_clipped_reward_matches_the_authors_values():
    env = sokoban_env.make_env(TWO_BOXES[None], reward="clipped")
    # box onto a target: +1 - 0.1; step: -0.01; box off the target again: -1.1 -> -0.01
    state, rewards, timesteps = play(env, TWO_BOXES, [RIGHT, DOWN, UP, RIGHT])
    assert rewards[:1] == [pytest.approx(0.9)] and not timesteps[0].last()
    assert rewards[1] == pytest.approx(-0.01)
    dense = sokoban_env.make_env(TWO_BOXES[None], reward="dense")
    _, dense_rewards, _ = play(dense, TWO_BOXES, [RIGHT, RIGHT])
    assert dense_rewards == [pytest.approx(0.9), pytest.approx(-1.1)]  # the second push moves it off
    _, clipped_rewards, _ = play(env, TWO_BOXES, [RIGHT, RIGHT])
    assert clipped_rewards == [pytest.approx(0.9), pytest.approx(-0.01)]


def test_two_box_level_completes_when_both_boxes_are_on_targets():
    env = sokoban_env.make_env(TWO_BOXES[None], reward="dense")
    # push box 1 right; go down-left around and push box 2 right
    _, rewards, timesteps = play(env, TWO_BOXES, [RIGHT, DOWN, RIGHT])
    assert [t.last() for t in timesteps] == [False, False, True]
    assert rewards[-1] == pytest.approx(1 + 10 - 0.1)
    assert bool(timesteps[-1].extras["solved"])


def test_rewards_equal_jumanjis_on_boxoban_levels(shared):
    levels = boxoban_levels(shared, 8)
    ours = sokoban_env.make_env(levels, reward="dense")
    theirs = JumanjiSokoban(generator=sokoban_env.LevelSampler(levels), reward_fn=JumanjiDenseReward())
    actions = jax.random.randint(jax.random.PRNGKey(1), (8, 60), 0, 4)
    states, _ = sokoban_env.level_states(ours, levels, jax.random.PRNGKey(2))

    def rollout(env):
        def step(state, action):
            state, timestep = jax.vmap(env.step)(state, action)
            return state, (timestep.reward, timestep.last())
        return jax.lax.scan(step, states, actions.T)[1]

    np.testing.assert_array_equal(*(np.asarray(x) for x in (rollout(ours)[0], rollout(theirs)[0])))
    np.testing.assert_array_equal(np.asarray(rollout(ours)[1]), np.asarray(rollout(theirs)[1]))


def test_level_states_start_every_level_once_in_order(shared):
    levels = boxoban_levels(shared, 5)
    env = sokoban_env.make_env(levels)
    states, observations = sokoban_env.level_states(env, levels, jax.random.PRNGKey(0))
    np.testing.assert_array_equal(np.asarray(observations), levels)
    assert np.asarray(states.step_count).tolist() == [0] * 5


def test_batched_env_samples_levels_and_auto_resets():
    levels = np.stack([ONE_BOX, TWO_BOXES])
    env = sokoban_env.batched(sokoban_env.make_env(levels, time_limit=3))
    state, timestep = env.reset(jax.random.split(jax.random.PRNGKey(0), 64))
    starts = {bytes(np.asarray(g)) for g in timestep.observation.grid}
    assert starts == {bytes(levels[0]), bytes(levels[1])}  # both levels drawn
    for _ in range(3):  # the time limit ends every episode on the third step
        state, timestep = env.step(state, jnp.full(64, LEFT))
    assert bool(timestep.last().all())
    # auto-reset: the observation is already the next episode's first, with a fresh step count
    assert np.asarray(state.step_count).tolist() == [0] * 64
    assert {bytes(np.asarray(g)) for g in timestep.observation.grid} <= starts


def test_bad_level_arrays_and_reward_names_fail_fast():
    with pytest.raises(PipelineError, match=r"expected shape \(n, 10, 10, 2\).*got \(7, 7, 2\)"):
        sokoban_env.make_env(np.zeros((7, 7, 2), np.uint8))
    with pytest.raises(ConfigError, match="reward: expected one of dense, clipped"):
        sokoban_env.make_env(ONE_BOX[None], reward="sparse")


def test_view_crops_only_padding_walls():
    levels = np.stack([ONE_BOX, TWO_BOXES])  # rooms of 3×5 and 4×6 in the top-left corner
    sokoban_env.check_view(levels, 6)
    np.testing.assert_array_equal(np.asarray(sokoban_env.view(jnp.asarray(levels), 6))[1, :4], TWO_BOXES[:4, :6])
    sokoban_env.check_view(levels, 5)  # the sixth column is wall in both
    with pytest.raises(ConfigError, match="view 4: level 1 has more than walls outside its top-left 4×4 cells"):
        sokoban_env.check_view(levels, 4)
