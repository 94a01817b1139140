"""The rehearsal's record (results/rehearsal/SCALE.json, and each part that `rehearse --merge` joins): read and
checked here, below both its writer (`rehearsal.programs`) and its readers (the plan, the GPU check)."""

from __future__ import annotations

import json
from pathlib import Path

from parallel_experts.config.errors import PipelineError
from parallel_experts.core import records

WHAT = "a rehearsal's record (python -m parallel_experts rehearse)"
# What every program's record holds (rehearsal.programs.compiled); one that compiled also has PEAK.
RECORD = {"key": str, "rule": str, "jobs": list, "devices": int, "backend": str}
PEAK = {"peak_bytes": int, "memory": dict}


def read(path: str | Path, missing_ok: bool = True) -> dict | None:
    """The rehearsal's records (`{"scale", "programs": [...]}`), checked: anything else is named in one line with
    the record and key (a part of another config or version, an edited file). None where it has not run."""
    path = Path(path)
    if missing_ok and not path.exists():
        return None
    found = records.read_json(path, {"scale": str, "programs": list}, WHAT)
    for index, record in enumerate(found["programs"]):
        where = f"{path}: not {WHAT}: programs[{index}]"
        records.fields_of(record, RECORD | ({} if "error" in record else PEAK), where)
        for job in record["jobs"]:
            if not (isinstance(job, list) and len(job) == 2 and all(isinstance(part, str) for part in job)):
                raise PipelineError(f"{where}: a job should be [rule, wildcards], got {json.dumps(job)[:80]}")
    return found
