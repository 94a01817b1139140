"""The allocation grids: every budget's allocations with their work relative to the anchor and the FLOPs that
the domain measured for one step of the real model, as a dataset and as tables (ours and the authors')."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from parallel_experts.core import budget
from parallel_experts.core.definitions import FAMILIES, family_id
from parallel_experts.results import paper

STEP = {"sokoban": "environment step", "lm": "token"}
# Sokoban: the recurrent agent's step. LM: the forward pass of one token with a full window, per family.
FLOPS_DIMS = {"sokoban": ("allocation",), "lm": ("allocation", "window", "family")}


def work_proxy(proxy: budget.Proxy) -> str:
    """The domain's work proxy as a formula, with the config's encoder channels where the domain has them."""
    if proxy.domain == "sokoban":
        return (f"L·E·d·({proxy.encoder_channels} + 2d) per environment step (each expert's 3×3 gate conv "
                "from the encoder's channels, s and h to 4d gates; constants dropped)")
    return "L·E·((10 + 2K/H)·d² + 2·T·d) per token (the projections, MLP and attention of a block), T = attention window"


def allocation_dataset(budgets: Sequence[budget.Budget], proxy: budget.Proxy,
                       step_flops: Callable[[budget.Allocation], Any] | None = None,
                       flops_per: str | None = None) -> xr.Dataset:
    """Every allocation of every budget of a domain, with its work (`proxy`) relative to the budget's anchor, and the
    FLOPs that `step_flops` measures for one step of the real model (NaN without it), `flops_per` saying of what
    (default: one step of the domain). Where a budget has allocations only one family trains, a coordinate
    `only_family` names it ("" where both train it)."""
    domain = proxy.domain
    rows, works, anchors, only = [], [], [], []
    for b in budgets:
        anchors.append(proxy.work(b.anchor))
        trained = [(a, "") for a in b.allocations]
        trained += [(a, family_id(recurrent)) for recurrent, extra in b.family_only.items() for a in extra]
        for a, family in trained:
            rows.append((b.name, a, a == b.anchor))
            works.append(proxy.work(a))
            only.append(family)
    names = [name for name, _, _ in rows]
    anchor_by_name = dict(zip([b.name for b in budgets], anchors))
    work = np.array(works)
    ratio = work / np.array([anchor_by_name[name] for name in names])
    work_dims: tuple[str, ...] = ("allocation", "window")
    if domain == "sokoban":  # one work value per step, no attention window
        work, ratio, work_dims = work[:, 0], ratio[:, 0], ("allocation",)
    flops_shape = () if domain == "sokoban" else (len(proxy.windows), len(FAMILIES))
    coords: dict[str, tuple] = {
        "budget": ("allocation", names),
        "depth": ("allocation", [a.depth for _, a, _ in rows]),
        "experts": ("allocation", [a.experts for _, a, _ in rows]),
        "width": ("allocation", [a.width for _, a, _ in rows]),
    }
    if any(only):
        coords["only_family"] = ("allocation", only, {"long_name": "the one family that trains it (empty: both)"})
    if domain == "lm":
        coords |= {
            "q_heads": ("allocation", [a.q_heads for _, a, _ in rows]),
            "kv_heads": ("allocation", [a.kv_heads for _, a, _ in rows]),
            "window": ("window", list(proxy.windows)),
            # in the order of the flag, as `planning.plan.allocations` measures them: non-recurrent, then recurrent
            "family": ("family", [family_id(recurrent) for recurrent in sorted(FAMILIES)]),
        }
    ds = xr.Dataset(
        {
            "work": (work_dims, work, {"long_name": f"work proxy {work_proxy(proxy)}", "units": "1"}),
            "work_ratio": (work_dims, ratio, {"long_name": "work relative to the budget's anchor", "units": "1"}),
            "is_anchor": ("allocation", np.array([flag for _, _, flag in rows]),
                          {"long_name": "the allocation that defines the budget"}),
            "tolerance": ("budget_name", [b.tolerance for b in budgets],
                          {"long_name": "largest allowed |work_ratio - 1|"}),
            # XLA's count for the compiled step function, where the domain's model exists (NaN otherwise).
            "measured_flops": (FLOPS_DIMS[domain], np.array([step_flops(a) if step_flops else np.full(flops_shape, np.nan)
                                                             for _, a, _ in rows]),
                               {"long_name": f"FLOPs of the compiled step function per {flops_per or STEP[domain]}",
                                "units": "FLOP", "source": "parallel_experts.core.benchmarking.flops_of"}),
        },
        coords=coords | {"budget_name": [b.name for b in budgets]},
        attrs={"domain": domain, "work_proxy": work_proxy(proxy)},
    )
    return ds


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
    if "only_family" in ds.coords:
        table["only"] = ds["only_family"].values
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
    grid, shared = paper.allocations(domain), paper.DOMAIN_CONFIG[domain]
    specs = {name: budget.BudgetSpec(tuple(anchor), 1.0, _allocation_lists(grid[grid.budget == name]))
             for name, anchor in paper.ANCHORS[domain].items()}
    proxy = budget.Proxy(domain, shared.get("encoder_channels", 0), tuple(shared.get("windows", ())),
                         shared.get("head_dim", 0))
    table = allocation_table(allocation_dataset(budget.budgets(specs, proxy), proxy))
    return table.drop(columns=["anchor"] + [c for c in table if c.startswith("measured FLOPs")])


def _allocation_lists(grid: pd.DataFrame) -> tuple[tuple[int, ...], ...]:
    columns = ["depth", "experts", "width"] + (["q_heads", "kv_heads"] if "q_heads" in grid else [])
    return tuple(map(tuple, grid[columns].astype(int).values.tolist()))
