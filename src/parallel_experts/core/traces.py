"""What a JAX profiler trace says, in a few numbers: where a program's time went, read on any machine afterwards.

`jax.profiler.trace(folder, create_perfetto_trace=True)` writes TensorBoard's `*.xplane.pb` (its profile plugin
reads it) and a Perfetto trace (`perfetto_trace.json.gz`: open it at ui.perfetto.dev). `summary` reads the latter:
every event that XLA ran for an HLO operation (a GPU kernel, a CPU thunk: its `hlo_op` argument), per device or host
process, its count and total time, and the operations that took the most. Many short operations with the device
idle between them say that a program is bound by launches, not by its FLOPs.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

TOP = 12  # operations listed per process


def summary(folder: str | Path, top: int = TOP) -> dict:
    """Per process of the newest Perfetto trace under `folder`: its operations' count, total and span (first start to
    last end, µs), the share of the span they were busy (it may pass 1: operations run on several streams or threads
    at once, and on a CPU a loop's operations nest inside the loop's own), and the `top` operations by total time.
    The trace's path is kept beside it."""
    found = sorted(Path(folder).rglob("perfetto_trace.json.gz"), key=lambda path: path.stat().st_mtime)
    if not found:
        return {"file": None, "processes": {}}
    with gzip.open(found[-1], "rt") as file:
        events = json.load(file)["traceEvents"]
    names = {event["pid"]: event["args"]["name"] for event in events
             if event.get("ph") == "M" and event.get("name") == "process_name"}
    per_process: dict = defaultdict(lambda: {"ops": defaultdict(lambda: [0, 0.0]), "start": None, "end": None})
    for event in events:
        if event.get("ph") != "X" or "hlo_op" not in event.get("args", {}):
            continue
        process = per_process[names.get(event["pid"], str(event["pid"]))]
        op = process["ops"][event["name"]]
        op[0] += 1
        op[1] += event["dur"]
        start, end = event["ts"], event["ts"] + event["dur"]
        process["start"] = start if process["start"] is None else min(process["start"], start)
        process["end"] = end if process["end"] is None else max(process["end"], end)
    processes = {}
    for name, process in per_process.items():
        ops = sorted(process["ops"].items(), key=lambda item: -item[1][1])
        total, span = sum(us for _, us in process["ops"].values()), process["end"] - process["start"]
        processes[name] = {"operations": sum(count for count, _ in process["ops"].values()), "busy_us": total,
                           "span_us": span, "busy_share": total / span if span else None,
                           "top": [{"op": op, "count": count, "us": us, "share": us / total if total else None}
                                   for op, (count, us) in ops[:top]]}
    return {"file": str(found[-1]), "processes": processes}
