"""Boxoban files and cached splits, checked by hand and against Jumanji's own converter."""

import os
import re
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import BOXOBAN, needs_boxoban
from jumanji.environments.routing.sokoban.generator import convert_level_to_array

from parallel_experts.sokoban import boxoban
from parallel_experts.sokoban.boxoban import LevelFormatError
from parallel_experts.sokoban.levels import LevelError

TEST_FILE = BOXOBAN / "unfiltered/test/000.txt"

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
    read = boxoban.read_levels(TEST_FILE)
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
    level = boxoban.read_levels(TEST_FILE)[0]
    np.testing.assert_array_equal(level[..., 1], digits(LEVEL_0_FIXED))
    np.testing.assert_array_equal(level[..., 0], digits(LEVEL_0_VARIABLE))


@needs_boxoban
def test_reader_agrees_with_jumanjis_own_converter_on_every_level():
    read = boxoban.read_levels(TEST_FILE)
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
    read = boxoban.read_levels(TEST_FILE)
    assert boxoban.to_text(read[0]) == "\n".join(LEVEL_0)
    assert boxoban.format_levels(read) == text


def test_box_and_player_on_a_target(tmp_path):
    path = tmp_path / "marks.txt"
    path.write_text("; 0\n######\n#+ *.#\n# $$ #\n######\n")
    (level,) = boxoban.read_levels(path)
    assert level[1, 1].tolist() == [3, 2] and level[1, 3].tolist() == [4, 2] and level[2, 2].tolist() == [4, 0]
    assert boxoban.to_text(level) == "######\n#+ *.#\n# $$ #\n######"


def test_level_size_is_read_from_the_file(tmp_path):
    path = tmp_path / "small.txt"
    path.write_text("; 0\n#####\n#@$.#\n#####\n\n; 1\n#####\n#.$@#\n#####\n")
    read = boxoban.read_levels(path)
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
        boxoban.read_levels(path)
    message = str(caught.value)
    assert message.startswith(f"{path}, line {line} (level {level}): "), message
    assert expected in message, message


def test_the_unbroken_error_fixture_parses(tmp_path):
    path = tmp_path / "good.txt"
    path.write_text("\n".join(GOOD) + "\n")
    assert boxoban.read_levels(path).shape == (2, 3, 5, 2)


def test_undecodable_bytes_and_empty_files(tmp_path):
    path = tmp_path / "bytes.txt"
    path.write_bytes(b"; 0\n#####\n#@$.\xff\n#####\n")
    where = re.escape(str(path))
    with pytest.raises(LevelFormatError, match=rf"^{where}, line 3 \(level 0\): a byte that is not UTF-8"):
        boxoban.read_levels(path)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(LevelFormatError, match=rf"^{re.escape(str(empty))}: no levels"):
        boxoban.read_levels(empty)
    with pytest.raises(LevelError, match="cannot read"):
        boxoban.read_levels(tmp_path / "missing.txt")


# ---------------------------------------------------------------------------------------------------
# Splits and the cache


@pytest.fixture
def boxoban_root(tmp_path):
    """A Boxoban layout with the real test file (also as `unfiltered/valid`) and a two-file `hard` split of 3 + 2
    levels."""
    root = tmp_path / "boxoban"
    (root / "unfiltered/test").mkdir(parents=True)
    shutil.copy(TEST_FILE, root / "unfiltered/test/000.txt")
    (root / "unfiltered/valid").mkdir()  # a split whose files are not pinned (boxoban.PINNED), free to edit
    shutil.copy(TEST_FILE, root / "unfiltered/valid/000.txt")
    (root / "hard").mkdir()
    blocks = TEST_FILE.read_text().split("\n\n")
    (root / "hard/001.txt").write_text("\n\n".join(blocks[:2]) + "\n\n")
    (root / "hard/000.txt").write_text("\n\n".join(blocks[:3]) + "\n\n")
    return root


class CountingReader:
    def __init__(self, monkeypatch):
        self.calls = []
        self.real = boxoban.read_levels
        monkeypatch.setattr(boxoban, "read_levels", self)

    def __call__(self, path):
        self.calls.append(Path(path).name)
        return self.real(path)


