"""The first GPU's check (`workflow/scripts/gpu_check.sh`, `python -m parallel_experts gpu-check`): in under ten
minutes on one GPU, the programs the paper's jobs run, compiled, timed and priced as the plan prices them, in one
JSON file.

Sections (`gpu_measure` measures them):
* `sokoban_train`: a Sokoban training call of a run (the job's program: every seed, the level table an argument,
  the carry donated) with a few updates instead of the job's `log_interval` (200 in the paper: minutes per call);
  by default the largest budget's anchor and its allocation of the most experts.
* `lm_train`: one LM training update, one GPU's share of the job's (the per-device shapes of its program on
  `resources.lm_train.gpus` devices); by default the first budget's anchor at the longest window, both families.
* `lm_table6`: one GPU's share of an update of a cell (row, C) of our Table 6 job, and at the paper's shapes the
  authors' tokens per second per GPU beside ours; by default four cells that span the serial term (the Transformer
  at its longest context, the recurrent L1 E16 at the shortest and the longest, L8 E2 at the shortest); and the
  Transformer's cells again with another attention than the config's (`lm.attention`; by default cuDNN's fused
  kernel beside our query blocks: our Transformer trained at 0.3× the authors' speed on an H200);
* `lm_latency`: Table 5's job at one context and batch, the recurrent L1 E16 against the Transformer L16 E1.

The first Table 6 cell of each family that runs at most TRACE_STEPS level-steps per update is also traced (one more
update under `jax.profiler`): the trace is kept in the folder `<out>-traces/` (TensorBoard's profile plugin or
ui.perfetto.dev open it) and summarised in the JSON (`core.traces`: the operations that took the time).

Per update: XLA's memory plan on this device beside the CPU rehearsal's figure for the job's program (from a
rehearsal file, `rehearse`, where one holds it: the CPU's figure is otherwise null); seconds per update; the
planner's FLOPs per update; achieved TFLOP/s; and their fraction of the plan's peak (`plan.<family>.peak_tflops`,
or `--peak-tflops`): the `plan.<family>.efficiency` with which the plan predicts the measured time. `plan_updates`
gathers them per config key (the median of its updates, as the plan takes the median of timed jobs).

Each section runs in a fresh process, so that the device's peak memory is its own and a crash, an out-of-memory or
a hang (killed at its time limit) is that section's error while the others run. This process never loads JAX: it
would hold most of the GPU's memory (XLA preallocates) while they run. The file is rewritten after every section,
so a check killed part-way keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from parallel_experts.config.errors import ConfigError
from parallel_experts.config.options import at_least, config_files, count, option, output, seconds
from parallel_experts.core import atomic, precision
from parallel_experts.core.budget import allocation_id, sokoban_work
from parallel_experts.core.definitions import family
from parallel_experts.lm import experiment as lm_experiment
from parallel_experts.lm import systems
from parallel_experts.lm.settings import ATTENTIONS, LmSettings, ModelConfig
from parallel_experts.planning import costs, lm_time, memory, resources
from parallel_experts.results import paths, rehearsal_file
from parallel_experts.sokoban import experiment as sokoban_experiment
from parallel_experts.study import Study

BUDGET_SECONDS = 540  # the whole check: ten minutes of a GPU less the machine's start and a margin
SECTION_SECONDS = 240  # the most one section may take, compiling included
LAST_START = 20  # seconds of the budget below which no section starts
SOKOBAN_UPDATES = 2  # per timed Sokoban call (the paper's large updates: seconds each)
TRACE_STEPS = 512  # a traced update's level-steps at most: a trace holds every kernel of every step


@dataclass(frozen=True, kw_only=True)
class GpuCheck:
    """on one GPU, in under ten minutes: a training update of each family compiled (XLA's memory plan beside the CPU
    rehearsal's), timed and priced as the plan's efficiency, and Table 5's decode latency of L1 E16 against L16 E1
    (JSON; gpu_check.py)"""

    config: tuple[str, ...] = config_files()
    out: str = output()
    rehearsal: str | None = option("a rehearsal file (rehearse) with the CPU's plan of the programs (default: the "
                                   "config's scale's, results/rehearsal/SCALE.json, where it exists)", default=None)
    sokoban_run: tuple[str, ...] = option("a Sokoban run to time (repeatable; default: the largest budget's anchor "
                                          "and its allocation of the most experts)", action="append", metavar="RUN",
                                          default=())
    lm_run: tuple[str, ...] = option("an LM run to time (repeatable; default: the first budget's anchor at the "
                                     "longest window, both families)", action="append", metavar="RUN", default=())
    table6: tuple[str, ...] = option("a cell of Table 6 to time, as L1-E16@1024 (recurrent) or transformer@1024 "
                                     "(repeatable; `all`: every cell of the config's Table 6; default: four)",
                                     action="append", metavar="CELL", default=())
    attention: tuple[str, ...] = option("time the Transformer's Table 6 cells again with this lm.attention "
                                        "(repeatable; default: cudnn, jax.nn.dot_product_attention's fused kernel, "
                                        "for a bfloat16 LM, xla for a float32 one, blocked where the config sets "
                                        "another)", action="append", choices=ATTENTIONS, default=())
    sokoban_updates: int | None = option("updates per timed Sokoban call (default: 2)", type=count, default=None)
    context: int | None = option("Table 5's context (default: the config's longest)", type=count, default=None)
    batch: int | None = option("Table 5's batch (default: the config's smallest)", type=count, default=None)
    peak_tflops: tuple[str, ...] = option("the peak of this GPU for a plan family (train, lm_train) instead of the "
                                          "config's plan.FAMILY.peak_tflops", action="append", metavar="FAMILY=TFLOPS",
                                          default=())
    budget_seconds: float | None = option("no section starts after this (default: 540)", type=seconds, default=None)


def job(options: GpuCheck, study: Study) -> int:
    """`gpu-check`: the sections measured, one line for the file, one per failed section and per plan update; exit
    status 1 where a section failed."""
    if options.rehearsal:  # a file named must be there, and whole; the scale's default may not exist yet
        rehearsal_file.read(options.rehearsal, missing_ok=False)
    peak = peaks(options.peak_tflops)
    chosen = sections(study, options.sokoban_run, options.lm_run, options.context, options.batch,
                      options.sokoban_updates or SOKOBAN_UPDATES, options.table6, options.attention)
    traced(chosen, atomic.writable_folder(traces_folder(options.out)))
    rehearsal = options.rehearsal or paths.rehearsal(study.scale)
    found = check(study, chosen, options.out, rehearsal, peak, options.budget_seconds or BUDGET_SECONDS)
    print(f"{options.out}: {len(chosen) - len(found['errors'])} of {len(chosen)} sections measured in "
          f"{found['seconds']:.0f} s" + "".join(f"\n  failed: {error}" for error in found["errors"]))
    for key, entry in found["plan_updates"].items():
        print(f"  {key}: {entry['value']:.4f} (the config assumes {entry['assumed']})")
    return 1 if found["errors"] else 0


def sections(study: Study, sokoban_runs: Sequence[str] = (), lm_runs: Sequence[str] = (),
             context: int | None = None, batch: int | None = None, updates: int = SOKOBAN_UPDATES,
             table6: Sequence[str] = (), attention: Sequence[str] = ()) -> list[dict]:
    """What the check measures, most wanted first (a check that runs out of time loses the last): one Sokoban run,
    the LM runs, the Table 6 cells, the Transformer's cells again with each other `attention` than the config's
    (`default_attention` where none is given), Table 5's cell (by default the config's longest context and
    smallest batch), the other Sokoban runs."""
    sokoban = list(sokoban_runs) or default_sokoban_runs(study.sokoban)
    lm = list(lm_runs) or default_lm_runs(study.lm)
    for option, ids, known in (("--sokoban-run", sokoban, study.sokoban.by_id), ("--lm-run", lm, study.lm.by_id)):
        for run in ids:
            if run not in known:
                raise ConfigError(f"gpu-check {option}: the config defines no run {run!r}")
    latency = systems.latency_settings(study.lm.settings.tables)
    cell = {"section": "lm_latency", "context": context or max(latency["contexts"]),
            "batch": batch or min(latency["batches"])}
    training = [{"section": "sokoban_train", "run": run, "updates": updates} for run in sokoban]
    cells: list[dict] = [{"section": "lm_table6", "row": list(row), "context": c}
                         for row, c in table6_cells(study.lm, table6)]
    others = [way for way in dict.fromkeys(attention or [default_attention(study.lm.settings)])
              if way != study.lm.settings.attention]
    cells += [spec | {"attention": way} for way in others for spec in cells if not spec["row"][0]]
    return [*training[:1], *({"section": "lm_train", "run": run} for run in lm), *cells, cell, *training[1:]]


def table6_cells(lm: lm_experiment.Families, given: Sequence[str] = ()) -> list[tuple[tuple[bool, int, int], int]]:
    """The Table 6 cells named (`L1-E16@1024`, `transformer@1024`, `all`), each a row and context of the config's
    Table 6; by default four that span the serial term: the Transformer at its longest context, the recurrent
    L1 E16 at the shortest and the longest, L8 E2 at the shortest (at the paper's shapes, the longest the authors
    ran without running out of memory)."""
    spec = systems.throughput_settings(lm.settings.tables)
    rows, contexts = systems.selected(systems.THROUGHPUT_ROWS, spec), sorted(spec["contexts"])
    if "all" in given:
        return [(row, c) for row in rows for c in contexts]
    if not given:
        oom = lm_time.authors_table6()["oom"]  # at another scale's contexts, no cell of theirs: none ran out
        longest = {row: max((c for c in contexts if not oom.get((*row, c), False)), default=contexts[-1])
                   for row in rows}
        deepest = systems.THROUGHPUT_ROWS[-1]  # the recurrent L8 E2
        wanted = [(systems.TRANSFORMER, "longest"), (systems.SHALLOWEST, contexts[0]), (systems.SHALLOWEST, "longest"),
                  (deepest, contexts[0])]
        return list(dict.fromkeys((row, longest[row] if c == "longest" else c) for row, c in wanted if row in rows))
    by_name = {_cell_name(row, c): (row, c) for row in rows for c in contexts}
    for name in given:
        if name.lower() not in by_name:
            raise ConfigError(f"gpu-check --table6 {name!r}: not a cell of the config's Table 6 (rows "
                              f"{', '.join(map(systems.label, rows))}; contexts {contexts}), written as L1-E16@1024 "
                              "or transformer@1024, or `all`")
    return list(dict.fromkeys(by_name[name.lower()] for name in given))


def _cell_name(row: tuple[bool, int, int], context: int) -> str:
    recurrent, depth, experts = row
    return f"{f'l{depth}-e{experts}' if recurrent else 'transformer'}@{context}"


def default_attention(lm: LmSettings) -> str:
    """The attention to time the Transformer with beside the config's: cuDNN's fused kernel for a bfloat16 LM (the
    paper's), XLA's for a float32 one (the smoke check on a CPU); ours where the config sets another."""
    if lm.attention != ModelConfig.attention:
        return ModelConfig.attention
    return "cudnn" if lm.dtype == "bfloat16" else "xla"


def _spec_name(spec: Mapping) -> str:
    """A Table 6 section's name: its cell, and the attention where it is not the config's (`transformer@2048+cudnn`)."""
    name = _cell_name(tuple(spec["row"]), spec["context"])
    return f"{name}+{spec['attention']}" if "attention" in spec else name


def traces_folder(out: str | Path) -> Path:
    return Path(out).with_name(f"{Path(out).stem}-traces")


def traced(chosen: Sequence[dict], folder: Path) -> None:
    """Mark the first Table 6 cell of each family and attention that runs at most TRACE_STEPS level-steps per update
    (C × L: one microbatch; the Transformer none) to be traced, in a folder of `folder` named after it
    (`l1-e16-c32`, `transformer-c2048+cudnn`)."""
    cells = [spec for spec in chosen if spec["section"] == "lm_table6"]
    for kind in dict.fromkeys((spec["row"][0], spec.get("attention")) for spec in cells):
        short = [spec for spec in cells if (spec["row"][0], spec.get("attention")) == kind
                 and (not kind[0] or spec["context"] * spec["row"][1] <= TRACE_STEPS)]
        if short:
            short[0]["trace"] = str(folder / _spec_name(short[0]).replace("@", "-c"))


def default_sokoban_runs(sokoban: sokoban_experiment.Families) -> list[str]:
    """The largest budget's anchor and its allocation of the most experts (the paper: L1 E1 d1024 and L1 E208 d64,
    equal work per step; the large budget is most of the plan's GPU-hours), recurrent, of the first sweep's kind."""
    channels = sokoban.settings.encoder_channels
    largest = max(sokoban.budgets, key=lambda b: sokoban_work(b.anchor, channels))
    runs = [run for run in sokoban.sweeps if run.budget == largest.name and run.agent.recurrent]
    runs = [run for run in runs if run.agent.expert == runs[0].agent.expert]
    anchor = next((run for run in runs if allocation_id(run.agent) == allocation_id(largest.anchor)), runs[0])
    most = max(runs, key=lambda run: (run.agent.experts, run.agent.depth))
    return list(dict.fromkeys([anchor.id, most.id]))


def default_lm_runs(lm: lm_experiment.Families) -> list[str]:
    """The first budget's anchor at the longest window, non-recurrent and recurrent (the paper: L16 E1 d768 at
    W = 1,024)."""
    first, window = lm.budgets[0], max(lm.settings.windows)
    runs = [run for run in lm.sweeps if run.budget == first.name and run.window == window]
    anchor = [run for run in runs if allocation_id(run.model) == allocation_id(first.anchor)]
    chosen = anchor or [run for run in runs if allocation_id(run.model) == allocation_id(runs[0].model)]
    return [run.id for run in sorted(chosen, key=lambda run: run.model.recurrent)]


TFLOPS = at_least(float, 0, "a finite number of TFLOP/s above 0", above=True)


def peaks(given: Sequence[str]) -> dict[str, float]:
    """`--peak-tflops FAMILY=TFLOPS` options as {family: TFLOP/s}, for the plan's training families."""
    found = {}
    for option in given:
        name, _, value = option.partition("=")
        try:
            tflops = TFLOPS(value)
        except argparse.ArgumentTypeError:
            tflops = None
        if name not in ("train", "lm_train") or tflops is None:
            raise ConfigError(f"gpu-check --peak-tflops {option!r}: expected train=TFLOPS or lm_train=TFLOPS, "
                              "TFLOPS a finite positive number")
        found[name] = tflops
    return found


