"""The Boxoban level set (google-deepmind/boxoban-levels): its text format, its splits, a parsed cache, a download.

* `read_levels` parses the Boxoban text format, with errors that name the file, the level and the line;
  `format_levels` writes it;
* `load_split` reads one split of that level set once and caches it as one .npz (a `LevelSet`, which
  remembers the file and number of every level);
* `download_boxoban` fetches the level set where the network allows.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import urllib.request
import zipfile
from pathlib import Path
from typing import NoReturn

import numpy as np
from tqdm import tqdm

from parallel_experts.core.atomic import atomic_open
from parallel_experts.sokoban.levels import (AGENT, BOX, EMPTY, FIXED, GRID_SIZE, TARGET, VARIABLE, WALL, LevelError,
                                             LevelSet, pad_to)

# Each character as (variable, fixed). '*' and '+' (a box / the player on a target) are the usual
# Sokoban marks; Boxoban's files never use them, Jumanji's own converter does not know them.
SYMBOLS = {
    "#": (EMPTY, WALL),
    " ": (EMPTY, EMPTY),
    ".": (EMPTY, TARGET),
    "$": (BOX, EMPTY),
    "@": (AGENT, EMPTY),
    "*": (BOX, TARGET),
    "+": (AGENT, TARGET),
}
_UNKNOWN = len(SYMBOLS)
_SYMBOL_OF = np.full(128, _UNKNOWN, np.uint8)  # ASCII code → index into SYMBOLS
for _i, _char in enumerate(SYMBOLS):
    _SYMBOL_OF[ord(_char)] = _i
_VARIABLE_OF = np.array([v for v, _ in SYMBOLS.values()], np.uint8)
_FIXED_OF = np.array([f for _, f in SYMBOLS.values()], np.uint8)
_CHAR_OF = {cell: char for char, cell in SYMBOLS.items()}
_EXPECTED_CHARS = ", ".join(repr(c) for c in SYMBOLS)
_HEADER = re.compile(r";\s*(\d+)\s*")




class LevelFormatError(LevelError):
    """A level file that breaks the Boxoban text format; the message names the file, level and line."""


# --------------------------------------------------------------------------------------------------
# The Boxoban text format


def read_levels(path: str | Path) -> np.ndarray:
    """Every level of a Boxoban text file, in file order: uint8 (n, rows, cols, 2) in Jumanji's encoding.

    The format: each level is a header line `; N` (N = 0, 1, 2, ... in order) followed by its rows
    (`#` wall, ` ` floor, `.` target, `$` box, `@` player, `*` box on target, `+` player on target);
    blank (or all-space) lines separate levels. The level size is read from the file; all its levels must share it.
    Each level needs exactly one player, at least one box and as many boxes as targets.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise LevelError(f"{path}: cannot read ({error.strerror})") from None
    # Undecodable bytes become U+FFFD and are then reported like any unknown character, with their line.
    return parse_levels(data.decode("utf-8", errors="replace"), str(path))


