"""Benchmark helpers: XLA FLOP counts against hand counts, unrolled scans counted in full."""

import threading

import jax
import jax.numpy as jnp

from parallel_experts.core import benchmarking
from parallel_experts.core.benchmarking import flops_of, unrolled_scans


def test_measured_flops_of_a_matmul_are_two_m_k_n():
    a, b = jnp.ones((32, 48)), jnp.ones((48, 16))
    assert flops_of(jax.jit(jnp.matmul).lower(a, b).compile()) == 2 * 32 * 48 * 16


def test_unrolled_scans_count_every_iteration():
    def ten_matmuls():  # a new function each time, so that no trace cache hands back the other program
        return lambda x: jax.lax.scan(lambda c, _: (c @ x, None), x, None, length=10)[0]

    x = jnp.ones((8, 8))
    looped = flops_of(jax.jit(ten_matmuls()).lower(x))
    with unrolled_scans():
        unrolled = flops_of(jax.jit(ten_matmuls()).lower(x))
    assert unrolled == 10 * 2 * 8**3 and looped < 2 * 2 * 8**3  # XLA counts a loop body once


def test_cells_are_prepared_one_per_core_at_once_in_their_order():
    cores = benchmarking.usable_cpus()
    meeting = threading.Barrier(cores, timeout=30)  # broken unless `cores` cells are prepared at the same time

    def prepare(item):
        meeting.wait()
        return item * 10

    assert benchmarking.prepared(prepare, list(range(cores))) == [10 * i for i in range(cores)]
