"""The language-model runs a config asks for: every budget × attention window × family × allocation, and every
ablation (`lm.ablations.<setting>`: the recurrent model at one allocation of a budget and one window, one
ModelConfig setting varied).

A run is named by what defines it (`recurrent/small/W128/L2-E8-d768`; a model setting that an ablation varies,
where it is not ModelConfig's default: `recurrent/small/W128/L2-E8-d768-mean`; a seed other than 0:
`recurrent/small/W128/L2-E8-d768-s1`), so equal definitions share one id: an ablation's run at the default value
is the sweep's run, trained once. Each seed of `lm.budgets.<name>.seeds` (default: one, 0; the paper's FineWeb
runs are single-seed) is a run of its own, a job of its own: the seed is the parameters' initial key, as the
token order is the authors' deterministic sampler's (shards.stream_windows). Seed 0's runs keep the ids and
definitions they had before seeds existed, so their results stay valid. The sweep's dataset holds a
configuration's seeds side by side (`collect`), as Sokoban's does. Both families read the same tokens
per update and in total; each run is evaluated at its own window W (paper §5.2):
* non-recurrent runs train on independent sequences of 2W tokens (the authors train on 256 tokens for W = 128
  and on 2,048 for W = 1,024) and are evaluated with a W-token sliding window;
* recurrent runs keep a W-token rolling cache (M = W), train on segments of `lm.training.segment` tokens and
  are evaluated with their own cache.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import xarray as xr

from parallel_experts.config.errors import ConfigError
from parallel_experts.config.settings import Resources
from parallel_experts.core import budget
from parallel_experts.core.definitions import Definition, by_id, family_id
from parallel_experts.lm import jobs
from parallel_experts.lm.settings import (DTYPE_BYTES, LmSettings, ModelConfig, TrainConfig, Training, family_attention,
                                         memory_for)
from parallel_experts.results import store
from parallel_experts.results.store import run_results, with_ablations

# The lm.training keys that TrainConfig takes as they are (the others: the microbatch in tokens, its cache bound and
# the recurrent segment, which train_config turns into TrainConfig's settings).
TRAINING_KEYS = tuple(f.name for f in fields(Training) if f.name in {f.name for f in fields(TrainConfig)})
# The ModelConfig settings an ablation may vary (lm.ablations.<setting>), each with how a run id shows a value that
# is not ModelConfig's default.
VARIANTS = {"aggregation": "-{}", "kv_cache": "-kv_{}"}


DEFAULT_SEEDS = (0,)  # lm.budgets.<name>.seeds where not given: one run, key 0 (the top-level seeds are Sokoban's)


@dataclass(frozen=True)
class Run(Definition):
    budget: str
    window: int
    model: ModelConfig
    train: TrainConfig
    seed: int = 0  # the parameters' initial key

    @property
    def id(self) -> str:
        return self.configuration + ("" if self.seed == 0 else f"-s{self.seed}")

    @property
    def configuration(self) -> str:
        """What the run trains, whatever its seed: the id of its seed-0 run (the sweep dataset's `run`)."""
        where = f"{family_id(self.model.recurrent)}/{self.budget}/W{self.window}/{budget.allocation_id(self.model)}"
        return where + variant_id(self.model)

    def to_dict(self) -> dict:
        d = super().to_dict()
        # Runs defined before these settings existed keep their params where they take the default: not retrained.
        if self.seed == 0:
            del d["seed"]
        if d["train"]["matmul_precision"] == TrainConfig.matmul_precision:
            del d["train"]["matmul_precision"]
        if d["model"]["attention"] == ModelConfig.attention:
            del d["model"]["attention"]
        return d


_DEFAULTS = {f.name: f.default for f in fields(ModelConfig)}


def variant_id(model: ModelConfig) -> str:
    """The settings of VARIANTS where they are not ModelConfig's defaults, as a run id shows them: `-mean`."""
    return "".join(form.format(getattr(model, name)) for name, form in VARIANTS.items()
                   if getattr(model, name) != _DEFAULTS[name])


def runs(settings: LmSettings, budgets: Sequence[budget.Budget], devices: int) -> list[Run]:
    """Every run of every LM budget (`budgets`: the config's, parsed), in a stable order; `devices`: a training
    job's (`Families.devices`)."""
    model_options = {"aggregation": settings.aggregation} if settings.aggregation is not None else {}
    found = []
    for b in budgets:
        for window in settings.windows:
            for recurrent in (False, True):
                for a in b.allocations:
                    model = ModelConfig(a.depth, a.experts, a.width, a.q_heads, a.kv_heads, vocab=settings.vocabulary,
                                        recurrent=recurrent, dtype=settings.dtype,
                                        attention=family_attention(recurrent, settings.attention), **model_options)
                    train = train_config(settings, model, window, devices)
                    found += [Run(b.name, window, model, train, seed) for seed in seeds(settings, b.name)]
    return found


def seeds(settings: LmSettings, budget_name: str) -> tuple[int, ...]:
    """The seeds of an LM budget's runs: `lm.budgets.<name>.seeds`, else DEFAULT_SEEDS."""
    return settings.budgets[budget_name].seeds or DEFAULT_SEEDS


def train_config(settings: LmSettings, model: ModelConfig, window: int, devices: int) -> TrainConfig:
    """The training settings of `model` at `window`: `lm.training`, the microbatch bounded by
    `microbatch_cache_gb` for the recurrent model (`cache_bounded`) on a job's `devices`."""
    training = settings.training
    sequence = training.segment if model.recurrent else 2 * window
    # The config counts the microbatch in tokens, TrainConfig in streams of `sequence` tokens.
    options: dict[str, Any] = {key: getattr(training, key) for key in TRAINING_KEYS}
    if training.microbatch_tokens is not None:
        options["microbatch"] = max(1, training.microbatch_tokens // sequence)
    train = TrainConfig(sequence=sequence, memory=memory_for(window, model.recurrent),
                        train_tokens=settings.train_tokens, **options)
    if not model.recurrent or training.microbatch_cache_gb is None:
        return train
    return cache_bounded(train, model, training.microbatch_cache_gb, devices)


def devices(resources: Resources, family: str = "lm_train") -> int:
    """The devices a job of a resources family (as planning.resources.FAMILY names them) splits its streams over:
    the family's GPUs, one where it has none. `lm_train`: a training job; `bench`: Table 6, as the paper's four
    H100s split theirs."""
    return max(1, resources.of_family(family).gpus)


def cache_bytes(model: ModelConfig, memory: int) -> int:
    """Bytes of one stream's rolling caches (keys and values of every level, M entries each)."""
    return 2 * math.prod(model.cache_shape(memory)) * DTYPE_BYTES[model.dtype]


def cache_bounded(train: TrainConfig, model: ModelConfig, limit_gb: float, device_count: int) -> TrainConfig:
    """`train` with the largest microbatch, up to its own, whose streams' caches on one device fit in `limit_gb`,
    that splits the update's streams into whole microbatches and each over the devices evenly.

    Backprop through a recurrent window keeps a few dozen copies of the caches per stream (XLA's plan: about 50
    bytes of temporaries per byte of cache at paper scale, on a CPU), which grow with depth and cache length: the
    deep W = 1,024 runs plan up to 352 GB per device at 128 streams per device. More, smaller microbatches are
    memory only (the update's gradient is the mean over all streams whatever the microbatch)."""
    per_stream, limit = cache_bytes(model, train.memory), limit_gb * 1e9
    if -(-train.microbatch // device_count) * per_stream <= limit:
        return train
    fitting = [m for m in range(device_count, train.microbatch + 1, device_count)
               if train.streams % m == 0 and m // device_count * per_stream <= limit]
    if not fitting:
        raise ConfigError(f"lm.training.microbatch_cache_gb: {limit_gb} GB holds not even one stream's caches "
                          f"({per_stream / 1e9:.3g} GB) of the recurrent L{model.depth} E{model.experts} "
                          f"d{model.width} at M = {train.memory}; raise it")
    return replace(train, microbatch=max(fitting))


def ablation_runs(settings: LmSettings, sweep_runs: list[Run], devices: int) -> dict[str, list[Run]]:
    """Each ablation's runs (`lm.ablations.<setting>`), in the order of its values, each value's seeds together:
    the sweep's recurrent run at the ablation's budget, window and allocation, with ModelConfig.<setting> set to
    each value, once per seed of the ablation (default: the budget's). A value equal to the sweep's setting gives
    the sweep's runs themselves (`sweep_runs`: `runs`)."""
    sweep = [run for run in sweep_runs if run.seed == seeds(settings, run.budget)[0]]  # one per configuration
    found: dict[str, list[Run]] = {}
    for setting, spec in settings.ablations.items():
        where = f"lm.ablations.{setting}"
        if spec.window not in settings.windows:
            raise ConfigError(f"{where}.window: {spec.window} is not one of lm.windows {list(settings.windows)}")
        if spec.budget not in settings.budgets:
            raise ConfigError(f"{where}.budget: unknown budget {spec.budget!r} (defined: "
                              f"{', '.join(settings.budgets)})")
        recurrent = [run for run in sweep
                     if run.model.recurrent and run.budget == spec.budget and run.window == spec.window]
        # [L, E, d] names the allocation as the budget lists it; [L, E, d, H, K] its heads too
        base = [run for run in recurrent if _allocation(run.model)[:len(spec.allocation)] == list(spec.allocation)]
        if len(base) != 1:
            raise ConfigError(f"{where}.allocation: {list(spec.allocation)} names no single allocation of budget "
                              f"{spec.budget!r} (its allocations: "
                              f"{', '.join(str(_allocation(run.model)) for run in recurrent)})")
        [run] = base
        found[setting] = []
        for value in spec.values:  # a per-expert cache is E times larger: its own microbatch bound
            model = replace(run.model, **{setting: value})
            train = train_config(settings, model, run.window, devices)
            found[setting] += [replace(run, model=model, train=train, seed=seed)
                               for seed in spec.seeds or seeds(settings, spec.budget)]
    return found


def _allocation(model: ModelConfig) -> list[int]:
    return [model.depth, model.experts, model.width, model.q_heads, model.kv_heads]


@dataclass(frozen=True)
class Families:
    """Every family of LM runs of a config, the sweep's (`runs`) and each ablation's; the settings they were built
    from and the budgets they spend; and what their jobs cost besides the runs (the planner): each job's devices."""

    settings: LmSettings
    budgets: tuple[budget.Budget, ...]  # in the config's order
    sweeps: list[Run]
    ablations: dict[str, list[Run]]
    devices: int  # a training job's (`devices`)
    bench_devices: int  # Table 6's job's

    @property
    def by_id(self) -> dict[str, Run]:
        """Every run (the sweep and every ablation), by id."""
        return by_id([self.sweeps, *self.ablations.values()])

    @property
    def seeds(self) -> dict[str, tuple[int, ...]]:
        """Each budget's seeds (`seeds`)."""
        return {name: seeds(self.settings, name) for name in self.settings.budgets}


def families(settings: LmSettings, budgets: Sequence[budget.Budget], resources: Resources) -> Families:
    """Every family of LM runs of the settings, the sweep built once for both; `resources`: the jobs' (their
    devices)."""
    train_devices = devices(resources)
    sweeps = runs(settings, budgets, train_devices)
    return Families(settings, tuple(budgets), sweeps, ablation_runs(settings, sweeps, train_devices), train_devices,
                    devices(resources, "bench"))


CURVE_VARIABLES, EVAL_VARIABLES = ("train_loss", "train_ce_loss"), ("validation_loss", "scored_tokens")


def collect(curve_paths: Sequence[str], eval_paths: Sequence[str], ablations: Mapping[str, list[str]] | None = None
            ) -> xr.Dataset:
    """One dataset over all runs: validation loss (sliding window), learning curves, the runs' definitions.

    Dims `run` and `seed`, as Sokoban's sweep: `run` is a configuration, named by its seed-0 run's id
    (Run.configuration), and holds each of its seeds' runs at their seed (NaN at a seed that another
    configuration has and it lacks). With `ablations` ({setting: run ids in the order of its values}, see
    ablation_runs), the dataset is the ablations' and names each one's configurations (results.with_ablations)."""
    seeds_of: dict[str, dict[int, xr.Dataset]] = {}
    definition: dict[str, Run] = {}
    named: dict[str, str] = {}
    for run, curve, evaluation_ in run_results(Run, curve_paths, eval_paths, CURVE_VARIABLES, EVAL_VARIABLES):
        ds = xr.Dataset({name: curve[name] for name in CURVE_VARIABLES}
                        | {name: evaluation_[name] for name in EVAL_VARIABLES})
        seeds_of.setdefault(run.configuration, {})[run.seed] = ds.expand_dims(seed=[run.seed])
        definition.setdefault(run.configuration, run)
        named[run.id] = run.configuration
    per_run = []
    for name, per_seed in seeds_of.items():
        run, m = definition[name], definition[name].model
        ds = xr.concat([per_seed[seed] for seed in sorted(per_seed)], dim="seed", join="outer")
        coords = {"recurrent": m.recurrent, "budget": run.budget, "window": run.window, "depth": m.depth,
                  "experts": m.experts, "width": m.width, "q_heads": m.q_heads, "kv_heads": m.kv_heads,
                  "train_tokens": run.train.updates * run.train.batch_tokens,
                  **{setting: getattr(m, setting) for setting in VARIANTS}}
        per_run.append(ds.expand_dims(run=[name]).assign_coords({key: ("run", [value])
                                                                 for key, value in coords.items()}))
    ds = xr.concat(per_run, dim="run", join="outer").assign_attrs(vocabulary=run.model.vocab)
    if ablations is None:
        return ds
    return with_ablations(ds, {setting: list(dict.fromkeys(named.get(i, i) for i in ids))
                               for setting, ids in ablations.items()})


def sweep_job(options: jobs.Sweep) -> int:
    """`lm-sweep`: every language-model run given, in one dataset."""
    ds = collect(options.curves, options.evals, options.ablations)
    store.write_netcdf(ds, options.out)
    print(f"{options.out}: {ds.sizes['run']} runs")
    return 0