def parse_levels(text: str, source: str = "<text>") -> np.ndarray:
    """`read_levels` for text already in memory; `source` names it in error messages."""

    def fail(line: int, level: int, what: str) -> NoReturn:
        raise LevelFormatError(f"{source}, line {line} (level {level}): {what}")

    rows: list[str] = []  # every level row of the file, in order
    row_lines: list[int] = []  # the line number of each row
    headers: list[int] = []  # the line number of each level's header
    starts: list[int] = []  # the index in `rows` of each level's first row
    width = height = None
    in_level = False

    def close(line: int) -> None:  # the level being read ends before `line`
        nonlocal height, in_level
        level, count = len(headers) - 1, len(rows) - starts[-1]
        if count == 0:
            fail(line, level, f"no rows after the header at line {headers[-1]}")
        if height is None:
            height = count
        elif count < height:
            fail(line, level, f"{count} rows, expected {height} (the height of level 0); a row is missing here")
        elif count > height:
            fail(row_lines[starts[-1] + height], level, f"{count} rows, expected {height} (the height of level 0)")
        in_level = False

    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        line = line.removesuffix("\r")
        if line.startswith(";"):
            if in_level:
                close(number)
            expected = len(headers)
            match = _HEADER.fullmatch(line)
            if not match or int(match[1]) != expected:
                fail(number, expected, f"expected the header '; {expected}' (levels are numbered 0, 1, 2, ... "
                                       f"in file order), got {line!r}")
            headers.append(number)
            starts.append(len(rows))
            in_level = True
        elif not line.strip():
            if in_level:
                close(number)
        elif not in_level:
            fail(number, len(headers), f"expected the header '; {len(headers)}' before a level's rows, got {line!r}")
        else:
            if width is None:
                width = len(line)
            elif len(line) != width:
                fail(number, len(headers) - 1, f"row {len(rows) - starts[-1] + 1} has {len(line)} characters, "
                                               f"expected {width} (the width of the file's first row)")
            rows.append(line)
            row_lines.append(number)
    if in_level:
        close(len(lines) + 1)
    if not headers:
        raise LevelFormatError(f"{source}: no levels; expected a header '; 0' followed by the rows of level 0")

    # One pass of table lookups for the whole file; the checks below only locate the first problem.
    codes = np.frombuffer("".join(rows).encode("utf-32-le"), np.uint32).reshape(len(headers), height, width)
    symbols = np.where(codes < 128, _SYMBOL_OF[np.minimum(codes, 127)], _UNKNOWN)
    unknown = np.argwhere(symbols == _UNKNOWN)
    if len(unknown):
        level, row, col = unknown[0]
        char = chr(codes[level, row, col])
        shown = "a byte that is not UTF-8 text" if char == "\ufffd" else f"unknown character {char!r}"
        fail(row_lines[level * height + row], level, f"{shown} in column {col + 1}; expected one of {_EXPECTED_CHARS}")
    levels = np.stack([_VARIABLE_OF[symbols], _FIXED_OF[symbols]], axis=-1)

    players = (levels[..., VARIABLE] == AGENT).sum(axis=(1, 2))
    boxes = (levels[..., VARIABLE] == BOX).sum(axis=(1, 2))
    targets = (levels[..., FIXED] == TARGET).sum(axis=(1, 2))
    broken = np.flatnonzero((players != 1) | (boxes == 0) | (boxes != targets))
    if len(broken):
        level = broken[0]
        first, last = row_lines[level * height], row_lines[level * height + height - 1]
        if players[level] != 1:
            at = [(row_lines[level * height + r], c + 1) for r, c in np.argwhere(levels[level, ..., VARIABLE] == AGENT)]
            if not at:
                fail(first, level, f"no player ('@' or '+') in lines {first}-{last}; expected exactly one")
            shown = ", ".join(f"line {line} column {col}" for line, col in at)
            fail(at[1][0], level, f"{players[level]} players ('@' or '+'), at {shown}; expected exactly one")
        if boxes[level] == 0:
            fail(first, level, f"no box ('$' or '*') in lines {first}-{last}; expected at least one")
        fail(first, level, f"boxes ('$' or '*'): {boxes[level]}, targets ('.', '*' or '+'): {targets[level]}, "
                           f"in lines {first}-{last}; expected as many boxes as targets")
    return levels


def to_text(level: np.ndarray) -> str:
    """One level's rows in the Boxoban text format (without the header), '*'/'+' where they apply."""
    level = np.asarray(level)
    rows = []
    for r, row in enumerate(level):
        chars = []
        for c, (variable, fixed) in enumerate(row.tolist()):
            char = _CHAR_OF.get((variable, fixed))
            if char is None:
                raise LevelError(f"cell ({r}, {c}) holds {variable} over {fixed}, which no character stands for")
            chars.append(char)
        rows.append("".join(chars))
    return "\n".join(rows)


def format_levels(levels: np.ndarray) -> str:
    """A whole Boxoban file: `; N`, the rows, a blank line, for each level (what `read_levels` reads back)."""
    return "".join(f"; {n}\n{to_text(level)}\n\n" for n, level in enumerate(levels))


