"""The command line: one line for every expected failure, a real subparser with a handler for every command."""

import dataclasses
import os
import subprocess
import sys

import pytest
from helpers import REPO

from parallel_experts import cli

COMMANDS = cli.parser()._subparsers._group_actions[0].choices


def test_cli_reports_bad_input_in_one_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "parallel_experts", "sokoban-levels", "--source",
                          '{"boxoban": "unfiltered/test"}', "--boxoban", f'{{"root": "{tmp_path}"}}',
                          "--out", str(tmp_path / "x.npz")], capture_output=True, text=True)
    assert run.returncode == 1 and "Traceback" not in run.stderr
    assert run.stderr.startswith(f"error: {tmp_path}/unfiltered/test: no such folder") and run.stderr.count("\n") == 1


def test_a_command_imports_only_its_own_options():
    """Every job of the workflow starts through the CLI: building every command's options imported the planner and
    the GPU check (scipy.optimize among them), 1.1 of `check-config`'s 2 seconds."""
    code = ("import sys; from parallel_experts import cli; cli.main(['check-config', 'config/smoke.yaml']); "
            "print(sorted(m for m in ('parallel_experts.planning.costs', 'parallel_experts.gpu_check') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_a_handler_and_its_own_help(name, capsys):
    assert callable(COMMANDS[name].get_default("handler"))
    with pytest.raises(SystemExit) as done:
        cli.main([name, "--help"])
    assert done.value.code == 0 and f"parallel_experts {name}" in capsys.readouterr().out


def test_benchmark_options_are_parsed_before_any_work():
    with pytest.raises(SystemExit) as done:
        cli.main(["sokoban-bench", "--allocations", "1,2"])
    assert done.value.code == 2


GPU_CHECK = ["gpu-check", "--config", "c.yaml", "--out", "o"]


@pytest.mark.parametrize("argv, says", [
    (["power", "--gpu-hours", "nan"], "'nan': give a finite number of device-hours above 0"),
    (["power", "--gpu-hours", "-1"], "'-1': give a finite number of device-hours above 0"),
    (["power", "--gpu-hours", "0"], "'0': give a finite number of device-hours above 0"),
    (["power", "--gpu-hours", "inf"], "'inf': give a finite number of device-hours above 0"),
    (["power", "--draws", "0"], "'0': give a whole number, at least 1"),
    (["power", "--seed", "-1"], "'-1': give a whole number, at least 0"),
    ([*GPU_CHECK, "--budget-seconds", "nan"], "'nan': give a finite number of seconds above 0"),
    ([*GPU_CHECK, "--context", "0"], "'0': give a whole number, at least 1"),
    ([*GPU_CHECK, "--batch", "-4"], "'-4': give a whole number, at least 1"),
    ([*GPU_CHECK, "--sokoban-updates", "0"], "'0': give a whole number, at least 1"),
])
def test_a_number_option_out_of_its_range_is_refused_before_any_work(capsys, argv, says):
    """Issue 44, class 4: a count of 0, a NaN or infinite budget and a negative seed would run and mean nothing, or
    fail deep inside the work; argparse refuses each, naming the option and the value."""
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert done.value.code == 2 and f"argument {argv[-2]}: {says}" in error


def outputs():
    """(command, its options' field) of every output option of every command (`config.options.output`)."""
    return [(name, field) for name, command in cli.COMMANDS.items() for field in dataclasses.fields(command.options)
            if field.metadata.get("written")]


def argv_with(name: str, written: dataclasses.Field, value: str) -> list[str]:
    """The command line of `name` with `value` for its output option `written` and a placeholder for every other
    required option (the outputs are checked before anything else is read)."""
    argv = [name]
    for field in dataclasses.fields(cli.COMMANDS[name].options):
        if field is not written and field.default is not dataclasses.MISSING:
            continue
        meta = field.metadata
        flag = (meta["flags"] or (f"--{field.name.replace('_', '-')}",))[0]
        token = value if field is written else str(meta["choices"][0]) if "choices" in meta else "1"
        argv += [flag, token] if flag.startswith("-") else [token]
    return argv


@pytest.mark.parametrize("name, field", outputs(), ids=[f"{name} {field.name}" for name, field in outputs()])
def test_every_output_is_checked_before_the_command_starts(tmp_path, capsys, name, field):
    """Issue 44, class 5: a device, or a path whose folder is a file, is refused in one line naming it before any
    work, whichever command writes it; nothing is replaced."""
    (tmp_path / "a-file").write_text("kept")
    for where, says in (("/dev/null", "/dev/null: "), (str(tmp_path / "a-file" / "out"), "a-file is a file")):
        status = cli.main(argv_with(name, field, where))
        error = capsys.readouterr().err.strip().splitlines()
        assert status == 1 and len(error) == 1 and says in error[0] and "nothing is written" in error[0], error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"] and (tmp_path / "a-file").read_text() == "kept"


@pytest.mark.parametrize("option, says", [("--out", "/dev/null: it is a device, pipe or socket"),
                                          ("--write", "is a file, not a folder")])
def test_power_refuses_an_output_path_before_its_analysis(tmp_path, capsys, option, says):
    """Issue 44, class 5: checked before any work, so nothing is computed (no power cache in --directory)."""
    (tmp_path / "a-file").write_text("kept")
    where = "/dev/null" if option == "--out" else str(tmp_path / "a-file")
    status = cli.main(["power", "--configfile", str(REPO / "config/smoke.yaml"), "--directory", str(tmp_path),
                       option, where])
    assert status == 1 and says in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"] and (tmp_path / "a-file").read_text() == "kept"


def test_the_gpu_check_refuses_a_rehearsal_file_that_is_not_there_before_any_section(tmp_path, capsys):
    """Issue 44, class 4: a --rehearsal named but missing ran every section and reported no CPU figure."""
    out = tmp_path / "check.json"
    status = cli.main(["gpu-check", "--config", str(REPO / "config/smoke.yaml"), "--out", str(out), "--rehearsal",
                       str(tmp_path / "missing.json")])
    error = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and len(error) == 1 and "missing.json" in error[0], error
    assert not out.exists()


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """`python -m parallel_experts ... | head`: when the reader has gone, the command stops with status 1 and says
    nothing, instead of a BrokenPipeError traceback (issue 44). Every command returns through the same `run`."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first write
    done = subprocess.run([sys.executable, "-m", "parallel_experts", "check-config", "config/smoke.yaml"],
                          stdout=write, stderr=subprocess.PIPE, text=True, cwd=REPO)
    os.close(write)
    assert (done.returncode, done.stderr) == (1, "")
