"""The LM runs a config defines: every budget × window × family × allocation, with the paper's sequence rules."""

import copy
import dataclasses
import json

import pytest
import yaml
from helpers import REPO, planned_jobs

from parallel_experts.config import files
from parallel_experts.config.errors import ConfigError
from parallel_experts.lm import experiment, systems
from parallel_experts.study import Study


def test_paper_runs_follow_the_papers_sequence_and_cache_rules():
    paper = files.load([REPO / "config/paper.yaml"])
    runs = Study.of(paper).lm.sweeps
    grids = {b.name: len(b.allocations) for b in Study.of(paper).lm.budgets}
    assert len(runs) == sum(grids.values()) * len(paper["lm"]["windows"]) * 2 == 140
    assert len({run.id for run in runs}) == len(runs)
    for run in runs:
        if run.model.recurrent:  # a W-token rolling cache, trained on segments
            assert run.train.memory == run.window and run.id.startswith("recurrent/")
        else:  # independent sequences of 2W tokens: 256 for W = 128, 2,048 for W = 1,024 (paper §5.2)
            assert run.train.sequence == 2 * run.window and run.train.memory == 0
            assert run.id.startswith("nonrecurrent/")
        assert experiment.Run.from_dict(json.loads(json.dumps(run.to_dict()))) == run


def test_per_expert_caches_get_their_own_run_id():
    paper = files.load([REPO / "config/paper.yaml"])
    run = next(r for r in Study.of(paper).lm.sweeps if r.model.recurrent and r.model.experts > 1)
    assert run.model.kv_cache == "level" and not run.id.endswith("-kv_level")
    per_expert = dataclasses.replace(run, model=dataclasses.replace(run.model, kv_cache="expert"))
    assert per_expert.id == run.id + "-kv_expert"
    assert experiment.Run.from_dict(json.loads(json.dumps(per_expert.to_dict()))) == per_expert


def test_the_transformers_attention_is_set_for_its_runs_and_table6_and_kept_out_of_default_definitions():
    paper = files.load([REPO / "config/paper.yaml"])
    default = Study.of(paper).lm
    assert "attention" not in default.settings.shape
    assert all("attention" not in run.to_dict()["model"] for run in default.sweeps)  # no run is defined anew
    fused = Study.of(paper | {"lm": paper["lm"] | {"attention": "cudnn"}}).lm
    assert {(run.model.recurrent, run.model.attention) for run in fused.sweeps} == {(False, "cudnn"),
                                                                                    (True, "blocked")}
    for run in fused.sweeps:
        assert experiment.Run.from_dict(json.loads(json.dumps(run.to_dict()))) == run
        assert dataclasses.replace(run.model, attention="blocked") == default.by_id[run.id].model
    table6 = {row: systems.throughput_cell(fused.settings.tables, fused.settings.shape, row, 2048)[0].attention
              for row in systems.THROUGHPUT_ROWS}
    assert table6 == {row: "blocked" if row[0] else "cudnn" for row in systems.THROUGHPUT_ROWS}
    with pytest.raises(ConfigError, match="attention 'cudnn' with dtype 'float32'"):
        Study.of(paper | {"lm": paper["lm"] | {"attention": "cudnn", "dtype": "float32"}})


