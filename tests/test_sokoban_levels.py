"""Boxoban files, cached splits and generated levels, checked by hand, by Jumanji and by an independent solver."""

import os
import re
import shutil
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jumanji.environments import Sokoban
from jumanji.environments.routing.sokoban.generator import Generator, convert_level_to_array
from jumanji.environments.routing.sokoban.types import State

import sokoban_solver as solver
from conftest import BOXOBAN
from parallel_experts.sokoban import levels
from parallel_experts.sokoban.levels import LevelError, LevelFormatError

TEST_FILE = BOXOBAN / "unfiltered/test/000.txt"
needs_boxoban = pytest.mark.skipif(not TEST_FILE.exists(), reason=f"{TEST_FILE} not present")

# Level 0 of unfiltered/test/000.txt, copied from the file, and its two grids decoded by hand:
# fixed 1 wall, 2 target; variable 3 agent, 4 box (Jumanji's constants.py).
LEVEL_0 = [
    "##########",
    "###    . #",
    "## .   $.#",
    "##    .$ #",
    "#####    #",
    "####   ###",
    "##### $###",
    "#####$ ###",
    "#####@####",
    "##########",
]
LEVEL_0_FIXED = [
    "1111111111",
    "1110000201",
    "1102000021",
    "1100002001",
    "1111100001",
    "1111000111",
    "1111100111",
    "1111100111",
    "1111101111",
    "1111111111",
]
LEVEL_0_VARIABLE = [
    "0000000000",
    "0000000000",
    "0000000400",
    "0000000400",
    "0000000000",
    "0000000000",
    "0000004000",
    "0000040000",
    "0000030000",
    "0000000000",
]


def digits(rows):
    return np.array([[int(ch) for ch in row] for row in rows], np.uint8)


# ---------------------------------------------------------------------------------------------------
# Reading the text format


@needs_boxoban
def test_reader_reads_every_level_of_the_test_file():
    read = levels.read_levels(TEST_FILE)
    assert read.shape == (1000, 10, 10, 2) and read.dtype == np.uint8
    variable, fixed = read[..., 0], read[..., 1]
    assert ((variable == 3).sum(axis=(1, 2)) == 1).all()
    assert ((variable == 4).sum(axis=(1, 2)) == 4).all()
    assert ((fixed == 2).sum(axis=(1, 2)) == 4).all()
    assert set(np.unique(variable)) == {0, 3, 4} and set(np.unique(fixed)) == {0, 1, 2}
    # The file numbers its levels 0..999 in order (which the reader also insists on).
    headers = [line for line in TEST_FILE.read_text().splitlines() if line.startswith(";")]
    assert headers == [f"; {n}" for n in range(1000)]


@needs_boxoban
def test_reader_decodes_a_level_cell_by_cell():
    text = TEST_FILE.read_text()
    assert text.startswith("; 0\n" + "\n".join(LEVEL_0) + "\n\n")  # the copy above is the file's level 0
    level = levels.read_levels(TEST_FILE)[0]
    np.testing.assert_array_equal(level[..., 1], digits(LEVEL_0_FIXED))
    np.testing.assert_array_equal(level[..., 0], digits(LEVEL_0_VARIABLE))


@needs_boxoban
def test_reader_agrees_with_jumanjis_own_converter_on_every_level():
    read = levels.read_levels(TEST_FILE)
    blocks = TEST_FILE.read_text().split("\n\n")
    for n, block in enumerate(filter(None, blocks)):
        header, *rows = block.splitlines()
        assert header == f"; {n}"
        fixed, variable = convert_level_to_array(rows)
        np.testing.assert_array_equal(read[n, ..., 0], np.asarray(variable), err_msg=f"level {n}")
        np.testing.assert_array_equal(read[n, ..., 1], np.asarray(fixed), err_msg=f"level {n}")


@needs_boxoban
def test_a_whole_file_round_trips_to_the_same_characters():
    text = TEST_FILE.read_text()
    read = levels.read_levels(TEST_FILE)
    assert levels.to_text(read[0]) == "\n".join(LEVEL_0)
    assert levels.format_levels(read) == text


