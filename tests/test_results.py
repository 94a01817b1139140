"""Result datasets: the allocation grid with its work ratios, atomically written netCDF that reads back."""

from parallel_experts import results
from parallel_experts.config import load


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