def test_the_cache_bound_splits_only_the_deep_recurrent_runs_into_more_microbatches():
    """`lm.training.microbatch_cache_gb`: a recurrent run takes the largest microbatch, up to `microbatch_tokens`,
    whose streams' caches fit the bound on each GPU; by hand, L32 E1 d768 at M = 1,024 keeps 32 · 1,024 · 2 · 4 · 96
    bfloat16 values per stream (50.3 MB), so 1.1 GB holds 21 streams per GPU: 16 of them (64 over 4 GPUs) split
    the update's 2,048 streams evenly."""
    paper = files.load([REPO / "config/paper.yaml"])
    runs = Study.of(paper).lm.by_id
    deepest = runs["recurrent/medium/W1024/L32-E1-d768"]
    assert experiment.cache_bytes(deepest.model, 1024) == 32 * 1024 * 2 * 4 * 96 * 2 == 50_331_648
    assert (deepest.train.microbatch, deepest.train.groups) == (64, 32)
    limit = paper["lm"]["training"]["microbatch_cache_gb"] * 1e9
    for run in runs.values():
        per_gpu = run.train.microbatch // 4 * experiment.cache_bytes(run.model, run.train.memory)
        if not run.model.recurrent:
            assert run.train.microbatch == 32768 // run.train.sequence  # microbatch_tokens, untouched
        elif run.train.microbatch < 512:  # bounded: the largest power of two per GPU that fits (2,048 streams)
            assert per_gpu <= limit < 2 * per_gpu and run.window == 1024
        else:
            assert per_gpu <= limit
    demo = files.load([REPO / "config/config.yaml"])  # no bound: microbatch_tokens as before
    assert all(run.train.microbatch == 8192 // run.train.sequence for run in Study.of(demo).lm.sweeps)


def test_a_cache_bound_below_one_stream_is_a_config_error():
    paper = files.load([REPO / "config/paper.yaml"])
    paper["lm"]["training"]["microbatch_cache_gb"] = 0.01
    with pytest.raises(ConfigError, match=r"lm\.training\.microbatch_cache_gb: 0\.01 GB holds not even one stream's "
                                          r"caches \(0\.011 GB\) of the recurrent L4 E1 d1344 at M = 1024"):
        Study.of(paper).lm.sweeps


def test_a_per_expert_cache_ablation_gets_its_own_microbatch_bound():
    paper = files.load([REPO / "config/paper.yaml"])
    paper["lm"]["training"]["microbatch_cache_gb"] = 0.1  # 0.4 MB of level caches per stream of L2 E8 d768, M = 128
    level, expert = Study.of(paper).lm.ablations["kv_cache"]
    assert experiment.cache_bytes(expert.model, 128) == 8 * experiment.cache_bytes(level.model, 128) == 8 * 2 * 128 * 2 * 4 * 96 * 2
    assert (level.train.microbatch, expert.train.microbatch) == (512, 64)  # 128 and 16 streams per GPU


def with_lm_seeds(config, seeds, ablation_seeds=None):
    """`config` with `seeds` for its every LM budget (and, where given, `ablation_seeds` for its every ablation)."""
    config = copy.deepcopy(config)
    for spec in config["lm"]["budgets"].values():
        spec["seeds"] = seeds
    for spec in config["lm"].get("ablations", {}).values():
        if ablation_seeds is not None:
            spec["seeds"] = ablation_seeds
    return config


def test_each_lm_seed_is_a_run_and_seed_0_keeps_its_id_and_definition():
    demo = files.load([REPO / "config/config.yaml"])
    assert demo["seeds"] == [0, 1]  # Sokoban's: the LM trains one seed, 0, without lm.budgets.<name>.seeds
    today = Study.of(demo).lm.sweeps
    assert {run.seed for run in today} == {0} and not any(run.id.endswith(("-s0", "-s1")) for run in today)
    # the params JSON of a run defined before seeds existed: no seed in it
    assert all(set(run.to_dict()) == {"budget", "window", "model", "train"} for run in today)

    seeded = Study.of(with_lm_seeds(demo, [0, 1])).lm.sweeps
    assert len(seeded) == 2 * len(today)
    first = {run.id: run for run in seeded if run.seed == 0}
    assert list(first) == [run.id for run in today]
    assert [run.to_dict() for run in first.values()] == [run.to_dict() for run in today]
    for run in (run for run in seeded if run.seed == 1):
        assert run.id == run.configuration + "-s1" and run.configuration in first
        assert dataclasses.replace(run, seed=0) == first[run.configuration]
        assert run.to_dict()["seed"] == 1
        assert experiment.Run.from_dict(json.loads(json.dumps(run.to_dict()))) == run
    only_one = Study.of(with_lm_seeds(demo, [3])).lm.sweeps
    assert {run.id for run in only_one} == {run.id + "-s3" for run in today}


def test_lm_ablations_follow_their_budgets_seeds_or_their_own():
    demo = files.load([REPO / "config/config.yaml"])
    found = Study.of(with_lm_seeds(demo, [0, 1])).lm.ablations
    aggregation = [(run.model.aggregation, run.seed) for run in found["aggregation"]]
    assert aggregation == [("sqrt_sum", 0), ("sqrt_sum", 1), ("mean", 0), ("mean", 1)]
    sweep = Study.of(with_lm_seeds(demo, [0, 1])).lm.by_id
    assert [run.id in sweep for run in found["aggregation"]] == [True] * 4  # the default's are the sweep's runs
    assert found["aggregation"][3].id == "recurrent/small/W64/L2-E2-d64-mean-s1"
    own = Study.of(with_lm_seeds(demo, [0, 1], ablation_seeds=[2])).lm.ablations
    assert [run.id for run in own["kv_cache"]] == ["recurrent/small/W64/L2-E2-d64-s2",
                                                   "recurrent/small/W64/L2-E2-d64-kv_expert-s2"]


def test_two_lm_seeds_plan_two_training_jobs_per_allocation(tmp_path):
    """A dry run of the smoke DAG with two seeds for the LM budget: every LM run twice, nothing else more."""
    smoke = files.load([REPO / "config/smoke.yaml"])
    config = tmp_path / "two_seeds.yaml"
    config.write_text(yaml.safe_dump(with_lm_seeds(smoke, [0, 1])))
    once, twice = (planned_jobs("--directory", str(tmp_path), configfile=path)
                   for path in (REPO / "config/smoke.yaml", config))
    assert twice["lm_train"] == twice["lm_evaluate"] == 2 * once["lm_train"] == 2 * len(Study.of(smoke).lm.by_id)
    assert {rule: n for rule, n in twice.items() if rule not in ("lm_train", "lm_evaluate", "total")} == {
        rule: n for rule, n in once.items() if rule not in ("lm_train", "lm_evaluate", "total")}
