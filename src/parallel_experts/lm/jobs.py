"""The options of each language-model command of the CLI, without JAX (the CLI builds its parser from them): each is
taken by the one function that runs the command, named in the CLI's table."""

from __future__ import annotations

from dataclasses import dataclass

from parallel_experts.config.options import RunCommand, Training, config_files, option, output
from parallel_experts.results import store

TOKENS = "folder of shards from lm-tokens"


@dataclass(frozen=True, kw_only=True)
class Tokens:
    """write the token shards of the configured corpus"""

    corpus: str = option("JSON: the config's lm.corpus")
    shard_tokens: int = option(None, type=int)
    out: str = output("folder of shards", folder=True)


@dataclass(frozen=True, kw_only=True)
class Train(Training):
    """train one language-model run, resumable"""

    tokens: str = option(TOKENS)


@dataclass(frozen=True, kw_only=True)
class Evaluate(RunCommand):
    """sliding-window validation loss of a trained run"""

    tokens: str = option(TOKENS)
    evaluation: str = option("JSON: the config's lm.evaluation")
    out: str = output()


@dataclass(frozen=True, kw_only=True)
class Sweep(store.Sweep):
    """collect every language-model run into one dataset"""


@dataclass(frozen=True, kw_only=True)
class Latency:
    """Table 5: per-token decode latency of every row after pre-filling the caches (the config's lm.latency), side
    by side; netCDF"""

    config: tuple[str, ...] = config_files()
    out: str = output()


@dataclass(frozen=True, kw_only=True)
class Throughput:
    """Table 6: training tokens/s and memory of every row, the complete update read from token shards (the config's
    lm.throughput), side by side; netCDF"""

    config: tuple[str, ...] = config_files()
    tokens: str = option(TOKENS)
    batch_tokens: int | None = option("tokens per update instead of the config's", type=int, default=None)
    devices: int | None = option("devices an update's streams split over instead of the config's "
                                 "resources.bench.gpus", type=int, default=None)
    out: str = output()
