"""The rehearsal (src/parallel_experts/rehearsal/): every distinct program of a config's DAG compiled with abstract
inputs, and the plan's memory check that reads its file (planning/memory.py)."""

import json
import os
import subprocess
import sys

import jax
import pandas as pd
import pytest
import yaml

import helpers
from helpers import REPO, snakemake
from parallel_experts.config import files
from parallel_experts.config.errors import ConfigError, PipelineError
from parallel_experts.config.settings import PlanAssumptions
from parallel_experts.study import Study
from parallel_experts.lm import flops as lm_flops
from parallel_experts.lm import programs as lm_programs
from parallel_experts.planning import costs, memory
from parallel_experts.rehearsal import programs as rehearsal
from parallel_experts.results import paths
from parallel_experts.sokoban import flops as sokoban_flops
from parallel_experts.sokoban import programs as sokoban_programs
from parallel_experts.sokoban import rehearsal_updates

SMOKE, PAPER = REPO / "config/smoke.yaml", REPO / "config/paper.yaml"


def planned_jobs(config) -> set[tuple[str, str]]:
    """The planner's enumeration of the DAG's timed jobs (rule, wildcards), independent of the rehearsal's."""
    by_result = costs.jobs_by_result(Study.of(config), costs.Counters(sokoban_flops, lm_flops))
    return {(job.rule, job.wildcards) for jobs in by_result.values() for job in jobs}


def test_the_smoke_programs_are_distinct_and_cover_every_job_of_the_dag():
    config = files.load([SMOKE])
    programs = rehearsal.programs(Study.of(config))
    keys = [program.key for program in programs]
    assert len(keys) == len(set(keys))
    assert {tuple(job) for program in programs for job in program.jobs} == planned_jobs(config)
    # a program that many jobs run is listed once, with all of them: the chance level of every evaluation
    [chance] = [program for program in programs if "/chance/" in program.key]
    evaluations = {job for job in planned_jobs(config) if job[0] == "sokoban_evaluate"}
    assert set(map(tuple, chance.jobs)) == evaluations and len(evaluations) == 4


def test_an_unknown_only_key_is_refused_before_anything_compiles(tmp_path):
    out = tmp_path / "rehearsal.json"
    with pytest.raises(ConfigError, match=r"rehearse --only: no program 'NOSUCHKEY' at this config; its \d+ keys: "):
        rehearsal.rehearse(Study.of(files.load([SMOKE])), out, keys={"NOSUCHKEY"})
    assert not out.exists()


def test_the_parts_hold_every_program_once_in_order_and_are_full():
    paper = Study.of(files.load([PAPER]))
    parts = rehearsal.parts(paper)
    assert [p.key for part in parts for p in part] == [p.key for p in rehearsal.programs(paper)]

    def units(programs):
        return sum(5 if p.rule == "sokoban_train" else 1 for p in programs)  # a training update: 80 s of 16

    assert all(units(part) <= 40 for part in parts)
    assert all(units(part) + units(after[:1]) > 40 for part, after in zip(parts, parts[1:]))  # none could take more
    assert rehearsal.part_keys(paper, 1) == {p.key for p in parts[1]}
    with pytest.raises(PipelineError, match=f"--part {len(parts)}: .* parts 0 to {len(parts) - 1}"):
        rehearsal.part_keys(paper, len(parts))


def test_the_paper_training_updates_are_compiled_for_the_gpus_their_job_splits_them_over():
    """The LM training jobs and Table 6 split each update over four GPUs (the paper's four H100s), so their programs
    are compiled for four devices, and each device's memory is what the plan checks; every other program uses one."""
    config = files.load([PAPER])
    assert config["resources"]["lm_train"]["gpus"] == config["resources"]["bench"]["gpus"] == 4
    found = {}
    for program in lm_programs.programs(Study.of(config).lm):
        split = program.rule in ("lm_train", "lm_throughput") and "/update/" in program.key or "/advance/" in program.key
        found.setdefault((program.rule, split), set()).add(program.devices)
    assert found == {("lm_train", True): {4}, ("lm_throughput", True): {4}, ("lm_evaluate", False): {1},
                     ("lm_latency", False): {1}}


