"""Every command the README and docs/ give runs as written (issue 43): each shell-block line and inline code span
that calls Snakemake, make, the CLI or a workflow script is collected, and Snakemake and make commands are
dry-run, CLI and Python-script commands asked for --help, with every --option the text names found in that help
(a shell script: in its own text or in the help of the CLI commands it calls).

Placeholders in capitals (FILE, OUT), in angle brackets or as "..." are the reader's to fill: they are left out of
the dry runs, with the option they are the value of; the options around them are still checked. WORKDIR becomes an
empty folder."""

import re
import shutil
import subprocess
import sys

import pytest
from helpers import REPO, cli, snakemake

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "config/README.md"]
CALLS = ("python -m parallel_experts", "python workflow/scripts/", "bash workflow/scripts/", "snakemake", "make ")
SHELL_BLOCK = re.compile(r"```(?:bash|sh|shell|console)\n(.*?)```", re.S)
INLINE = re.compile(r"(?<!`)`([^`]+)`(?!`)")  # a span may wrap onto the next line of a paragraph
PLACEHOLDER = re.compile(r"^([A-Z][A-Z_.]*|<[^>]*>|\.\.\.|[A-Z]+\.nc|\[.*\])$")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
# Snakemake commands whose run is the point and that a dry run cannot stand for: --unlock removes a lock, --report
# renders the results of a finished run.
NOT_DRY_RUN = ("--unlock", "--report")


def documented() -> dict[str, list[str]]:
    """Each command the docs give, with where: its file and line."""
    found: dict[str, list[str]] = {}
    for path in DOCS:
        text = path.read_text()
        spans = [(m.start(1), line) for m in SHELL_BLOCK.finditer(text)
                 for line in m.group(1).replace("\\\n", " ").splitlines()]
        outside = SHELL_BLOCK.sub(lambda m: " " * len(m.group(0)), text)
        spans += [(m.start(1), m.group(1)) for m in INLINE.finditer(outside) if "\n\n" not in m.group(1)]
        for offset, line in spans:
            command = " ".join(line.split(" #")[0].split()).removeprefix("$ ").removeprefix(".venv/bin/")
            if command.startswith(CALLS):
                where = f"{path.relative_to(REPO)}:{text.count(chr(10), 0, offset) + 1}"
                found.setdefault(command, []).append(where)
    return found


COMMANDS = documented()


def filled(command: str) -> list[str]:
    """The command's words without the reader's placeholders, and without an option whose value was one."""
    words = re.sub(r"\[[^\]]*\]", " ", command).split()  # optional parts: their options are checked, not run
    kept = []
    for word in words:
        if PLACEHOLDER.match(word):
            if kept and kept[-1].startswith("--") and "=" not in kept[-1]:
                kept.pop()  # `--rehearsal FILE`: the option goes with its value
            continue
        kept.append(word)
    return kept


def helps(args: list[str]) -> str:
    """The --help text of a CLI command (its first word the subcommand, or none), which must exit 0."""
    run = cli(*args, "--help")
    assert run.returncode == 0, f"{' '.join(args)} --help: {run.stderr[-500:]}"
    return run.stdout


def test_the_docs_give_commands_of_every_kind():
    """The collection itself: a change to the docs' markup that hid the commands would leave nothing to check."""
    kinds = {next(call for call in CALLS if command.startswith(call)) for command in COMMANDS}
    assert kinds == set(CALLS), kinds
    assert "snakemake allocations --forcerun report_allocations" in COMMANDS  # the README's, which once failed


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_documented_command_runs_as_written(command, tmp_path):
    where = ", ".join(COMMANDS[command])
    words = filled(command.replace("WORKDIR", str(tmp_path)))  # a folder the command may fill: an empty one
    options = set(OPTION.findall(command))
    if command.startswith("python -m parallel_experts"):
        sub = [w for w in words[3:4] if not w.startswith("-")]
        text = helps(sub)
    elif command.startswith("python workflow/scripts/"):
        run = subprocess.run([sys.executable, words[1], "--help"], cwd=REPO, capture_output=True, text=True)
        assert run.returncode == 0, f"{where}: {words[1]} --help: {run.stderr[-500:]}"
        text = run.stdout
    elif command.startswith("bash workflow/scripts/"):
        script = (REPO / words[1]).read_text()
        text = script + "".join(helps([sub]) for sub in re.findall(r"-m parallel_experts ([a-z-]+)", script))
    elif command.startswith("make "):
        run = subprocess.run(["make", "-n", *words[1:]], cwd=REPO, capture_output=True, text=True)
        assert run.returncode == 0, f"{where}: make -n {' '.join(words[1:])}: {run.stderr[-500:]}"
        return
    else:
        if any(option in words for option in NOT_DRY_RUN):
            pytest.skip(f"{command}: its run is the point, a dry run cannot stand for it")
        if "conda" in words and shutil.which("conda") is None:
            pytest.skip(f"{command}: for a machine with conda, which this one lacks")
        run = snakemake("-n", "--quiet", "--nolock", *words[1:])
        assert run.returncode == 0, f"{where}: snakemake -n {' '.join(words[1:])}: {(run.stderr + run.stdout)[-800:]}"
        return
    missing = sorted(option for option in options if option not in text and option != "--help")
    assert not missing, f"{where}: {command}: not in its help: {missing}"
