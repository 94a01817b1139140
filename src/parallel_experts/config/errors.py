"""The project's expected failures, and how a failure names the place it comes from.

An expected failure (bad input, a diverged run) is a `PipelineError`; the CLI prints its message as one line,
with no traceback. A `ConfigError` names the config key, written with `key_path`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence


class PipelineError(Exception):
    """An expected failure (bad input, diverged training): the CLI reports it in one line, no traceback."""


class ConfigError(PipelineError, ValueError):
    """A configuration problem, phrased as one line naming the key."""


def key_path(path: Sequence) -> str:
    """`sokoban.budgets.small.allocations[3]` from a JSON path."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def reason(error: BaseException) -> str:
    """Why a library call failed, in a few words on one line: the OS's words for a system error, else the first
    line of the message (HDF5's run over several lines, with timestamps)."""
    if isinstance(error, OSError) and error.errno:
        return os.strerror(error.errno)
    lines = str(error).strip().splitlines()
    return (lines[0][:160] if lines else "") or type(error).__name__
