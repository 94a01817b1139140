"""The language-model benchmark runs end to end (--quick) and its numbers are consistent."""

import json
import math

from parallel_experts import cli
from parallel_experts.lm import bench
from parallel_experts.lm.models import ModelConfig, token_flops


def test_quick_benchmark_counts_a_full_update(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert cli.main(["lm-bench", "--quick", "--json", str(out)]) == 0
    assert "vs Transformer" in capsys.readouterr().out
    result = json.loads(out.read_text())
    runs = result["runs"]
    assert [(r["recurrent"], r["depth"], r["experts"]) for r in runs] == list(bench.ALLOCATIONS)
    assert runs[0]["vs_transformer"] == 1.0
    for r in runs:
        assert not r["oom"] and r["tokens_per_s"] > 0 and r["planned_bytes"] > 0
        assert 0 < r["fraction_of_peak"] < 1.5  # noisy shared machine: only a sanity bound
        # A training update costs about three forward passes (four with the recurrent rematerialisation),
        # plus the optimiser: an independent check of the unrolled count against the per-token forward count.
        config = ModelConfig(r["depth"], r["experts"], 16, 2, 1, vocab=64, recurrent=r["recurrent"],
                             dtype="float32")
        per_token = r["flops_per_update"] / 256
        assert 2.5 <= per_token / token_flops(config, r["context"]) <= 6, r["label"]
        assert math.isclose(r["achieved_gflops"], r["flops_per_update"] * r["tokens_per_s"] / 256 / 1e9)


def test_an_update_over_the_memory_limit_is_reported_not_run():
    config = ModelConfig(1, 2, 16, 2, 1, vocab=64, recurrent=True, dtype="float32")
    result = bench.update_speed(config, context=16, batch_tokens=256, repeats=1, memory_limit=0, count_flops=False)
    assert result["oom"] and result["planned_bytes"] > 0 and "tokens_per_s" not in result
