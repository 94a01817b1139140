"""Result datasets: the allocation grid with its work ratios, and a sweep's runs read back with their results."""

import json

import numpy as np
import pytest
import xarray as xr
from helpers import REPO

from parallel_experts.config.errors import PipelineError
from parallel_experts.config.files import load
from parallel_experts.results import grids, store
from parallel_experts.study import Study


def test_allocation_dataset_ratios_and_dims(repo):
    smoke = Study.of(load([repo / "config/smoke.yaml"]))
    sokoban = grids.allocation_dataset(smoke.sokoban.budgets, smoke.sokoban.settings.proxy)
    # [2, 1, 8] against the anchor [1, 1, 16]: 2·8·(32+16) / (16·(32+32)) = 768/1024
    assert sokoban["work_ratio"].values.tolist() == [1.0, 0.75]
    assert sokoban["is_anchor"].values.tolist() == [True, False]
    lm = grids.allocation_dataset(smoke.lm.budgets, smoke.lm.settings.proxy)
    assert lm["work_ratio"].dims == ("allocation", "window")
    assert lm["measured_flops"].isnull().all()  # a place for the model stages to fill in


def test_run_results_rebuild_each_run_and_refuse_an_evaluation_of_another(tmp_path):
    first, second = Study.of(load([REPO / "config/smoke.yaml"])).sokoban.sweeps[:2]
    curve = tmp_path / "curve.nc"
    store.write_netcdf(xr.Dataset(attrs={"run_config": json.dumps(first.to_dict())}), curve)
    for run, name in ((first, "good.nc"), (second, "other.nc")):
        store.write_netcdf(xr.Dataset(attrs={"run": run.id}), tmp_path / name)
    [(run, _, _)] = store.run_results(type(first), [curve], [tmp_path / "good.nc"])
    assert run == first
    with pytest.raises(PipelineError, match=f"other.nc evaluates {second.id}, not {first.id}"):
        list(store.run_results(type(first), [curve], [tmp_path / "other.nc"]))


def test_a_result_that_cannot_be_read_is_one_line_naming_it(tmp_path):
    store.write_netcdf(xr.Dataset({"loss": ("update", np.arange(50.0))}), tmp_path / "curve.nc")
    whole = (tmp_path / "curve.nc").read_bytes()
    (tmp_path / "truncated.nc").write_bytes(whole[:len(whole) // 2])
    (tmp_path / "garbage.nc").write_text("{}")
    (tmp_path / "folder.nc").mkdir()
    for name, why in [("truncated.nc", "truncated file"), ("garbage.nc", "file signature not found"),
                      ("folder.nc", "Is a directory"), ("missing.nc", "No such file or directory")]:
        with pytest.raises(PipelineError) as error:
            store.open_dataset(tmp_path / name)
        message = str(error.value)
        assert message.startswith(f"{tmp_path / name}: not a readable netCDF result (") and why in message
        assert "\n" not in message
    assert store.open_dataset(tmp_path / "curve.nc")["loss"].values.tolist() == list(range(50))
