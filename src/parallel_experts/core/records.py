"""The small files the pipeline writes for itself and reads back later: JSON records (checkpoint state, report
sidecars) and Snakemake's benchmark tables. A damaged one (empty, truncated, edited, of another kind) is a
`PipelineError` naming the file and the key, column or line, never a KeyError deep in the code that uses it.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping
from pathlib import Path

from parallel_experts.config.errors import PipelineError, quote, reason


def read_json(path: str | Path, fields: Mapping[str, type | tuple[type, ...]], what: str) -> dict:
    """The JSON object in `path`, with every key of `fields` present and of its type; `what` says what the file
    should be ("a report's sidecar"). Other keys are kept as they are."""
    try:
        found = json.loads(Path(path).read_bytes())
    except OSError as error:
        raise PipelineError(f"{path}: cannot read {what} ({reason(error)})") from None
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError
        raise PipelineError(f"{path}: not {what}: not JSON ({reason(error)})") from None
    if not isinstance(found, dict):
        raise PipelineError(f"{path}: not {what}: expected a JSON object, got {type(found).__name__}")
    for key, kind in fields.items():
        if key not in found:
            raise PipelineError(f"{path}: not {what}: no key {key!r}")
        value = found[key]
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _types(kind)):
            names = " or ".join(t.__name__ for t in _types(kind))
            raise PipelineError(f"{path}: not {what}: key {key!r} should be {names}, got {quote(value)}")
    return found


def _types(kind) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def benchmark_seconds(path: str | Path) -> float:
    """The wall-clock seconds of the last timing in a Snakemake benchmark file (tab-separated, a header with
    column `s`, one row per timing): a positive finite number, or one line naming the file and what is wrong."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise PipelineError(f"{path}: cannot read the benchmark file ({reason(error)})") from None
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
