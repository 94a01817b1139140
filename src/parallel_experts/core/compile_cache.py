"""JAX's persistent compilation cache, shared by every job: a program that one job compiled (a resumed or
resubmitted job, another seed or run of the same shapes, an evaluation of the same architecture) is loaded from
disk by the next instead of compiled again.

`use` sets JAX's own environment variables before JAX is imported, so that every process started from this
one (lm.throughput's fresh process per cell) compiles through the same cache. A cache that the caller chose
(JAX_COMPILATION_CACHE_DIR already set, as tests/conftest.py does for a whole test session) is kept, and so is
any other of these variables that the caller set.

Many jobs reading and writing one folder at once is safe with the pinned JAX (0.10.2; jax/_src/lru_cache.py,
compilation_cache.py and compiler.py). An entry is one file named by a SHA-256 key of the program, its compile
options, jaxlib's version, the XLA flags and the devices' kind, so two jobs share a file only when they compiled
the same program for the same kind of device. Without a size limit (JAX's default, kept here) no lock is taken:
a writer that finds no file writes it with one `write_bytes`, not renamed into place. Two writers of one key
write the same program; a reader that meets a file half-written, or torn by two writers, fails zlib's
end-of-stream or Adler-32 check (our locks pin no `zstandard`, so JAX compresses with zlib), and JAX warns
("Error reading persistent compilation cache entry") and compiles: a torn entry costs one compile, never a wrong
program. What is left: a job killed in the milliseconds while it writes leaves a truncated file that JAX never
rewrites (a write skips an existing key), so later jobs compile that program again, with the warning, until the
files of the program it names (`<cache>/<program>-*-cache`) are deleted. A size limit would put a file lock
around every read and write instead, which needs `flock` on the shared file system (absent on some Lustre
mounts), so none is set.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

CACHE_DIR = "JAX_COMPILATION_CACHE_DIR"
ENABLE = "JAX_ENABLE_COMPILATION_CACHE"  # set to "false" by `off`, for this process and those it starts
# What is cached, as JAX names it: every program, not only those that compile in over a second (JAX's
# default). A demo training job compiles its update in ~36 s and ~170 small programs (parameter initialisers,
# eager operations) in ~15 s together; each of these loads from its file in about a millisecond.
SETTINGS = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}


def use(directory: str | Path | None) -> None:
    """Compile through the persistent cache in `directory` (None: no cache), in this process and those it starts.
    A variable the caller set wins. Call it before the process compiles anything."""
    values = dict(SETTINGS)
    if directory is not None:  # absolute, so that a process that changes its working directory still finds it
        values[CACHE_DIR] = str(Path(directory).absolute())
    for name, value in values.items():
        os.environ.setdefault(name, value)
    # JAX reads the variables once, when it is imported; a process that imported it before reading the config
    # (one that ran another command first) would otherwise compile without a cache, silently. Its first compile reads
    # the settings, so until then they can still be given to JAX directly.
    jax = sys.modules.get("jax")  # imported already: set it directly (importing it here would load it for all)
    if jax is not None:
        jax.config.update("jax_compilation_cache_dir", os.environ.get(CACHE_DIR))
        for name in SETTINGS:
            jax.config.update(name.lower(), float(os.environ[name]))


def off() -> None:
    """No persistent cache in this process or those it starts, whatever the caller set: for the benchmarks, whose
    compile seconds (sokoban-bench, Table 5's first call) would otherwise time a read from the cache."""
    os.environ[ENABLE] = "false"
    jax = sys.modules.get("jax")  # as in `use`: the benchmarks import JAX first
    if jax is not None:
        jax.config.update("jax_enable_compilation_cache", False)
        # JAX decides once, at its first compile, whether the cache is used, and keeps that decision; importing the
        # benchmarks' modules compiles (the GPU check's sections read every update from the cache on a second run,
        # reporting 0.2 s compiles). Resetting makes the next compile decide again, with the cache off. Imported by
        # name, as `jax` above: only a process that has loaded JAX gets here (the layers without JAX import this).
        importlib.import_module("jax.experimental.compilation_cache.compilation_cache").reset_cache()