def check(study: Study, chosen: Sequence[Mapping], out: str | Path, rehearsal: str | Path | None = None,
          peaks: Mapping[str, float] | None = None, budget: float = BUDGET_SECONDS,
          progress: Callable[[str], None] = print) -> dict:
    """Measure every section of `chosen` (`sections`), each in a fresh process, price the updates and write it all
    to `out` (JSON) after each section; what was found."""
    rehearsed = read_rehearsal(rehearsal)
    found: dict = {"config_scale": study.scale, "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                   "budget_seconds": budget, "rehearsal": rehearsed["about"], "machine": None,
                   "sokoban_train": {}, "lm_train": {}, "lm_table6": {}, "lm_latency": None, "plan_updates": {},
                   "errors": []}
    start = time.monotonic()
    for index, spec in enumerate(chosen, 1):
        name = " ".join([spec["section"], spec.get("run", "")]).strip()
        if spec["section"] == "lm_table6":
            name = f"lm_table6 {_spec_name(spec)}"
        left = budget - (time.monotonic() - start)
        if left < LAST_START:
            result = {"ok": False, "error": f"not run: the check's {budget:.0f} s were spent"}
        else:
            progress(f"[{index}/{len(chosen)}] {name} (at most {min(SECTION_SECONDS, left):.0f} s)")
            result = isolated(study.config, spec, min(SECTION_SECONDS, left))
        machine = result.pop("machine", None)
        found["machine"] = found["machine"] or machine
        if spec["section"] == "lm_latency":
            entry = found["lm_latency"] = dict(spec) | result
        elif spec["section"] == "lm_table6":
            entry = found["lm_table6"][name.split()[1]] = dict(spec) | result
        else:
            entry = dict(spec) | priced(study, spec, result, peaks or {}, rehearsed)
            found[spec["section"]][spec["run"]] = entry
        if not result.get("ok"):
            found["errors"].append(f"{name}: {result.get('error')}")
        progress(f"[{index}/{len(chosen)}] {name}: {summary(entry)}")
        found["plan_updates"] = plan_updates(found)
        found["seconds"] = time.monotonic() - start
        atomic.write_text(out, json.dumps(found, indent=1))
    return found


