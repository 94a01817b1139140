"""A compiled program of a config's DAG, described so that it can be lowered without allocating anything: the
function as the job jits it and its arguments as shapes (`jax.ShapeDtypeStruct`, with their sharding where the job
shards them). Each domain lists its programs (`sokoban.programs`, `lm.programs`); `rehearsal` compiles them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import equinox as eqx
import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec


@dataclass
class Program:
    """One distinct program: `key` says what defines it (two jobs with the same key run the same program), `jobs`
    the (rule, wildcards) of every job that runs it, as the planner names them; `build()` returns (the function,
    its abstract arguments, the parameter count of the model it runs)."""

    key: str
    rule: str
    build: Callable[[], tuple[Callable, tuple, int]]
    devices: int = 1  # the devices the job splits its data over
    donate: tuple[int, ...] = ()  # arguments the job donates (their buffers become the outputs: XLA's aliases)
    jobs: list[tuple[str, str]] = field(default_factory=list)


def collect(programs: Iterable[tuple[Program, tuple[str, str]]]) -> list[Program]:
    """(program, job) pairs -> the distinct programs, in first-seen order, each with every job that runs it."""
    found: dict[str, Program] = {}
    for program, job in programs:
        kept = found.setdefault(program.key, program)
        if job not in kept.jobs:
            kept.jobs.append(job)
    return list(found.values())


def abstract(tree):
    """A pytree's arrays as shapes (`jax.ShapeDtypeStruct`), its other leaves as they are."""
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype) if eqx.is_array(x) else x, tree)


def split(module) -> tuple:
    """An abstract module (`eqx.filter_eval_shape`) as (its array shapes, the rest): a jitted function takes the
    first and `eqx.combine`s it with the second, as the jobs' `eqx.filter_jit` does."""
    return eqx.partition(module, lambda x: isinstance(x, jax.ShapeDtypeStruct))


def parameter_count(params) -> int:
    """The number of parameters (array elements) of a pytree of arrays or shapes."""
    return sum(int(x.size) for x in jax.tree.leaves(params) if hasattr(x, "size"))


def sharded(shape: jax.ShapeDtypeStruct, devices: int, axis: int | None) -> jax.ShapeDtypeStruct:
    """`shape` on the first `devices` devices, split along `axis` (a job's data-parallel split) or, with None,
    replicated."""
    spec = PartitionSpec() if axis is None else PartitionSpec(*([None] * axis), "data")
    mesh = Mesh(jax.devices()[:devices], ("data",))
    return jax.ShapeDtypeStruct(shape.shape, shape.dtype, sharding=NamedSharding(mesh, spec))
