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
from parallel_experts.lm import programs as lm_programs
from parallel_experts.rehearsal import programs as rehearsal

SMOKE = "config/smoke.yaml"


def positive(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


@pytest.mark.pipeline
def test_the_check_measures_every_section_and_its_numbers_follow_from_its_fields(tmp_path):
    smoke = study.load([str(REPO / SMOKE)])
    plan = yaml.safe_load((REPO / SMOKE).read_text())["plan"]["default"]  # the smoke's one assumption
    sokoban_run = gpu_check.default_sokoban_runs(smoke.sokoban)[0]
    transformer, recurrent = gpu_check.default_lm_runs(smoke.lm)
    # The CPU rehearsal of the Transformer's update: on a CPU the check compiles that very program, so its plan
    # must equal the rehearsal's, byte for byte. The Sokoban program is left out of the file: its figure is null.
    run = smoke.lm.by_id[transformer]
    rehearsed = tmp_path / "rehearsal.json"
    rehearsal.write(smoke, [rehearsal.compile_program(lm_programs.train_update(run.model, run.train, 1))], rehearsed)
    out = tmp_path / "check.json"

    done = subprocess.run(["bash", "workflow/scripts/gpu_check.sh", "--smoke", str(out), "--rehearsal", str(rehearsed),
                           "--sokoban-run", sokoban_run, "--sokoban-updates", "3"], cwd=REPO, capture_output=True,
                          text=True, timeout=900,
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

    # Table 6: the smoke keeps the Transformer and L1 E16, at its one context, and the Transformer again with
    # jax.nn.dot_product_attention (XLA's: the smoke's float32 LM); each traced, none the paper's cell
    assert list(found["lm_table6"]) == ["transformer@16", "l1-e16@16", "transformer@16+xla"]
    attention = {name: (cell["attention"], cell["program_key"]) for name, cell in found["lm_table6"].items()}
    assert attention["transformer@16"][0] == attention["l1-e16@16"][0] == "blocked"
    assert attention["transformer@16+xla"][1] == attention["transformer@16"][1].replace("kv_level/",
                                                                                     "kv_level-attention_xla/")
    for name, cell in found["lm_table6"].items():
        assert cell["ok"] and cell["loss_finite"] and cell["authors_tokens_per_second"] is None
        assert cell["ours_over_authors"] is None and cell["streams"] == 64 // 16  # the smoke's 64 tokens per update
        assert cell["tokens_per_second"] == pytest.approx(cell["tokens_per_update"] / cell["seconds_per_update"])
        trace = cell["trace_summary"]
        assert trace["file"].startswith(str(tmp_path / "check-traces" / name.replace("@", "-c")))
        (cpu,) = trace["processes"].values()  # the host's: XLA:CPU runs every operation there
        assert cpu["operations"] >= len(cpu["top"]) > 0 and 0 < cpu["busy_us"]
        assert sum(op["us"] for op in cpu["top"]) <= cpu["busy_us"] * (1 + 1e-9)

    latency = found["lm_latency"]
    assert latency["ok"] and (latency["context"], latency["batch"]) == (8, 2)  # the smoke's longest C, smallest B
    ms = latency["ms_per_token"]
    assert set(ms) == {"Transformer L16 E1", "recurrent L1 E16"} and all(positive(v) for v in ms.values())
    assert latency["ratio"] == pytest.approx(ms["recurrent L1 E16"] / ms["Transformer L16 E1"], rel=1e-9)
    assert found["machine"]["backend"] == "cpu" and found["seconds"] < found["budget_seconds"]


    # `lm-speed` refits the LM time model from this file: every timing of our code that ended well, in one list
    serial = tmp_path / "serial.yaml"
    serial.write_text("plan: {lm_train: {device: a CPU, peak_tflops: 0.22, efficiency: 0.05, "
                      "serial: {step_ms: 1, per_sequence_us: 1}}}\n")
    refit = subprocess.run([sys.executable, "-m", "parallel_experts", "lm-speed", "--configfile", SMOKE, "--configfile",
                            str(serial), "--check", str(out)], cwd=REPO, capture_output=True, text=True)
    assert refit.returncode == 0, refit.stderr[-3000:]
    # two LM runs, two Table 6 cells, Table 5's decode: not the Transformer with another attention than its jobs'
    assert refit.stdout.startswith("5 timings of our code")
    assert "plan.lm_train.serial.step_ms: 1 -> " in refit.stdout


def test_table6_cells_are_named_as_the_help_says_and_others_refused_naming_the_cell():
    paper = study.load([str(REPO / "config/paper.yaml")])
    # by default: the Transformer at its longest C, L1 E16 at the shortest and the longest the authors ran, L8 E2
    assert gpu_check.table6_cells(paper.lm) == [((False, 16, 1), 2048), ((True, 1, 16), 32), ((True, 1, 16), 1024),
                                             ((True, 8, 2), 32)]
    assert gpu_check.table6_cells(paper.lm, ["L2-E8@64", "transformer@32", "l2-e8@64"]) == [((True, 2, 8), 64),
                                                                                          ((False, 16, 1), 32)]
    assert len(gpu_check.table6_cells(paper.lm, ["all"])) == 5 * 6
    for bad in ("L3-E16@32", "L1-E16@33", "transformer", "L1-E16"):
        with pytest.raises(ConfigError, match=f"--table6 '{bad}': not a cell"):
            gpu_check.table6_cells(paper.lm, [bad])
    chosen = gpu_check.sections(paper)
    gpu_check.traced(chosen, REPO / "traces")
    traced = {spec.get("trace") for spec in chosen} - {None}
    assert traced == {str(REPO / "traces" / name) for name in ("transformer-c2048", "l1-e16-c32",
                                                               "transformer-c2048+cudnn")}
    # the paper's LM is bfloat16: the Transformer's cell again with cuDNN's fused attention, after the four
    fused = [spec for spec in chosen if "attention" in spec]
    assert [(spec["row"], spec["context"], spec["attention"]) for spec in fused] == [([False, 16, 1], 2048, "cudnn")]
    assert chosen.index(fused[0]) == max(i for i, spec in enumerate(chosen) if spec["section"] == "lm_table6")
    asked = gpu_check.sections(paper, table6=["transformer@32", "L1-E16@32"], attention=["xla", "cudnn", "xla"])
    assert [(spec["context"], spec.get("attention")) for spec in asked if spec["section"] == "lm_table6"] == [
        (32, None), (32, None), (32, "xla"), (32, "cudnn")]
    # where the config sets cuDNN's, the Transformer's cells run it, and are timed again with ours
    fused = study.Study.of(paper.config | {"lm": paper.config["lm"] | {"attention": "cudnn"}})
    for given in ((), ("cudnn", "blocked")):
        cells = [spec for spec in gpu_check.sections(fused, table6=["transformer@32"], attention=given)
                 if spec["section"] == "lm_table6"]
        assert [spec.get("attention") for spec in cells] == [None, "blocked"]


def test_a_failing_or_hanging_section_is_its_own_error():
    config = study.load([str(REPO / SMOKE)]).config
    failed = gpu_check.isolated(config, {"section": "lm_latency", "context": -1, "batch": 2}, timeout=300)
    assert not failed["ok"] and "error" in failed and failed["machine"]["backend"] == "cpu"
    hung = gpu_check.isolated(config, {"section": "lm_latency", "context": 8, "batch": 2}, timeout=0.5)
    assert not hung["ok"] and hung["error"].startswith("killed at the section's limit")


def test_the_sections_after_a_failed_one_still_run_and_the_file_keeps_both(tmp_path, monkeypatch):
    smoke = study.load([str(REPO / SMOKE)])
    chosen = gpu_check.sections(smoke, lm_runs=gpu_check.default_lm_runs(smoke.lm)[:1])
    results = iter([{"ok": False, "error": "RuntimeError: out of memory"},
                    {"ok": True, "flops_per_update": 2e12, "seconds_per_update": 4.0, "peak_bytes": 10,
                     "program_key": "a", "job_program_key": "b"},
                    {"ok": False, "error": "killed at the section's limit of 1 s"}])
    monkeypatch.setattr(gpu_check, "isolated", lambda config, spec, timeout: dict(next(results)))
    out = tmp_path / "check.json"
    latency = next(spec for spec in chosen if spec["section"] == "lm_latency")
    found = gpu_check.check(smoke, [*chosen[:2], latency], out, progress=lambda line: None)

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
