"""Figs. 10 (left) and 11: the Sokoban ablations, scored as the sweeps are (final-five return, mean ± 1 standard
error over seeds), beside the authors' value of the same configuration, with a verdict on the paper's pattern.

Each ablation trains the recurrent ConvLSTM agent at one allocation once per value of one agent setting
(`sokoban.ablations`, see sokoban/experiment.py); the ablations dataset names each ablation's runs
(store.ablation_members; the default agent of two ablations at one allocation is one run, a budget sweep's
where one trains it) and holds their `aggregation` and `radius` as coordinates. The paper: the sqrt-sum is the
best aggregation rule (App. D); full shared-state access is best and narrower radii lower the return
monotonically (§5.3, App. E).
"""

from __future__ import annotations


import pandas as pd
import xarray as xr

from parallel_experts.analysis import comparison
from parallel_experts.analysis import sokoban_scores
from parallel_experts.analysis import verdicts
from parallel_experts.core import aggregation
from parallel_experts.results import paper as published
from parallel_experts.results import store
from parallel_experts.study import Study

# The paper's run of each ablation (Figs. 10 left and 11): budget and allocation; its value is the authors' mean
# final-five return of that configuration in their medium sweep (rebuttal/openreview_p_tests_and_seed_tables.md
# in their code; `paper_value`).
PAPER_RUNS, PAPER_SEEDS = published.SOKOBAN_ABLATION_RUNS, published.SOKOBAN_ABLATION_SEEDS
OWN_RUNS = "ablation"  # the sweep name of the runs an ablation trains itself (sokoban.experiment.ABLATION)


def paper_value(setting: str) -> float:
    """The authors' mean final-five return of the configuration the paper's ablation varies (the sqrt-sum, the
    full radius): their medium-budget sweep's score of that allocation."""
    budget, (depth, experts, width) = PAPER_RUNS[setting]
    table = sokoban_scores.configuration_scores(sokoban_scores.paper_per_seed_scores())
    row = table[(table["budget"] == budget) & (table["depth"] == depth) & (table["experts"] == experts)
                & (table["width"] == width)]
    return float(row["mean"].iloc[0])


def _paper_run(setting: str) -> str:
    """The paper's run of an ablation as the pages write it: "medium budget's (1, 4, 128)"."""
    budget, allocation = PAPER_RUNS[setting]
    return f"{budget} budget's {allocation}"


# Each ablation's page: its title and what it varies (shown above the figure).
PAGES = {
    "aggregation": ("Sokoban aggregation rules (Fig. 10, left)",
        "The recurrent ConvLSTM agent at one allocation, trained once per rule that merges the experts' "
        "outputs into the shared state (paper App. D; authors' PRE/recnanogpt/): sqrt-sum Σh/√E (the default), mean "
        "Σh/E, routed-mean Σαh/(ε+Σα), routed-sqrt-sum Σαh/√(ε+Σα²). Points: mean final-five return ± 1 "
        f"standard error over seeds. The paper's run is the {_paper_run('aggregation')} with {PAPER_SEEDS} seeds; "
        f"the authors' sqrt-sum value ({paper_value('aggregation'):.3f}, their {PAPER_RUNS['aggregation'][0]} "
        "sweep's score of that allocation) is drawn beside ours where this config runs the same configuration. "
        "Routing for Sokoban is unspecified; ours gives one α per expert and observation (sokoban/agent.py)."),
    "radius": ("Sokoban communication radius (Fig. 11)",
        "The recurrent ConvLSTM agent at one allocation with its experts on a ring: expert i reads s_i = "
        "|N_r(i)|^{-1/2} Σ_{j∈N_r(i)} h_j over the experts within ring distance r instead of the shared sqrt-"
        "sum state (the previous step's last level at level 1); the head reads the full sqrt-sum. The paper "
        "does not define the radius; this ring is our own choice, and r ≥ ⌊E/2⌋ is the "
        "standard agent exactly. Points: mean final-five return ± 1 standard error over seeds. The paper's "
        f"run is the {_paper_run('radius')} with r = 0, 1, 2, full and {PAPER_SEEDS} seeds; the authors' "
        f"full-radius value ({paper_value('radius'):.3f}) is drawn where this config runs the same configuration."),
}
PAPER_FINDINGS = {
    "aggregation": "the paper's finding (App. D): the sqrt-sum is the best of the four rules.",
    "radius": "the paper's finding (§5.3): full shared-state access is best, and narrower radii lower the return "
              "monotonically.",
}


def runs(data: xr.Dataset, setting: str) -> xr.Dataset:
    """The runs of one ablation in the ablations dataset (store.ablation_members), in the order of its values.
    A value whose agent is a budget sweep's run (sokoban.experiment.shared) is scored at the seeds of the
    ablation's own runs only, so that every value is scored on the same seeds."""
    selected = data.sel(run=store.ablation_members(data)[setting])
    own = (selected["sweep"] == OWN_RUNS).values
    if own.any():
        selected = selected.isel(seed=selected["final_five"].isel(run=own).notnull().any("run").values)
    return selected


def at_chance(data: xr.Dataset, setting: str) -> bool:
    """Whether every agent of one ablation is at chance (sokoban_scores.at_chance): its ordering then means nothing."""
    return sokoban_scores.at_chance(runs(data, setting))


