"""The paper's Sokoban statistics, computed the same way for our runs and for the authors' per-seed returns.

Score per seed = mean of the final five logged episodic returns; a configuration's score is the mean over
seeds (sample variance beside it, Table 7). Depth comparisons take, at each exact depth, the configuration
with the best mean and apply a one-sided Welch t-test, uncorrected (the authors' protocol, in their
rebuttal/openreview_p_tests_and_seed_tables.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from parallel_experts.analysis import calibration, comparison, depth_rules, verdicts
from parallel_experts.core import definitions
from parallel_experts.results import others
from parallel_experts.results import paper as published
from parallel_experts.sokoban import experiment as sokoban_experiment
from parallel_experts.study import Study

ALLOCATION = ["depth", "experts", "width"]
DEPTH_TESTS = ((4, 2), (2, 1))  # (deeper, shallower): the authors' tests
PAPER_EXPERT = "convlstm"  # the authors published per-seed scores only for their recurrent ConvLSTM sweeps
# What the paper reports, set beside every sweep's summary.
PAPER_FINDING = ("the paper's finding for Sokoban: with recurrence the best allocation is shallow (L = 2–4) and "
                 "better than the best non-recurrent one, after "
                 f"{published.SOKOBAN_TRAINING['env_steps'].value / 1e6:.0f}M environment steps on Boxoban levels.")
PAPER_DEPTH = ("The paper's recurrent ConvLSTM sweeps: " + " and ".join(
    f"{test} with p {'' if ps[0].startswith('<') else '= '}{' / '.join(ps)}" for test, ps in published.DEPTH_TEST_P.items())
    + " at the small / medium / large budget.")


def per_seed_scores(sweep: xr.Dataset, variants: Sequence[str] = ()) -> pd.DataFrame:
    """One row per run and seed: sweep, recurrent, budget, L, E, d, the `variants` coordinates (e.g. an
    ablation's `radius`), seed, final-five score."""
    table = sweep["final_five"].to_dataframe().reset_index()
    keep = ["sweep", "recurrent", "budget", *ALLOCATION, *variants, "seed", "final_five"]
    return table.dropna(subset=["final_five"])[keep].rename(columns={"final_five": "score"})


def paper_per_seed_scores() -> pd.DataFrame:
    """The authors' per-seed scores of the recurrent ConvLSTM sweeps, in the same layout."""
    table = published.reference("sokoban_reference_returns").rename(
        columns={"depth_L": "depth", "experts_E": "experts", "width_d": "width", "seed_index": "seed",
                 "final5_mean_return": "score"})
    return table.assign(sweep="convlstm", recurrent=True)[["sweep", "recurrent", "budget", *ALLOCATION, "seed",
                                                           "score"]]


def paper_scores(study: Study, budget: str | None = None) -> pd.DataFrame:
    """The authors' configuration scores (Table 7) of every budget that `config` shares with the paper (the same
    anchor), or of `budget` only; empty where none is shared."""
    table = configuration_scores(paper_per_seed_scores())
    shared = [name for name in dict.fromkeys(table["budget"]) if budget in (None, name)
              and comparison.same_budget_as_paper(study.sokoban.budgets, "sokoban", name)]
    return table[table["budget"].isin(shared)]


def paper_scores_beside(study: Study, runs: xr.Dataset, budget: str | None = None) -> pd.DataFrame | None:
    """The authors' configuration scores to draw beside the sweep `runs` (of `budget` only, where given): None
    unless its experts are the authors' ConvLSTM and `config` shares a budget with the paper."""
    if runs["expert"].values[0] != PAPER_EXPERT:
        return None
    table = paper_scores(study, budget)
    return table if len(table) else None


def paper_best_up_to_depth(study: Study, runs: xr.Dataset) -> pd.DataFrame | None:
    """Fig. 3 (left) of the authors' scores, beside the sweep `runs` (see `paper_scores_beside`)."""
    paper = paper_scores_beside(study, runs)
    return None if paper is None else best_up_to_depth(paper)


def configuration_scores(per_seed: pd.DataFrame, variants: Sequence[str] = ()) -> pd.DataFrame:
    """Mean, sample variance, standard error and seed count of every configuration (Table 7); configurations
    differ also by the `variants` columns where given."""
    keys = ["sweep", "recurrent", "budget", *ALLOCATION, *variants]
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
    """One-sided Welch t-tests between the best configurations at two depths (H1: the deeper one is better): `p` as
    the authors computed it, as if the two had been chosen in advance (depth_rules.depth_test), and `p_picked`
    against the rule's own null, the picking of the best at each depth from the same noisy means included
    (calibration; the claims page's rule)."""
    scores = configuration_scores(per_seed)
    rows = []
    for key, group in scores.groupby(["sweep", "recurrent", "budget"], sort=False):
        group = group.reset_index(drop=True)
        for deeper, shallower in DEPTH_TESTS:
            arms = depth_rules.Arms.of_table(group)
            i, j, p = depth_rules.depth_test(arms, deeper, shallower)
            if i < 0 or j < 0 or np.isnan(p):
                continue
            picked = calibration.test(depth_rules.BestAgainst((deeper,), (shallower,)), {True: arms})
            # One-sided for "deeper better" whichever way it points: 1 − p where it points the other way.
            p_picked = float(picked.p) if int(picked.direction) == 1 else 1.0 - float(picked.p)
            at = {deeper: group.iloc[int(i)], shallower: group.iloc[int(j)]}
            t, _ = verdicts.welch_from_summaries(*(at[d][c] for d in (deeper, shallower)
                                                   for c in ("mean", "variance", "seeds")))
            rows.append(dict(zip(["sweep", "recurrent", "budget"], key)) | {
                "test": f"L={deeper} > L={shallower}",
                "deeper": f"L{deeper} E{at[deeper]['experts']} d{at[deeper]['width']}",
                "shallower": f"L{shallower} E{at[shallower]['experts']} d{at[shallower]['width']}",
                "difference": at[deeper]["mean"] - at[shallower]["mean"], "t": float(t), "p": float(p),
                "p_picked": p_picked})
    return pd.DataFrame(rows)


def depth_verdicts(tests: pd.DataFrame, alpha: float = verdicts.ALPHA) -> list[str]:
    """One sentence per row of `welch_depth_tests`: whether the deeper configuration is better at level `alpha`, by
    the p with the picking included; the authors' p beside it."""
    lines = []
    for _, row in tests.iterrows():
        holds = "holds" if row["p_picked"] < alpha else f"is not shown (p ≥ {alpha})"
        lines.append(f"{row['sweep']}, {definitions.family(row['recurrent'])}, {row['budget']} budget: {row['test']} "
                     f"{holds}: best {row['deeper']} minus best {row['shallower']} = {row['difference']:+.3f}, "
                     f"p = {row['p_picked']:.4f} with the picking of the best per depth included (one-sided Welch "
                     f"p = {row['p']:.4f} as if chosen in advance, the authors' protocol)")
    return lines


def depth_pattern(tests: pd.DataFrame, alpha: float = verdicts.ALPHA) -> str:
    """Whether the recurrent rows of `welch_depth_tests` show the paper's depth pattern, L=4 > L=2 > L=1 with both
    steps significant (as the authors' small and medium ConvLSTM budgets do)."""
    recurrent = tests[tests["recurrent"].astype(bool)] if len(tests) else tests
    if not len(recurrent):
        return ("this run cannot test the paper's depth pattern (L=4 > L=2 > L=1): it needs recurrent runs at L=1, 2 "
                "and 4 with at least two seeds each.")
    significant = int((recurrent["p_picked"] < alpha).sum())
    if significant == len(recurrent):
        verdict = "shows the paper's depth pattern: every deeper recurrent configuration tested is significantly better"
    elif significant == 0:
        verdict = "does not show the paper's depth pattern: no deeper recurrent configuration is significantly better"
    else:
        verdict = (f"shows the paper's depth pattern only in part: {significant} of {len(recurrent)} depth tests of "
                   f"the recurrent runs are significant")
    return (f"this run {verdict} (one-sided Welch t against the rule's own null, the picking of the best per depth "
            f"included, p < {alpha}). {PAPER_DEPTH}")


def depth_findings(per_seed: pd.DataFrame, faults: Sequence[str] = ()) -> list[str]:
    """The depth tests of a report in words: each test, then whether the paper's depth pattern shows; none where the
    scores hold `faults` (scored_seeds.faults), saying why."""
    if faults:
        return [verdicts.not_decided(faults)]
    tests = welch_depth_tests(per_seed)
    return [*depth_verdicts(tests), depth_pattern(tests)]


def scores_beside_paper(scores: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """Table 7: our configuration scores with the authors' mean, variance and seed count of the same
    configuration beside them (NaN where the authors have none)."""
    keys = ["sweep", "recurrent", "budget", *ALLOCATION]
    theirs = paper.rename(columns={"mean": "paper mean", "variance": "paper variance", "seeds": "paper seeds"})
    return scores.merge(theirs[keys + ["paper mean", "paper variance", "paper seeds"]], on=keys, how="left")


def seed_scores(per_seed: pd.DataFrame, config: pd.Series, variants: Sequence[str] = ()) -> np.ndarray:
    """The per-seed scores of one configuration (a row of `configuration_scores`, with the same `variants`)."""
    keys = ["sweep", "recurrent", "budget", *ALLOCATION, *variants]
    mask = np.logical_and.reduce([per_seed[key] == config[key] for key in keys])
    return per_seed.loc[mask, "score"].to_numpy(float)


def solve_rates(sweep: xr.Dataset) -> pd.DataFrame:
    """Table 1: greedy and sampled solve rate on the test levels, mean over seeds, per configuration."""
    rates = sweep["solve_rate"].mean("seed").to_dataframe().reset_index()
    table = rates.pivot_table(index=["sweep", "recurrent", "budget", *ALLOCATION], columns="mode",
                              values="solve_rate").reset_index()
    table.columns.name = None
    return table


def sweep_table(runs: xr.Dataset, scores: pd.DataFrame, paper: pd.DataFrame | None) -> pd.DataFrame:
    """One sweep's configurations, recurrent first, then by depth and experts: score, solve rates and, where given,
    the authors' mean of the same allocation."""
    table = scores.merge(solve_rates(runs), on=["sweep", "recurrent", "budget", *ALLOCATION])
    if paper is not None:
        table = table.merge(paper[[*ALLOCATION, "mean"]].rename(columns={"mean": "paper mean"}), on=ALLOCATION,
                            how="left")
    return table.drop(columns=["sweep", "budget"]).sort_values(["recurrent", "depth", "experts"],
                                                               ascending=[False, True, True])


def training_returns(sweep: xr.Dataset) -> pd.DataFrame:
    """Long table of the logged episodic returns: one row per run, seed and log point."""
    table = sweep["episodic_return"].to_dataframe().reset_index().dropna(subset=["episodic_return"])
    table["env_steps"] = table["update"] * table["steps_per_update"]
    table["allocation"] = ("L" + table["depth"].astype(str) + " E" + table["experts"].astype(str)
                           + " d" + table["width"].astype(str))
    return table


def training_note(sweep: xr.Dataset) -> str:
    """The line under every Sokoban report's scale banner (plain text, which the report escapes): training length,
    test levels and how many pushes a push-optimal solution of them needs on average (where the level set was
    solved)."""
    note = (f"Training: {int(sweep['env_steps'].max()):,} environment steps per run; test levels: "
            f"{sweep.attrs['test_levels']}.")
    if "test_mean_optimal_pushes" in sweep.attrs:
        note += (f" A push-optimal solution of a test level takes {sweep.attrs['test_mean_optimal_pushes']:.2f} "
                 f"pushes on average ({int(sweep.attrs['test_optimal_pushes_levels']):,} levels solved).")
    if "test_random_solve_rate" in sweep.attrs:
        rates = sweep["solve_rate"].mean("seed")
        note += (f" A uniformly random policy solves {sweep.attrs['test_random_solve_rate']:.3f} of the test levels "
                 f"within the {int(sweep.attrs['test_time_limit'])}-step time limit; the best allocation here solves "
                 f"{float(rates.sel(mode='greedy').max()):.3f} greedily and {float(rates.sel(mode='sampled').max()):.3f}"
                 " with sampled actions (mean over seeds).")
    return note


def best_allocation_text(scores: pd.DataFrame) -> str:
    """The configuration with the best mean of a score table, in words: "L=2 (E=4, d=64) with 13.665"."""
    row = scores.loc[scores["mean"].idxmax()]
    return f"L={row['depth']} (E={row['experts']}, d={row['width']}) with {row['mean']:.3f}"


def at_chance(data: xr.Dataset) -> bool:
    """Whether no run of a Sokoban dataset solves more test levels, greedy or sampled (mean over seeds), than a
    uniformly random policy (its `test_random_solve_rate`): then its scores cannot show any effect. False where
    the dataset does not know the chance level."""
    if "test_random_solve_rate" not in data.attrs:
        return False
    return float(data["solve_rate"].mean("seed").max()) <= float(data.attrs["test_random_solve_rate"])


def recurrence_verdict(gap: float, stderr: float) -> str:
    """A difference (best recurrent minus best non-recurrent) of `gap` with standard error `stderr`, judged by the
    two-standard-error rule (`verdicts.direction`), in words."""
    return {1: "shows the paper's effect (recurrent better)",
            -1: "shows the opposite of the paper's effect (non-recurrent better)",
            0: f"does not separate recurrent from non-recurrent (difference within {verdicts.NOISE_TEXT})"}[
        verdicts.direction(gap, stderr)]


def recurrence_effect(scores: pd.DataFrame) -> str | None:
    """One sentence comparing the best recurrent with the best non-recurrent configuration of a score table
    (one sweep and budget); None unless both recurrences are there."""
    by_recurrence = {r: rows.loc[rows["mean"].idxmax()] for r, rows in scores.groupby("recurrent")}
    if len(by_recurrence) != 2:
        return None
    rec, non = by_recurrence[True], by_recurrence[False]
    gap = rec["mean"] - non["mean"]
    noise = (rec["stderr"] ** 2 + non["stderr"] ** 2) ** 0.5
    return (f"this run {recurrence_verdict(gap, noise)}: best recurrent minus best non-recurrent = {gap:+.3f} "
            f"(± {noise:.3f} standard error; {int(rec['seeds'])} and {int(non['seeds'])} seeds)")


def sweep_summary(scores: pd.DataFrame, paper: pd.DataFrame | None, per_seed: pd.DataFrame | None = None,
                  faults: Sequence[str] = ()) -> list[str]:
    """The findings under a sweep's figure: each recurrence's best allocation (and the authors'), whether
    recurrence wins, the depth tests of `per_seed` (where given) and the paper's finding; where the scores hold
    `faults` (scored_seeds.faults), why nothing is tested instead of the tests."""
    lines = [f"best {definitions.family(r)} allocation: {best_allocation_text(rows)}"
             for r, rows in scores.groupby("recurrent", sort=False)]
    if paper is not None:
        lines.append(f"paper, recurrent: {best_allocation_text(paper)}")
    effect = None if faults else recurrence_effect(scores)
    if effect is not None:
        lines.append(effect)
    if per_seed is not None or faults:
        lines += depth_findings(per_seed, faults)
    return [*lines, PAPER_FINDING]


def best_agents(sweep: xr.Dataset) -> pd.DataFrame:
    """Table 2: per budget, the best recurrent and the best non-recurrent configuration by mean final-five return
    over seeds, among every sweep of that budget, with its greedy and sampled solve rate (mean over seeds)."""
    scores = configuration_scores(per_seed_scores(sweep))
    table = scores.merge(solve_rates(sweep), on=["sweep", "recurrent", "budget", *ALLOCATION])
    best = table.loc[table.groupby(["budget", "recurrent"], sort=False)["mean"].idxmax()]
    best = best.sort_values("recurrent", ascending=False, kind="stable")
    best = best.sort_values("budget", key=lambda b: b.map(list(dict.fromkeys(scores["budget"])).index), kind="stable")
    best.insert(0, "family", [definitions.family(r) for r in best["recurrent"]])
    return best.drop(columns=["recurrent", "variance"]).rename(columns={"mean": "final-five mean"}).reset_index(drop=True)


def prior_work() -> pd.DataFrame:
    """The earlier agents' published solve rates (`results.others`), one row each."""
    table = pd.DataFrame([{"agent": row.agent, "env_steps": row.env_steps, "solve rate": row.solve_rate,
                           "± (seeds)": row.spread, "protocol": row.protocol or "as published",
                           "source": row.source} for row in others.SOKOBAN_SOLVE_RATES])
    return table.assign(trained=table["env_steps"].map(steps_text), levels=describe_levels(others.LEVELS))


def describe_levels(source: Mapping) -> str:
    """A `sokoban.levels` entry in words: "Boxoban unfiltered/test", "200 generated 5×5 rooms with 1 box"."""
    if "boxoban" in source:
        return f"Boxoban {source['boxoban']}"
    g = source["generate"]
    return f"{g['count']} generated {g['room_size']}×{g['room_size']} rooms with {g['boxes']} box{'es' * (g['boxes'] > 1)}"


def same_levels_as_prior_work(sokoban: sokoban_experiment.Families) -> bool:
    """Whether the config tests on the levels of the published solve rates (Boxoban unfiltered/test)."""
    return sokoban.settings.levels["test"].get("boxoban") == others.LEVELS["boxoban"]


def prior_work_comparison(sokoban: sokoban_experiment.Families) -> str:
    """Whether the config's solve rates compare like for like with the published ones: the same test levels, and
    which published rows were trained for as many environment steps as this config."""
    test, steps = sokoban.settings.levels["test"], sokoban.settings.env_steps
    if not same_levels_as_prior_work(sokoban):
        return (f"Not like for like: the published solve rates are on {describe_levels(others.LEVELS)}, this "
                f"config's test levels are {describe_levels(test)} ({steps:,} environment steps per run).")
    matched = [f"{row.agent} at {steps_text(row.env_steps)}" for row in others.SOKOBAN_SOLVE_RATES
               if row.env_steps == steps]
    length = (f"trained as long as ours ({steps_text(steps)} environment steps): {', '.join(matched)}"
              if matched else f"no published row was trained for {steps_text(steps)} environment steps, as ours were")
    return f"Like for like in levels: ours are also {describe_levels(test)}; {length}."


def steps_text(steps: int) -> str:
    """50M, 2B, 192k: a step count as the literature writes it."""
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if steps >= size:
            return f"{steps / size:g}{unit}"
    return str(steps)


def prior_work_note(sokoban: sokoban_experiment.Families) -> str:
    """The earlier agents' solve rates in one sentence, and whether they compare with this config's."""
    by_source: dict[tuple[str, str], list[str]] = {}
    for row in others.SOKOBAN_SOLVE_RATES:
        spread = "" if row.spread is None else f" ± {row.spread:.3f}"
        by_source.setdefault((row.source, row.protocol), []).append(
            f"{row.agent} {row.solve_rate:.3f}{spread} at {steps_text(row.env_steps)} steps")
    rates = " ".join(f"{'; '.join(found)} ({source}{'; ' + protocol if protocol else ''})."
                     for (source, protocol), found in by_source.items())
    return f"Earlier agents on {describe_levels(others.LEVELS)}: {rates} {prior_work_comparison(sokoban)}"
