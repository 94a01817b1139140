"""Self-describing result datasets (xarray → netCDF) and the paper's reference numbers beside them."""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from parallel_experts import budget
from parallel_experts.atomic import atomic_path
from parallel_experts.config import digest
from parallel_experts.errors import PipelineError, reason

WORK_PROXY = {
    "sokoban": "L·E·d·(C_enc + 2d) per environment step (ConvLSTM gate conv, constants dropped)",
    "lm": "L·E·((10 + 2K/H)·d² + 2·T·d) per token (SPEC D.2), T = attention window",
}
STEP = {"sokoban": "environment step", "lm": "token"}
# The two families of every sweep: the name shown in reports for each value of `recurrent`, recurrent first.
FAMILIES = {True: "recurrent", False: "non-recurrent"}
# Sokoban: the recurrent agent's step. LM: the forward pass of one token with a full window, per family.
FLOPS_DIMS = {"sokoban": ("allocation",), "lm": ("allocation", "window", "family")}


def family(recurrent: bool) -> str:
    """The name of a family in reports: "recurrent" or "non-recurrent"."""
    return FAMILIES[bool(recurrent)]


def family_id(recurrent: bool) -> str:
    """The name of a family on disk (run ids, the `family` coordinate): its report name without the hyphen."""
    return family(recurrent).replace("-", "")


