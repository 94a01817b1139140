"""Fig. 6, the number of experts (paper §5.3): score against E at fixed depth L and width d; and App. K's Fig. 18,
the same view of the ConvGLU sweep alone.

A *point* is one configuration: its panel (the Sokoban sweep, or FineWeb at one window), recurrence, budget ("" for
the expert-count sweep, which has none), L, E, d, score and standard error over seeds (NaN for a single seed, as the
LM's runs have by default) and the number of seeds. A *family* is every point of one panel, recurrence, L and d,
kept where it has at least two values of E; across budgets its points spend different work (reading Fig. 6 from the
budget sweeps is our choice). The same selection decides, from the config alone, whether the figure's data can exist
(`targets.catalogue`).

Two questions are answered from the points, with a noise of two standard errors where seeds give one (with one
LM run per allocation, any difference counts there):
* whether more experts help: each family's score at its largest E against its smallest E;
* whether the recurrent family saturates at shallower depth: at each budget (expert-count sweep: each E) and
  width, the smallest depth within noise of that recurrence's best (**choice**: the paper names no test).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
import xarray as xr

from parallel_experts.analysis import lm_losses
from parallel_experts.analysis import sokoban_scores
from parallel_experts.analysis import verdicts
from parallel_experts.core import definitions
from parallel_experts.results import store

FAMILY = ["panel", "recurrent", "depth", "width"]
POINT = [*FAMILY, "budget", "experts"]
# What the paper reports (§5.3), set beside the findings.
PAPER_FINDING = ("the paper's finding (§5.3, Fig. 6): more experts per level improve both recurrent and "
                 "non-recurrent models, recurrent models saturate at shallower depth, and Sokoban keeps improving "
                 "beyond 8 experts.")
DOMAINS = ("Sokoban", "FineWeb")  # how panel names begin


def sokoban_panel(sweep: str) -> str:
    return f"Sokoban, {sweep} sweep"


def lm_panel(window: int) -> str:
    return f"FineWeb, {window}-token window"


def load(sokoban_paths: Iterable[str], lm_path: str, window: int,
         sweep_name: str = "") -> tuple[pd.DataFrame, set[str]]:
    """The points of the result files a Fig. 6 report reads (empty paths are skipped), each opened once, and
    the Sokoban panels at chance (chance_panels); with `sweep_name`, of that Sokoban sweep's runs only (Fig. 18)."""
    sokoban = [store.open_dataset(p) for p in sokoban_paths if p]
    if sweep_name:
        sokoban = [ds.isel(run=(ds["sweep"] == sweep_name).values) for ds in sokoban]
    return points(sokoban, store.open_dataset(lm_path) if lm_path else None, window), chance_panels(sokoban)


def points(sokoban: Iterable[xr.Dataset], lm: xr.Dataset | None, window: int) -> pd.DataFrame:
    """The points of Sokoban datasets and of the LM sweep at attention `window` (None: no LM panel)."""
    tables = [sokoban_points(ds) for ds in sokoban] + ([lm_points(lm, window)] if lm is not None else [])
    return pd.concat(tables, ignore_index=True) if tables else _points(pd.DataFrame(columns=POINT + ["score"]), 1)


def sokoban_points(sweep: xr.Dataset) -> pd.DataFrame:
    """Points of a Sokoban dataset (`sokoban.experiment.collect`): mean final-five return over seeds (higher is
    better) ± its standard error, one panel per sweep."""
    table = sokoban_scores.configuration_scores(sokoban_scores.per_seed_scores(sweep))
    table = table.assign(panel=[sokoban_panel(s) for s in table["sweep"]]).rename(columns={"mean": "score"})
    return _points(table, sign=1)


def lm_points(sweep: xr.Dataset, window: int) -> pd.DataFrame:
    """Points of the LM sweep (`lm.experiment.collect`) at attention `window`: mean validation loss over seeds,
    lower is better, ± its standard error (NaN for one seed, the paper's and our default)."""
    selected = sweep.isel(run=(sweep["window"] == window).values)
    table = pd.DataFrame({name: selected[name].values for name in ["recurrent", "budget", "depth", "experts", "width"]})
    table = pd.concat([table, lm_losses.over_seeds(selected)], axis=1)
    table = table.dropna(subset=["validation_loss"]).rename(columns={"validation_loss": "score"})
    return _points(table.assign(panel=lm_panel(window)), sign=-1)


def chance_panels(sokoban: Iterable[xr.Dataset]) -> set[str]:
    """The Sokoban panels (one per sweep) whose every agent is at chance (sokoban.analysis.at_chance): their
    scores cannot show an effect of the number of experts."""
    return {sokoban_panel(name) for ds in sokoban for name in dict.fromkeys(ds["sweep"].values.tolist())
            if sokoban_scores.at_chance(ds.isel(run=(ds["sweep"] == name).values))}


def _points(table: pd.DataFrame, sign: int) -> pd.DataFrame:
    table = table.assign(sign=sign, **({} if "stderr" in table else {"stderr": np.nan}),
                         **({} if "seeds" in table else {"seeds": 1}))
    return table[[*POINT, "score", "stderr", "seeds", "sign"]].astype({"recurrent": bool})


def families(points: pd.DataFrame) -> pd.DataFrame:
    """The points of every (panel, recurrence, L, d) with at least two values of E, sorted by family and E,
    Sokoban panels first."""
    distinct = points.groupby(FAMILY)["experts"].transform("nunique")
    kept = points[distinct >= 2]
    return kept.sort_values([*FAMILY, "experts", "budget"], ascending=[True, False, True, True, True, True],
                            key=_sokoban_first, kind="stable").reset_index(drop=True)


def _sokoban_first(column: pd.Series) -> pd.Series:
    return column.map(lambda panel: (not panel.startswith("Sokoban"), panel)) if column.name == "panel" else column