def test_box_and_player_on_a_target(tmp_path):
    path = tmp_path / "marks.txt"
    path.write_text("; 0\n######\n#+ *.#\n# $$ #\n######\n")
    (level,) = levels.read_levels(path)
    assert level[1, 1].tolist() == [3, 2] and level[1, 3].tolist() == [4, 2] and level[2, 2].tolist() == [4, 0]
    assert levels.to_text(level) == "######\n#+ *.#\n# $$ #\n######"


def test_level_size_is_read_from_the_file(tmp_path):
    path = tmp_path / "small.txt"
    path.write_text("; 0\n#####\n#@$.#\n#####\n\n; 1\n#####\n#.$@#\n#####\n")
    read = levels.read_levels(path)
    assert read.shape == (2, 3, 5, 2)
    assert read[1, 1].tolist() == [[0, 1], [0, 2], [4, 0], [3, 0], [0, 1]]


GOOD = ["; 0", "#####", "#@$.#", "#####", "", "; 1", "#####", "#.$@#", "#####", ""]


def with_line(number: int, text: str | None) -> str:
    """GOOD with line `number` (1-based) replaced by `text`, or removed when text is None."""
    lines = list(GOOD)
    if text is None:
        del lines[number - 1]
    else:
        lines[number - 1] = text
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "content, line, level, expected",
    [
        (with_line(8, "#.$x#"), 8, 1, "unknown character 'x' in column 4"),
        (with_line(8, "#.$@"), 8, 1, "row 2 has 4 characters, expected 5"),
        (with_line(8, "#+$@#"), 8, 1, "2 players ('@' or '+'), at line 8 column 2, line 8 column 4"),
        (with_line(8, "#.$ #"), 7, 1, "no player"),
        (with_line(8, "# $@#"), 7, 1, "boxes ('$' or '*'): 1, targets ('.', '*' or '+'): 0, in lines 7-9"),
        (with_line(8, "#. @#"), 7, 1, "no box"),
        (with_line(9, None), 9, 1, "2 rows, expected 3"),
        (with_line(6, "; 2"), 6, 1, "expected the header '; 1'"),
        (with_line(1, "#####"), 1, 0, "expected the header '; 0' before a level's rows"),
        (with_line(10, "#####"), 10, 1, "4 rows, expected 3"),
        (with_line(6, ""), 7, 1, "expected the header '; 1' before a level's rows"),
    ],
)
def test_malformed_files_name_file_level_and_line(tmp_path, content, line, level, expected):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(LevelFormatError) as caught:
        levels.read_levels(path)
    message = str(caught.value)
    assert message.startswith(f"{path}, line {line} (level {level}): "), message
    assert expected in message, message


def test_the_unbroken_error_fixture_parses(tmp_path):
    path = tmp_path / "good.txt"
    path.write_text("\n".join(GOOD) + "\n")
    assert levels.read_levels(path).shape == (2, 3, 5, 2)


def test_undecodable_bytes_and_empty_files(tmp_path):
    path = tmp_path / "bytes.txt"
    path.write_bytes(b"; 0\n#####\n#@$.\xff\n#####\n")
    where = re.escape(str(path))
    with pytest.raises(LevelFormatError, match=rf"^{where}, line 3 \(level 0\): a byte that is not UTF-8"):
        levels.read_levels(path)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(LevelFormatError, match=rf"^{re.escape(str(empty))}: no levels"):
        levels.read_levels(empty)
    with pytest.raises(LevelError, match="cannot read"):
        levels.read_levels(tmp_path / "missing.txt")


def test_pad_to_embeds_top_left_in_walls():
    small = levels.parse_levels("; 0\n#####\n#@$.#\n#####\n")
    padded = levels.pad_to(small)
    assert padded.shape == (1, 10, 10, 2)
    np.testing.assert_array_equal(padded[0, :3, :5], small[0])
    outside = np.ones((10, 10), bool)
    outside[:3, :5] = False
    assert (padded[0, ..., 1][outside] == 1).all() and (padded[0, ..., 0][outside] == 0).all()
    assert levels.pad_to(padded).tolist() == padded.tolist()
    with pytest.raises(LevelError, match="do not fit"):
        levels.pad_to(np.zeros((11, 10, 2), np.uint8))


# ---------------------------------------------------------------------------------------------------
# Splits and the cache