def test_a_real_update_trains_the_seeds_this_machine_holds():
    """By hand: 9 seeds planned at 23.5 GB on 14.4 GB train 5 (9 × 14.4 / 23.5 = 5.5); a run that fits trains all;
    one that a seed alone overfills still trains one."""
    assert rehearsal_updates.seeds_that_fit(23.5e9, 9, 14.4e9) == 5
    assert rehearsal_updates.seeds_that_fit(14.4e9, 9, 14.4e9) == 9
    assert rehearsal_updates.seeds_that_fit(400e9, 3, 14.4e9) == 1


def test_merging_the_parts_needs_every_program_of_the_config_once(tmp_path):
    smoke = Study.of(files.load([SMOKE]))
    keys = [p.key for p in rehearsal.programs(smoke)]

    def part(name, chosen, scale="smoke"):
        path = tmp_path / f"{name}.json"
        # records as rehearsal.programs.compiled writes them for programs it skipped
        records = [{"key": key, "rule": key.split("/")[0], "jobs": [], "devices": 1, "backend": "cpu",
                    "error": "not compiled"} for key in chosen]
        path.write_text(json.dumps({"scale": scale, "programs": records}))
        return path

    one, two = part("one", keys[10:]), part("two", keys[:10])
    assert [r["key"] for r in rehearsal.merge(smoke, [one, two])] == keys  # in the config's order
    with pytest.raises(PipelineError, match=f"{one}: 10 programs .* not rehearsed"):
        rehearsal.merge(smoke, [one])
    with pytest.raises(PipelineError, match=f"{two}: program {keys[0]!r}.* twice"):
        rehearsal.merge(smoke, [one, two, two])
    with pytest.raises(PipelineError, match="other.json: program 'lm_train/x'"):
        rehearsal.merge(smoke, [one, two, part("other", ["lm_train/x"])])
    with pytest.raises(PipelineError, match="paper.json: program .* of scale 'paper'"):
        rehearsal.merge(smoke, [one, part("paper", keys[:10], scale="paper")])


