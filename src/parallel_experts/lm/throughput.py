"""Table 6: training throughput and memory of the Transformer and the recurrent allocations (paper App. H.2).

The complete update is timed, dataloader included: each update reads its windows from the real token shards
(`results/lm/tokens`) through the training sampler (`Trainer.batches`, `shards.stream_windows`), warms up
the recurrent state at a shard's start as `lm.train.train` does, and runs the compiled optimiser update, all
of it inside the timer. Every context C of the grid keeps the tokens per update fixed (`batch_tokens`), so
B = batch_tokens / C: the Transformer trains on B independent sequences of C tokens, the recurrent model on
B streams with segment C and cache M = C (rematerialised token steps), in one microbatch, its streams split over
the devices of `resources.bench.gpus` (the paper: four H100s; `lm.train.Trainer`'s data parallelism). The cells take
turns over `rounds` rounds, each in a new random order; a turn runs `steps` updates from a fresh state, and the median
of its updates after the first (which touches the fresh state's memory) is that round's time. The median over rounds
gives tokens/s, of all devices together; the rounds are what the claims page tests a ratio over.

Memory, per device: XLA's planned bytes of the compiled update (arguments + temporaries + outputs − aliased)
everywhere, and on devices that report it (GPUs) the first device's measured peak, each (allocation, C) then in a
fresh process so that the peak is its own. An update planned above the device's memory (its `bytes_limit`, or the
host's RAM on CPU, or `memory_limit_gb`) is reported as OOM without running, and so is one that runs out of memory.
FLOPs per update (XLA's count with every scan unrolled) and their fraction of the devices' fp32 matmul peak measured
beside them are counted for contexts up to `flops_up_to` (0: none; the unrolled trace is slow at long C).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np
import xarray as xr

from parallel_experts.core.benchmarking import (counted_flops, host_memory, interleaved, machine_info, matmul_peak,
                                                unrolled_scans)
from parallel_experts.core.tables import fmt
from parallel_experts.lm import experiment, systems
from parallel_experts.lm import shards as shard_io
from parallel_experts.lm.settings import ModelConfig
from parallel_experts.lm.train import Trainer, device_mesh


def trainer(model_config: ModelConfig, context: int, batch_tokens: int, devices: int = 1):
    """The training job (`lm.train.Trainer`) of one cell (`train_config`), its streams split over `devices`."""
    return Trainer(model_config, systems.train_config(model_config, context, batch_tokens), device_mesh(devices))


def timed_updates(job, update, carry, shards: Sequence[np.ndarray], steps: int
                  ) -> Iterator[tuple[float, np.ndarray]]:
    """(seconds, the inputs it trained on) of each of `steps` updates, read and run as `lm.train.train` does:
    the batch from the sampler, warm-up windows advanced at a shard's start, the update, all in the timer."""
    batches = job.batches(shards, (0, 0, 0))
    for _ in range(steps):
        start = time.perf_counter()
        position, inputs, labels, reset = next(batches)
        while position[2] < job.config.warmup:
            carry = job.advance(carry, inputs, reset)
            position, inputs, labels, reset = next(batches)
        carry, metrics = update(carry, inputs, labels, reset)
        jax.block_until_ready(metrics["loss"])
        yield time.perf_counter() - start, inputs


def device_memory() -> int:
    """What one device can hold: its allocator's limit where it reports one (GPUs), else the host's RAM."""
    stats = jax.devices()[0].memory_stats() or {}
    return int(stats.get("bytes_limit") or host_memory())


def planned_bytes(compiled) -> int:
    m = compiled.memory_analysis()
    return int(m.argument_size_in_bytes + m.temp_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes)


def training_shards(tokens: str | Path, vocab: int) -> list[np.ndarray]:
    """The training shards of `tokens` as a model with `vocab` ids reads them."""
    vocabulary, _, training = shard_io.model_shards(tokens, vocab)
    return [shard_io.load_tokens(path, vocabulary) for path in training]


