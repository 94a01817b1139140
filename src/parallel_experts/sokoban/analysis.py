"""The paper's Sokoban statistics, computed the same way for our runs and for the authors' per-seed returns.

Score per seed = mean of the final five logged episodic returns; a configuration's score is the mean over
seeds (sample variance beside it, Table 7). Depth comparisons take, at each exact depth, the configuration
with the best mean and apply a one-sided Welch t-test, uncorrected (the authors' protocol, SPEC B.6).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from parallel_experts import results

ALLOCATION = ["depth", "experts", "width"]
DEPTH_TESTS = ((4, 2), (2, 1))  # (deeper, shallower): the authors' tests


def same_budget_as_paper(config_path: str, budget: str) -> bool:
    """Whether the config's budget of this name is the paper's (same anchor), so the authors' numbers compare."""
    import json

    with open(config_path) as f:
        config = json.load(f)
    anchor = config["sokoban"]["budgets"].get(budget, {}).get("anchor")
    return anchor is not None and anchor == results.PAPER_ANCHORS["sokoban"].get(budget)


def per_seed_scores(sweep: xr.Dataset) -> pd.DataFrame:
    """One row per run and seed: sweep, recurrent, budget, L, E, d, seed, final-five score."""
    table = sweep["final_five"].to_dataframe().reset_index()
    keep = ["sweep", "recurrent", "budget", *ALLOCATION, "seed", "final_five"]
    return table.dropna(subset=["final_five"])[keep].rename(columns={"final_five": "score"})


def paper_per_seed_scores() -> pd.DataFrame:
    """The authors' per-seed scores of the recurrent ConvLSTM sweeps, in the same layout."""
    table = results.reference("sokoban_reference_returns").rename(
        columns={"depth_L": "depth", "experts_E": "experts", "width_d": "width", "seed_index": "seed",
                 "final5_mean_return": "score"})
    return table.assign(sweep="convlstm", recurrent=True)[["sweep", "recurrent", "budget", *ALLOCATION, "seed",
                                                           "score"]]


def configuration_scores(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Mean, sample variance, standard error and seed count of every configuration (Table 7)."""
    keys = ["sweep", "recurrent", "budget", *ALLOCATION]
    grouped = per_seed.groupby(keys, sort=False)["score"]
    table = grouped.agg(mean="mean", variance=lambda s: s.var(ddof=1), seeds="count").reset_index()
    table["stderr"] = np.sqrt(table["variance"] / table["seeds"])
    return table


def best_at_each_depth(scores: pd.DataFrame) -> pd.DataFrame:
    """Per sweep, recurrence, budget and exact depth: the configuration with the best mean."""
    keys = ["sweep", "recurrent", "budget", "depth"]
    return scores.loc[scores.groupby(keys, sort=False)["mean"].idxmax()].reset_index(drop=True)


def best_up_to_depth(scores: pd.DataFrame) -> pd.DataFrame:
    """Fig. 3 (left): the best mean among all configurations with depth ≤ L, for every depth L present."""
    rows = []
    for key, group in scores.groupby(["sweep", "recurrent", "budget"], sort=False):
        for cap in sorted(group["depth"].unique()):
            best = group[group["depth"] <= cap].sort_values("mean").iloc[-1]
            rows.append(dict(zip(["sweep", "recurrent", "budget"], key)) | {
                "max_depth": cap, "best_mean": best["mean"], "best_stderr": best["stderr"],
                "at": f"L{best['depth']} E{best['experts']} d{best['width']}"})
    return pd.DataFrame(rows)


def welch_depth_tests(per_seed: pd.DataFrame) -> pd.DataFrame:
    """One-sided Welch t-tests between the best configurations at two depths (H1: the deeper one is better)."""
    best = best_at_each_depth(configuration_scores(per_seed))
    rows = []
    for key, group in best.groupby(["sweep", "recurrent", "budget"], sort=False):
        for deeper, shallower in DEPTH_TESTS:
            at = {depth: group[group["depth"] == depth] for depth in (deeper, shallower)}
            if any(len(a) == 0 for a in at.values()):
                continue
            samples = [_seeds(per_seed, key, at[d].iloc[0]) for d in (deeper, shallower)]
            if min(len(s) for s in samples) < 2:
                continue
            test = stats.ttest_ind(*samples, equal_var=False, alternative="greater")
            rows.append(dict(zip(["sweep", "recurrent", "budget"], key)) | {
                "test": f"L={deeper} > L={shallower}",
                "deeper": f"L{deeper} E{at[deeper].iloc[0]['experts']} d{at[deeper].iloc[0]['width']}",
                "shallower": f"L{shallower} E{at[shallower].iloc[0]['experts']} d{at[shallower].iloc[0]['width']}",
                "difference": samples[0].mean() - samples[1].mean(), "t": test.statistic, "p": test.pvalue})
    return pd.DataFrame(rows)


def _seeds(per_seed: pd.DataFrame, key: tuple, config: pd.Series) -> np.ndarray:
    sweep, recurrent, budget = key
    mask = ((per_seed["sweep"] == sweep) & (per_seed["recurrent"] == recurrent) & (per_seed["budget"] == budget)
            & (per_seed["depth"] == config["depth"]) & (per_seed["experts"] == config["experts"])
            & (per_seed["width"] == config["width"]))
    return per_seed.loc[mask, "score"].to_numpy(float)


def solve_rates(sweep: xr.Dataset) -> pd.DataFrame:
    """Table 1: greedy and sampled solve rate on the test levels, mean over seeds, per configuration."""
    rates = sweep["solve_rate"].mean("seed").to_dataframe().reset_index()
    table = rates.pivot_table(index=["sweep", "recurrent", "budget", *ALLOCATION], columns="mode",
                              values="solve_rate").reset_index()
    table.columns.name = None
    return table


def learning_curves(sweep: xr.Dataset) -> pd.DataFrame:
    """Long table of the logged episodic returns: one row per run, seed and log point."""
    table = sweep["episodic_return"].to_dataframe().reset_index().dropna(subset=["episodic_return"])
    table["env_steps"] = table["update"] * table["steps_per_update"]
    table["allocation"] = ("L" + table["depth"].astype(str) + " E" + table["experts"].astype(str)
                           + " d" + table["width"].astype(str))
    return table
