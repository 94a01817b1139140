"""Jumanji's Sokoban as the referee: levels built by hand, move lists replayed in the real env."""

import jax
import jax.numpy as jnp
import numpy as np
from jumanji.environments import Sokoban
from jumanji.environments.routing.sokoban.generator import Generator, convert_level_to_array
from jumanji.environments.routing.sokoban.types import State

from parallel_experts.sokoban import boxoban, levels


class FixedLevel(Generator):
    """A Jumanji generator that always starts from one given level (the State as generator.py builds it)."""

    def __init__(self, level):
        super().__init__()
        self.level = jnp.asarray(level, jnp.uint8)

    def __call__(self, key) -> State:
        variable, fixed = self.level[..., 0], self.level[..., 1]
        return State(key=key, fixed_grid=fixed, variable_grid=variable,
                     agent_location=self.get_agent_coordinates(variable), step_count=jnp.array(0, jnp.int32))


REFEREE = Sokoban(generator=FixedLevel(np.zeros((10, 10, 2), np.uint8)), time_limit=10_000)


@jax.jit
def _replay(grids, actions, lengths):
    def one(level, actions, length):
        state = FixedLevel(level)(jax.random.key(0))  # what env.reset starts from (checked below, unjitted)

        def step(carry, t_action):
            state, solved = carry
            t, action = t_action
            following, timestep = REFEREE.step(state, action)
            active = t < length
            state = jax.tree.map(lambda new, old: jnp.where(active, new, old), following, state)
            solved = jnp.where(t == length - 1, timestep.extras["solved"] & timestep.last(), solved)
            return (state, solved), None

        (state, solved), _ = jax.lax.scan(step, (state, jnp.array(False)), (jnp.arange(actions.shape[0]), actions))
        on_targets = ((state.variable_grid == 4) & (state.fixed_grid == 2)).sum()
        return state.variable_grid, on_targets, solved

    return jax.vmap(one)(grids, actions, lengths)


def replay_in_jumanji(grids, move_lists):
    """Play each move list in Jumanji's Sokoban from its 10×10 level: final variable grids, boxes on
    targets, and whether the last move ended the episode as solved (Jumanji's 4-box `level_complete`)."""
    steps = max(len(m) for m in move_lists)
    steps = -(-steps // 64) * 64  # few distinct shapes, few compilations
    actions = np.zeros((len(move_lists), steps), np.int32)
    for row, moves in zip(actions, move_lists):
        row[:len(moves)] = moves
    lengths = np.array([len(m) for m in move_lists], np.int32)
    return [np.asarray(x) for x in _replay(jnp.asarray(grids), jnp.asarray(actions), jnp.asarray(lengths))]


def hand_level(*rows):
    return levels.pad_to(boxoban.parse_levels("; 0\n" + "\n".join(rows) + "\n")[0])


def level(*rows):
    """A 10×10 level from text rows (padded with walls), in Jumanji's (H, W, 2) encoding."""
    rows = [row.ljust(10, "#") for row in rows] + ["#" * 10] * (10 - len(rows))
    fixed, variable = convert_level_to_array(rows)
    return np.stack([np.asarray(variable), np.asarray(fixed)], axis=-1)


ONE_BOX = level("#####", "#@$.#", "#####")
TWO_BOXES = level("######", "#@$. #", "#  $.#", "######")
