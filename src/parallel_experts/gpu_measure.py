"""The sections of the GPU check (`gpu_check`), each measured in a process of its own.

A training section compiles the job's program as the rehearsal does (`rehearsal.programs.compiled`: the domain's
program builder, the job's donation) and runs the executable on concrete arguments of the same shapes: one call to
warm up, then timed calls (each blocked until ready; compiling excluded). The latency section is Table 5's job itself
(`lm.latency.run`) at one context and batch. Each section yields what it found stage by stage, so that a section
that fails part-way still reports its compile and memory plan.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import statistics
import traceback
from collections.abc import Iterator, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from parallel_experts.analysis.systems import paper_table
from parallel_experts.core import atomic, compile_cache, traces
from parallel_experts.core.benchmarking import machine_info, time_calls
from parallel_experts.lm import flops as lm_flops
from parallel_experts.lm import latency, systems
from parallel_experts.lm import programs as lm_programs
from parallel_experts.lm.train import Trainer as LMTrainer
from parallel_experts.planning import costs, lm_time
from parallel_experts.rehearsal import programs as rehearsal
from parallel_experts.sokoban import experiment as sokoban_experiment
from parallel_experts.sokoban import flops as sokoban_flops
from parallel_experts.sokoban import generator
from parallel_experts.sokoban import programs as sokoban_programs
from parallel_experts.sokoban.settings import SokobanSettings
from parallel_experts.sokoban.train import Trainer as SokobanTrainer
from parallel_experts.study import Study

TIMING_SECONDS = 20  # timed calls of an update: at least two, more while they sum to less, at most TIMED_CALLS
TIMED_CALLS = 5
STAND_INS = 64  # generated Boxoban-like levels tiled to a Boxoban split's size (no download on a GPU node)


def run(study: Study, spec: Mapping, out: str) -> None:
    """Measure one section (`spec`, from `gpu_check.sections`) and write what it found to `out` (JSON) after
    every stage; an error ends it with its message beside what was found before."""
    compile_cache.off()  # compile seconds are measured, not read from a cache
    precision = jax.config.jax_default_matmul_precision  # type: ignore[attr-defined]  # a flag JAX's stubs omit
    found: dict = {"machine": machine_info() | {"device_kind": jax.devices()[0].device_kind,
                                                "matmul_precision": precision}}
    measure = {"sokoban_train": sokoban_update, "lm_train": lm_update, "lm_table6": table6_update,
               "lm_latency": decode_latency}
    try:
        for stage in measure[spec["section"]](study, spec):
            found |= stage
            atomic.write_text(out, json.dumps(found, indent=1))
    except Exception as error:  # an out-of-memory, a failed compile: this section's result, not the check's end
        traceback.print_exc()
        found["error"] = f"{type(error).__name__}: {str(error).strip()[:600]}"
    atomic.write_text(out, json.dumps(found | {"ok": "error" not in found}, indent=1))


# ------------------------------------------------------------------------------------------- training updates


def sokoban_update(study: Study, spec: Mapping) -> Iterator[dict]:
    """The job's compiled call of a Sokoban run (all its seeds) with `spec["updates"]` updates instead of the job's
    `log_interval`: the same update under a shorter `lax.scan`."""
    run = study.sokoban.by_id[spec["run"]]
    levels, where = level_table(study.sokoban.settings)
    length = min(spec["updates"], run.train.log_interval)
    program = sokoban_programs.train_update(run.agent, run.train, len(run.seeds), len(levels), length)
    job = sokoban_programs.train_update(run.agent, run.train, len(run.seeds), len(levels), run.train.log_interval)
    yield {"program_key": program.key, "job_program_key": job.key, "seeds": len(run.seeds),
           "updates_per_call": length, "levels": where, "share_of_job_update": 1.0}

    def start(executable):
        trainer = SokobanTrainer(run.agent, run.train, levels)
        state = {"carry": trainer.init(list(run.seeds))}

        def call():
            state["carry"], metrics = executable(trainer.levels, state["carry"])
            state["loss"] = metrics["loss"]
            return state["carry"]
        return call, lambda: state["loss"]

    yield from timed_update(program, start, length, planner_flops(run), spec.get("trace"))


def lm_update(study: Study, spec: Mapping) -> Iterator[dict]:
    """One optimiser update of an LM run, one GPU's share of it: the job splits its streams over the GPUs of
    `resources.lm_train`, so one device of it runs every group of microbatch / GPUs streams (the per-device shapes
    of the job's program, without its gradient all-reduce)."""
    run, devices = study.lm.by_id[spec["run"]], study.lm.devices
    train = one_device_share(run.train, devices)
    program = lm_programs.train_update(run.model, train, 1)
    yield {"program_key": program.key, "job_program_key": lm_programs.train_update(run.model, run.train, devices).key,
           "job_devices": devices, "tokens_per_update": train.batch_tokens, "groups": train.groups,
           "microbatch": train.microbatch, "sequence": train.sequence, "updates_per_call": 1}

    share = train.batch_tokens / run.train.batch_tokens
    yield {"share_of_job_update": share}
    yield from timed_update(program, lm_start(run.model, train, donated=True), 1, planner_flops(run) * share,
                            spec.get("trace"))


def table6_update(study: Study, spec: Mapping) -> Iterator[dict]:
    """One GPU's share of an update of a cell of our Table 6 job (`lm.throughput`: the config's width and tokens per
    update, the streams split over `resources.bench.gpus`; the carry donated), and where the cell is the authors'
    own (`planning.lm_time.authors_per_gpu`), their tokens per second per GPU beside ours. `spec["attention"]`, where
    given, replaces the model's."""
    row, context = tuple(spec["row"]), spec["context"]
    model, job = systems.throughput_cell(study.lm.settings.tables, study.lm.settings.shape, row, context)
    model = dataclasses.replace(model, attention=spec.get("attention", model.attention))
    devices = study.lm.bench_devices
    train = one_device_share(job, devices)
    authors = lm_time.authors_per_gpu(row, context, model, job, devices)
    program = lm_programs.train_update(model, train, 1, rule="lm_throughput")
    flops = lm_time.training(model, train, 1, lm_flops.forward(model, context)).flops
    yield {"program_key": program.key, "job_devices": devices, "tokens_per_update": train.batch_tokens,
           "streams": train.microbatch, "attention": model.attention, "authors_tokens_per_second": authors}
    for stage in timed_update(program, lm_start(model, train, donated=False), 1, flops, spec.get("trace")):
        if "seconds_per_update" in stage:
            ours = train.batch_tokens / stage["seconds_per_update"]
            stage |= {"tokens_per_second": ours, "ours_over_authors": ours / authors if authors else None}
        yield stage


def lm_start(model, train, donated: bool):
    """`start` for `timed_update` of an LM update: a fresh batch per call where the update donates it (the training
    job's), made before the timing; one batch for every call where it does not (Table 6's)."""
    def start(executable):
        trainer = LMTrainer(model, train)
        state = {"carry": trainer.init()}
        keys = range(TIMED_CALLS + 2) if donated else [0]  # the warm-up, the timed calls and the traced call
        made = [lm_batch(train, model.vocab, jax.random.key(i)) for i in keys]
        batches = iter(made) if donated else itertools.repeat(made[0])

        def call():
            state["carry"], metrics = executable(state["carry"], *next(batches))
            state["loss"] = metrics["loss"]
            return state["carry"], metrics
        return call, lambda: state["loss"]
    return start


def timed_update(program, start, updates: int, flops: float, trace: str | None = None) -> Iterator[dict]:
    """Compile `program` (XLA's plan on this device), run it through `start(executable)` -> (call, loss): one call
    to warm up and the timed calls of `updates` updates each (`flops` each, as the planner counts them); with
    `trace`, one more call under JAX's profiler, its trace kept in that folder."""
    record, executable = rehearsal.compiled(program)
    if executable is None:
        raise RuntimeError(record["error"])
    yield {"compile_seconds": record["compile_seconds"], "lower_seconds": record["lower_seconds"],
           "parameters": record["parameters"], "memory": record["memory"], "peak_bytes": record["peak_bytes"],
           "backend": record["backend"]}
    call, loss = start(executable)
    jax.block_until_ready(call())
    seconds = time_calls(call, 2, TIMING_SECONDS, TIMED_CALLS)
    losses = np.asarray(loss(), np.float64)
    yield {"call_seconds": seconds, "seconds_per_update": statistics.median(seconds) / updates,
           "loss": losses.tolist(), "loss_finite": bool(np.isfinite(losses).all()),
           "device_peak_bytes": device_stat("peak_bytes_in_use"), "device_bytes_limit": device_stat("bytes_limit")}
    yield {"flops_per_update": flops}
    if trace:
        with jax.profiler.trace(trace, create_perfetto_trace=True):
            jax.block_until_ready(call())
        yield {"trace_summary": traces.summary(trace)}


def planner_flops(run) -> float:
    """FLOPs of one training update of `run` as the plan prices its job (`planning.costs`), its model counted."""
    if isinstance(run, sokoban_experiment.Run):
        job = costs.sokoban_train_job(run, sokoban_flops.forward(run.agent, run.train.view))
        return job.flops / run.train.num_updates
    return costs.lm_train_job(run, lm_flops.forward(run.model, run.window), gpus=1).flops / run.train.updates  # any GPUs


def level_table(sokoban: SokobanSettings) -> tuple[np.ndarray, str]:
    """The training table at the config's size: its own levels where it generates them, else generated Boxoban-like
    levels (10×10, 4 boxes) tiled to the split's size: the program depends on the table's shape only."""
    source = sokoban.levels["train"]
    if "generate" in source:
        return sokoban_experiment.level_set(source, sokoban.boxoban).levels, "the config's"
    count = sokoban_experiment.level_count(source)
    levels = generator.generate_levels(STAND_INS, seed=0)
    return np.resize(levels, (count, *levels.shape[1:])), f"{STAND_INS} generated levels tiled to {count}"


def one_device_share(train, devices: int):
    """`train` of one of its `devices`: the update's, the microbatch's and the run's tokens divided by them."""
    return dataclasses.replace(train, batch_tokens=train.batch_tokens // devices,
                               microbatch=train.microbatch // devices, train_tokens=train.train_tokens // devices)


def lm_batch(train, vocab: int, key) -> tuple:
    """Random windows of one update, shaped as `Trainer.batches` gives them: inputs, labels, reset flags."""
    tokens = jax.random.randint(key, (train.groups, train.microbatch, train.sequence + 1), 0, vocab, jnp.int32)
    reset = jnp.zeros((train.groups, train.microbatch), bool)
    return jax.block_until_ready((tokens[..., :-1], tokens[..., 1:], reset))


def device_stat(name: str) -> int | None:
    """One of the first device's memory statistics, where it reports them (GPUs; not every CPU backend)."""
    stats = jax.devices()[0].memory_stats() or {}
    return int(stats[name]) if name in stats else None


# ------------------------------------------------------------------------------------------------- Table 5


def decode_latency(study: Study, spec: Mapping) -> Iterator[dict]:
    """Table 5's job (`lm.latency.run`) for the recurrent L1 E16 and the Transformer L16 E1 at one context and
    batch, with the paper's figures where it reports that context (four H100s, B = 16 in all: 4 per GPU)."""
    table = {**study.lm.settings.tables["latency"], "contexts": [spec["context"]], "batches": [spec["batch"]],
             "rows": [systems.label(systems.SHALLOWEST)]}
    one_cell = dataclasses.replace(study.lm, settings=dataclasses.replace(study.lm.settings, latency=table))
    ds = latency.run(one_cell, study.config, progress=lambda line: print(line, flush=True))
    cell = {"context": spec["context"], "batch": spec["batch"]}
    labels = [systems.label(systems.TRANSFORMER), systems.label(systems.SHALLOWEST)]

    def per_row(name):
        return {label: float(ds[name].sel(allocation=label, **cell)) for label in labels}
    found = {**cell, "width": table["width"], "settings": systems.latency_settings(one_cell.settings.tables),
             "ms_per_token": per_row("ms_per_token"), "step_ms": per_row("step_ms"),
             "first_call_seconds": per_row("first_call_seconds"),
             "ratio": float(ds["ratio"].sel(allocation=labels[1], **cell))}
    paper = paper_table("table5_latency", "ms_per_token")["ms_per_token"]
    if all((label, spec["context"]) in paper.index for label in labels):
        theirs = {label: float(paper[label, spec["context"]]) for label in labels}
        found["paper"] = {"ms_per_token": theirs, "ratio": theirs[labels[1]] / theirs[labels[0]],
                          "note": "paper Table 5: four H100s, B = 16 in all (4 per GPU)"}
    yield found