class Definition:
    """A frozen dataclass of settings (nested dataclasses, tuples, plain values) that travels as JSON, in rule
    params and netCDF attributes, and is rebuilt from it: a run's definition."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping):
        types = typing.get_type_hints(cls)
        return cls(**{f.name: _rebuilt(types[f.name], d[f.name]) for f in dataclasses.fields(cls)})


def _rebuilt(kind, value):
    if dataclasses.is_dataclass(kind):
        return kind(**value)
    return tuple(value) if typing.get_origin(kind) is tuple else value


def by_id(groups: Iterable[Iterable[Definition]]) -> dict[str, Definition]:
    """Every run of `groups` (a domain's sweep, each ablation, ...) once, by id; one id never names two
    definitions, as a run id shows every setting that varies."""
    found: dict[str, Definition] = {}
    for run in (run for group in groups for run in group):
        if found.setdefault(run.id, run) != run:
            raise PipelineError(f"run id {run.id} names two different runs: {found[run.id]} and {run}; "
                                "a setting that varies must appear in the run id (its experiment's variant_id)")
    return found


def with_ablations(ds: xr.Dataset, ablations: Mapping[str, list[str]]) -> xr.Dataset:
    """The ablations' dataset: `ds` naming each ablation's runs ({setting: run ids in the order of its values})
    in attribute `ablations` (JSON), as a run may belong to several."""
    missing = sorted({name for ids in ablations.values() for name in ids} - set(ds["run"].values.tolist()))
    if missing:
        raise PipelineError(f"the ablations name runs whose results were not given: {', '.join(missing)}")
    return ds.assign_attrs(ablations=json.dumps(dict(ablations)))


def ablation_members(data: xr.Dataset) -> dict[str, list[str]]:
    """Each ablation's run ids in the order of its values, from an ablations dataset (with_ablations)."""
    return json.loads(data.attrs["ablations"])


def allocation_dataset(config: Mapping, domain: str,
                       step_flops: Callable[[budget.Allocation], float] | None = None) -> xr.Dataset:
    """Every allocation of every budget of `domain`, with its work relative to the budget's anchor, and the
    FLOPs that `step_flops` measures for one step of the real model (NaN without it)."""
    domain_config = config[domain]
    rows, works, anchors = [], [], []
    for b in budget.budgets(config, domain):
        anchor_work = budget.work(domain, b.anchor, domain_config)
        anchors.append(anchor_work)
        for a in b.allocations:
            rows.append((b.name, a, a == b.anchor))
            works.append(budget.work(domain, a, domain_config))
    names = [name for name, _, _ in rows]
    anchor_by_name = dict(zip(domain_config["budgets"], anchors))
    work = np.array(works)
    ratio = work / np.array([anchor_by_name[name] for name in names])
    work_dims = ("allocation", "window")
    if domain == "sokoban":  # one work value per step, no attention window
        work, ratio, work_dims = work[:, 0], ratio[:, 0], ("allocation",)
    flops_shape = () if domain == "sokoban" else (len(domain_config["windows"]), len(FAMILIES))
    coords = {
        "budget": ("allocation", names),
        "depth": ("allocation", [a.depth for _, a, _ in rows]),
        "experts": ("allocation", [a.experts for _, a, _ in rows]),
        "width": ("allocation", [a.width for _, a, _ in rows]),
    }
    if domain == "lm":
        coords |= {
            "q_heads": ("allocation", [a.q_heads for _, a, _ in rows]),
            "kv_heads": ("allocation", [a.kv_heads for _, a, _ in rows]),
            "window": ("window", list(domain_config["windows"])),
            # in the order of the flag, as `cli.allocations` measures them: non-recurrent, then recurrent
            "family": ("family", [family_id(recurrent) for recurrent in sorted(FAMILIES)]),
        }
    ds = xr.Dataset(
        {
            "work": (work_dims, work, {"long_name": f"work proxy {WORK_PROXY[domain]}", "units": "1"}),
            "work_ratio": (work_dims, ratio, {"long_name": "work relative to the budget's anchor", "units": "1"}),
            "is_anchor": ("allocation", np.array([flag for _, _, flag in rows]),
                          {"long_name": "the allocation that defines the budget"}),
            "tolerance": ("budget_name", [domain_config["budgets"][n]["tolerance"] for n in domain_config["budgets"]],
                          {"long_name": "largest allowed |work_ratio - 1|"}),
            # XLA's count for the compiled step function, where the domain's model exists (NaN otherwise).
            "measured_flops": (FLOPS_DIMS[domain], np.array([step_flops(a) if step_flops else np.full(flops_shape, np.nan)
                                                             for _, a, _ in rows]),
                               {"long_name": f"FLOPs per {STEP[domain]} of the compiled step function",
                                "units": "FLOP", "source": "parallel_experts.benchmarking.flops_of"}),
        },
        coords=coords | {"budget_name": list(domain_config["budgets"])},
        attrs={"domain": domain, "work_proxy": WORK_PROXY[domain]},
    )
    return with_provenance(ds, config)


def with_provenance(ds: xr.Dataset, config: Mapping) -> xr.Dataset:
    """Attach the configuration that produced `ds` (netCDF attributes must be flat strings)."""
    return ds.assign_attrs(scale=config["scale"], config_digest=digest(config), config=json.dumps(config))


def write_netcdf(ds: xr.Dataset, path: str | Path) -> None:
    """Write atomically, so a killed job never leaves a half-written result that looks finished."""
    with atomic_path(path) as temporary:
        ds.to_netcdf(temporary, engine="h5netcdf")


def open_dataset(path: str | Path) -> xr.Dataset:
    """A result file, loaded into memory; a missing, truncated or foreign file is one line naming it."""
    try:
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            return ds.load()
    except (OSError, ValueError) as error:  # h5py: OSError for a truncated file; xarray: ValueError
        advice = "; delete it to recompute it" if Path(path).is_file() else ""
        raise PipelineError(f"{path}: not a readable netCDF result ({reason(error)}){advice}") from None


def run_results(run_type: type[Definition], curve_paths: Sequence[str], eval_paths: Sequence[str]
                ) -> Iterator[tuple[Definition, xr.Dataset, xr.Dataset]]:
    """(run definition, learning curves, evaluation) of each run of a sweep, checked to belong together."""
    for curve_path, eval_path in zip(curve_paths, eval_paths, strict=True):
        curve, evaluation = open_dataset(curve_path), open_dataset(eval_path)
        run = run_type.from_dict(json.loads(curve.attrs["run_config"]))
        if evaluation.attrs["run"] != run.id:
            raise PipelineError(f"{eval_path} evaluates {evaluation.attrs['run']}, not {run.id} of {curve_path}")
        yield run, curve, evaluation


def reference(name: str) -> pd.DataFrame:
    """One of the paper's reference tables shipped with the package (see reference/README in shared/paper)."""
    with resources.files("parallel_experts").joinpath(f"reference/{name}.csv").open() as f:
        return pd.read_csv(f)


def paper_allocations(domain: str) -> pd.DataFrame:
    """The authors' allocation grid of `domain` with our column names (budget, depth, experts, width, ...)."""
    table = reference({"sokoban": "sokoban_allocations", "lm": "fineweb_allocations"}[domain])
    return table.rename(columns={"depth_L": "depth", "experts_E": "experts", "width_d": "width"})


# The paper's budget definitions (rebuttal Table 2; SPEC A.11, E.12) and the windows its LM sweeps use.
PAPER_ANCHORS = {
    "sokoban": {"small": [1, 1, 128], "medium": [1, 1, 256], "large": [1, 1, 1024]},
    "lm": {"small": [16, 1, 768, 8, 4], "medium": [32, 1, 768, 8, 4]},
}
PAPER_DOMAIN_CONFIG = {"sokoban": {"encoder_channels": 32}, "lm": {"head_dim": 96, "windows": [128, 1024]}}


def allocation_table(ds: xr.Dataset) -> pd.DataFrame:
    """One row per allocation: budget, L, E, d (and heads), work ratio (per window for the LM), measured FLOPs."""
    columns = ["budget", "depth", "experts", "width"] + (["q_heads", "kv_heads"] if "q_heads" in ds else [])
    table = ds[columns].reset_coords().to_dataframe()[columns]
    ratio = ds["work_ratio"]
    if "window" in ratio.dims:
        for window in ratio["window"].values:
            table[f"work ratio (T={window})"] = ratio.sel(window=window).values
    else:
        table["work ratio"] = ratio.values
    table["anchor"] = ds["is_anchor"].values
    flops = ds["measured_flops"]
    if "window" in flops.dims:
        for window in flops["window"].values:
            for family in flops["family"].values:
                table[f"measured FLOPs ({family}, T={window})"] = flops.sel(window=window, family=family).values
    else:
        table["measured FLOPs"] = flops.values
    return table.reset_index(drop=True)


def paper_allocation_table(domain: str) -> pd.DataFrame:
    """The authors' grid with the work ratio our proxy gives it against the paper's anchors."""
    grid = paper_allocations(domain)
    spec = {"budgets": {name: {"anchor": anchor, "tolerance": 1.0,
                               "allocations": _allocation_lists(grid[grid.budget == name])}
                        for name, anchor in PAPER_ANCHORS[domain].items()}}
    paper_config = {domain: PAPER_DOMAIN_CONFIG[domain] | spec}
    ds = allocation_dataset(paper_config | {"scale": "paper", "description": "authors' grid"}, domain)
    table = allocation_table(ds)
    return table.drop(columns=["anchor"] + [c for c in table if c.startswith("measured FLOPs")])


def _allocation_lists(grid: pd.DataFrame) -> list[list[int]]:
    columns = ["depth", "experts", "width"] + (["q_heads", "kv_heads"] if "q_heads" in grid else [])
    return grid[columns].astype(int).values.tolist()
