"""Benchmark helpers shared by the Sokoban and language-model benchmarks: timing, matmul peak, FLOP counts.

Speeds on a shared machine drift, so every benchmark measures its own matmul peak side by side and quotes
ratios. XLA's cost analysis counts the body of a while loop once, whatever its trip count; `unrolled_scans`
traces a program with every `lax.scan` unrolled so that the lowered program's count is the real one.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np

T, R = TypeVar("T"), TypeVar("R")


def time_calls(call, repeats: int, min_time: float = 0.0, max_repeats: int | None = None,
                cpu: list[float] | None = None) -> list[float]:
    """Wall times of `repeats` calls of `call()` (each blocked until ready); more while their sum < min_time.
    `cpu`, if given, receives the process CPU time (all threads) of each call."""
    max_repeats = max(repeats, max_repeats or repeats)
    times: list[float] = []
    while len(times) < repeats or (sum(times) < min_time and len(times) < max_repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        jax.block_until_ready(call())
        times.append(time.perf_counter() - start)
        if cpu is not None:
            cpu.append(time.process_time() - start_cpu)
    return times


def interleaved(cells: int, rounds: int, visit: Callable[[int], object], rng: np.random.Generator | None = None
                ) -> tuple[list[list], np.ndarray, np.ndarray]:
    """Visit each of `cells` once per round, in a new random order every round: a drift of the machine's load then
    falls on every cell alike in expectation, where a cell always visited first would carry the drift as its own
    effect, and the rounds are independent repeats that a test over rounds can count. `visit(cell)` measures one
    cell; `rng` draws the orders (seed 0 where None: the same orders on every machine). Returns the results
    [cell][round], each cell's place in each round's order (cells, rounds) and the 1-minute load average at each
    round's start."""
    rng = np.random.default_rng(0) if rng is None else rng
    results = [[None] * rounds for _ in range(cells)]
    place, load = np.zeros((cells, rounds), int), np.zeros(rounds)
    for r in range(rounds):
        load[r] = os.getloadavg()[0]
        for position, cell in enumerate(rng.permutation(cells)):
            place[cell, r] = position
            results[cell][r] = visit(int(cell))
    return results, place, load


def prepared(prepare: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """`prepare(item)` of every item, as many at once as this process has cores (threads: XLA compiles outside the
    GIL), in the order of `items`. A timed job holds the whole machine, and XLA compiles a program on one core, so
    preparing its cells one after another left the other cores idle for most of the job (Table 5 of the demo used
    1.1 of its 2 cores in 100 s). Nothing is timed while cells are prepared."""
    with concurrent.futures.ThreadPoolExecutor(usable_cpus()) as pool:
        return list(pool.map(prepare, items))


def flops_of(program) -> float:
    """FLOPs of a lowered or compiled JAX program (`jax.jit(f).lower(...)`, `.compile()`), as XLA's cost
    analysis counts them: a loop body once, whatever its trip count (see `unrolled_scans`)."""
    analysis = program.cost_analysis()
    if isinstance(analysis, Sequence):  # older jax: one dict per device program
        analysis = analysis[0]
    if not analysis or "flops" not in analysis:
        raise RuntimeError("XLA gave no cost analysis of this program (a GPU's lowering has none): count it with "
                           "counted_flops, which lowers for the CPU")
    return float(analysis["flops"])


def counted_flops(function, *args) -> float:
    """XLA-counted FLOPs of `jax.jit(function)` at the shapes of `args`, lowered for the CPU whatever the default
    backend: a count of what the program computes on any device, the same on a GPU node as on a laptop (on an H200,
    JAX 0.11.2's lowering for the GPU has no cost analysis; one whose inputs sit on the CPU has)."""
    cpu = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
    shapes = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=cpu) if hasattr(x, "shape")
                          else x, args)
    return flops_of(jax.jit(function).lower(*shapes))


def matmul_peak(size: int = 2048, repeats: int = 5) -> dict:
    """fp32 GFLOP/s of a jitted size×size matmul: median over `repeats` calls after one warm-up call."""
    a = jax.random.normal(jax.random.PRNGKey(0), (size, size), jnp.float32)
    b = jax.random.normal(jax.random.PRNGKey(1), (size, size), jnp.float32)
    matmul = jax.jit(jnp.matmul)
    jax.block_until_ready(matmul(a, b))
    cpu: list[float] = []
    times = time_calls(lambda: matmul(a, b), repeats, cpu=cpu)
    flops = 2.0 * size**3
    return {"size": size, "repeats": repeats, "seconds": times, "cpu_seconds": cpu, "flops": flops,
            "gflops": flops / statistics.median(times) / 1e9, "gflops_best": flops / min(times) / 1e9,
            "gflops_cpu": flops / (statistics.median(cpu) / usable_cpus()) / 1e9}



@contextlib.contextmanager
def unrolled_scans():
    """While active, every `jax.lax.scan` call (looked up as an attribute, as our modules do) is fully unrolled,
    whatever `unroll` its caller passes."""
    original = jax.lax.scan

    @functools.wraps(original)
    def scan(*args, **kwargs):
        return original(*args, **(kwargs | {"unroll": True}))

    jax.lax.scan = scan
    try:
        yield
    finally:
        jax.lax.scan = original



def host_memory() -> int:
    """This machine's RAM in bytes."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def usable_cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def machine_info() -> dict:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"host": platform.node(), "platform": platform.platform(), "python": platform.python_version(),
            "cpu": model or platform.processor(), "cpu_count": os.cpu_count(), "usable_cpus": usable_cpus(),
            "jax": jax.__version__, "jaxlib": jaxlib.__version__, "backend": jax.default_backend(),
            "devices": [str(d) for d in jax.devices()], "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
            "loadavg_start": list(os.getloadavg())}
