"""`python -m parallel_experts <command>`: the one interface every Snakemake rule calls.

This module only parses and dispatches. Each command is a dataclass of options, declared in the layer that runs
it (its fields are the command's options, its docstring the command's help), and one function of that layer that
takes it. A command with a `config` option is handed the study its config defines as well, or the part of it the
function takes (`study.load`, at the matmul precision of the command's domain), so a bad config stops here with one
line (exit status 2) before anything is
computed or JAX is imported. Expected failures (`config.errors.PipelineError`: bad level files, diverged training)
are reported in one line with exit status 1; a trainer that stopped cleanly before its time limit exits with 75
(`core.walltime`: resubmit it).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pkgutil
import sys
from collections.abc import Sequence
from typing import NamedTuple

from parallel_experts import study
from parallel_experts.config.errors import ConfigError, PipelineError
from parallel_experts.core import atomic


class Command(NamedTuple):
    declared: str  # "module:Options", the options dataclass: imported for this command alone (the planner's take 1 s)
    run: str  # "module:function", imported once the config is checked (most of them import JAX)
    domain: str | None = None  # the family whose matmul precision the command computes at
    counters: bool = False  # the function also takes the domains' FLOP counters (planning never imports JAX)
    # The part of the study (`study.Study`) the function takes: the whole study (""), or a domain's runs with their
    # settings ("sokoban", "lm": the domain layer may not import the study).
    takes: str = ""

    @property
    def options(self) -> type:
        return pkgutil.resolve_name(self.declared)

    def __call__(self, args: argparse.Namespace) -> int:
        """The command's function on its options; with the validated config where the command reads one, and the
        FLOP counters, which load JAX, only after it."""
        options = self.options(**{field.name: parsed(getattr(args, field.name))
                                  for field in dataclasses.fields(self.options)})
        writable(options)
        if not hasattr(options, "config"):
            return pkgutil.resolve_name(self.run)(options)
        loaded = study.load(options.config, self.domain)
        counted = (flop_counters(),) if self.counters else ()
        return pkgutil.resolve_name(self.run)(options, getattr(loaded, self.takes) if self.takes else loaded, *counted)

SOKOBAN, LM, PLANNING = "parallel_experts.sokoban.jobs", "parallel_experts.lm.jobs", "parallel_experts.planning"
COMMANDS = {
    "check-config": Command("parallel_experts.study:CheckConfig", "parallel_experts.study:check_config"),
    "allocations": Command(f"{PLANNING}.plan:Allocations", f"{PLANNING}.plan:allocations", counters=True),
    "report": Command("parallel_experts.reporting.jobs:Report", "parallel_experts.reporting.render:report_job"),
    "plan": Command(f"{PLANNING}.plan:Plan", f"{PLANNING}.plan:run", counters=True),
    "power": Command(f"{PLANNING}.power:Power", f"{PLANNING}.power:run", counters=True),
    "rehearse": Command("parallel_experts.rehearsal.jobs:Rehearse", "parallel_experts.rehearsal.programs:job"),
    "index": Command("parallel_experts.reporting.jobs:Index", "parallel_experts.reporting.render:index_job"),
    "sokoban-levels": Command(f"{SOKOBAN}:Levels", "parallel_experts.sokoban.experiment:levels_job"),
    "sokoban-train": Command(f"{SOKOBAN}:Train", "parallel_experts.sokoban.train:job", "sokoban", takes="sokoban"),
    "sokoban-evaluate": Command(f"{SOKOBAN}:Evaluate", "parallel_experts.sokoban.evaluate:job", "sokoban",
                                takes="sokoban"),
    "sokoban-probe-data": Command(f"{SOKOBAN}:ProbeData", "parallel_experts.sokoban.probes:job", "sokoban",
                                  takes="sokoban"),
    "sokoban-probe-fit": Command(f"{SOKOBAN}:ProbeFit", "parallel_experts.sokoban.probe_scores:fit_job"),
    "sokoban-probes": Command(f"{SOKOBAN}:Probes", "parallel_experts.sokoban.probe_scores:collect_job"),
    "lm-tokens": Command(f"{LM}:Tokens", "parallel_experts.lm.corpus:tokens_job"),
    "lm-train": Command(f"{LM}:Train", "parallel_experts.lm.train:job", "lm", takes="lm"),
    "lm-evaluate": Command(f"{LM}:Evaluate", "parallel_experts.lm.evaluate:job", "lm", takes="lm"),
    "sokoban-sweep": Command(f"{SOKOBAN}:Sweep", "parallel_experts.sokoban.experiment:sweep_job"),
    "lm-sweep": Command(f"{LM}:Sweep", "parallel_experts.lm.experiment:sweep_job"),
    "sokoban-bench": Command(f"{SOKOBAN}:Bench", "parallel_experts.sokoban.bench:run", "sokoban", takes="sokoban"),
    "lm-latency": Command(f"{LM}:Latency", "parallel_experts.benchmarks:latency_job", "lm"),
    "lm-throughput": Command(f"{LM}:Throughput", "parallel_experts.benchmarks:throughput_job", "lm"),
    "gpu-check": Command("parallel_experts.gpu_check:GpuCheck", "parallel_experts.gpu_check:job"),
    "lm-speed": Command(f"{PLANNING}.lm_speed:LmSpeed", f"{PLANNING}.lm_speed:run", counters=True),
}
# Their help lists every option's default; the other commands' defaults are plain.
DEFAULTS_IN_HELP = {"sokoban-bench"}


def parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every command's, or with `only` that one command's (its options alone imported)."""
    parser = argparse.ArgumentParser(prog="parallel_experts", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items() if only is None else [(only, COMMANDS[only])]:
        help = " ".join((command.options.__doc__ or "").split())
        formatter = argparse.ArgumentDefaultsHelpFormatter if name in DEFAULTS_IN_HELP else argparse.HelpFormatter
        sub = commands.add_parser(name, help=help, description=help, formatter_class=formatter)
        sub.set_defaults(handler=command)
        add_options(sub, command.options)
    return parser


def add_options(parser: argparse.ArgumentParser, options: type) -> None:
    """An argument for each field of `options` (`config.options.option`: its flags, help and argparse keywords)."""
    groups: dict[str, argparse._ActionsContainer] = {}
    for field in dataclasses.fields(options):
        keywords = dict(field.metadata)
        flags = keywords.pop("flags") or (f"--{field.name.replace('_', '-')}",)
        group, negative = keywords.pop("group", None), keywords.pop("negative", None)
        keywords.pop("written", None)  # what `writable` checks, not argparse's
        if negative:  # a pair of flags that set one boolean, the first true
            group = group or field.name
        if group is not None and group not in groups:
            groups[group] = parser.add_mutually_exclusive_group()
        target = parser if group is None else groups[group]
        if flags[0].startswith("-"):
            keywords["dest"] = field.name
            if field.default is dataclasses.MISSING:
                keywords["required"] = True
            else:  # append and extend add to a list
                keywords["default"] = list(field.default) if isinstance(field.default, tuple) else field.default
        if negative:
            target.add_argument(*flags, action="store_true", **keywords)
            target.add_argument(negative, dest=field.name, action="store_false")
        else:
            target.add_argument(*flags, **keywords)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser(argv[0] if argv and argv[0] in COMMANDS else None).parse_args(argv)
    try:
        return args.handler(args)
    except ConfigError as error:
        print(f"config error: {error}", file=sys.stderr)
        return 2
    except PipelineError as error:
        print(f"error: {error}", file=sys.stderr)
        return getattr(error, "exit_status", 1)  # a trainer stopped before its time limit: RESUBMIT
    except Exception as error:  # a read or a write outside atomic_path (a library's own file) the file system refused
        refused = atomic.refusal(error)
        if refused is None:
            raise
        reason = os.strerror(refused.errno or 0)
        print(f"error: {refused.filename or 'a file'}: the file system refused it ({reason})", file=sys.stderr)
        return 1


def writable(options) -> None:
    """Every output of the command (`config.options.output`) checked before its work: a bad path costs nothing."""
    for field in dataclasses.fields(options):
        value, kind = getattr(options, field.name), field.metadata.get("written")
        if kind and value:
            (atomic.writable_folder if kind == "folder" else atomic.writable_file)(value)


def parsed(value):
    """A parsed option as the options hold it: a list of values as a tuple, so that the options stay frozen."""
    return tuple(value) if isinstance(value, list) else value


def flop_counters():
    """The domains' FLOP counters: they lower the models, so they load JAX."""
    from parallel_experts.lm import flops as lm_flops
    from parallel_experts.planning import costs
    from parallel_experts.sokoban import flops as sokoban_flops

    return costs.Counters(sokoban_flops, lm_flops)
