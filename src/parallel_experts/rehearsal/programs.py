"""The rehearsal: every distinct compiled program of a config's DAG, lowered with abstract arguments (nothing is
allocated, not even the paper's 900k-level table) and compiled on the local backend, with what XLA says of it.

`python -m parallel_experts rehearse --config FILE --out results/rehearsal/SCALE.json` compiles them all (`job`); the
`rehearsal` target compiles them in parts (`parts`: `rehearse --part N`), as jobs that run side by side and each stay
done, so a rehearsal of many hours resumes where it stopped, and then merges the parts (`merge`).
Per program: the jobs that run it, compile seconds (and, apart, the seconds to build and lower it), the parameter
count of its model, XLA's FLOP count (its cost analysis: the body of every loop counted once, see
`core.benchmarking`) and XLA's memory analysis per device
(arguments, outputs, temporaries, aliases, generated code), and the backend that compiled it. A program whose job
splits its data over more devices than the backend has is recorded with the reason and not compiled (on a CPU,
`--xla_force_host_platform_device_count` gives the host as many devices; the CLI sets it from the config).
The planner reads the file without JAX (`results.rehearsal_file`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import jax

from parallel_experts.config.errors import ConfigError, PipelineError
from parallel_experts.config.settings import Resources
from parallel_experts.core import atomic, compile_cache
from parallel_experts.core.programs import Program
from parallel_experts.lm import experiment as lm_experiment
from parallel_experts.lm import programs as lm_programs
from parallel_experts.rehearsal import jobs
from parallel_experts.results import rehearsal_file
from parallel_experts.sokoban import experiment as sokoban_experiment
from parallel_experts.sokoban import programs as sokoban_programs
from parallel_experts.sokoban import rehearsal_updates
from parallel_experts.sokoban.levels import LevelSet

# A part's compiling, in units of about 16 s (XLA:CPU on this project's 2-core machine, paper shapes): the mean of any
# program but a Sokoban training update, which takes 80 s (5 units; up to 8 minutes). A part is about ten minutes.
PART_UNITS = 40
UNITS = {"sokoban_train": 5}

MEMORY = {"argument": "argument_size_in_bytes", "output": "output_size_in_bytes", "temp": "temp_size_in_bytes",
          "alias": "alias_size_in_bytes", "generated_code": "generated_code_size_in_bytes"}


class Rehearsed(Protocol):
    """What the rehearsal reads of a study (`parallel_experts.study.Study`, which this layer may not import): its
    scale, its jobs' resources and both domains' runs."""

    @property
    def scale(self) -> str: ...

    @property
    def resources(self) -> Resources: ...

    @property
    def sokoban(self) -> sokoban_experiment.Families: ...

    @property
    def lm(self) -> lm_experiment.Families: ...


def programs(study: Rehearsed) -> list[Program]:
    """Every distinct program of the config's DAG: both domains'."""
    return sokoban_programs.programs(study.sokoban) + lm_programs.programs(study.lm)


def parts(study: Rehearsed) -> list[list[Program]]:
    """The programs, in the order `programs` lists them, in parts of at most `PART_UNITS`."""
    found: list[list[Program]] = [[]]
    units = 0
    for program in programs(study):
        cost = UNITS.get(program.rule, 1)
        if found[-1] and units + cost > PART_UNITS:
            found, units = [*found, []], 0
        found[-1].append(program)
        units += cost
    return found


def part_keys(study: Rehearsed, index: int) -> set[str]:
    """The keys of the programs of part `index`."""
    found = parts(study)
    if not 0 <= index < len(found):
        raise PipelineError(f"rehearse --part {index}: the config's programs are in parts 0 to {len(found) - 1}")
    return {program.key for program in found[index]}


def merge(study: Rehearsed, files: Sequence[str | Path]) -> list[dict]:
    """The records of the parts' files, in the order of `programs`: every program of the config once, or an error
    that names the file that is not of this config (a part left from another config or an older program list)."""
    expected = [program.key for program in programs(study)]
    known = set(expected)
    found: dict[str, dict] = {}
    for path in files:
        rehearsed = rehearsal_file.read(path, missing_ok=False)
        assert rehearsed is not None  # read refuses a missing file
        for record in rehearsed["programs"]:
            if rehearsed["scale"] != study.scale or record["key"] not in known or record["key"] in found:
                raise PipelineError(f"{path}: program {record['key']!r} of scale {rehearsed['scale']!r} is not one of "
                                    f"this config's, or is there twice: rehearse that part again")
            found[record["key"]] = record
    missing = [key for key in expected if key not in found]
    if missing:
        raise PipelineError(f"{files[0] if files else 'the parts'}: {len(missing)} programs of the config were not "
                            f"rehearsed (the first: {missing[0]!r})")
    return [found[key] for key in expected]


def peak_bytes(memory: Mapping[str, int]) -> int:
    """What one device holds while the program runs, by XLA's plan: arguments + outputs + temporaries, less the
    outputs that reuse donated arguments, plus the program's code."""
    return memory["argument"] + memory["output"] + memory["temp"] - memory["alias"] + memory["generated_code"]


