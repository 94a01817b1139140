"""The options of each Sokoban command of the CLI, without JAX (the CLI builds its parser from them): each is taken
by the one function that runs the command, named in the CLI's table."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from parallel_experts.config.options import RunCommand, Training, config_files, option, output
from parallel_experts.core import budget
from parallel_experts.results import store


def level_count(text: str) -> int | None:
    return None if text == "all" else int(text)


def allocation(text: str) -> budget.Allocation:
    """`L,E,d` on the command line."""
    try:
        depth, experts, width = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected L,E,d (three integers), got {text!r}") from None
    if min(depth, experts, width) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return budget.Allocation(depth, experts, width)


@dataclass(frozen=True, kw_only=True)
class Levels:
    """write a level set (.npz) from its source"""

    source: str = option('JSON: {"generate": {...}} or {"boxoban": split}')
    boxoban: str = option("JSON: where Boxoban splits come from (root, download)", default="{}")
    out: str = output()


@dataclass(frozen=True, kw_only=True)
class Train(Training):
    """train one Sokoban run (all its seeds), resumable"""

    levels: str = option("training level set from sokoban-levels")


@dataclass(frozen=True, kw_only=True)
class Evaluate(RunCommand):
    """solve rate of a trained run on a level set"""

    levels: str = option("test level set from sokoban-levels")
    out: str = output()


@dataclass(frozen=True, kw_only=True)
class ProbeData(RunCommand):
    """greedy episodes of one trained agent as probe data: states, encoder outputs, control, labels"""

    seed: int = option("the training seed whose agent plays", type=int)
    levels: str = option("level set from sokoban-levels")
    count: int | None = option("play the first COUNT levels, or all", type=level_count, default=None)
    out: str = output()


@dataclass(frozen=True, kw_only=True)
class ProbeFit:
    """fit, calibrate and score the planning probes of one probed agent (a run's agent of one training seed)"""

    train: str = option("probe data of the training levels")
    calibration: str = option("probe data of the calibration levels")
    test: str = option("probe data of the test levels")
    solved: tuple[str, ...] = option("every probed run's test evaluation: only the levels every probed agent solves "
                                     "are scored", nargs="+")
    seeds: str = option('JSON: {"run id": [its probed seeds]} of every --solved run')
    fit: str = option("JSON: the config's sokoban.probes.fit", default="{}")
    picture: str = option('JSON: {"level": test level, "steps": first steps} of Fig. 13', default="{}")
    out: str = output()


@dataclass(frozen=True, kw_only=True)
class Probes:
    """collect every probed agent's scores into one dataset, by run and agent"""

    out: str = output()
    scores: tuple[str, ...] = option(None, "scores", nargs="+")


@dataclass(frozen=True, kw_only=True)
class Sweep(store.Sweep):
    """collect every Sokoban run into one dataset"""

    family: str | None = option("label every run a run of this sweep, without a budget: the dataset of "
                                "sokoban.expert_count, some of whose runs may be the budget sweeps' runs", default=None)


@dataclass(frozen=True, kw_only=True)
class Bench:
    """Sokoban training throughput: env-steps/s, FLOPs per step and fraction of the matmul peak per allocation,
    measured side by side"""

    config: tuple[str, ...] = config_files("config files (merged in order) naming the budget, its anchor and the "
                                           "training settings", default=("config/paper.yaml",))
    budget: str = option("Sokoban budget whose allocations (and anchor) are used", default="small")
    allocations: tuple[budget.Allocation, ...] | None = option(
        "allocations to time instead of the budget's (the work ratio stays against its anchor)", nargs="+",
        type=allocation, metavar="L,E,d", default=None)
    expert: str = option(None, choices=["convlstm", "convglu"], default="convlstm")
    recurrent: bool = option(None, "--recurrent", negative="--nonrecurrent", default=True)
    num_envs: int = option(None, type=int, default=32)
    num_steps: int = option("rollout length of one update", type=int, default=20)
    log_interval: int = option("updates per compiled call (one update of the anchor takes ~7 s on 2 cores)", type=int,
                               default=1)
    seeds: int = option("seeds vmapped together, as training does", type=int, default=1)
    warmup: int = option("untimed calls after compiling", type=int, default=1)
    repeats: int = option("timed calls, at least", type=int, default=1)
    min_time: float = option("add timed calls until they sum to this (s)", type=float, default=4.0)
    max_repeats: int = option("cap on timed calls added by --min-time", type=int, default=5)
    levels: int = option("generated 10×10 4-box levels to train on", type=int, default=200)
    matmul_size: int = option(None, type=int, default=2048)
    matmul_repeats: int = option("timed matmuls of the start/end peak", type=int, default=7)
    local_peak_repeats: int = option("timed matmuls right before and after each allocation's timed calls (0: use the "
                                     "start peak)", type=int, default=3)
    env_steps: int = option("steps per env-only call (× num-envs env steps)", type=int, default=500)
    env_repeats: int = option(None, type=int, default=5)
    json: str | None = output("write every number, the settings and the machine here", default=None)
    quick: bool = option("tiny sizes for tests: one small allocation, 4 envs × 5 steps, small matmul",
                         action="store_true", default=False)
