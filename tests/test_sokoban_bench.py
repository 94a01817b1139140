"""The throughput benchmark runs end to end (--quick) and its numbers are sane."""

import json
import math

from helpers import REPO

from parallel_experts import cli


def test_quick_benchmark_writes_sane_numbers(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert cli.main(["sokoban-bench", "--quick", "--config", str(REPO / "config/paper.yaml"), "--json", str(out)]) == 0
    assert "GFLOP/s" in capsys.readouterr().out

    result = json.loads(out.read_text())
    assert result["machine"]["jax"] and result["machine"]["backend"]
    for peak in (result["matmul_peak_start"], result["matmul_peak_end"]):
        assert peak["gflops"] > 0
    assert result["env_only"]["env_steps_per_s"] > 0

    [row] = result["allocations"]
    for name in ("compile_s", "env_steps_per_s", "forward_flops_per_step", "train_flops_per_step",
                 "naive_loop_flops_per_step", "achieved_gflops", "peak_gflops_local", "fraction_of_peak",
                 "work_proxy", "work_ratio"):
        assert math.isfinite(row[name]) and row[name] > 0, name
    assert 0 < row["fraction_of_peak"] < 1.5  # noisy shared machine: only a sanity bound
    # Training counts the backward pass too; the naive count of the looped program undercounts by ~T×K.
    assert row["train_flops_per_step"] > row["forward_flops_per_step"]
    assert row["train_flops_per_step"] > row["naive_loop_flops_per_step"]
    assert math.isclose(row["achieved_gflops"], row["train_flops_per_step"] * row["env_steps_per_s"] / 1e9)
