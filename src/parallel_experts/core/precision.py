"""The precision of float32 matrix products and convolutions: `<domain>.training.matmul_precision`, one setting per
family (Sokoban, LM), which every job of the family computes at (training, evaluation, probes, benchmarks).

JAX's names (`jax_default_matmul_precision`); it acts on float32 inputs only, so a bfloat16 model's matmuls are
bfloat16 whatever it says. `default` is JAX's default, which leans to speed: TensorFloat-32 on NVIDIA Ampere and
later GPUs (tensor cores, 10 bits of mantissa), full float32 on older GPUs and on the CPU (docs.jax.dev, "Matmul
precision"). XLA:CPU computes float32 products in float32 at every setting, so on the CPU it changes no number.
No JAX here: `study.load` sets the precision before a job compiles, as it sets the compilation cache.
"""

from __future__ import annotations

import os
import sys
from parallel_experts.config.errors import ConfigError

MATMUL_PRECISIONS = ("default", "tensorfloat32", "float32", "bfloat16")
DEFAULT = "default"
VARIABLE = "JAX_DEFAULT_MATMUL_PRECISION"  # read by JAX when imported: the processes a job starts inherit it


def check(name: str, key: str) -> None:
    """Refuse a precision JAX does not name, in one line naming the config `key`."""
    if name not in MATMUL_PRECISIONS:
        raise ConfigError(f"{key}: expected one of {MATMUL_PRECISIONS}, got {name!r}")


def use(name: str) -> None:
    """Compute float32 matmuls and convolutions at `name` in this process and those it starts; call it before the
    process compiles anything. `default` leaves JAX's own default, as code that never sets it gets."""
    check(name, "matmul precision")
    value = None if name == DEFAULT else name
    if value is None:
        os.environ.pop(VARIABLE, None)
    else:
        os.environ[VARIABLE] = value
    jax = sys.modules.get("jax")  # imported already (a command's modules may import it): set it directly
    if jax is not None:
        jax.config.update("jax_default_matmul_precision", value)