@dataclass(frozen=True)
class Cell:
    """One (allocation, C) of Table 6, compiled: its training job, its update and the shards it reads."""

    job: Trainer
    update: Any  # the compiled update (state donated)
    shards: Sequence[np.ndarray]
    arguments: tuple  # the update's argument shapes, for counting its FLOPs

    @classmethod
    def compiled(cls, model_config: ModelConfig, context: int, batch_tokens: int, shards: Sequence[np.ndarray],
                 devices: int = 1) -> Cell:
        job = trainer(model_config, context, batch_tokens, devices)
        arguments = (job.init(), *next(job.batches(shards, (0, 0, 0)))[1:])
        update = jax.jit(job._update, donate_argnums=0).lower(*arguments).compile()
        shapes = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype) if hasattr(x, "shape") else x, arguments)
        return cls(job, update, shards, shapes)

    def run(self, steps: int) -> list[float]:
        """Seconds of each of `steps` updates from a fresh state, freed after: one cell's state on the devices at a
        time, however many cells take turns."""
        return [seconds for seconds, _ in timed_updates(self.job, self.update, self.job.init(), self.shards, steps)]


def measure(model_config: ModelConfig, context: int, spec: Mapping, shards: Sequence[np.ndarray],
            memory_limit: int, devices: int = 1) -> tuple[dict, Cell | None]:
    """One cell's plan, and unless it cannot fit on each of `devices`, its peak memory over PEAK_UPDATES updates:
    (what was found, the compiled cell to time, or None where it is out of memory)."""
    cell = Cell.compiled(model_config, context, spec["batch_tokens"], shards, devices)
    result = {"planned_bytes": planned_bytes(cell.update), "flops_per_update": np.nan}
    if context <= spec["flops_up_to"]:
        with unrolled_scans():
            result["flops_per_update"] = counted_flops(cell.job._update, *cell.arguments)
    if result["planned_bytes"] > memory_limit:
        return result | {"oom": True}, None
    try:
        cell.run(systems.PEAK_UPDATES)
    except jax.errors.JaxRuntimeError as error:  # the device ran out of memory after all
        if "RESOURCE_EXHAUSTED" not in str(error):
            raise
        return result | {"oom": True}, None
    stats = jax.devices()[0].memory_stats() or {}
    return result | {"oom": False, "peak_bytes": stats.get("peak_bytes_in_use", np.nan)}, cell


def _measured(model_config: ModelConfig, context: int, spec: Mapping, tokens: str, memory_limit: int,
              devices: int = 1) -> dict:
    return measure(model_config, context, spec, training_shards(tokens, model_config.vocab), memory_limit,
                   devices)[0]


def _isolated(*args) -> dict:
    """`measure` in a fresh process, of the shards of a folder: its device's peak memory is this cell's own."""
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_measured, *args).result()


