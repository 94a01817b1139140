"""workflow/scripts/same_results.py, the check that a refactoring changed no number: exact on every variable,
attribute and JSON value, blind only to timestamps and to the files that hold measured times."""

import json
import shutil
import subprocess
import sys

import numpy as np
import xarray as xr
from helpers import REPO

SCRIPT = REPO / "workflow/scripts/same_results.py"


def results(folder, solved=(0.5, np.nan), rendered="2026-12-03T03:00:00+00:00", ms=1.0):
    """A results folder of a checkout `folder.parent`, its report's sidecar naming its notebook by absolute path."""
    (folder / "sokoban/runs/a").mkdir(parents=True)
    (folder / "lm").mkdir()
    (folder / "reports").mkdir()
    xr.Dataset({"solve_rate": ("seed", list(solved))}, attrs={"run": "a"}).to_netcdf(
        folder / "sokoban/runs/a/eval.nc", engine="h5netcdf")
    xr.Dataset({"ms_per_token": ("allocation", [ms])}).to_netcdf(folder / "lm/latency.nc", engine="h5netcdf")
    (folder / "reports/fig2.json").write_text(json.dumps({"title": "Fig. 2", "rendered": rendered,
                                                          "notebook": f"{folder.parent}/workflow/notebooks/a.ipynb"}))
    return folder


def compare(before, after):
    return subprocess.run([sys.executable, str(SCRIPT), str(before), str(after)], capture_output=True, text=True)


def test_the_same_numbers_pass_whatever_the_timestamps_and_measured_times(tmp_path):
    before = results(tmp_path / "before/results")
    after = results(tmp_path / "after/results", rendered="2026-12-03T04:00:00+00:00", ms=2.0)
    run = compare(before, after)
    assert run.returncode == 0, run.stdout
    assert "lm/latency.nc: variable ms_per_token: values differ" in run.stdout
    assert "0 of them hold no measured time" in run.stdout


def test_a_changed_number_or_a_missing_file_fails_and_is_named(tmp_path):
    before = results(tmp_path / "before/results")
    after = results(tmp_path / "after/results", solved=(0.5, 0.25))
    run = compare(before, after)
    assert run.returncode == 1
    assert "sokoban/runs/a/eval.nc: variable solve_rate: values differ" in run.stdout
    shutil.rmtree(after)
    after = results(tmp_path / "after/results")
    (after / "reports/fig2.json").unlink()
    run = compare(before, after)
    assert run.returncode == 1 and "reports/fig2.json: only before" in run.stdout