@pytest.fixture
def boxoban_root(tmp_path):
    """A Boxoban layout with the real test file and a two-file `hard` split of 3 + 2 levels."""
    root = tmp_path / "boxoban"
    (root / "unfiltered/test").mkdir(parents=True)
    shutil.copy(TEST_FILE, root / "unfiltered/test/000.txt")
    (root / "hard").mkdir()
    blocks = TEST_FILE.read_text().split("\n\n")
    (root / "hard/001.txt").write_text("\n\n".join(blocks[:2]) + "\n\n")
    (root / "hard/000.txt").write_text("\n\n".join(blocks[:3]) + "\n\n")
    return root


class CountingReader:
    def __init__(self, monkeypatch):
        self.calls = []
        self.real = levels.read_levels
        monkeypatch.setattr(levels, "read_levels", self)

    def __call__(self, path):
        self.calls.append(Path(path).name)
        return self.real(path)


@needs_boxoban
def test_split_is_cached_and_rebuilt_when_a_file_changes(boxoban_root, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    reader = CountingReader(monkeypatch)
    first = levels.load_split("unfiltered/test", boxoban_root, cache_dir=cache_dir)
    assert reader.calls == ["000.txt"]
    (cache,) = (cache_dir / "levels").glob("*.npz")
    np.testing.assert_array_equal(first.levels, reader.real(TEST_FILE))
    assert first.files == ("unfiltered/test/000.txt",)
    assert first.file.tolist() == [0] * 1000 and first.index.tolist() == list(range(1000))
    assert first.name(17) == "unfiltered/test/000.txt level 17" and len(first) == 1000

    began = time.perf_counter()
    second = levels.load_split("unfiltered/test", boxoban_root, cache_dir=cache_dir)
    elapsed = time.perf_counter() - began
    assert reader.calls == ["000.txt"], "the second load parsed the file again instead of reading the cache"
    assert elapsed < 0.5, f"cached load took {elapsed:.3f} s"
    for name in ("levels", "file", "index"):
        np.testing.assert_array_equal(getattr(second, name), getattr(first, name))
    assert second.files == first.files

    source = boxoban_root / "unfiltered/test/000.txt"
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))  # touched, same content
    inode = cache.stat().st_ino
    third = levels.load_split("unfiltered/test", boxoban_root, cache_dir=cache_dir)
    assert reader.calls == ["000.txt", "000.txt"]
    np.testing.assert_array_equal(third.levels, first.levels)
    assert cache.stat().st_ino != inode, "the cache was not replaced"

    source.write_text("\n\n".join(source.read_text().split("\n\n")[:5]) + "\n\n")  # now 5 levels
    assert len(levels.load_split("unfiltered/test", boxoban_root, cache_dir=cache_dir)) == 5
    assert list((cache_dir / "levels").iterdir()) == [cache], "a temporary file was left behind"

    cache.write_bytes(b"not an npz")  # a damaged cache is rebuilt, not trusted
    assert len(levels.load_split("unfiltered/test", boxoban_root, cache_dir=cache_dir)) == 5
    assert reader.calls == ["000.txt"] * 4


@needs_boxoban
def test_split_of_several_files_keeps_provenance(boxoban_root, tmp_path):
    hard = levels.load_split("hard", boxoban_root, cache_dir=tmp_path / "cache")
    assert hard.files == ("hard/000.txt", "hard/001.txt")  # sorted by name, not by creation
    assert hard.file.tolist() == [0, 0, 0, 1, 1] and hard.index.tolist() == [0, 1, 2, 0, 1]
    assert hard.name(3) == "hard/001.txt level 0"
    test = levels.read_levels(TEST_FILE)
    np.testing.assert_array_equal(hard.levels, np.concatenate([test[:3], test[:2]]))
    assert "hard" in hard.source and "5 levels" in hard.source


