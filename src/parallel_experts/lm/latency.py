"""Table 5: per-token decode latency of the Transformer and the recurrent allocations (paper App. H.1).

For each row, context C and batch B (streams): random weights, a prompt of C random tokens per stream pre-fills
the caches (`decode.prefill`: the Transformer's C-slot ring per layer and expert, the recurrent model's full
rolling cache M = C per level), then `decode.generate` runs `steps` greedy steps in one jitted `lax.scan`,
its rings donated and carried from call to call. After `warmup` calls, one timed call per round over `rounds`
rounds gives the median milliseconds per token (one decode step of all B streams); the single-step call (one jitted
greedy step) is timed the same way beside it. The cells take turns in a random order each round (see `run`). Ratios
are to the Transformer at the same C and B.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import equinox as eqx
import jax
import numpy as np
import xarray as xr

from parallel_experts.core.benchmarking import interleaved, machine_info, prepared, time_calls
from parallel_experts.lm import decode, experiment, models, systems


def prepare(model_config: models.ModelConfig, context: int, batch: int, steps: int, warmup: int) -> dict:
    """Pre-fill `context` tokens for `batch` streams, compile and warm up: the decode call (`steps` greedy steps)
    and the single-step call, each carrying its rings on, and the time of the first decode call."""
    model = models.build(model_config, jax.random.key(0))
    prompts = jax.random.randint(jax.random.key(1), (batch, context), 0, model_config.vocab)
    last, rings = eqx.filter_jit(decode.prefill_batch)(model, prompts, context)
    state = {"rings": rings, "tokens": decode.argmax(last)}
    generate = eqx.filter_jit(decode.generate, donate="all-except-first")
    single = eqx.filter_jit(decode.greedy_step, donate="all-except-first")

    def decode_call():
        state["rings"], state["tokens"], decoded = generate(model, state["rings"], state["tokens"], steps)
        return decoded

    def step_call():
        state["rings"], state["tokens"] = single(model, state["rings"], state["tokens"])
        return state["tokens"]

    first = time_calls(decode_call, 1)[0]
    time_calls(decode_call, warmup - 1)
    time_calls(step_call, warmup)
    return {"decode": decode_call, "step": step_call, "first_call": first}


def run(lm: experiment.Families, config: Mapping, progress=print) -> xr.Dataset:
    """Table 5 over the config's contexts and batches (`lm.latency` of `lm`'s settings; `config`: the validated
    mapping, which the dataset records): every cell is prepared first, then `rounds`
    rounds each time one decode call and one single-step call of every cell, the cells in a new random order each
    round (`benchmarking.interleaved`), so that a shared machine's changing load falls on every row alike and the
    claims page can test a ratio over rounds."""
    spec = systems.latency_settings(lm.settings.tables)
    contexts, batches = list(spec["contexts"]), list(spec["batches"])
    rows = systems.selected(systems.LATENCY_ROWS, spec)
    cells = list(itertools.product(range(len(rows)), range(len(contexts)), range(len(batches))))
    shape = (len(rows), len(contexts), len(batches))
    calls = dict(zip(cells, prepared(lambda cell: prepare(
        systems.model_config(rows[cell[0]], spec["width"], lm.settings.shape), contexts[cell[1]], batches[cell[2]],
        spec["steps"], spec["warmup"]), cells)))
    compile_s = np.zeros(shape)
    for i, j, k in cells:
        compile_s[i, j, k] = calls[i, j, k]["first_call"]
        progress(f"{systems.label(rows[i])}  C={contexts[j]}  B={batches[k]}: prepared")
    found, place, load = interleaved(len(cells), spec["rounds"], lambda c: (
        time_calls(calls[cells[c]]["decode"], 1)[0], time_calls(calls[cells[c]]["step"], 1)[0]))
    decode_s, step_s, position = (np.zeros((*shape, spec["rounds"]), dtype) for dtype in (float, float, int))
    for c, cell in enumerate(cells):
        decode_s[cell], step_s[cell] = np.array(found[c]).T
        position[cell] = place[c]
    ms = 1e3 * np.median(decode_s, -1) / spec["steps"]
    dims, timed = ("allocation", "context", "batch"), ("allocation", "context", "batch", "round")
    variables = {
        "ms_per_token": (dims, ms, {"long_name": f"median decode time per token ({spec['steps']}-step jitted scan,"
                                    f" {spec['rounds']} rounds after {spec['warmup']} warm-ups)", "units": "ms"}),
        "step_ms": (dims, 1e3 * np.median(step_s, -1), {"long_name": "median time of one jitted greedy step",
                                                       "units": "ms"}),
        "decode_seconds": (timed, decode_s, {"long_name": "time of the decode call of each round", "units": "s"}),
        "step_seconds": (timed, step_s, {"long_name": "time of the single-step call of each round", "units": "s"}),
        "position": (timed, position, {"long_name": "the cell's place in its round's random order"}),
        "load": ("round", load, {"long_name": "1-minute load average at the round's start"}),
        "first_call_seconds": (dims, compile_s, {"long_name": "first decode call, compilation included (the "
                                                 "cells prepared side by side, one per core)",
                                                 "units": "s"}),
    }
    ds = systems.dataset(rows, variables, {"context": contexts, "batch": batches}, config, spec, machine_info())
    ds["ratio"] = systems.ratio_to_transformer(ds["ms_per_token"]).assign_attrs(
        long_name="decode time per token relative to the Transformer L16 E1 at the same C and B", units="1")
    return ds