# --------------------------------------------------------------------------------------------------
# Level sets by split, cached


# Each split's level count (google-deepmind/boxoban-levels: 1,000 per file, hard's last file 332).
SPLIT_LEVELS = {"unfiltered/train": 900_000, "unfiltered/valid": 100_000, "unfiltered/test": 1_000,
                "medium/train": 450_000, "medium/valid": 50_000, "hard": 3_332}
SPLITS = tuple(SPLIT_LEVELS)
LAYOUT = "ROOT/unfiltered/{train,valid,test}, ROOT/medium/{train,valid} and ROOT/hard, each holding NNN.txt files"
BOXOBAN_URL = "https://github.com/google-deepmind/boxoban-levels/archive/refs/heads/master.zip"
# What the test set is: the SHA-256 of each file of the splits that results are reported on, from
# google-deepmind/boxoban-levels (master). A copy that differs (another split's file, an edited level, a file
# added or missing) is refused, never scored as the test set.
PINNED = {"unfiltered/test": {"000.txt": "272928a4e7c185fdf84daa523b298750b6ff08703cb0c20d3be7eff93acc5256"}}
CACHE_VERSION = 1  # bump when the parser or the cache layout changes, so old caches are rebuilt


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "parallel_experts"


def load_split(
    split: str,
    root: str | Path | None = None,
    *,
    cache_dir: str | Path | None = None,
    download: bool = False,
    size: int = GRID_SIZE,
) -> LevelSet:
    """All levels of one Boxoban split (its *.txt files in name order), padded to size×size.

    `root` is a copy of google-deepmind/boxoban-levels; without one, `download=True` fetches it into
    `cache_dir`. The parsed levels are cached in `cache_dir` as one .npz keyed by the files' names,
    sizes and modification times, so later calls skip the parsing unless a file changed.
    """
    if split not in SPLITS:
        raise LevelError(f"unknown Boxoban split {split!r}; expected one of {', '.join(SPLITS)}")
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if root is None:
        if not download:
            raise LevelError(f"no Boxoban levels given for {split}: pass root= a copy of "
                             f"google-deepmind/boxoban-levels laid out as {LAYOUT}, or download=True")
        root = download_boxoban(cache_dir)
    folder = Path(root) / split
    expected = f"expected a copy of google-deepmind/boxoban-levels laid out as {LAYOUT}"
    if not folder.is_dir():
        raise LevelError(f"{folder}: no such folder; {expected}")
    paths = sorted(folder.glob("*.txt"))
    if not paths:
        raise LevelError(f"{folder}: no *.txt level files; {expected}")

    if split in PINNED:
        check_pinned(split, paths)
    folder = folder.resolve()
    stats = [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in paths]
    key = json.dumps({"version": CACHE_VERSION, "folder": str(folder), "size": size, "files": stats})
    where = hashlib.sha256(str(folder).encode()).hexdigest()[:12]  # copies elsewhere get their own cache
    cache = cache_dir / "levels" / f"{split.replace('/', '-')}-{where}.npz"
    arrays = _read_cache(cache, key)
    if arrays is None:
        arrays = _read_split(paths, size)
        _write_cache(cache, key, arrays)
    files = tuple(f"{split}/{p.name}" for p in paths)
    source = f"Boxoban {split}: {len(arrays['levels'])} levels in {len(paths)} files of {folder}"
    return LevelSet(arrays["levels"], source, files, arrays["file"], arrays["index"])


