"""Result datasets: the allocation grid with its work ratios, and a sweep's runs read back with their results."""

import json

import pytest
import xarray as xr

from helpers import REPO
from parallel_experts import results
from parallel_experts.config import load
from parallel_experts.errors import PipelineError
from parallel_experts.sokoban.experiment import runs


def test_allocation_dataset_ratios_and_dims(repo):
    config = load([repo / "config/smoke.yaml"])
    sokoban = results.allocation_dataset(config, "sokoban")
    # [2, 1, 8] against the anchor [1, 1, 16]: 2·8·(32+16) / (16·(32+32)) = 768/1024
    assert sokoban["work_ratio"].values.tolist() == [1.0, 0.75]
    assert sokoban["is_anchor"].values.tolist() == [True, False]
    lm = results.allocation_dataset(config, "lm")
    assert lm["work_ratio"].dims == ("allocation", "window")
    assert lm["measured_flops"].isnull().all()  # a place for the model stages to fill in
    assert lm.attrs["scale"] == "smoke"


def test_run_results_rebuild_each_run_and_refuse_an_evaluation_of_another(tmp_path):
    first, second = runs(load([REPO / "config/smoke.yaml"]))[:2]
    curve = tmp_path / "curve.nc"
    results.write_netcdf(xr.Dataset(attrs={"run_config": json.dumps(first.to_dict())}), curve)
    for run, name in ((first, "good.nc"), (second, "other.nc")):
        results.write_netcdf(xr.Dataset(attrs={"run": run.id}), tmp_path / name)
    [(run, _, _)] = results.run_results(type(first), [curve], [tmp_path / "good.nc"])
    assert run == first
    with pytest.raises(PipelineError, match=f"other.nc evaluates {second.id}, not {first.id}"):
        list(results.run_results(type(first), [curve], [tmp_path / "other.nc"]))