def compile_program(program: Program) -> dict:
    """Lower and compile one program; its record."""
    return compiled(program)[0]


def compiled(program: Program) -> tuple[dict, jax.stages.Compiled | None]:
    """Lower and compile one program: its record and the executable (None where it was not compiled), which takes
    concrete arguments of the shapes the program was lowered with (`gpu_check` runs it)."""
    record = {"key": program.key, "rule": program.rule, "jobs": [list(job) for job in program.jobs],
              "devices": program.devices, "backend": jax.default_backend(), "device_kind": jax.devices()[0].device_kind}
    if program.devices > jax.device_count():
        return record | {"error": f"needs {program.devices} devices, the {jax.default_backend()} backend has "
                                  f"{jax.device_count()}"}, None
    start = time.perf_counter()
    function, args, params = program.build()
    lowered = jax.jit(function, donate_argnums=program.donate).lower(*args)
    lowered_s = time.perf_counter() - start
    executable = lowered.compile()
    compile_s = time.perf_counter() - start - lowered_s
    analysis = executable.cost_analysis()
    analysis = (analysis[0] if isinstance(analysis, list) else analysis) or {}
    found = executable.memory_analysis()
    memory = {name: int(getattr(found, attribute)) for name, attribute in MEMORY.items()}
    return record | {"lower_seconds": lowered_s, "compile_seconds": compile_s, "parameters": params,
                     "xla_flops": float(analysis.get("flops", float("nan"))), "memory": memory,
                     "peak_bytes": peak_bytes(memory)}, executable


def rehearse(study: Rehearsed, out: str | Path, progress: Callable[[str], None] = print,
             keys: set[str] | None = None) -> list[dict]:
    """Compile every program of `study` (or those of `keys`) and write the records to `out` (JSON), rewritten
    after each program so that a long rehearsal can be watched and a killed one keeps what it did."""
    records, every = [], programs(study)
    unknown = sorted(set(keys or ()) - {p.key for p in every})
    if unknown:  # nothing compiled and exit 0 would pass for a rehearsal
        known = [p.key for p in every]
        raise ConfigError(f"rehearse --only: no program {unknown[0]!r} at this config; its {len(known)} keys: "
                          + ", ".join(known[:2]) + (", ..." if len(known) > 2 else "")
                          + " (all of them: the `key` of each program in a full rehearsal's JSON)")
    chosen = [p for p in every if keys is None or p.key in keys]
    for index, program in enumerate(chosen, 1):
        record = compile_program(program)
        records.append(record)
        write(study, records, out)
        what = record.get("error") or (f"{record['compile_seconds']:.1f} s, {record['peak_bytes'] / 2**30:.3f} GiB "
                                       f"per device, {record['parameters']:,} parameters")
        progress(f"[{index}/{len(chosen)}] {program.key}: {what}")
    return records


def write(study: Rehearsed, records: list[dict], out: str | Path, updates: list[dict] | None = None) -> None:
    """The rehearsal's file: the config's scale, every compiled program's record and the updates run for real."""
    found = {"scale": study.scale, "programs": records} | ({"updates": updates} if updates is not None else {})
    atomic.write_text(out, json.dumps(found, indent=1))


def job(options: jobs.Rehearse, study: Rehearsed) -> int:
    """`rehearse`: compile the config's programs (all, `--only` some, or `--part` N), or `--merge` the parts' files;
    with `--levels`, also run the chosen Sokoban updates for real. One line: what compiled, and on which backend."""
    compile_cache.off()  # compile seconds are what a rehearsal measures, not reads from the cache
    # A job that splits its data over N GPUs is compiled for N devices; on a CPU the host can pose as N devices, if
    # told before JAX starts its backend.
    devices = max(1, *(spec.gpus for spec in study.resources.families.values()))
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    if options.merge:
        records = merge(study, options.merge)
        write(study, records, options.out)
    else:
        keys = part_keys(study, options.part) if options.part is not None else set(options.only or ()) or None
        records = rehearse(study, options.out, keys=keys)
    if options.levels:
        if not options.run_dir:
            raise ConfigError("rehearse: --levels needs --run-dir, where the runs checkpoint")
        levels = LevelSet.load(options.levels).levels
        updates = rehearsal_updates.run_all(study.sokoban, records, levels, options.run_dir,
                                            options.seeds)
        write(study, records, options.out, updates)
    failed = [r for r in records if "error" in r]
    print(f"{options.out}: {len(records) - len(failed)} programs compiled on {records[0]['backend'] if records else '-'}"
          + (f", {len(failed)} not ({failed[0]['error']})" if failed else ""))
    return 0
