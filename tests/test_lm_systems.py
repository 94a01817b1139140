"""Tables 5 and 6: the throughput benchmark trains on exactly the sampler's tokens, cells are planned, timed or
reported OOM, and the tables' ratios, verdicts and the paper's numbers are the right ones."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from parallel_experts.analysis import latency as table5
from parallel_experts.analysis import throughput as table6
from parallel_experts.core.benchmarking import machine_info
from parallel_experts.lm import corpus, latency, systems, throughput
from parallel_experts.lm.models import token_flops
from parallel_experts.lm.settings import ModelConfig
from parallel_experts.lm.shards import shard_name

LM = {"head_dim": 8, "vocabulary": 50304, "dtype": "float32"}  # GPT-2's ids: the shards' ids are the model's


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """A folder with a validation shard and one training shard of random GPT-2 ids."""
    folder = tmp_path_factory.mktemp("tokens")
    rng = np.random.default_rng(0)
    train = rng.integers(0, 50257, 2000).astype(np.uint16)
    corpus.write_shard(folder / shard_name(0), rng.integers(0, 50257, 500))
    corpus.write_shard(folder / shard_name(1), train)
    return folder, train


@pytest.mark.parametrize("recurrent", [False, True])
def test_the_timed_updates_train_on_the_tokens_the_sampler_defines(shards, recurrent):
    folder, train = shards
    context, batch_tokens = 16, 64
    job = throughput.trainer(systems.model_config((recurrent, 1, 2), 16, LM), context, batch_tokens)
    streams, length = batch_tokens // context, len(train) // (batch_tokens // context)
    read = [inputs for _, inputs in throughput.timed_updates(job, job.update, job.init(), [train], 3)]
    # The recurrent model warms its state up on window 0 of the shard (⌈M/T⌉ = 1) and trains from window 1.
    first = 1 if recurrent else 0
    for update, inputs in enumerate(read):
        k = first + update
        expected = [train[j * length + k * context: j * length + k * context + context] for j in range(streams)]
        np.testing.assert_array_equal(inputs.reshape(streams, context), np.array(expected, np.int32))


def test_a_cell_is_timed_with_its_flops_or_reported_oom_without_running(shards):
    folder, _ = shards
    spec = {"batch_tokens": 64, "steps": 3, "flops_up_to": 16}
    config = ModelConfig(2, 1, 16, 2, 1, vocab=64, dtype="float32")
    found, cell = throughput.measure(config, 16, spec, throughput.training_shards(folder, 64), memory_limit=2**40)
    assert not found["oom"] and found["planned_bytes"] > 0
    assert len(cell.run(3)) == 3  # a turn of a round: updates from a fresh state, the cell's program reused
    # An update costs about three forward passes plus the optimiser: the unrolled count against the per-token one.
    assert 2.5 <= found["flops_per_update"] / 64 / token_flops(config, 16) <= 6
    planned_only = throughput._isolated(config, 16, spec | {"flops_up_to": 0}, str(folder), 0)  # a fresh process
    assert planned_only["oom"] and "peak_bytes" not in planned_only
    assert planned_only["planned_bytes"] == found["planned_bytes"]


TWO_DEVICES = """
import json, sys
import jax, numpy as np
from parallel_experts.config.settings import Resources
from parallel_experts.lm import experiment, throughput
from parallel_experts.lm.settings import ModelConfig
assert len(jax.devices()) == 2
config, folder = ModelConfig(2, 1, 16, 2, 1, vocab=64, recurrent=True, dtype="float32"), sys.argv[1]
spec = {"batch_tokens": 64, "steps": 3, "flops_up_to": 0}
job = throughput.trainer(config, 16, spec["batch_tokens"], devices=2)
_, inputs, _, _ = next(job.batches([np.arange(2000, dtype=np.uint16) % 64], (0, 0, 0)))
shards = throughput.training_shards(folder, 64)
found = {d: throughput.measure(config, 16, spec, shards, 2**40, devices=d) for d in (1, 2)}
print(json.dumps({"inputs_on": len(inputs.sharding.device_set), "planned": {d: f["planned_bytes"] for d, (f, _) in
                  found.items()}, "timed": {d: len(cell.run(3)) for d, (_, cell) in found.items()},
                  "configured": experiment.devices(Resources.of({"resources": {"default": {"gpus": 0, "cpus": 1,
                  "mem_mb": 100, "runtime": 1}, "bench": {"gpus": 2, "cpus": 1, "mem_mb": 100, "runtime": 1}}}),
                                                   "bench")}))
