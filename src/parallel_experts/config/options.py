"""A command's options, declared once: the fields of a frozen dataclass, each with its type, default and help.

The command's function takes that dataclass (as Levanter's `main(config)` does); the CLI builds the command's
parser from its fields (`option`'s keywords are argparse's) and the dataclass from what it parsed. A field without a
default is a required option. The dataclass's docstring is the command's help.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable
from typing import Any


def option(help: str | None = None, *flags: str, default: Any = dataclasses.MISSING, **argparse: Any):
    """A field of a command's options: `flags` on the command line (default `--field-name`; a name without a dash
    is positional), `help` and the other keywords of argparse's `add_argument`. `group`: a name shared by fields
    that exclude each other; `negative`: a flag that sets a boolean field false."""
    return dataclasses.field(default=default, metadata={"flags": flags, "help": help, **argparse})


def output(help: str | None = None, *flags: str, folder: bool = False, **keywords: Any):
    """An `option` naming where a command writes: a file, or with `folder` a folder. The CLI checks each before the
    command starts (`core.atomic.writable_file`, `writable_folder`): a device, a pipe, a folder where a file should
    be (or a file where a folder should be) and a link out of the project are refused before any work."""
    return option(help, *flags, written="folder" if folder else "file", **keywords)


def at_least(kind: type, low: float, what: str, *, above: bool = False) -> Callable[[str], Any]:
    """An argparse `type`: a finite `kind` (int or float) of at least `low` (above it, with `above`); anything else,
    NaN and infinity included, is refused in one line before any work ("give `what`"). A count of 0 or a NaN
    budget would otherwise run and mean nothing, and a negative seed fails deep inside numpy."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < low or (above and value == low):
            raise argparse.ArgumentTypeError(f"{text!r}: give {what}")
        return value

    return parse


# A time limit in seconds: a limit that compares false with every time (NaN) or has passed would silently mean none,
# or stop at once.
seconds = at_least(float, 0, "a finite number of seconds above 0", above=True)
count = at_least(int, 1, "a whole number, at least 1")


def config_files(help: str = "config files, merged in order", **argparse: Any):
    """The `--config` option of a command that reads the config: the CLI hands the command the validated config."""
    return option(help, "--config", nargs="+", **argparse)


def configfile():
    """The `--configfile FILE` option (repeated, as Snakemake's) of a command a user runs beside the workflow."""
    return option("a config file; repeat it to merge several in order", "--configfile", action="append",
                  metavar="FILE")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunCommand:
    """A command on one run of the config (its definition read from the config by id: a run's definition, all its
    seeds, has no size limit, a command line has)."""

    config: tuple[str, ...] = config_files()
    run: str = option("the run's id in the config (see sokoban/experiment.py, lm/experiment.py)")
    run_dir: str = output("checkpoints and outputs of this run", folder=True)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Training(RunCommand):
    """A training command's options, both domains' (`core.training_job` runs the job's frame)."""

    time_limit: float | None = option("stop cleanly (checkpoint, exit status 75) before this many seconds have "
                                      "passed; default: the time SLURM leaves the job, if it runs in one, else none",
                                      type=seconds, metavar="SECONDS", default=None)