def check_pinned(split: str, paths: list[Path]) -> None:
    """Refuse a copy of `split` whose files are not the published ones (`PINNED`), naming the first that differs."""
    pinned = PINNED[split]
    names = sorted(p.name for p in paths)
    if names != sorted(pinned):
        extra, missing = sorted(set(names) - set(pinned)), sorted(set(pinned) - set(names))
        at = paths[0].parent
        raise LevelError(f"{at / (extra or missing)[0]}: {'not a file' if extra else 'missing'} of Boxoban {split}, "
                         f"which is exactly {', '.join(sorted(pinned))} (google-deepmind/boxoban-levels)")
    for path in paths:
        found = hashlib.sha256(path.read_bytes()).hexdigest()
        if found != pinned[path.name]:
            raise LevelError(f"{path}: SHA-256 {found[:16]}…, expected {pinned[path.name][:16]}… (Boxoban {split} "
                             "as published in google-deepmind/boxoban-levels); refusing another file in its place")


def _read_split(paths: list[Path], size: int) -> dict[str, np.ndarray]:
    levels, file, index = [], [], []
    for number, path in enumerate(tqdm(paths, desc="reading levels", unit="file", disable=len(paths) < 20)):
        read = read_levels(path)
        try:
            levels.append(pad_to(read, size))
        except LevelError as error:
            raise LevelError(f"{path}: {error}") from None
        file.append(np.full(len(read), number, np.int32))
        index.append(np.arange(len(read), dtype=np.int32))  # the reader checked that headers count 0, 1, 2, ...
    return {"levels": np.concatenate(levels), "file": np.concatenate(file), "index": np.concatenate(index)}


def _read_cache(cache: Path, key: str) -> dict[str, np.ndarray] | None:
    # A missing, stale or damaged cache is rebuilt from the level files; it never changes what is read.
    try:
        with np.load(cache, allow_pickle=False) as stored:
            if str(stored["key"]) != key:
                return None
            return {name: stored[f"level_{name}"] for name in ("levels", "file", "index")}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None


def _write_cache(cache: Path, key: str, arrays: dict[str, np.ndarray]) -> None:
    try:
        with atomic_open(cache) as out:  # readers see the old cache or the new one, never half of one
            np.savez(out, key=np.array(key), **{f"level_{name}": array for name, array in arrays.items()})
    except OSError as error:
        raise LevelError(f"{cache.parent}: cannot write the level cache ({error.strerror}); "
                         f"pass cache_dir= a writable folder") from None


def download_boxoban(cache_dir: str | Path | None = None, url: str = BOXOBAN_URL, timeout: float = 30.0) -> Path:
    """The root folder of the Boxoban level set, downloaded and unpacked into `cache_dir` on first use.

    The archive is the GitHub repository's zip; it is unpacked beside its final place and renamed into
    it, so an interrupted download never leaves something that looks like a level set.
    """
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    root = cache_dir / "boxoban-levels"
    if (root / "unfiltered").is_dir():
        return root
    cache_dir.mkdir(parents=True, exist_ok=True)
    offline = f"without network, pass root= a local copy of google-deepmind/boxoban-levels laid out as {LAYOUT}"
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".boxoban-download-") as scratch:
        archive = Path(scratch) / "boxoban-levels.zip"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response, archive.open("wb") as out:
                total = int(response.headers.get("Content-Length") or 0) or None
                with tqdm(total=total, unit="B", unit_scale=True, desc="downloading Boxoban levels") as bar:
                    while chunk := response.read(1 << 20):
                        out.write(chunk)
                        bar.update(len(chunk))
        except OSError as error:  # urllib's URLError, timeouts and resets are all OSErrors
            reason = getattr(error, "reason", None) or error
            raise LevelError(f"cannot download the Boxoban levels from {url} ({reason}); {offline}") from None
        try:
            with zipfile.ZipFile(archive) as unpacking:
                unpacking.extractall(Path(scratch) / "unpacked")
        except zipfile.BadZipFile:
            raise LevelError(f"{url}: the download is not a zip archive; {offline}") from None
        tops = list((Path(scratch) / "unpacked").iterdir())
        if len(tops) != 1 or not (tops[0] / "unfiltered").is_dir():
            raise LevelError(f"{url}: the archive is not laid out as {LAYOUT}")
        try:
            os.replace(tops[0], root)
        except OSError:
            if not (root / "unfiltered").is_dir():  # else another process finished the same download first
                raise
    return root
