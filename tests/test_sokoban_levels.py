"""Level sets: padding to Jumanji's grid, and saving with the provenance of every level."""

import numpy as np
import pytest

from parallel_experts.sokoban import boxoban, generator, levels
from parallel_experts.sokoban.levels import LevelError


def test_pad_to_embeds_top_left_in_walls():
    small = boxoban.parse_levels("; 0\n#####\n#@$.#\n#####\n")
    padded = levels.pad_to(small)
    assert padded.shape == (1, 10, 10, 2)
    np.testing.assert_array_equal(padded[0, :3, :5], small[0])
    outside = np.ones((10, 10), bool)
    outside[:3, :5] = False
    assert (padded[0, ..., 1][outside] == 1).all() and (padded[0, ..., 0][outside] == 0).all()
    assert levels.pad_to(padded).tolist() == padded.tolist()
    with pytest.raises(LevelError, match="do not fit"):
        levels.pad_to(np.zeros((11, 10, 2), np.uint8))


def test_level_set_saves_and_loads_with_its_provenance(tmp_path):
    level_set = generator.generated_set(7, room_size=5, num_boxes=1, seed=4)
    level_set.save(tmp_path / "set.npz")
    loaded = levels.LevelSet.load(tmp_path / "set.npz")
    np.testing.assert_array_equal(loaded.levels, level_set.levels)
    assert loaded.source == level_set.source and loaded.name(6) == level_set.name(6)
    whole = (tmp_path / "set.npz").read_bytes()
    for damage in (b"not a level set", b"", whole[:len(whole) // 2], whole[:-30]):  # garbage, empty, truncated
        (tmp_path / "bad.npz").write_bytes(damage)
        with pytest.raises(levels.LevelError, match="bad.npz: not a saved level set"):
            levels.LevelSet.load(tmp_path / "bad.npz")
    (tmp_path / "folder.npz").mkdir()
    with pytest.raises(levels.LevelError, match="folder.npz: not a saved level set"):
        levels.LevelSet.load(tmp_path / "folder.npz")
    np.savez(tmp_path / "small.npz", levels=np.zeros((2, 5, 5, 2), np.uint8), level_file=np.zeros(2, np.int32),
             level_index=np.arange(2, dtype=np.int32), files=np.array(["a"]), source=np.array("5×5"))
    with pytest.raises(levels.LevelError, match=r"small.npz: expected \(n, 10, 10, 2\) uint8 levels"):
        levels.LevelSet.load(tmp_path / "small.npz")


def test_push_counts_travel_with_the_level_set(tmp_path):
    level_set = generator.generated_set(5, room_size=5, num_boxes=1, seed=4)
    assert level_set.pushes is None
    with_pushes = level_set.with_pushes(np.array([2, 3]))  # counts of the first two levels only
    with_pushes.save(tmp_path / "set.npz")
    assert levels.LevelSet.load(tmp_path / "set.npz").pushes.tolist() == [2, 3]
    level_set.save(tmp_path / "plain.npz")
    assert levels.LevelSet.load(tmp_path / "plain.npz").pushes is None
    with pytest.raises(LevelError, match="6 push counts for a set of 5 levels"):
        level_set.with_pushes(np.ones(6))