def isolated(config: Mapping, spec: Mapping, timeout: float) -> dict:
    """`gpu_measure.run` of one section in a fresh process, stopped after `timeout` seconds: what it found, with an
    error where it did not end well."""
    with tempfile.TemporaryDirectory() as folder:
        part = Path(folder) / "section.json"
        start = time.monotonic()
        process = multiprocessing.get_context("spawn").Process(target=_measure, args=(dict(config), dict(spec),
                                                                                       str(part)))
        process.start()
        process.join(timeout)
        if process.is_alive():
            process.kill()
            process.join()
        found = json.loads(part.read_text()) if part.exists() else {}
    found["wall_seconds"] = time.monotonic() - start
    if process.exitcode != 0:  # killed at the limit, or died (a segmentation fault, the kernel's OOM killer)
        why = (f"killed at the section's limit of {timeout:.0f} s" if process.exitcode == -9 and
               found["wall_seconds"] >= timeout else f"the section's process ended with status {process.exitcode}")
        found |= {"ok": False, "error": why + (f" (after: {found['error']})" if "error" in found else "")}
    return found


def _measure(config: dict, spec: dict, out: str) -> None:
    study = Study.of(config, validated=True)  # the mapping crossed the process boundary: the study does not pickle
    # The family's matmul precision, as its jobs set it (study.load), before JAX is imported here.
    precision.use(study.matmul_precision("sokoban" if spec["section"] == "sokoban_train" else "lm"))
    from parallel_experts import gpu_measure  # JAX: in the section's own process only

    gpu_measure.run(study, spec, out)