@pytest.mark.pipeline
def test_the_smoke_rehearsal_compiles_every_program_and_the_plan_marks_the_jobs_that_do_not_fit(tmp_path):
    done = snakemake("rehearsal", "--cores", "2", "--configfile", str(SMOKE), "--directory", str(tmp_path),
                     timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    # compiled in parts, as jobs of their own: a rehearsal stopped with one part to go compiles that part only
    parts = rehearsal.parts(Study.of(files.load([SMOKE])))
    assert len(parts) >= 2 and all((tmp_path / paths.rehearsal_part("smoke", n)).exists() for n in range(len(parts)))
    rehearsed = json.loads((tmp_path / paths.rehearsal("smoke")).read_text())
    (tmp_path / paths.rehearsal("smoke")).rename(tmp_path / "rehearsed.json")
    (tmp_path / paths.rehearsal_part("smoke", 1)).unlink()
    again = helpers.planned_jobs("rehearsal", "--directory", str(tmp_path), configfile=SMOKE)
    assert again == {"rehearse_part": 1, "rehearse": 1, "rehearsal": 1}
    (tmp_path / "rehearsed.json").rename(tmp_path / paths.rehearsal("smoke"))
    # A config edit that changes some programs (Table 6 split over two GPUs) compiles only the parts that hold them.
    edited = yaml.safe_load(SMOKE.read_text())
    edited["resources"]["bench"] = edited["resources"]["default"] | {"gpus": 2}
    (tmp_path / "edited.yaml").write_text(yaml.safe_dump(edited))
    before, after = parts, rehearsal.parts(Study.of(files.load([tmp_path / "edited.yaml"])))
    changed = [n for n, (a, b) in enumerate(zip(before, after)) if [p.key for p in a] != [p.key for p in b]]
    assert len(before) == len(after) and 0 < len(changed) < len(parts)
    snapshot = tmp_path / paths.CONFIG_JSON
    os.utime(snapshot, (snapshot.stat().st_mtime + 60,) * 2)  # as the real run's snapshot of the edit would be
    assert helpers.planned_jobs("rehearsal", "--directory", str(tmp_path), configfile=tmp_path / "edited.yaml") == {
        "rehearse_part": len(changed), "rehearse": 1, "rehearsal": 1}
    records = rehearsed["programs"]
    assert len(records) == len(rehearsal.programs(Study.of(files.load([SMOKE]))))
    for record in records:
        assert "error" not in record and record["backend"] == "cpu" and record["compile_seconds"] > 0
        m = record["memory"]
        assert record["peak_bytes"] == m["argument"] + m["output"] + m["temp"] - m["alias"] + m["generated_code"] > 0
    # The training update donates its carry: XLA aliases it to the output (an LM update's parameters at least).
    update = next(r for r in records if r["key"].startswith("lm_train/update/"))
    assert update["memory"]["alias"] >= 4 * update["parameters"]
    # One budget, so it is the largest: one update of its run predicted the least memory, for real.
    [real] = rehearsed["updates"]
    assert real["finite"] and real["resumed_equal"] and real["checkpoint_update"] == real["updates"] == 1

    # A device of 1 MB: every job whose largest program plans more is marked, and only those.
    config = yaml.safe_load(SMOKE.read_text())
    config["plan"]["default"]["memory_gb"] = 1e-3
    small = tmp_path / "small.yaml"
    small.write_text(yaml.safe_dump(config))
    done = subprocess.run([sys.executable, "-m", "parallel_experts", "plan", "--configfile", str(small), "--directory",
                           str(tmp_path), "--out", str(tmp_path / "plan")], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    backend, jobs = memory.read(tmp_path / "plan")
    assert backend == "cpu" and "from XLA's plan on the cpu backend" in done.stdout
    assert (jobs["programs"] > 0).all()
    largest = {}
    for record in records:
        for rule, wildcards in record["jobs"]:
            largest[rule, wildcards] = max(largest.get((rule, wildcards), 0), record["peak_bytes"])
    for job in jobs.itertuples():
        assert job.peak_bytes == largest[job.rule, job.wildcards]
        assert job.fits == (job.peak_bytes <= 1e6)
    assert not jobs["fits"].all() and jobs["fits"].any()


def test_a_job_fits_by_its_largest_program_and_is_unmarked_without_a_device_memory():
    config = {"plan": {"train": {"device": "GPU", "peak_tflops": 1, "efficiency": 0.1, "memory_gb": 2},
                       "default": {"device": "CPU", "peak_tflops": 1, "efficiency": 0.1}}}
    jobs = pd.DataFrame({"rule": ["sokoban_train", "sokoban_evaluate", "lm_latency", "sokoban_probe_fit"],
                         "wildcards": ["run=a", "run=a", "", "run=a"]})
    records = {"programs": [{"jobs": [["sokoban_train", "run=a"]], "peak_bytes": 1.5e9, "backend": "gpu"},
                            {"jobs": [["sokoban_train", "run=a"], ["sokoban_evaluate", "run=a"]],
                             "peak_bytes": 2.5e9, "backend": "gpu"},
                            {"jobs": [["lm_latency", ""]], "peak_bytes": 5e9, "backend": "gpu"}]}
    found = memory.per_job(PlanAssumptions.of(config), jobs, records).set_index("rule")
    assert found.loc["sokoban_train", "peak_bytes"] == 2.5e9 and found.loc["sokoban_train", "programs"] == 2
    assert found.loc["sokoban_train", "fits"] is False and found.loc["sokoban_evaluate", "fits"] is False
    assert pd.isna(found.loc["lm_latency", "fits"])  # plan.default names no memory: no mark
    assert found.loc["sokoban_probe_fit", "programs"] == 0 and pd.isna(found.loc["sokoban_probe_fit", "fits"])
    assert memory.backend(records) == "gpu"


def test_a_paper_sokoban_update_compiles_at_its_exact_shape():
    """The small budget's anchor (L1 E1 d128, 9 seeds, 200 updates per call, rematerialised) with the 900k-level
    table as an argument: nothing is allocated, its parameters are the hand count, and the carry is donated."""
    key = "sokoban_train/convlstm-recurrent-L1-E1-d128/seeds9/envs32x20/view10/levels900000/updates200/remat"
    [program] = [p for p in sokoban_programs.programs(Study.of(files.load([PAPER])).sokoban) if p.key == key]
    record = rehearsal.compile_program(program)
    d, z, inputs, hidden = 128, 32, 32 + 128 + 128, 256  # level 0 reads concat(z, s, h)
    encoder = 2 * 5 * z // 2  # two embedding tables of C/2 over the 5 cell values
    convlstm = 9 * inputs * 4 * d + 4 * d + 4 * d  # 3×3 kernel to 4 gates, bias, gate RMSNorm
    head = (d + 1) + (2 * d * 2 * hidden + 2 * hidden) + (hidden * 4 + 4) + (hidden + 1)
    assert record["parameters"] == encoder + convlstm + d + head  # + the core's output RMSNorm
    assert record["memory"]["argument"] > 900_000 * 10 * 10 * 2  # the level table is an argument, uint8
    assert record["memory"]["alias"] == record["memory"]["argument"] - 900_000 * 10 * 10 * 2  # all but the table


def test_a_paper_lm_program_compiles_at_its_exact_shape():
    """The Transformer L16 E1 d768 of the small budget evaluated at W = 128 in blocks of 128 streams: its
    parameters are GPT-2's block count at the paper's vocabulary (untied head, 4 KV heads of 96, no norm weights)."""
    key = "lm_evaluate/transformer-L16-E1-d768-h8x4-V50304-bfloat16-sqrt_sum-kv_level/W128/lanes128"
    [program] = [p for p in lm_programs.programs(Study.of(files.load([PAPER])).lm) if p.key == key]
    record = rehearsal.compile_program(program)
    d, vocab, kv = 768, 50304, 4 * 96
    block = d * d + 2 * d * kv + d * d + 2 * d * 4 * d
    assert record["parameters"] == 2 * vocab * d + 16 * block == 181_075_968
    assert record["memory"]["argument"] >= 2 * record["parameters"]  # bfloat16 weights


def test_a_sokoban_update_is_compiled_with_the_trainers_donation():
    """The rehearsal measures the program the job runs: the trainer's compiled updates donate exactly the arguments
    that the rehearsal's program donates (the carry), so XLA's aliases are the job's."""
    from parallel_experts.sokoban.train import Trainer

    config = files.load([SMOKE])
    sokoban = Study.of(config).sokoban
    run = sokoban.sweeps[0]
    [program] = [p for p in sokoban_programs.programs(sokoban) if p.jobs == [("sokoban_train", f"run={run.id}")]]
    function, args, _ = program.build()
    rehearsed = jax.jit(function, donate_argnums=program.donate).lower(*args)
    trained = Trainer(run.agent, run.train, sokoban_programs.dummy_levels()).run_updates.lower(*args)
    flags = [[info.donated for info in jax.tree.leaves(lowered.args_info)] for lowered in (rehearsed, trained)]
    assert flags[0] == flags[1] and flags[0][0] is False and all(flags[0][1:])  # the carry, not the level table
    memory = rehearsed.compile().memory_analysis()
    carry = sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(args[1]))
    assert memory.alias_size_in_bytes == carry


def test_every_view_accepts_the_stand_in_levels():
    """The programs are built on a stand-in level table; the demo's 6×6 view must accept it as the real levels."""
    from parallel_experts.sokoban import env as sokoban_env

    for view in (6, 10):
        sokoban_env.check_view(sokoban_programs.dummy_levels(3), view)


def test_the_real_updates_train_the_largest_run_of_each_budget_and_kind_and_one_small_large_one():
    sokoban = Study.of(files.load([PAPER])).sokoban
    runs = sokoban.sweeps
    peak = {run.id: run.agent.depth * run.agent.experts * run.agent.width + run.agent.recurrent for run in runs}
    records = [{"rule": "sokoban_train", "jobs": [["sokoban_train", f"run={run_id}"]], "peak_bytes": bytes_}
               for run_id, bytes_ in peak.items()]
    chosen = [(run.id, updates) for run, updates in rehearsal_updates.chosen_runs(sokoban, records)]
    expected = []
    for budget in ("small", "medium"):
        for kind in ("convglu", "convlstm"):
            members = [run.id for run in runs if run.budget == budget and run.agent.expert == kind]
            expected.append((max(members, key=peak.get), 2))
    large = [run.id for run in runs if run.budget == "large"]
    assert chosen == expected + [(min(large, key=peak.get), 1)]