def figure_width(found: pd.DataFrame) -> pd.DataFrame:
    """The families drawn in the figure: in each panel, those of the width with the most family points (the
    paper's d = 64 for Sokoban, d = 768 for FineWeb at paper scale); ties go to the wider."""
    counts = found.groupby(["panel", "width"]).size().reset_index(name="n")
    chosen = counts.sort_values(["n", "width"]).groupby("panel").tail(1)[["panel", "width"]]
    return found.merge(chosen, on=["panel", "width"])


AT_CHANCE = "no verdict: agents at chance"


def expert_trends(found: pd.DataFrame, at_chance: Iterable[str] = ()) -> pd.DataFrame:
    """One row per family: its E values and scores, the gain from the smallest to the largest E (positive is
    better in either domain), the noise it is judged against, and the verdict (none in a panel `at_chance`)."""
    chance = set(at_chance)
    rows = []
    for key, family in found.groupby(FAMILY, sort=False):
        family = family.sort_values("experts")
        first, last = family.iloc[0], family.iloc[-1]
        gain = first["sign"] * (last["score"] - first["score"])
        noise = verdicts.NOISE * float(np.sqrt(np.nansum([first["stderr"] ** 2, last["stderr"] ** 2])))
        steps = first["sign"] * np.diff(family["score"].to_numpy(float))
        rows.append(dict(zip(FAMILY, key)) | {
            "family": definitions.family(key[1]), "experts": ", ".join(map(str, family["experts"])),
            "scores": ", ".join(f"{s:.3f}" for s in family["score"]), "gain": gain, "noise": noise,
            "verdict": AT_CHANCE if key[0] in chance else _gain_verdict(gain, noise),
            "every_step_better": bool((steps > 0).all())})
    return pd.DataFrame(rows, columns=[*FAMILY, "family", "experts", "scores", "gain", "noise", "verdict",
                                       "every_step_better"])


def _gain_verdict(gain: float, noise: float) -> str:
    if gain > noise:
        return "more experts help"
    if gain < -noise:
        return "more experts hurt"
    return "no clear change" + (f" (within {verdicts.NOISE} standard errors)" if noise else "")


def saturation_depths(points: pd.DataFrame, at_chance: Iterable[str] = ()) -> pd.DataFrame:
    """At each panel, budget (expert-count sweep: each E) and width where both recurrences have at least two
    depths: each recurrence's saturation depth (the smallest depth within noise of its best) and the verdict
    (none in a panel `at_chance`)."""
    chance = set(at_chance)
    points = points.assign(comparison=[f"{b} budget" if b else f"E={e}"
                                       for b, e in zip(points["budget"], points["experts"])])
    rows = []
    for (panel, comparison, width), group in points.groupby(["panel", "comparison", "width"], sort=False):
        depth = {r: _saturation_depth(rows_) for r, rows_ in group.groupby("recurrent") if rows_["depth"].nunique() > 1}
        if len(depth) < 2:
            continue
        rec, non = depth[True], depth[False]
        verdict = (AT_CHANCE if panel in chance else "recurrent saturates at shallower depth" if rec < non else
                   "both saturate at the same depth" if rec == non else "non-recurrent saturates at shallower depth")
        rows.append({"panel": panel, "comparison": comparison, "width": width,
                     "depths": ", ".join(map(str, sorted(group["depth"].unique()))), "recurrent_depth": rec,
                     "nonrecurrent_depth": non, "verdict": verdict})
    return pd.DataFrame(rows, columns=["panel", "comparison", "width", "depths", "recurrent_depth",
                                       "nonrecurrent_depth", "verdict"])


def _saturation_depth(rows: pd.DataFrame) -> int:
    better = rows["sign"] * rows["score"]
    best = rows.loc[better.idxmax()]
    noise = verdicts.NOISE * np.sqrt(np.nan_to_num(rows["stderr"] ** 2) + np.nan_to_num(best["stderr"] ** 2))
    return int(rows.loc[better >= better.max() - noise, "depth"].min())


def summary(trends: pd.DataFrame, saturation: pd.DataFrame, at_chance: Iterable[str] = ()) -> list[str]:
    """The findings under the figure, per panel: in how many families more experts help, in how many
    comparisons recurrent saturates at shallower depth (a panel in `at_chance` says instead that its agents are
    at chance); then the paper's finding."""
    lines = [f"{domain}: no (L, d) with two or more values of E in this config's runs" for domain in DOMAINS
             if not any(panel.startswith(domain) for panel in trends["panel"])]
    chance = set(at_chance)
    for panel in dict.fromkeys([*trends["panel"], *saturation["panel"]]):
        if panel in chance:
            lines.append(f"{panel}: every agent solves no more test levels than a random policy, so these scores "
                         "cannot show an effect of the number of experts or of depth")
            continue
        here = trends[trends["panel"] == panel]
        for recurrent, rows in here.groupby("recurrent", sort=False):
            helped = (rows["verdict"] == "more experts help").sum()
            lines.append(f"{panel}, {definitions.family(recurrent)}: more experts help beyond {verdicts.NOISE} standard errors "
                         f"in {helped} of {len(rows)} families (L, d); the score improves at every step of E in "
                         f"{rows['every_step_better'].sum()}")
        sat = saturation[saturation["panel"] == panel]
        if len(sat):
            shallower = (sat["verdict"] == "recurrent saturates at shallower depth").sum()
            lines.append(f"{panel}: recurrent saturates at shallower depth in {shallower} of {len(sat)} "
                         f"budget and width comparisons")
        else:
            lines.append(f"{panel}: saturation depth not comparable (needs both recurrences with at least two "
                         f"depths at one budget and width)")
    return [*lines, PAPER_FINDING]