# ---------------------------------------------------------------------------------------------------- pricing


def priced(study: Study, spec: Mapping, result: Mapping, peaks: Mapping[str, float], rehearsed: Mapping) -> dict:
    """A training section's result with its achieved TFLOP/s and their fraction of the plan's peak (in the plan's
    terms: `planning.costs.assumption` of its rule and model family), and the CPU rehearsal's memory figure for its
    program."""
    rule = spec["section"]
    run = study.families("sokoban" if rule == "sokoban_train" else "lm").by_id[spec["run"]]
    recurrent = run.agent.recurrent if isinstance(run, sokoban_experiment.Run) else run.model.recurrent
    found = dict(result) | {"cpu_rehearsal": cpu_figure(rehearsed, result)}
    if "flops_per_update" not in result or "seconds_per_update" not in result:
        return found
    try:
        assumed = costs.assumption(study.plan, rule, family(recurrent))
    except ConfigError:  # the config states no throughput to compare with: measured, not priced
        return found
    name = resources.FAMILY[rule]
    peak, source = ((peaks[name], "--peak-tflops") if name in peaks else
                    (assumed.peak_tflops, f"{assumed.spec_key}.peak_tflops"))
    achieved = result["flops_per_update"] / result["seconds_per_update"] / 1e12
    return found | {"achieved_tflops": achieved, "peak_tflops": peak, "peak_source": source,
                    "plan_device": assumed.device, "efficiency": achieved / peak, "config_key": assumed.efficiency_key,
                    "assumed_efficiency": assumed.efficiency,
                    "assumed_seconds_per_update": result["flops_per_update"] / (peak * 1e12 * assumed.efficiency)}


