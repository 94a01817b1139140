"""The small files the pipeline writes for itself and reads back later: JSON records (checkpoint state, report
sidecars) and Snakemake's benchmark tables. A damaged one (empty, truncated, edited, of another kind) is a
`PipelineError` naming the file and the key, column or line, never a KeyError deep in the code that uses it.
"""

from __future__ import annotations

import csv
import json
import math
import os
import stat
from collections.abc import Mapping
from pathlib import Path

from parallel_experts.config.errors import PipelineError, quote, reason


# What else may stand where the pipeline expects a file: a named pipe would hang the read, a device never end.
KINDS = {stat.S_IFIFO: "a named pipe", stat.S_IFDIR: "a folder", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device",
         stat.S_IFSOCK: "a socket"}


def read_bytes(path: str | Path, what: str) -> bytes:
    """The bytes of `path`, a regular file (`what` it should be, for the message): anything else in its place is
    refused unread, in one line. Opened without blocking, so that a named pipe is seen before it hangs the read."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise PipelineError(f"{path}: cannot read {what} ({reason(error)})") from None
    kind = stat.S_IFMT(os.fstat(descriptor).st_mode)
    if kind != stat.S_IFREG:
        os.close(descriptor)
        raise PipelineError(f"{path}: cannot read {what}: {KINDS.get(kind, 'not a regular file')} is there, not a file")
    with os.fdopen(descriptor, "rb") as file:
        return file.read()


Fields = Mapping[str, type | tuple[type, ...]]  # a record's fields: each name and the types its value may have


def read_json(path: str | Path, fields: Fields, what: str) -> dict:
    """The JSON object in `path`, with every key of `fields` present and of its type; `what` says what the file
    should be ("a report's sidecar"). Other keys are kept as they are."""
    try:
        found = json.loads(read_bytes(path, what))
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError
        raise PipelineError(f"{path}: not {what}: not JSON ({reason(error)})") from None
    return fields_of(found, fields, f"{path}: not {what}")


def fields_of(found, fields: Fields, where: str, fix: str = "") -> dict:
    """`found`, a JSON object with every key of `fields` present and of its type; else a PipelineError that
    starts with `where` (the file and what it should be, and where in it) and ends with `fix`, if given."""

    def refuse(problem: str):
        raise PipelineError(f"{where}: {problem}" + (f"; {fix}" if fix else ""))

    if not isinstance(found, dict):
        refuse(f"expected a JSON object, got {type(found).__name__}")
    for key, kind in fields.items():
        if key not in found:
            refuse(f"no key {key!r}")
        value = found[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _types(kind)):
            refuse(f"key {key!r} should be {' or '.join(t.__name__ for t in _types(kind))}, got {quote(value)}")
    return found


def _types(kind) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def benchmark_seconds(path: str | Path) -> float:
    """The wall-clock seconds of the last timing in a Snakemake benchmark file (tab-separated, a header with
    column `s`, one row per timing): a positive finite number, or one line naming the file and what is wrong."""
    try:
        text = read_bytes(path, "the benchmark file").decode("utf-8")
    except UnicodeDecodeError:
        raise PipelineError(f"{path}: not a Snakemake benchmark file: not UTF-8 text") from None
    expected = "expected a header with column 's' and a row of timings per run (Snakemake's benchmark file)"
    rows = [row for row in csv.reader(text.splitlines(), delimiter="\t") if row]
    if not rows or "s" not in rows[0]:
        raise PipelineError(f"{path}: no column 's' in line 1; {expected}")
    if len(rows) < 2:
        raise PipelineError(f"{path}: no timing after the header; {expected}")
    line, last = len(rows), rows[-1]
    column = rows[0].index("s")
    if len(last) != len(rows[0]):
        raise PipelineError(f"{path}, line {line}: {len(last)} fields, expected {len(rows[0])} as in the header "
                            "(a truncated file?)")
    try:
        seconds = float(last[column])
    except ValueError:
        raise PipelineError(f"{path}, line {line}, column 's': expected seconds, got {quote(last[column])}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise PipelineError(f"{path}, line {line}, column 's': expected a positive number of seconds, got {seconds}")
    return seconds
