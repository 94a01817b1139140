"""The rehearsal: every distinct compiled program of a config's DAG, lowered with abstract arguments (nothing is
allocated, not even the paper's 900k-level table) and compiled on the local backend, with what XLA says of it.

`python -m parallel_experts rehearse --config FILE --out results/rehearsal/SCALE.json` (the `rehearsal` target).
Per program: the jobs that run it, compile seconds (and, apart, the seconds to build and lower it), the parameter
count of its model, XLA's FLOP count (its cost analysis: the body of every loop counted once, see
`core.benchmarking`) and XLA's memory analysis per device
(arguments, outputs, temporaries, aliases, generated code), and the backend that compiled it. A program whose job
splits its data over more devices than the backend has is recorded with the reason and not compiled (on a CPU,
`--xla_force_host_platform_device_count` gives the host as many devices; the CLI sets it from the config).
The planner reads the file (`planning.memory`) without JAX.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import jax

from parallel_experts.core import atomic
from parallel_experts.core.programs import Program
from parallel_experts.lm import programs as lm_programs
from parallel_experts.sokoban import programs as sokoban_programs

MEMORY = {"argument": "argument_size_in_bytes", "output": "output_size_in_bytes", "temp": "temp_size_in_bytes",
          "alias": "alias_size_in_bytes", "generated_code": "generated_code_size_in_bytes"}


def programs(config: Mapping) -> list[Program]:
    """Every distinct program of the config's DAG: both domains'."""
    return sokoban_programs.programs(config) + lm_programs.programs(config)


def peak_bytes(memory: Mapping[str, int]) -> int:
    """What one device holds while the program runs, by XLA's plan: arguments + outputs + temporaries, less the
    outputs that reuse donated arguments, plus the program's code."""
    return memory["argument"] + memory["output"] + memory["temp"] - memory["alias"] + memory["generated_code"]


def compile_program(program: Program) -> dict:
    """Lower and compile one program; its record."""
    record = {"key": program.key, "rule": program.rule, "jobs": [list(job) for job in program.jobs],
              "devices": program.devices, "backend": jax.default_backend(), "device_kind": jax.devices()[0].device_kind}
    if program.devices > jax.device_count():
        return record | {"error": f"needs {program.devices} devices, the {jax.default_backend()} backend has "
                                  f"{jax.device_count()}"}
    start = time.perf_counter()
    function, args, params = program.build()
    lowered = jax.jit(function, donate_argnums=program.donate).lower(*args)
    lowered_s = time.perf_counter() - start
    compiled = lowered.compile()
    compile_s = time.perf_counter() - start - lowered_s
    analysis = compiled.cost_analysis()
    analysis = analysis[0] if isinstance(analysis, list) else analysis
    found = compiled.memory_analysis()
    memory = {name: int(getattr(found, attribute)) for name, attribute in MEMORY.items()}
    return record | {"lower_seconds": lowered_s, "compile_seconds": compile_s, "parameters": params,
                     "xla_flops": float(analysis.get("flops", float("nan"))), "memory": memory,
                     "peak_bytes": peak_bytes(memory)}


def rehearse(config: Mapping, out: str | Path, progress: Callable[[str], None] = print,
             keys: set[str] | None = None) -> list[dict]:
    """Compile every program of `config` (or those of `keys`) and write the records to `out` (JSON), rewritten
    after each program so that a long rehearsal can be watched and a killed one keeps what it did."""
    records = []
    chosen = [p for p in programs(config) if keys is None or p.key in keys]
    for index, program in enumerate(chosen, 1):
        record = compile_program(program)
        records.append(record)
        write(config, records, out)
        what = record.get("error") or (f"{record['compile_seconds']:.1f} s, {record['peak_bytes'] / 2**30:.3f} GiB "
                                       f"per device, {record['parameters']:,} parameters")
        progress(f"[{index}/{len(chosen)}] {program.key}: {what}")
    return records


def write(config: Mapping, records: list[dict], out: str | Path, updates: list[dict] | None = None) -> None:
    """The rehearsal's file: the config's scale, every compiled program's record and the updates run for real."""
    found = {"scale": config["scale"], "programs": records} | ({"updates": updates} if updates is not None else {})
    atomic.write_text(out, json.dumps(found, indent=1))