@needs_boxoban
def test_split_is_cached_and_rebuilt_when_a_file_changes(boxoban_root, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    reader = CountingReader(monkeypatch)
    first = boxoban.load_split("unfiltered/valid", boxoban_root, cache_dir=cache_dir)
    assert reader.calls == ["000.txt"]
    (cache,) = (cache_dir / "levels").glob("*.npz")
    np.testing.assert_array_equal(first.levels, reader.real(TEST_FILE))
    assert first.files == ("unfiltered/valid/000.txt",)
    assert first.file.tolist() == [0] * 1000 and first.index.tolist() == list(range(1000))
    assert first.name(17) == "unfiltered/valid/000.txt level 17" and len(first) == 1000

    began = time.perf_counter()
    second = boxoban.load_split("unfiltered/valid", boxoban_root, cache_dir=cache_dir)
    elapsed = time.perf_counter() - began
    assert reader.calls == ["000.txt"], "the second load parsed the file again instead of reading the cache"
    assert elapsed < 0.5, f"cached load took {elapsed:.3f} s"
    for name in ("levels", "file", "index"):
        np.testing.assert_array_equal(getattr(second, name), getattr(first, name))
    assert second.files == first.files

    source = boxoban_root / "unfiltered/valid/000.txt"
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))  # touched, same content
    inode = cache.stat().st_ino
    third = boxoban.load_split("unfiltered/valid", boxoban_root, cache_dir=cache_dir)
    assert reader.calls == ["000.txt", "000.txt"]
    np.testing.assert_array_equal(third.levels, first.levels)
    assert cache.stat().st_ino != inode, "the cache was not replaced"

    source.write_text("\n\n".join(source.read_text().split("\n\n")[:5]) + "\n\n")  # now 5 levels
    assert len(boxoban.load_split("unfiltered/valid", boxoban_root, cache_dir=cache_dir)) == 5
    assert list((cache_dir / "levels").iterdir()) == [cache], "a temporary file was left behind"

    cache.write_bytes(b"not an npz")  # a damaged cache is rebuilt, not trusted
    assert len(boxoban.load_split("unfiltered/valid", boxoban_root, cache_dir=cache_dir)) == 5
    assert reader.calls == ["000.txt"] * 4


@needs_boxoban
def test_split_of_several_files_keeps_provenance(boxoban_root, tmp_path):
    hard = boxoban.load_split("hard", boxoban_root, cache_dir=tmp_path / "cache")
    assert hard.files == ("hard/000.txt", "hard/001.txt")  # sorted by name, not by creation
    assert hard.file.tolist() == [0, 0, 0, 1, 1] and hard.index.tolist() == [0, 1, 2, 0, 1]
    assert hard.name(3) == "hard/001.txt level 0"
    test = boxoban.read_levels(TEST_FILE)
    np.testing.assert_array_equal(hard.levels, np.concatenate([test[:3], test[:2]]))
    assert "hard" in hard.source and "5 levels" in hard.source


def test_missing_or_unknown_splits_say_what_is_expected(tmp_path):
    with pytest.raises(LevelError) as caught:
        boxoban.load_split("medium/train", tmp_path, cache_dir=tmp_path / "cache")
    assert str(tmp_path / "medium/train") in str(caught.value)
    assert "ROOT/unfiltered/{train,valid,test}, ROOT/medium/{train,valid} and ROOT/hard" in str(caught.value)
    (tmp_path / "hard").mkdir()
    with pytest.raises(LevelError, match=r"hard: no \*\.txt level files"):
        boxoban.load_split("hard", tmp_path, cache_dir=tmp_path / "cache")
    with pytest.raises(LevelError, match="unknown Boxoban split 'unfiltered/tset'; expected one of unfiltered/train"):
        boxoban.load_split("unfiltered/tset", tmp_path)
    with pytest.raises(LevelError, match="pass root= .* or download=True"):
        boxoban.load_split("hard")