def scores(data: xr.Dataset, setting: str) -> pd.DataFrame:
    """One row per value of the ablation's `setting`: mean, variance, stderr and seeds of the final-five score,
    aggregation rules in the paper's order, radii ascending (`full`: the radius that reaches every expert)."""
    per_seed = sokoban_scores.per_seed_scores(runs(data, setting), [setting])
    table = sokoban_scores.configuration_scores(per_seed, [setting])
    if setting == "aggregation":
        table = table.sort_values("aggregation", key=lambda rule: rule.map(aggregation.AGGREGATIONS.index))
    else:
        table["radius"] = table["radius"].astype(int)
        table["full"] = table["radius"] >= table["experts"] // 2
        table = table.sort_values("radius")
    return table.reset_index(drop=True)


def is_paper_run(study: Study, setting: str, table: pd.DataFrame) -> bool:
    """Whether the ablation runs the paper's configuration (its budget, as the paper anchors it, and allocation),
    so that the authors' value compares with ours."""
    budget, allocation = PAPER_RUNS[setting]
    ours = tuple(int(table[column].iloc[0]) for column in sokoban_scores.ALLOCATION)
    return (table["budget"].iloc[0] == budget and ours == allocation
            and comparison.same_budget_as_paper(study.sokoban.budgets, "sokoban", budget))


def label(setting: str, row: pd.Series) -> str:
    """How a value is named in text and on the axis: the rule, or `r = 1` / `full (r = 3)`."""
    if setting == "aggregation":
        return row["aggregation"]
    return f"full (r = {row['radius']})" if row["full"] else f"r = {row['radius']}"


def _gap(a: pd.Series, b: pd.Series) -> str:
    gap, stderr = a["mean"] - b["mean"], (a["stderr"] ** 2 + b["stderr"] ** 2) ** 0.5
    if pd.isna(stderr):
        return f"{gap:+.3f} (no standard error from one seed)"
    resolved = "" if verdicts.direction(gap, stderr) else f", within {verdicts.NOISE_TEXT}"
    return f"{gap:+.3f} ± {stderr:.3f} s.e.{resolved}"


def aggregation_verdict(table: pd.DataFrame) -> str:
    """Whether the sqrt-sum has the best mean of the rules in `table` (Fig. 10 left), and by how much."""
    if "sqrt_sum" not in set(table["aggregation"]) or len(table) < 2:
        return "the paper's pattern cannot be checked: it needs the sqrt-sum and at least one other rule."
    ranked = table.sort_values("mean", ascending=False)
    best, sqrt_sum = ranked.iloc[0], ranked[ranked["aggregation"] == "sqrt_sum"].iloc[0]
    if best["aggregation"] == "sqrt_sum":
        runner_up = ranked.iloc[1]
        return (f"the paper's pattern shows: the sqrt-sum has the best mean ({sqrt_sum['mean']:.3f}), ahead of "
                f"{runner_up['aggregation']} by {_gap(sqrt_sum, runner_up)}.")
    return (f"the paper's pattern does not show: {best['aggregation']} has the best mean ({best['mean']:.3f}), "
            f"above the sqrt-sum by {_gap(best, sqrt_sum)}.")


def radius_verdict(table: pd.DataFrame) -> str:
    """Whether the mean rises with the radius at every step of `table` (Fig. 11), the full radius last."""
    if len(table) < 2:
        return "the paper's pattern cannot be checked: it needs at least two radii."
    steps = [(table.iloc[i], table.iloc[i + 1]) for i in range(len(table) - 1)]
    path = " → ".join(f"{label('radius', row)}: {row['mean']:.3f}" for _, row in table.iterrows())
    falls = [f"{label('radius', a)} to {label('radius', b)} ({_gap(b, a)})" for a, b in steps if b["mean"] <= a["mean"]]
    if not falls:
        a, b = min(steps, key=lambda pair: pair[1]["mean"] - pair[0]["mean"])
        return (f"the paper's pattern shows: the mean return rises with r at every step ({path}); the smallest "
                f"rise, {label('radius', a)} to {label('radius', b)}, is {_gap(b, a)}.")
    return f"the paper's pattern does not show: the mean return does not rise from {'; '.join(falls)} ({path})."


def seeds_note(table: pd.DataFrame, paper_run: bool) -> str | None:
    """At small scale, or with fewer seeds than the paper's three, a warning that the seeds are few."""
    seeds = int(table["seeds"].min())
    if paper_run and seeds >= PAPER_SEEDS:
        return None
    return (f"seeds are few: {seeds} per setting (the paper: {PAPER_SEEDS}), at {'this' if paper_run else 'a small'} "
            f"scale, so the standard errors are rough and an ordering within them may be chance.")


def summary(study: Study, setting: str, table: pd.DataFrame, at_chance: bool = False) -> list[str]:
    """The lines under an ablation's figure: the verdict (with agents `at_chance`, see at_chance, a warning
    that the ordering means nothing), the authors' value, the paper's finding, the seeds."""
    verdict = aggregation_verdict(table) if setting == "aggregation" else radius_verdict(table)
    if at_chance:
        verdict = (f"every agent here solves no more test levels than a random policy, so this ordering says "
                   f"nothing about the paper's pattern: {verdict}")
    budget, allocation = PAPER_RUNS[setting]
    which = "sqrt-sum" if setting == "aggregation" else "full radius"
    paper_run = is_paper_run(study, setting, table)
    where = ("the same configuration" if paper_run else
             "not comparable: this config runs another budget or allocation")
    lines = [f"this run: {verdict}",
             f"paper, {which}: {paper_value(setting):.3f} (the authors' {budget} L{allocation[0]} E{allocation[1]} "
             f"d{allocation[2]}, {sokoban_scores.steps_text(published.SOKOBAN_TRAINING['env_steps'].value)} steps; "
             f"{where})",
             PAPER_FINDINGS[setting]]
    note = seeds_note(table, paper_run)
    return lines + ([note] if note else [])
