"""Sokoban levels as arrays in Jumanji's encoding, and a `LevelSet`: levels with the provenance of each one.

A level is a uint8 array (rows, cols, 2) laid out like Jumanji's observation `grid`
(jumanji/environments/routing/sokoban/constants.py and env.py `_state_to_observation`):
channel 0 is the variable grid (0 empty, 3 agent, 4 box), channel 1 the fixed grid (0 empty, 1 wall,
2 target). A box or the agent on a target shows in both channels, as Jumanji keeps them.

Two sources make level sets: `boxoban` (the Boxoban files, by split) and `generator` (new levels made
offline by reverse play). Jumanji's environment is fixed at 10×10; `pad_to` embeds smaller rooms in walls.
"""

from __future__ import annotations

import zipfile
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from parallel_experts.config.errors import PipelineError
from parallel_experts.core.atomic import atomic_open

# Jumanji's codes (constants.py) and the channel order of its observation grid.
EMPTY, WALL, TARGET, AGENT, BOX = 0, 1, 2, 3, 4
VARIABLE, FIXED = 0, 1
GRID_SIZE = 10  # Jumanji's Sokoban only runs 10×10 grids (constants.GRID_SIZE)
# The codes each channel may hold: anything else is a damaged or foreign level file.
CELL_CODES = {VARIABLE: [EMPTY, AGENT, BOX], FIXED: [EMPTY, WALL, TARGET]}
MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))  # action (up, right, down, left) → (row, col) change: constants.MOVES


class LevelError(PipelineError, ValueError):
    """A level file, level set or generator request that cannot be used, phrased as one line."""


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


@dataclass(frozen=True, eq=False)
class LevelSet:
    """Levels ready for sampling, with the provenance of each one."""

    levels: np.ndarray  # (n, 10, 10, 2) uint8, Jumanji's encoding
    source: str  # what the set is, in words
    files: tuple[str, ...]  # the files the levels came from, e.g. "unfiltered/test/000.txt"
    file: np.ndarray  # (n,) int32: each level's file, an index into `files`
    index: np.ndarray  # (n,) int32: each level's number `; N` within its file
    pushes: np.ndarray | None = None  # (k,) int32, k <= n: pushes of a push-optimal solution of the first k levels

    def __len__(self) -> int:
        return len(self.levels)

    def name(self, i: int) -> str:
        """Where level i came from, e.g. "unfiltered/test/000.txt level 17"."""
        return f"{self.files[self.file[i]]} level {self.index[i]}"

    def with_pushes(self, pushes: np.ndarray) -> "LevelSet":
        """The same levels with the push counts of the first len(pushes) of them (see solver.push_counts)."""
        if len(pushes) > len(self):
            raise LevelError(f"{len(pushes)} push counts for a set of {len(self)} levels ({self.source})")
        return replace(self, pushes=np.asarray(pushes, np.int32))

    def save(self, path: str | Path) -> None:
        """One .npz with the levels, their provenance and any push counts, written atomically."""
        pushes = {} if self.pushes is None else {"pushes": self.pushes}
        with atomic_open(path) as file:
            np.savez_compressed(file, levels=self.levels, level_file=self.file, level_index=self.index,
                                files=np.array(self.files), source=np.array(self.source), **pushes)

    @classmethod
    def load(cls, path: str | Path) -> "LevelSet":
        try:
            with np.load(path) as data:
                found = cls(data["levels"], str(data["source"]), tuple(data["files"].tolist()), data["level_file"],
                            data["level_index"], data["pushes"] if "pushes" in data else None)
        except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as error:
            # np.load: a truncated or empty file is a BadZipFile or an EOFError, a damaged member a zlib.error
            raise LevelError(f"{path}: not a saved level set ({error or type(error).__name__})") from None
        levels = found.levels
        if levels.dtype != np.uint8 or levels.ndim != 4 or levels.shape[1:] != (GRID_SIZE, GRID_SIZE, 2) \
                or not (len(found.file) == len(found.index) == len(levels)):
            raise LevelError(f"{path}: expected (n, {GRID_SIZE}, {GRID_SIZE}, 2) uint8 levels with n provenance "
                             f"entries, got {levels.dtype} {levels.shape} with {len(found.file)}")
        for channel, allowed in CELL_CODES.items():  # a code Jumanji does not know would train without a word
            wrong = np.argwhere(~np.isin(levels[..., channel], allowed))
            if len(wrong):
                level, row, col = wrong[0]
                raise LevelError(f"{path}: level {level}, row {row}, column {col}: cell code "
                                 f"{levels[level, row, col, channel]} in the {('variable', 'fixed')[channel]} grid; "
                                 f"expected one of {allowed} (Jumanji's encoding)")
        return found
