"""The language-model runs a config asks for: every budget × attention window × family × allocation.

A run is named by what defines it (`recurrent/small/W128/L2-E8-d768`). Both families read the same tokens per
update and in total; each run is evaluated at its own window W (SPEC F.1, F.2):
* non-recurrent runs train on independent sequences of 2W tokens (the authors train on 256 tokens for W = 128
  and on 2,048 for W = 1,024) and are evaluated with a W-token sliding window;
* recurrent runs keep a W-token rolling cache (M = W), train on segments of `lm.training.segment` tokens and
  are evaluated with their own cache.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from parallel_experts import budget
from parallel_experts.results import Definition, family_id, run_results
from parallel_experts.lm.models import ModelConfig
from parallel_experts.lm.train import TrainConfig

SEGMENT = 64  # lm.training.segment: the recurrent model's TBPTT window (SPEC E.8); a run setting, not TrainConfig's
TRAINING_KEYS = ("batch_tokens", "reg", "log_every", "checkpoint_every")  # omitted: TrainConfig's defaults
EVALUATION_DEFAULTS = {"streams": 2048, "lanes": 256}


@dataclass(frozen=True)
class Run(Definition):
    budget: str
    window: int
    model: ModelConfig
    train: TrainConfig

    @property
    def id(self) -> str:
        kv_cache = "" if self.model.kv_cache == "level" else f"-kv_{self.model.kv_cache}"  # old runs keep their ids
        return (f"{family_id(self.model.recurrent)}/{self.budget}/W{self.window}/"
                f"{budget.allocation_id(self.model)}{kv_cache}")

    def to_dict(self) -> dict:
        d = super().to_dict()
        if self.model.kv_cache == "level":  # runs defined before the option existed keep their params: not retrained
            del d["model"]["kv_cache"]
        return d


def runs(config: Mapping) -> list[Run]:
    """Every run of every LM budget in a validated config, in a stable order."""
    lm = config["lm"]
    training = lm.get("training", {})
    options = {key: training[key] for key in TRAINING_KEYS if key in training}
    model_options = {"aggregation": lm["aggregation"]} if "aggregation" in lm else {}
    found = []
    for b in budget.budgets(config, "lm"):
        for window in lm["windows"]:
            for recurrent in (False, True):
                sequence = training.get("segment", SEGMENT) if recurrent else 2 * window
                # The config counts the microbatch in tokens, TrainConfig in streams of `sequence` tokens.
                microbatch = ({"microbatch": max(1, training["microbatch_tokens"] // sequence)}
                              if "microbatch_tokens" in training else {})
                train = TrainConfig(sequence=sequence, memory=window if recurrent else 0,
                                    train_tokens=lm["train_tokens"], **options, **microbatch)
                for a in b.allocations:
                    model = ModelConfig(a.depth, a.experts, a.width, a.q_heads, a.kv_heads, vocab=lm["vocabulary"],
                                        recurrent=recurrent, dtype=lm["dtype"], **model_options)
                    found.append(Run(b.name, window, model, train))
    return found


def step_flops(config: Mapping) -> Callable[[budget.Allocation], np.ndarray]:
    """XLA-counted forward FLOPs of one token at an allocation, (window, family) for every window of the config
    and both families in the order of the datasets' `family` coordinate, for the allocations report."""
    from parallel_experts.lm.models import token_flops
    from parallel_experts.results import FAMILIES

    lm = config["lm"]

    def flops(a: budget.Allocation) -> np.ndarray:
        return np.array([[token_flops(ModelConfig(a.depth, a.experts, a.width, a.q_heads, a.kv_heads,
                                                  vocab=lm["vocabulary"], recurrent=recurrent,
                                                  dtype=lm["dtype"]), window)
                          for recurrent in sorted(FAMILIES)] for window in lm["windows"]])
    return flops


def evaluation(config: Mapping) -> dict:
    return EVALUATION_DEFAULTS | config["lm"].get("evaluation", {})


def collect(curve_paths: list[str], eval_paths: list[str]):
    """One dataset over all runs: validation loss (sliding window), learning curves, the runs' definitions."""
    import xarray as xr

    per_run = []
    for run, curve, evaluation_ in run_results(Run, curve_paths, eval_paths):
        m = run.model
        ds = xr.Dataset({name: curve[name] for name in ("train_loss", "train_ce_loss")}
                        | {name: evaluation_[name] for name in ("validation_loss", "scored_tokens")})
        per_run.append(ds.expand_dims(run=[run.id]).assign_coords(
            recurrent=("run", [m.recurrent]), budget=("run", [run.budget]), window=("run", [run.window]),
            depth=("run", [m.depth]), experts=("run", [m.experts]), width=("run", [m.width]),
            q_heads=("run", [m.q_heads]), kv_heads=("run", [m.kv_heads]),
            train_tokens=("run", [run.train.updates * run.train.batch_tokens])))
    return xr.concat(per_run, dim="run", join="outer").assign_attrs(vocabulary=run.model.vocab)
