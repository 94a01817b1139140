"""The push-optimal solver: hand-made levels whose fewest pushes are worked out by hand, Jumanji as the referee."""

import jax
import numpy as np
import pytest
from helpers import BOXOBAN, needs_boxoban
from jumanji.environments import Sokoban
from jumanji_referee import FixedLevel, hand_level, replay_in_jumanji

from parallel_experts.sokoban import boxoban, solver

TEST_FILE = BOXOBAN / "unfiltered/test/000.txt"


def test_solver_on_hand_made_levels():
    right = hand_level("#####", "#@$.#", "#####")
    up = hand_level("###", "#.#", "#$#", "#@#", "###")
    assert solver.solve(right) == [1] and solver.solve(up) == [0]
    walk_then_push = hand_level("######", "#   .#", "# $  #", "#@   #", "######")
    moves = solver.solve(walk_then_push)
    assert solver.solved(solver.play(walk_then_push, moves)) and not solver.solved(walk_then_push)
    # Jumanji agrees on what the actions mean: the box ends on the target.
    final, on_targets, _ = replay_in_jumanji(np.stack([right, up, walk_then_push]), [[1], [0], moves])
    assert on_targets.tolist() == [1, 1, 1]
    np.testing.assert_array_equal(final[0], solver.play(right, [1])[..., 0])

    # The generator plugs into the real env: reset shows the level as the observation.
    state, timestep = Sokoban(generator=FixedLevel(walk_then_push)).reset(jax.random.key(1))
    np.testing.assert_array_equal(timestep.observation.grid, walk_then_push)
    assert state.agent_location.tolist() == [3, 1]

    corner = hand_level("#####", "#$ .#", "# @ #", "#####")  # a box in a corner never moves again
    frozen = hand_level("#######", "#  @  #", "#.$$ .#", "#######")  # two boxes block each other on a wall
    assert solver.solve(corner) is None and solver.solve(frozen) is None


@needs_boxoban
def test_solver_solves_boxoban_levels_and_jumanji_agrees():
    first_six = boxoban.read_levels(TEST_FILE)[:6]
    moves = [solver.solve(level, max_nodes=100_000) for level in first_six]
    assert all(m is not None for m in moves)
    final, on_targets, solved = replay_in_jumanji(first_six, moves)
    assert on_targets.tolist() == [4] * 6 and solved.all()
    for level, m, grid in zip(first_six, moves, final):  # the solver's own rules give the same end position
        np.testing.assert_array_equal(solver.play(level, m)[..., 0], grid)
    with pytest.raises(solver.SearchLimit):
        solver.solve(first_six[0], max_nodes=3)



# Push-optimal counts worked out by hand (see each comment), with more moves than pushes where the player walks.
WALK_THEN_TWO = hand_level("#######",
                           "#  $ .#",  # the box goes two cells right: 2 pushes, after 2 steps to stand left of it
                           "#@    #",
                           "#######")
AROUND_A_WALL = hand_level("#######",
                           "#  .  #",
                           "#  $  #",  # the wall below the box forbids pushing it straight up: one push sideways,
                           "#@ # ##",  # one up, one back: 3 pushes (left-up-right or right-up-left)
                           "#######")
OUT_OF_ORDER = hand_level("########",
                          "#@$ $..#",  # neither box can leave the top row: the far box first, 2 pushes to the far
                          "#   ####",  # target (the player walks round below), then the near one 3: 5 pushes,
                          "########")  # where each box's distance to its nearest target sums to only 4


def test_optimal_pushes_of_hand_made_levels():
    cases = [(WALK_THEN_TWO, 2, 4), (AROUND_A_WALL, 3, None), (OUT_OF_ORDER, 5, None)]
    for level, pushes, moves in cases:
        assert solver.optimal_pushes(level) == pushes
        found = solver.solve(level)
        assert solver.solved(solver.play(level, found))
        assert moves is None or len(found) == moves
    final, on_targets, _ = replay_in_jumanji(np.stack([c[0] for c in cases]), [solver.solve(c[0]) for c in cases])
    assert on_targets.tolist() == [1, 1, 2]
    np.testing.assert_array_equal(solver.push_counts([c[0] for c in cases]), [2, 3, 5])


def test_push_counts_name_the_level_they_cannot_count():
    corner = hand_level("#####", "#$ .#", "# @ #", "#####")
    with pytest.raises(solver.UnsolvableLevel, match="level 1: unsolvable"):
        solver.push_counts([WALK_THEN_TWO, corner])
    with pytest.raises(solver.SearchLimit, match="level 0: no decision after 2 states"):
        solver.push_counts([OUT_OF_ORDER], max_nodes=2)