def test_missing_or_unknown_splits_say_what_is_expected(tmp_path):
    with pytest.raises(LevelError) as caught:
        levels.load_split("medium/train", tmp_path, cache_dir=tmp_path / "cache")
    assert str(tmp_path / "medium/train") in str(caught.value)
    assert "ROOT/unfiltered/{train,valid,test}, ROOT/medium/{train,valid} and ROOT/hard" in str(caught.value)
    (tmp_path / "hard").mkdir()
    with pytest.raises(LevelError, match=r"hard: no \*\.txt level files"):
        levels.load_split("hard", tmp_path, cache_dir=tmp_path / "cache")
    with pytest.raises(LevelError, match="unknown Boxoban split 'unfiltered/tset'; expected one of unfiltered/train"):
        levels.load_split("unfiltered/tset", tmp_path)
    with pytest.raises(LevelError, match="pass root= .* or download=True"):
        levels.load_split("hard")


# ---------------------------------------------------------------------------------------------------
# The independent solver, and Jumanji as the referee


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
    return levels.pad_to(levels.parse_levels("; 0\n" + "\n".join(rows) + "\n")[0])


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
    boxoban = levels.read_levels(TEST_FILE)[:6]
    moves = [solver.solve(level, max_nodes=100_000) for level in boxoban]
    assert all(m is not None for m in moves)
    final, on_targets, solved = replay_in_jumanji(boxoban, moves)
    assert on_targets.tolist() == [4] * 6 and solved.all()
    for level, m, grid in zip(boxoban, moves, final):  # the solver's own rules give the same end position
        np.testing.assert_array_equal(solver.play(level, m)[..., 0], grid)
    with pytest.raises(solver.SearchLimit):
        solver.solve(boxoban[0], max_nodes=3)


# ---------------------------------------------------------------------------------------------------
# The generator


CASES = [(5, 1, 20), (6, 1, 30), (7, 1, 20), (7, 2, 30), (7, 3, 20), (8, 3, 10), (10, 4, 12)]  # size, boxes, n


@pytest.fixture(scope="module")
def generated():
    return {(size, boxes): levels.generate_levels(n, size, boxes, seed=11) for size, boxes, n in CASES}


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
        np.testing.assert_array_equal(levels.parse_levels(levels.format_levels(batch)), batch)


def test_generated_levels_are_solvable_and_jumanji_plays_the_solutions(generated):
    grids, moves, boxes_per_level = [], [], []
    for (size, boxes), batch in generated.items():
        for level in batch:
            m = solver.solve(level, max_nodes=100_000)
            assert m is not None, f"unsolvable {size}×{size} level, {boxes} boxes:\n{levels.to_text(level)}"
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
    a = levels.generate_levels(12, 7, 2, seed=3)
    np.testing.assert_array_equal(a, levels.generate_levels(12, 7, 2, seed=3))
    np.testing.assert_array_equal(a[:5], levels.generate_levels(5, 7, 2, seed=3))  # a prefix is the same levels
    assert not np.array_equal(a, levels.generate_levels(12, 7, 2, seed=4))
    assert not np.array_equal(a, levels.generate_levels(12, 7, 2, seed=3, walks=4))


def test_generator_refuses_impossible_requests():
    with pytest.raises(LevelError, match="room_size 4 with num_boxes 3"):
        levels.generate_levels(1, 4, 3)
    with pytest.raises(LevelError, match="seed"):
        levels.generate_levels(1, 7, 1, seed=-1)


def test_generated_set_is_ready_for_jumanji():
    made = levels.generated_set(4, room_size=6, num_boxes=1, seed=2)
    assert made.levels.shape == (4, 10, 10, 2)
    np.testing.assert_array_equal(made.levels[:, :6, :6], levels.generate_levels(4, 6, 1, seed=2))
    assert made.name(3) == "generated(room_size=6, num_boxes=1, seed=2) level 3"


def test_level_set_saves_and_loads_with_its_provenance(tmp_path):
    level_set = levels.generated_set(7, room_size=5, num_boxes=1, seed=4)
    level_set.save(tmp_path / "set.npz")
    loaded = levels.LevelSet.load(tmp_path / "set.npz")
    np.testing.assert_array_equal(loaded.levels, level_set.levels)
    assert loaded.source == level_set.source and loaded.name(6) == level_set.name(6)
    (tmp_path / "bad.npz").write_bytes(b"not a level set")
    with pytest.raises(levels.LevelError, match="bad.npz: not a saved level set"):
        levels.LevelSet.load(tmp_path / "bad.npz")