def plan_updates(found: Mapping) -> dict:
    """Per config key: the efficiency each timed update implies, and their median (the value to give the key)."""
    measured: dict[str, dict] = {}
    for rule in ("sokoban_train", "lm_train"):
        for run, result in found[rule].items():
            if result.get("efficiency") is not None:
                entry = measured.setdefault(result["config_key"], {
                    "measured": {}, "assumed": result["assumed_efficiency"], "peak_tflops": result["peak_tflops"],
                    "peak_source": result["peak_source"], "plan_device": result["plan_device"]})
                entry["measured"][run] = result["efficiency"]
    for entry in measured.values():
        entry["value"] = statistics.median(entry["measured"].values())
        entry["this_device"] = (found["machine"] or {}).get("device_kind")
    return measured


def read_rehearsal(path: str | Path | None) -> dict:
    """The rehearsal's records by program key, and what the check says of the file."""
    found = None if path is None else rehearsal_file.read(path)
    if found is None:
        return {"records": {}, "about": {"file": None if path is None else str(path), "note": (
            "no rehearsal file: every CPU figure is null (`rehearse --config ... --only KEY` writes one)")}}
    records = {record["key"]: record for record in found.get("programs", [])}
    return {"records": records, "about": {"file": str(path), "scale": found.get("scale"),
                                          "programs": len(records)}}


