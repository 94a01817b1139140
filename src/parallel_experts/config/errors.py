"""The project's expected failures, and how a failure names the place it comes from.

An expected failure (bad input, a diverged run) is a `PipelineError`; the CLI prints its message as one line,
with no traceback. A `ConfigError` names the config key, written with `key_path`. What a message quotes from the
input passes `quote`, and a message is one line of at most MESSAGE_LIMIT characters however it was built, so a
megabyte-long value or a name with a line break never makes a megabyte-long or a second line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

QUOTE_LIMIT = 60  # characters of one value quoted in a message
MESSAGE_LIMIT = 500  # characters of a whole message: a few file names and keys, each quoted value bounded


class PipelineError(Exception):
    """An expected failure (bad input, diverged training): the CLI reports it in one line, no traceback."""

    def __str__(self) -> str:
        return one_line(super().__str__(), MESSAGE_LIMIT)


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


def quote(value, limit: int = QUOTE_LIMIT) -> str:
    """A value from the input as a message shows it: JSON where it is JSON (else its repr), one line, at most
    about `limit` characters, with the length of what was left out."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError):  # not JSON (bytes, a date, a cycle): a message must still be built
        text = repr(value)
    return one_line(text, limit)


def quote_key(key, limit: int = QUOTE_LIMIT) -> str:
    """A mapping key as a message names it: its repr ('x'), bounded as `quote` bounds a value."""
    return one_line(repr(key), limit)


def one_line(text: str, limit: int) -> str:
    """`text` with line breaks and other control characters escaped, and cut to `limit` characters."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:limit + 1])
    if len(shown) > limit:
        return f"{shown[:limit]}… ({len(text):,} characters)"
    return shown
