"""Generated levels, checked by an independent solver with Jumanji as the referee."""

import numpy as np
import pytest
from jumanji_referee import replay_in_jumanji

from parallel_experts.sokoban import boxoban, generator, levels, solver
from parallel_experts.sokoban.levels import LevelError

CASES = [(5, 1, 20), (6, 1, 30), (7, 1, 20), (7, 2, 30), (7, 3, 20), (8, 3, 10), (10, 4, 12)]  # size, boxes, n


GENERATED = pytest.mark.xdist_group("sokoban_generated")  # one worker runs its tests: levels generated once


@pytest.fixture(scope="module")
def generated():
    return {(size, boxes): generator.generate_levels(n, size, boxes, seed=11) for size, boxes, n in CASES}


@GENERATED
def test_generated_levels_are_well_formed(generated):
    for (size, boxes), batch in generated.items():
        assert batch.shape[1:] == (size, size, 2) and batch.dtype == np.uint8
        variable, fixed = batch[..., 0], batch[..., 1]
        assert ((variable == 3).sum(axis=(1, 2)) == 1).all()
        assert ((variable == 4).sum(axis=(1, 2)) == boxes).all()
        assert ((fixed == 2).sum(axis=(1, 2)) == boxes).all()
        assert not ((variable == 4) & (fixed == 2)).any(), "a box starts on a target"
        assert not ((variable != 0) & (fixed == 1)).any(), "something stands in a wall"
        border = np.ones((size, size), bool)
        border[1:-1, 1:-1] = False
        assert (fixed[:, border] == 1).all()
        # Each is a distinct level, and reads back through the text format unchanged.
        assert len({level.tobytes() for level in batch}) > len(batch) // 2
        np.testing.assert_array_equal(boxoban.parse_levels(boxoban.format_levels(batch)), batch)


@GENERATED
def test_generated_levels_are_solvable_and_jumanji_plays_the_solutions(generated):
    grids, moves, boxes_per_level = [], [], []
    for (size, boxes), batch in generated.items():
        for level in batch:
            m = solver.solve(level, max_nodes=100_000)
            assert m is not None, f"unsolvable {size}×{size} level, {boxes} boxes:\n{boxoban.to_text(level)}"
            assert solver.solved(solver.play(level, m))
            grids.append(levels.pad_to(level))
            moves.append(m)
            boxes_per_level.append(boxes)
    final, on_targets, solved = replay_in_jumanji(np.stack(grids), moves)
    boxes_per_level = np.array(boxes_per_level)
    np.testing.assert_array_equal(on_targets, boxes_per_level)  # every box on a target in Jumanji too
    assert solved[boxes_per_level == 4].all()  # Jumanji itself declares the 4-box levels solved
    assert not solved[boxes_per_level < 4].any()  # (its level_complete needs exactly 4 boxes on targets)


def test_generator_is_deterministic_given_the_seed():
    a = generator.generate_levels(12, 7, 2, seed=3)
    np.testing.assert_array_equal(a, generator.generate_levels(12, 7, 2, seed=3))
    np.testing.assert_array_equal(a[:5], generator.generate_levels(5, 7, 2, seed=3))  # a prefix is the same levels
    assert not np.array_equal(a, generator.generate_levels(12, 7, 2, seed=4))
    assert not np.array_equal(a, generator.generate_levels(12, 7, 2, seed=3, walks=4))


def test_generator_refuses_impossible_requests():
    with pytest.raises(LevelError, match="room_size 4 with num_boxes 3"):
        generator.generate_levels(1, 4, 3)
    with pytest.raises(LevelError, match="seed"):
        generator.generate_levels(1, 7, 1, seed=-1)


def test_generated_set_is_ready_for_jumanji():
    made = generator.generated_set(4, room_size=6, num_boxes=1, seed=2)
    assert made.levels.shape == (4, 10, 10, 2)
    np.testing.assert_array_equal(made.levels[:, :6, :6], generator.generate_levels(4, 6, 1, seed=2))
    assert made.name(3) == "generated(room_size=6, num_boxes=1, seed=2) level 3"