def run(lm: experiment.Families, config: Mapping, tokens: str | Path, progress=print, isolate: bool | None = None,
        batch_tokens: int | None = None, devices: int | None = None) -> xr.Dataset:
    """Table 6 over the config's contexts (`lm.throughput` of `lm`'s settings; `config`: the validated mapping, which
    the dataset records): every cell planned and its memory measured (a process
    per cell where the device reports its peak memory, or when `isolate` says so), then `rounds` rounds in which
    every cell that fits runs `steps` updates, the cells in a new random order each round
    (`benchmarking.interleaved`), so that a drift of the machine's load falls on every row alike and the claims page
    can test a ratio over rounds. `batch_tokens` per update and `devices` instead of the config's, where given."""
    tables = lm.settings.tables
    if batch_tokens:  # the effective table, which the dataset records in its config
        tables = tables | {"throughput": {**tables["throughput"], "batch_tokens": batch_tokens}}
        config = {**config, "lm": {**config["lm"], "throughput": dict(tables["throughput"])}}
    spec = systems.throughput_settings(tables)
    devices = devices or lm.bench_devices
    isolate = bool(jax.devices()[0].memory_stats()) if isolate is None else isolate
    limit = int(spec["memory_limit_gb"] * 2**30) if "memory_limit_gb" in spec else device_memory()
    contexts, rows = list(spec["contexts"]), systems.selected(systems.THROUGHPUT_ROWS, spec)
    shape = (len(rows), len(contexts))
    planned, peak, flops, oom = np.zeros(shape), np.full(shape, np.nan), np.full(shape, np.nan), np.zeros(shape, bool)
    shards = training_shards(tokens, lm.settings.vocabulary)
    cells = {}
    for i, row in enumerate(rows):
        for j, context in enumerate(contexts):
            model = systems.model_config(row, spec["width"], lm.settings.shape)
            if isolate:
                found = _isolated(model, context, spec, str(tokens), limit, devices)
                cell = None if found["oom"] else Cell.compiled(model, context, spec["batch_tokens"], shards, devices)
            else:
                found, cell = measure(model, context, spec, shards, limit, devices)
            planned[i, j], flops[i, j], oom[i, j] = found["planned_bytes"], found["flops_per_update"], found["oom"]
            peak[i, j] = found.get("peak_bytes", np.nan)
            if cell is not None:
                cells[i, j] = cell
            progress(f"{systems.label(row)}  C={context}: {'OOM, ' * found['oom']}planned "
                     f"{found['planned_bytes'] / 2**20:,.0f} MiB per device")
    peak_start = matmul_peak(1024, 3)
    timed = list(cells)
    found, place, load = interleaved(len(timed), spec["rounds"], lambda c: cells[timed[c]].run(spec["steps"]))
    seconds = np.full((*shape, spec["rounds"], spec["steps"]), np.nan)
    position = np.full((*shape, spec["rounds"]), -1)
    for c, cell in enumerate(timed):
        seconds[cell], position[cell] = found[c], place[c]
    peak_end = matmul_peak(1024, 3)
    round_seconds = np.median(seconds[..., systems.SKIPPED:], -1)
    tokens_per_s = spec["batch_tokens"] / np.median(round_seconds, -1)
    for (i, j) in timed:
        progress(f"{systems.label(rows[i])}  C={contexts[j]}: {fmt(tokens_per_s[i, j])} tokens/s on {devices} "
                 "device(s)")
    dims, by_round = ("allocation", "context"), ("allocation", "context", "round")
    matmul = 0.5 * (peak_start["gflops"] + peak_end["gflops"])
    variables = {
        "tokens_per_s": (dims, tokens_per_s, {"long_name": f"training tokens per second (median over {spec['rounds']} "
                                              "rounds of each round's median update, dataloader included)",
                                              "units": "tokens/s"}),
        "update_seconds": ((*by_round, "update"), seconds, {"long_name": "time of each update, read to result (the "
                                                            f"first {systems.SKIPPED} of a round untimed)",
                                                            "units": "s"}),
        "round_seconds": (by_round, round_seconds, {"long_name": "median timed update of each round", "units": "s"}),
        "position": (by_round, position, {"long_name": "the cell's place in its round's random order (-1: OOM)"}),
        "load": ("round", load, {"long_name": "1-minute load average at the round's start"}),
        "planned_bytes": (dims, planned, {"long_name": "XLA's planned memory of the compiled update per device",
                                          "units": "B"}),
        "peak_bytes": (dims, peak, {"long_name": "the first device's measured peak memory in use (where reported)",
                                    "units": "B"}),
        "oom": (dims, oom, {"long_name": f"out of memory: planned above {limit / 2**30:.1f} GiB, or ran out"}),
        "flops_per_update": (dims, flops, {"long_name": "XLA-counted FLOPs of one update, every scan unrolled",
                                           "units": "FLOP"}),
        "fraction_of_peak": (dims, flops * tokens_per_s / spec["batch_tokens"] / (matmul * 1e9 * devices),
                             {"long_name": "achieved FLOP/s over the fp32 matmul peak measured beside (one "
                                           "device's, times the devices)",
                              "units": "1"}),
    }
    coords = {"context": contexts, "batch": ("context", [spec["batch_tokens"] // c for c in contexts]),
              "update": np.arange(spec["steps"])}
    ds = systems.dataset(rows, variables, coords, config, spec | {"memory_limit_bytes": limit, "devices": devices},
                         machine_info())
    ds["vs_transformer"] = systems.ratio_to_transformer(ds["tokens_per_s"]).assign_attrs(
        long_name="tokens/s relative to the Transformer L16 E1 at the same C", units="1")
    return ds.assign_attrs(matmul_peak_gflops_start=peak_start["gflops"], matmul_peak_gflops_end=peak_end["gflops"])
