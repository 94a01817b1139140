"""XLA's FLOP counts kept on disk beside the compile cache, so that each program is lowered and counted once per
machine, not once per process: the paper's plan lowers about a hundred models (38 of its 42 seconds), and the
workflow, `power` and the tests plan the same programs again and again.

An entry is one small JSON file in `<compile cache>/flop-counts/`, named by the SHA-256 of everything the count
depends on: the program (the repr of its frozen config and its context), the source of this package, JAX's and
jaxlib's versions and the default matmul precision. Any change to the code makes every entry stale, so a count is
never read for a program other than the one it was counted on. Entries are written atomically (`core.atomic`); one
that does not hold a positive, finite count is counted again and replaced. No compile cache (the config's
`compile_cache: false`, or `compile_cache.off`): nothing is kept, every count is lowered.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import warnings
from collections.abc import Callable, Hashable
from pathlib import Path

import jax

from parallel_experts.core import atomic, compile_cache

FOLDER = "flop-counts"


def counted(program: Hashable, count: Callable[[], float]) -> float:
    """`count()`, the FLOPs of `program`, read from the store where an earlier process counted it."""
    folder = _folder()
    if folder is None:
        return count()
    path = folder / f"{_key(program)}.json"
    try:
        flops = float(json.loads(path.read_text())["flops"])
        if math.isfinite(flops) and flops > 0:
            return flops
    except (OSError, ValueError, KeyError, TypeError):  # absent, or damaged: counted again below
        pass
    flops = count()
    try:
        atomic.write_text(path, json.dumps({"program": repr(program), "flops": flops}))
    except OSError as error:  # a store that cannot be written costs time, never a plan
        warnings.warn(f"{path}: the FLOP count is not kept ({error})", stacklevel=2)
    return flops


def _folder() -> Path | None:
    directory = os.environ.get(compile_cache.CACHE_DIR)
    if not directory or os.environ.get(compile_cache.ENABLE, "").lower() == "false":
        return None
    return Path(directory) / FOLDER


def _key(program: Hashable) -> str:
    versions = (jax.__version__, jax.lib.__version__, str(jax.config.jax_default_matmul_precision))
    return hashlib.sha256(repr((program, versions, _source())).encode()).hexdigest()


@functools.cache
def _source() -> str:
    """A digest of every Python file of the package: the code that builds and lowers the programs."""
    package = Path(__file__).parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()