"""


def test_table6_splits_each_update_over_the_bench_devices(shards, tmp_path):
    """As the paper's four H100s: on two host devices each update's streams are split (inputs on both devices), so
    each device plans less memory than one device holding the whole update, and the update still runs."""
    folder, _ = shards
    script = tmp_path / "two.py"
    script.write_text(TWO_DEVICES)
    env = os.environ | {"XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2",
                        "JAX_PLATFORMS": "cpu"}
    run = subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True, env=env,
                         check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    found = json.loads(run.stdout.strip().splitlines()[-1])
    assert found["inputs_on"] == 2 and found["configured"] == 2 and found["timed"] == {"1": 3, "2": 3}
    assert found["planned"]["2"] < found["planned"]["1"]


def test_decode_latency_cells_are_prepared_and_keep_decoding():
    config = ModelConfig(2, 2, 16, 2, 1, vocab=64, recurrent=True, dtype="float32")
    cell = latency.prepare(config, context=8, batch=2, steps=4, warmup=2)
    decoded = cell["decode"]()
    assert decoded.shape == (4, 2) and cell["step"]().shape == (2,) and cell["first_call"] > 0


def synthetic_latency(ms: dict[str, float], context=128) -> xr.Dataset:
    """A Table 5 dataset with the given ms per token per row (one C, B = 4)."""
    rows = [row for row in systems.LATENCY_ROWS if systems.label(row) in ms]
    values = np.array([ms[systems.label(r)] for r in rows])[:, None, None]
    ds = systems.dataset(rows, {"ms_per_token": (("allocation", "context", "batch"), values),
                                "step_ms": (("allocation", "context", "batch"), 2 * values)},
                         {"context": [context], "batch": [4]}, {"scale": "test", "description": ""}, {}, machine_info())
    ds["ratio"] = systems.ratio_to_transformer(ds["ms_per_token"])
    return ds


def test_table5_ratios_goal_and_the_papers_numbers():
    ds = synthetic_latency({"Transformer L16 E1": 2.0, "recurrent L1 E16": 0.25, "recurrent L2 E8": 0.5})
    table = table5.comparison_table(ds)
    assert table["ratio"].tolist() == [1.0, 0.125, 0.25]
    assert table["paper_ms"].tolist() == [0.565, 0.108, 0.431]  # Table 5 at C = 128
    assert table["paper_ratio"].iloc[1] == pytest.approx(0.108 / 0.565)
    assert "0.125 at B = 4" in table5.goal_line(ds) and "goal ≤ 0.15: met" in table5.goal_line(ds)
    assert table5.pattern_line(ds).startswith("the paper's pattern (recurrent latency rising with L, L1 E16 the "
                                               "fastest row) shows")
    slow = synthetic_latency({"Transformer L16 E1": 1.0, "recurrent L1 E16": 0.2, "recurrent L2 E8": 0.1})
    assert "not met" in table5.goal_line(slow) and "does not show" in table5.pattern_line(slow)
    assert "not measured" in table5.goal_line(synthetic_latency({"Transformer L16 E1": 1.0}, context=64))


def test_table6_joins_the_papers_numbers_and_oom_cells():
    rows, dims = systems.THROUGHPUT_ROWS, ("allocation", "context")
    tokens = np.array([[1000.0, 900.0], [500.0, 300.0], [250.0, np.nan], [200.0, np.nan], [100.0, np.nan]])
    planned = np.array([[10.0, 20.0], [5.0, 10.0], [8.0, 40.0], [9.0, 50.0], [30.0, 60.0]]) * 2**20
    variables = {"tokens_per_s": (dims, tokens), "planned_bytes": (dims, planned),
                 "peak_bytes": (dims, np.full((5, 2), np.nan)), "oom": (dims, np.isnan(tokens)),
                 "fraction_of_peak": (dims, np.full((5, 2), np.nan))}
    ds = systems.dataset(rows, variables, {"context": [128, 1024], "batch": ("context", [1024, 128])},
                         {"scale": "test", "description": ""}, {"batch_tokens": 131072, "width": 768}, machine_info())
    ds["vs_transformer"] = systems.ratio_to_transformer(ds["tokens_per_s"])
    table = table6.comparison_table(ds).set_index(["allocation", "context"])
    assert table.loc[("recurrent L1 E16", 128), "vs_transformer"] == 0.5
    assert table.loc[("recurrent L1 E16", 128), "paper_tokens_per_s"] == 349_500
    assert table.loc[("recurrent L1 E16", 128), "paper_vs_transformer"] == pytest.approx(349.5 / 1025.3)
    assert bool(table.loc[("recurrent L2 E8", 1024), "paper_oom"]) and bool(table.loc[("recurrent L2 E8", 1024), "oom"])
    lines = table6.summary(ds)
    assert lines[0] == ("C = 128 (B = 1024): recurrent tokens/s over the Transformer's: L1 E16 0.50, L2 E8 0.25, "
                        "L4 E4 0.20, L8 E2 0.10.")
    assert "L2 E8 OOM" in lines[1]
    assert lines[2].startswith("memory: 4 of 8 recurrent cells plan at most the Transformer's")  # hand count
    assert math.isnan(table.loc[("recurrent L8 E2", 1024), "tokens_per_s"])
    assert lines[-1].endswith("when it started.")  # written before rounds: the load at the start
    rounds = ds.assign(load=("round", [1.25, 3.5, 2.0]))
    assert table6.summary(rounds)[-1].endswith("in 3 rounds, the rows in a new random order each round (the claims "
                                               "page tests each ratio to the Transformer over the rounds); load "
                                               "average 1.2 to 3.5.")


def test_settings_refuse_a_grid_that_does_not_split_and_rows_keep_the_transformer():
    from parallel_experts.config.errors import ConfigError

    with pytest.raises(ConfigError, match="batch_tokens 100 is not a multiple of context 16"):
        systems.throughput_settings({"throughput": {"width": 16, "batch_tokens": 100, "contexts": [16]}})
    with pytest.raises(ConfigError, match="lm.latency: missing"):
        systems.latency_settings({})
    kept = systems.selected(systems.LATENCY_ROWS, {"rows": ["recurrent L4 E4"]})
    assert [systems.label(r) for r in kept] == ["Transformer L16 E1", "recurrent L4 E4"]
