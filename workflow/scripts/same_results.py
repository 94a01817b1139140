"""Whether two results folders hold the same numbers: every variable and coordinate of every netCDF file and every
value of every JSON file, compared exactly (NaN equal to NaN), timestamps aside.

    python workflow/scripts/same_results.py BEFORE/results AFTER/results

Prints one line per difference and a summary; exits 1 if a file that holds no measured time differs. A refactoring
that changes no computation leaves nothing to print but the measured times of the systems tables (`lm/latency.nc`,
`lm/throughput.nc`, which time themselves) and the plan's measured job times, which differ from run to run. Paths
are compared relative to each checkout (a report's sidecar names its notebook by absolute path).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import xarray as xr

# What differs between two runs of the same code: when a page was rendered, and how fast the machine was.
TIMESTAMPS = {"rendered"}
TIMED = ("lm/latency.nc", "lm/throughput.nc", "plan/")


def same_array(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
        return False
    if a.dtype.kind in "fc":
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a, b))


def netcdf_differences(before: Path, after: Path) -> list[str]:
    with xr.open_dataset(before, engine="h5netcdf") as a, xr.open_dataset(after, engine="h5netcdf") as b:
        a, b = a.load(), b.load()
    found = []
    for name in sorted(set(a.variables) | set(b.variables)):
        if name not in a.variables or name not in b.variables:
            found.append(f"variable {name}: only in {'after' if name in b.variables else 'before'}")
        elif not same_array(a[name].values, b[name].values):
            found.append(f"variable {name}: values differ")
    for name in sorted(set(a.attrs) | set(b.attrs)):
        if a.attrs.get(name) != b.attrs.get(name):
            found.append(f"attribute {name}: {str(a.attrs.get(name))[:60]!r} -> {str(b.attrs.get(name))[:60]!r}")
    return found


def json_differences(before, after, roots: tuple[str, str], where: str = "") -> list[str]:
    """Every value that differs, by its key path; strings with each side's checkout (`roots`) taken out."""
    if isinstance(before, dict) and isinstance(after, dict):
        return [line for key in sorted(set(before) | set(after)) if key not in TIMESTAMPS
                for line in json_differences(before.get(key), after.get(key), roots, f"{where}.{key}")]
    if isinstance(before, str) and isinstance(after, str):
        before, after = before.replace(roots[0], "<checkout>"), after.replace(roots[1], "<checkout>")
    return [] if before == after else [f"{where or 'value'}: {str(before)[:60]!r} -> {str(after)[:60]!r}"]


def differences(before: Path, after: Path) -> dict[str, list[str]]:
    """Each file (relative path) whose numbers differ -> what differs; a file only one side has, too."""
    roots = (str(before.resolve().parent), str(after.resolve().parent))
    files = {p.relative_to(root).as_posix() for root in (before, after) for p in root.rglob("*")
             if p.suffix in (".nc", ".json", ".csv") and p.is_file()}
    found = {}
    for name in sorted(files):
        a, b = before / name, after / name
        if not (a.exists() and b.exists()):
            found[name] = [f"only {'after' if b.exists() else 'before'}"]
        elif a.suffix == ".nc":
            found[name] = netcdf_differences(a, b)
        elif a.suffix == ".json":
            found[name] = json_differences(json.loads(a.read_text()), json.loads(b.read_text()), roots)
        else:
            found[name] = [] if a.read_text() == b.read_text() else ["text differs"]
    return {name: lines for name, lines in found.items() if lines}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    found = differences(args.before, args.after)
    for name, lines in found.items():
        for line in lines:
            print(f"{name}: {line}")
    untimed = [name for name in found if not name.startswith(TIMED)]
    print(f"{len(found)} files differ; {len(untimed)} of them hold no measured time: {', '.join(untimed) or 'none'}")
    return 1 if untimed else 0


if __name__ == "__main__":
    sys.exit(main())
