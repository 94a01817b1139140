"""Sokoban levels as arrays in Jumanji's encoding: Boxoban files, cached splits, and a generator.

A level is a uint8 array (rows, cols, 2) laid out like Jumanji's observation `grid`
(jumanji/environments/routing/sokoban/constants.py and env.py `_state_to_observation`):
channel 0 is the variable grid (0 empty, 3 agent, 4 box), channel 1 the fixed grid (0 empty, 1 wall,
2 target). A box or the agent on a target shows in both channels, as Jumanji keeps them.

Three sources give levels in this form:
* `read_levels` parses the Boxoban text format (google-deepmind/boxoban-levels), with errors that name
  the file, the level and the line;
* `load_split` reads one split of that level set once and caches it as one .npz (a `LevelSet`, which
  remembers the file and number of every level);
* `generate_levels` makes new levels offline the way Boxoban's were made (a random-walk room, targets,
  then reverse play that pulls the boxes off them), so every level is solvable by construction.
Jumanji's environment is fixed at 10×10; `pad_to` embeds smaller rooms in walls.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import numpy as np

from parallel_experts.atomic import atomic_open
from parallel_experts.errors import PipelineError

# Jumanji's codes (constants.py) and the channel order of its observation grid.
EMPTY, WALL, TARGET, AGENT, BOX = 0, 1, 2, 3, 4
VARIABLE, FIXED = 0, 1
GRID_SIZE = 10  # Jumanji's Sokoban only runs 10×10 grids (constants.GRID_SIZE)

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


class LevelError(PipelineError, ValueError):
    """A level file, level set or generator request that cannot be used, phrased as one line."""


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


def pad_to(levels: np.ndarray, size: int = GRID_SIZE) -> np.ndarray:
    """Embed levels (…, rows, cols, 2) of at most size×size in the top-left corner of a size×size grid of walls.

    Top-left keeps every cell's coordinates, so a position or a move sequence means the same before and
    after padding. Jumanji's Sokoban runs only 10×10 grids, so smaller rooms are padded for it.
    """
    levels = np.asarray(levels)
    if levels.ndim < 3:
        raise LevelError(f"expected levels of shape (..., rows, cols, 2), got {levels.shape}")
    *batch, rows, cols, channels = levels.shape
    if channels != 2 or rows > size or cols > size:
        raise LevelError(f"levels of shape {rows}×{cols}×{channels} do not fit a {size}×{size}×2 grid")
    padded = np.zeros((*batch, size, size, 2), np.uint8)
    padded[..., FIXED] = WALL
    padded[..., :rows, :cols, :] = levels
    return padded


# --------------------------------------------------------------------------------------------------
# Level sets by split, cached


SPLITS = ("unfiltered/train", "unfiltered/valid", "unfiltered/test", "medium/train", "medium/valid", "hard")
LAYOUT = "ROOT/unfiltered/{train,valid,test}, ROOT/medium/{train,valid} and ROOT/hard, each holding NNN.txt files"
BOXOBAN_URL = "https://github.com/google-deepmind/boxoban-levels/archive/refs/heads/master.zip"
CACHE_VERSION = 1  # bump when the parser or the cache layout changes, so old caches are rebuilt


@dataclass(frozen=True, eq=False)
class LevelSet:
    """Levels ready for sampling, with the provenance of each one."""

    levels: np.ndarray  # (n, 10, 10, 2) uint8, Jumanji's encoding
    source: str  # what the set is, in words
    files: tuple[str, ...]  # the files the levels came from, e.g. "unfiltered/test/000.txt"
    file: np.ndarray  # (n,) int32: each level's file, an index into `files`
    index: np.ndarray  # (n,) int32: each level's number `; N` within its file

    def __len__(self) -> int:
        return len(self.levels)

    def name(self, i: int) -> str:
        """Where level i came from, e.g. "unfiltered/test/000.txt level 17"."""
        return f"{self.files[self.file[i]]} level {self.index[i]}"

    def save(self, path: str | Path) -> None:
        """One .npz with the levels and their provenance, written atomically."""
        with atomic_open(path) as file:
            np.savez_compressed(file, levels=self.levels, level_file=self.file, level_index=self.index,
                                files=np.array(self.files), source=np.array(self.source))

    @classmethod
    def load(cls, path: str | Path) -> "LevelSet":
        try:
            with np.load(path) as data:
                return cls(data["levels"], str(data["source"]), tuple(data["files"].tolist()), data["level_file"],
                           data["level_index"])
        except (OSError, KeyError, ValueError) as error:
            raise LevelError(f"{path}: not a saved level set ({error})") from None


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


def _read_split(paths: list[Path], size: int) -> dict[str, np.ndarray]:
    from tqdm import tqdm

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
    from tqdm import tqdm

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


# --------------------------------------------------------------------------------------------------
# Generating solvable levels

# gym-sokoban's (Schrader) room topology: a random walk stamps one of these 3×3 floor masks at every step.
_MASKS = np.array([
    [[0, 0, 0], [1, 1, 1], [0, 0, 0]],
    [[0, 1, 0], [0, 1, 0], [0, 1, 0]],
    [[0, 0, 0], [1, 1, 0], [0, 1, 0]],
    [[0, 0, 0], [1, 1, 0], [1, 1, 0]],
    [[0, 0, 0], [0, 1, 1], [0, 1, 0]],
], bool)
_DIRECTIONS = ((-1, 0), (0, 1), (1, 0), (0, -1))


def generate_levels(
    n: int,
    room_size: int = GRID_SIZE,
    num_boxes: int = 4,
    seed: int = 0,
    *,
    walks: int = 16,
    walk_steps: int = 300,
    p_pull: float = 0.5,
    min_displacement: int | None = None,
    topology_steps: int | None = None,
    p_change_direction: float = 0.35,
    max_tries: int = 200,
) -> np.ndarray:
    """n solvable levels (n, room_size, room_size, 2) uint8 in Jumanji's encoding, walls on the border.

    The procedure of Boxoban's unfiltered levels (Racanière et al. 2017) as gym-sokoban implements it:
    1. room: a random walk of `topology_steps` steps (default 1.7·2·room_size) inside the border, turning
       with probability `p_change_direction`, stamps 3×3 floor masks;
    2. the player and `num_boxes` targets go on distinct random floor cells, a box on each target;
    3. reverse play: the player walks at random, `walk_steps` steps at a time, and with probability
       `p_pull` pulls along a box standing behind it. Each such move undoes a legal forward move, so
       every position reached can be played forward back to the solved one: solvable by construction.
    Positions are scored like gym-sokoban, (number of times the pulled box changes) × (sum of the boxes'
    distances from the targets they started on), counting only positions with no box on any target and
    a total distance of at least `min_displacement` (default 2·num_boxes: no box-one-step-off-its-target
    levels). gym-sokoban searches the reverse moves depth-first for the best score (slow in Python);
    here `walks` random walks climb instead, each starting from the best position found so far. A room
    where no walk scores is redrawn, up to `max_tries` times.

    Level i uses its own random stream `np.random.default_rng([seed, i])`, so it depends only on the
    seed, its position and the settings: the first k levels of a longer request are the same levels.

    Measured on one core of the 2-core CPU machine, 1,000 levels: 6×6 with 1 box about 2 s, 7×7 with
    2 boxes 2 s, 7×7 with 3 boxes 5 s, 10×10 with 4 boxes 4-5 s. The 10×10 4-box levels need 10.6 pushes on
    average (push-optimal solutions of 60 levels), Boxoban's unfiltered test levels 10.9 (first 40).
    """
    if not (isinstance(seed, (int, np.integer)) and seed >= 0):
        raise LevelError(f"seed: expected a non-negative integer, got {seed!r}")
    interior = (room_size - 2) ** 2
    if room_size < 4 or num_boxes < 1 or num_boxes + 2 > interior:
        raise LevelError(f"room_size {room_size} with num_boxes {num_boxes}: expected room_size >= 4 and "
                         f"1 <= num_boxes <= {max(interior - 2, 0)} (the inside of the border less two cells)")
    steps = int(1.7 * 2 * room_size) if topology_steps is None else topology_steps
    levels = np.empty((n, room_size, room_size, 2), np.uint8)
    for i in range(n):
        rng = np.random.default_rng([seed, i])
        for _ in range(max_tries):
            level = _try_level(rng, room_size, num_boxes, steps, p_change_direction, walks, walk_steps, p_pull,
                               2 * num_boxes if min_displacement is None else min_displacement)
            if level is not None:
                levels[i] = level
                break
        else:
            raise LevelError(f"level {i} of seed {seed}: no {room_size}×{room_size} room with {num_boxes} boxes "
                             f"in {max_tries} tries; use a larger room, fewer boxes or more walks")
    return levels


def _try_level(rng, size, num_boxes, topology_steps, p_change, walks, walk_steps, p_pull,
               min_displacement) -> np.ndarray | None:
    floor = _room(rng, size, topology_steps, p_change)
    cells = np.flatnonzero(floor)
    if len(cells) <= num_boxes + 1:  # gym-sokoban's rule: room for the player, the boxes and one more
        return None
    chosen = rng.choice(cells, num_boxes + 1, replace=False).tolist()
    best = _reverse_play(floor, chosen[0], chosen[1:], rng, walks, walk_steps, p_pull, min_displacement)
    if best is None:
        return None
    player, boxes = best
    fixed = np.where(floor.reshape(-1), EMPTY, WALL).astype(np.uint8)
    fixed[chosen[1:]] = TARGET
    variable = np.full(size * size, EMPTY, np.uint8)
    variable[boxes] = BOX
    variable[player] = AGENT
    return np.stack([variable, fixed], axis=-1).reshape(size, size, 2)


def _room(rng, size: int, steps: int, p_change: float) -> np.ndarray:
    floor = np.zeros((size, size), bool)
    direction = _DIRECTIONS[rng.integers(4)]
    row, col = rng.integers(1, size - 1, size=2).tolist()
    turns = rng.random(steps) < p_change
    new_directions, masks = rng.integers(4, size=steps), rng.integers(5, size=steps)
    for step in range(steps):
        if turns[step]:
            direction = _DIRECTIONS[new_directions[step]]
        row = min(max(row + direction[0], 1), size - 2)
        col = min(max(col + direction[1], 1), size - 2)
        floor[row - 1:row + 2, col - 1:col + 2] |= _MASKS[masks[step]]
    # Every mask covers its centre and the centres form a path, so the floor is one connected room.
    floor[[0, -1], :] = floor[:, [0, -1]] = False
    return floor


def _reverse_play(floor, player: int, targets: list[int], rng, walks: int, steps: int, p_pull: float,
                  min_displacement: int):
    """The best-scoring (player, box cells) reached by reverse play from the solved position, or None."""
    width = floor.shape[1]
    free = floor.reshape(-1).tolist()
    is_target = [False] * len(free)
    for t in targets:
        is_target[t] = True
    rows, cols = [c // width for c in range(len(free))], [c % width for c in range(len(free))]
    offsets = (-width, 1, width, -1)  # up, right, down, left in row-major cell numbers
    best_score, best = 0, None
    # (player, box cells, boxes on targets, displacement, box changes, last pulled box) where a walk starts
    start = (player, list(targets), len(targets), 0, 0, -1)
    for _ in range(walks):
        position, box_cell, covered, displacement, swaps, last = start
        box_cell = list(box_cell)
        box_at = [-1] * len(free)  # which box stands on each cell
        for b, cell in enumerate(box_cell):
            box_at[cell] = b
        moves, pulls = rng.integers(4, size=steps).tolist(), (rng.random(steps) < p_pull).tolist()
        for move, pull in zip(moves, pulls):
            offset = offsets[move]
            ahead = position + offset  # floor never touches the border, so neighbours stay in the grid
            if not free[ahead] or box_at[ahead] >= 0:
                continue
            behind = position - offset
            b = box_at[behind]
            if pull and b >= 0:  # the box follows the player: the reverse of pushing it from `ahead`
                box_at[behind], box_at[position], box_cell[b] = -1, b, position
                covered += is_target[position] - is_target[behind]
                t = targets[b]
                displacement += (abs(rows[position] - rows[t]) + abs(cols[position] - cols[t])
                                 - abs(rows[behind] - rows[t]) - abs(cols[behind] - cols[t]))
                if b != last:
                    swaps, last = swaps + 1, b
            position = ahead
            if covered == 0 and displacement >= min_displacement and swaps * displacement > best_score:
                best_score, best = swaps * displacement, (position, list(box_cell))
                start = (position, box_cell.copy(), covered, displacement, swaps, last)
    return best


def generated_set(n: int, room_size: int = GRID_SIZE, num_boxes: int = 4, seed: int = 0, size: int = GRID_SIZE,
                  **settings) -> LevelSet:
    """`generate_levels` padded to size×size, as a `LevelSet` whose provenance is the generator call."""
    levels = pad_to(generate_levels(n, room_size, num_boxes, seed, **settings), size)
    call = f"generated(room_size={room_size}, num_boxes={num_boxes}, seed={seed}" + \
        "".join(f", {k}={v!r}" for k, v in sorted(settings.items())) + ")"
    return LevelSet(levels, f"{n} levels {call}", (call,), np.zeros(n, np.int32), np.arange(n, dtype=np.int32))
