"""workflow/scripts/gpu_check.sh, end to end on the CPU at the smoke config's shapes: every section measured, and every
number the file derives re-derived here from the fields it is derived from; a section that fails or hangs is that
section's error, not the check's end."""

import json
import math
import os
import statistics
import subprocess
import sys

import pytest
import yaml
from helpers import REPO

from parallel_experts import gpu_check, study
from parallel_experts.config.errors import ConfigError
from parallel_experts.lm import experiment as lm_experiment
from parallel_experts.lm import programs as lm_programs
from parallel_experts.rehearsal import programs as rehearsal

SMOKE = "config/smoke.yaml"


def positive(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


@pytest.mark.pipeline
def test_the_check_measures_every_section_and_its_numbers_follow_from_its_fields(tmp_path):
    config = study.load([str(REPO / SMOKE)])
    plan = yaml.safe_load((REPO / SMOKE).read_text())["plan"]["default"]  # the smoke's one assumption
    sokoban_run = gpu_check.default_sokoban_runs(config)[0]
    transformer, recurrent = gpu_check.default_lm_runs(config)
    # The CPU rehearsal of the Transformer's update: on a CPU the check compiles that very program, so its plan
    # must equal the rehearsal's, byte for byte. The Sokoban program is left out of the file: its figure is null.
    run = lm_experiment.runs_by_id(config)[transformer]
    rehearsed = tmp_path / "rehearsal.json"
    rehearsal.write(config, [rehearsal.compile_program(lm_programs.train_update(run.model, run.train, 1))], rehearsed)
    out = tmp_path / "check.json"

    done = subprocess.run(["bash", "workflow/scripts/gpu_check.sh", "--smoke", str(out), "--rehearsal", str(rehearsed),
                           "--sokoban-run", sokoban_run, "--sokoban-updates", "3"], cwd=REPO, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHON": sys.executable})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = json.loads(out.read_text())

    assert found["errors"] == []
    assert list(found["sokoban_train"]) == [sokoban_run]
    assert list(found["lm_train"]) == [transformer, recurrent]
    updates = [*found["sokoban_train"].values(), *found["lm_train"].values()]
    for update in updates:
        assert update["ok"] and update["loss_finite"]
        for field in ("compile_seconds", "peak_bytes", "seconds_per_update", "flops_per_update", "achieved_tflops",
                      "peak_tflops", "efficiency"):
            assert positive(update[field]), (update["run"], field, update[field])
        memory = update["memory"]
        assert update["peak_bytes"] == (memory["argument"] + memory["output"] + memory["temp"] - memory["alias"]
                                        + memory["generated_code"])
        assert update["seconds_per_update"] == pytest.approx(
            statistics.median(update["call_seconds"]) / update["updates_per_call"], rel=1e-12)
        assert update["achieved_tflops"] == pytest.approx(
            update["flops_per_update"] / update["seconds_per_update"] / 1e12, rel=1e-12)
        assert update["peak_tflops"] == plan["peak_tflops"] and update["peak_source"] == "plan.default.peak_tflops"
        assert update["efficiency"] == pytest.approx(update["achieved_tflops"] / plan["peak_tflops"], rel=1e-12)
        assert update["config_key"] == "plan.default.efficiency" and update["assumed_efficiency"] == plan["efficiency"]
        assert update["share_of_job_update"] == 1.0  # the smoke config trains its LM runs on one device
    assert updates[0]["updates_per_call"] == 2  # at most the job's call: the smoke's log_interval, not 3

    cpu = found["lm_train"][transformer]["cpu_rehearsal"]
    assert cpu["same_program"] and cpu["peak_bytes"] == found["lm_train"][transformer]["peak_bytes"]
    assert cpu["this_over_cpu"] == 1.0
    assert found["sokoban_train"][sokoban_run]["cpu_rehearsal"]["peak_bytes"] is None

    wanted = found["plan_updates"]["plan.default.efficiency"]
    assert wanted["value"] == pytest.approx(statistics.median(u["efficiency"] for u in updates), rel=1e-12)
    assert wanted["assumed"] == plan["efficiency"]

    latency = found["lm_latency"]
    assert latency["ok"] and (latency["context"], latency["batch"]) == (8, 2)  # the smoke's longest C, smallest B
    ms = latency["ms_per_token"]
    assert set(ms) == {"Transformer L16 E1", "recurrent L1 E16"} and all(positive(v) for v in ms.values())
    assert latency["ratio"] == pytest.approx(ms["recurrent L1 E16"] / ms["Transformer L16 E1"], rel=1e-9)
    assert found["machine"]["backend"] == "cpu" and found["seconds"] < found["budget_seconds"]


def test_a_failing_or_hanging_section_is_its_own_error():
    config = study.load([str(REPO / SMOKE)])
    failed = gpu_check.isolated(config, {"section": "lm_latency", "context": -1, "batch": 2}, timeout=300)
    assert not failed["ok"] and "error" in failed and failed["machine"]["backend"] == "cpu"
    hung = gpu_check.isolated(config, {"section": "lm_latency", "context": 8, "batch": 2}, timeout=0.5)
    assert not hung["ok"] and hung["error"].startswith("killed at the section's limit")


def test_the_sections_after_a_failed_one_still_run_and_the_file_keeps_both(tmp_path, monkeypatch):
    config = study.load([str(REPO / SMOKE)])
    chosen = gpu_check.sections(config, lm_runs=gpu_check.default_lm_runs(config)[:1])
    results = iter([{"ok": False, "error": "RuntimeError: out of memory"},
                    {"ok": True, "flops_per_update": 2e12, "seconds_per_update": 4.0, "peak_bytes": 10,
                     "program_key": "a", "job_program_key": "b"},
                    {"ok": False, "error": "killed at the section's limit of 1 s"}])
    monkeypatch.setattr(gpu_check, "isolated", lambda config, spec, timeout: dict(next(results)))
    out = tmp_path / "check.json"
    found = gpu_check.check(config, chosen[:3], out, progress=lambda line: None)

    assert json.loads(out.read_text()) == found
    assert [e.split(":")[0] for e in found["errors"]] == [f"sokoban_train {chosen[0]['run']}", "lm_latency"]
    lm = found["lm_train"][chosen[1]["run"]]
    assert lm["achieved_tflops"] == 0.5 and lm["efficiency"] == 0.5 / 0.22  # 2 TFLOP in 4 s of 0.22 TFLOP/s
    assert lm["cpu_rehearsal"] == {"key": "b", "peak_bytes": None, "note": "no rehearsal file"}


def test_the_check_itself_never_loads_jax():
    """XLA preallocates most of a GPU's memory in the first process that uses it: the check's own process must
    leave the GPU to the sections' processes."""
    code = ("import sys; from parallel_experts import gpu_check, study; "
            f"gpu_check.sections(study.load([{SMOKE!r}])); print('jax' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_peak_is_given_per_plan_family_as_a_finite_positive_number():
    assert gpu_check.peaks(["train=494.7", "lm_train=989"]) == {"train": 494.7, "lm_train": 989.0}
    for bad in ("train=abc", "train=0", "train=inf", "train=nan", "bench=989", "train"):
        with pytest.raises(ConfigError, match="--peak-tflops"):
            gpu_check.peaks([bad])