def cpu_figure(rehearsed: Mapping, result: Mapping) -> dict:
    """The rehearsal's plan of this program, else of the job's (the same update in a longer scan, or per device of
    the job's devices), beside this device's."""
    keys = [result.get("program_key"), result.get("job_program_key")]
    key = next((k for k in keys if k in rehearsed["records"] and "peak_bytes" in rehearsed["records"][k]), None)
    if key is None:
        return {"key": keys[-1], "peak_bytes": None, "note": "not in the rehearsal file" if rehearsed["records"]
                else "no rehearsal file"}
    record = rehearsed["records"][key]
    ours = result.get("peak_bytes")
    return {"key": key, "same_program": key == keys[0], "peak_bytes": record["peak_bytes"],
            "memory": record["memory"], "backend": record["backend"], "devices": record["devices"],
            "this_over_cpu": ours / record["peak_bytes"] if ours else None}


def summary(entry: Mapping) -> str:
    """One line of a section's result."""
    if not entry.get("ok"):
        return f"FAILED ({entry.get('error')})"
    if entry["section"] == "lm_latency":
        ms = ", ".join(f"{label} {value:.3f} ms/token" for label, value in entry["ms_per_token"].items())
        return f"{ms}; ratio {entry['ratio']:.3f}"
    if entry["section"] == "lm_table6":
        ratio = entry["ours_over_authors"]
        return (f"{entry['seconds_per_update']:.3f} s per update, {entry['tokens_per_second']:,.0f} tokens/s per "
                "device" + (f", {ratio:.2f}× the authors'" if ratio else "")
                + (", traced" if "trace_summary" in entry else ""))
    shown = {"seconds_per_update": lambda s: f"{s:.3f} s per update", "efficiency": lambda e: f"{e:.1%} of the peak",
             "peak_bytes": lambda b: f"XLA plans {memory.size(b)} per device",
             "compile_seconds": lambda s: f"compiled in {s:.0f} s"}
    return ", ".join(form(entry[name]) for name, form in shown.items() if name in entry)
