"""The paper's claims decided from this reproduction's results: for each claim, which results it reads, which test
it runs and which verdict follows (`judge`, the table of verdicts; the claims page, reporting.claims, puts the
paper's words beside it, and the planner may call the same rules).

A rule reads datasets and returns a `Finding`: a verdict, our measurement in words, and the statistical test. The
verdicts:

* supported: the measurement shows the paper's statement, by a test at α (`calibration`: the rule's p-value against
  its own null at this design, the picking of best allocations included);
* contradicted: it shows the opposite, by such a test;
* inconclusive: it was tested, and the test does not decide (or there is nothing to test: agents at chance);
* untested: there is no test at α at this design (one seed or one agent per arm, one timing round), or the
  rule's chance of its verdict with no effect, at the observed spread, exceeds α: whatever the measurement leans
  to, it is not a verdict;
* not run at this scale: the config does not produce the results the claim needs.

Every tested verdict carries its chance with no effect at the design it was made on (`Finding.no_effect`,
`calibration.no_effect` at each family's pooled seed-to-seed SD). A claim with parts (a budget, a domain, a context)
is supported only when every part that ran is (an intersection-union test: α holds without correction), and
contradicted when a part is at α over the number of tested parts (Bonferroni), so that neither verdict is more likely
than α with no effect (`combine`). Findings are plain text; escaping is the page's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import xarray as xr

from parallel_experts.analysis import calibration
from parallel_experts.analysis import depth_rules
from parallel_experts.analysis import expert_count
from parallel_experts.analysis import lm_losses
from parallel_experts.analysis import lm_ablations
from parallel_experts.analysis import probes as probe_analysis
from parallel_experts.analysis import sokoban_scores
from parallel_experts.analysis import sokoban_ablations as ablations
from parallel_experts.analysis import verdicts
from parallel_experts.analysis.depth_rules import Arms
from parallel_experts.core import definitions
from parallel_experts.lm import systems
from parallel_experts.results import store
from parallel_experts.study import Study

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
UNTESTED, NOT_RUN = "untested", "not run at this scale"
VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE, UNTESTED, NOT_RUN)
TESTED = (SUPPORTED, CONTRADICTED, INCONCLUSIVE)  # the verdicts of a test at α
# The verdict of a test's direction: the paper's (+1), neither (0), the opposite (−1).
BY_DIRECTION = {1: SUPPORTED, 0: INCONCLUSIVE, -1: CONTRADICTED}


@dataclass(frozen=True)
class Evidence:
    """A part's test: its rule on the design it ran, the families' pooled SDs, the direction and its p-value."""

    rule: depth_rules.Rule
    shape: calibration.Design
    sd: Mapping[bool, float]  # each family's pooled SD (calibration.pooled_sd)
    direction: int
    p: float

    def no_effect(self, level: float = verdicts.ALPHA) -> calibration.Rates:
        sd = {family: np.full(len(seeds), self.sd[family]) for family, seeds, _ in self.shape}
        return calibration.no_effect(self.rule, self.shape, sd, level)


@dataclass(frozen=True)
class Finding:
    verdict: str  # one of VERDICTS
    measured: str  # our measurement, in words and numbers
    test: str = ""  # the statistical test and its outcome
    rule: str = verdicts.NO_RULE  # the rule that decided the verdict (analysis.verdicts)
    no_effect: float | None = None  # the chance of this verdict with no effect at this design (tested verdicts)
    decided_by: tuple[str, ...] = ()  # the parts that decided a claim's verdict
    evidence: Evidence | None = None  # a tested part's test, which `combine` decides the claim with
    parts: tuple[tuple[str, Finding], ...] = ()  # a combined finding's parts, each with a test or none


def not_run(what: str) -> Finding:
    return Finding(NOT_RUN, f"not run (this config does not produce {what})")


def tested(rule: depth_rules.Rule, families: Mapping[bool, Arms], measured: str, test: str, rule_text: str,
           statistic: str = "Welch t") -> Finding:
    """The verdict of `rule` on our runs (`families`, one study): supported or contradicted where its p-value
    against its own null is below α and its chance of that verdict with no effect, at each family's pooled SD, is
    within α (plus three Monte Carlo standard errors); untested where it has no test, or where that chance is
    larger. `test` names what the rule compares; the strength (a `statistic`) and p are added."""
    found = calibration.test(rule, families)
    direction, p, t = int(found.direction), float(found.p), float(found.strength)
    if bool(found.untested):
        return Finding(UNTESTED, measured, f"{test}: no test (a side with one seed or one round)", verdicts.UNTESTED)
    if direction == 0:
        return Finding(INCONCLUSIVE, measured, test, rule_text)
    sd = {family: float(calibration.pooled_sd(arms)) for family, arms in families.items()}
    evidence = Evidence(rule, calibration.design(families), sd, direction, p)
    words = f"{test}: {verdicts.tested_text(t, p, statistic)}"
    verdict = BY_DIRECTION[direction] if p < verdicts.ALPHA else INCONCLUSIVE
    if verdict == INCONCLUSIVE:
        return Finding(verdict, measured, words, rule_text, evidence=evidence)
    rates = evidence.no_effect()
    chance = rates.of(direction)
    if not rates.holds(direction):
        return Finding(UNTESTED, measured, f"{words}; but with no effect this rule says {verdict} {chance:.3f} of the "
                       "time at the observed spread, above alpha", verdicts.UNTESTED)
    return Finding(verdict, measured, words, rule_text, chance, evidence=evidence)


def _leaves(parts: Mapping[str, Finding]) -> list[tuple[str, Finding]]:
    """The parts of a claim, each combined part replaced by its own parts (named under it)."""
    found = []
    for name, part in parts.items():
        found += [(f"{name}, {inner}", leaf) for inner, leaf in part.parts] if part.parts else [(name, part)]
    return found


def combine(parts: Mapping[str, Finding]) -> Finding:
    """One finding from the parts of a claim: supported if every part that ran is (each at α: an intersection-union
    test), contradicted if a tested part is at α over the number of tested parts (Bonferroni), untested if no part
    that ran was tested, not run if none ran; the measurements (a part that did not run says so) and tests are
    joined, each under its part's name (a test every part shares, once), and the parts that decided are named."""
    ran = {name: f for name, f in parts.items() if f.verdict != NOT_RUN}
    leaves = _leaves(ran)
    evidence = [(name, f.evidence) for name, f in leaves if f.evidence is not None]
    level = verdicts.ALPHA / max(len(evidence), 1)
    against = [(name, e) for name, e in evidence if e.direction == -1 and e.p < level]
    rules = "; ".join(dict.fromkeys(f.rule for f in ran.values() if f.rule))
    if len(evidence) > 1:
        rules += f"; parts: contradicted at alpha / {len(evidence)} (Bonferroni)"
    verdict, decided, chance = INCONCLUSIVE, (), None
    if not ran:
        verdict = NOT_RUN
    elif against:
        verdict, decided = CONTRADICTED, tuple(name for name, _ in against)
        chance = min(1.0, sum(e.no_effect(level).contradicted for _, e in evidence))
    elif all(f.verdict == SUPPORTED for _, f in leaves):
        # The least favourable null of an intersection-union test: one part with no effect, the others certain.
        verdict, decided, chance = SUPPORTED, tuple(name for name, _ in leaves), max(f.no_effect for _, f in leaves)
    elif all(f.verdict == UNTESTED for _, f in leaves):
        verdict = UNTESTED
    tests = {name: f.test for name, f in ran.items() if f.test}
    shared = len(tests) > 1 and len(set(tests.values())) == 1  # one reason for every part (one timing block) once
    test = next(iter(tests.values())) if shared else "; ".join(f"{name}: {t}" for name, t in tests.items())
    return Finding(verdict, "; ".join(f"{name}: {f.measured}" for name, f in parts.items()), test, rules, chance,
                   decided, parts=tuple(leaves))


# ------------------------------------------------------------------------------------------------ Sokoban


def _sokoban_scores(data: xr.Dataset, variants: tuple[str, ...] = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    per_seed = sokoban_scores.per_seed_scores(data, variants)
    return per_seed, sokoban_scores.configuration_scores(per_seed, variants)


def _at_chance(data: xr.Dataset, runs: Iterable[str]) -> bool:
    return sokoban_scores.at_chance(data.sel(run=list(runs)))


def _per_comparison(sweep: xr.Dataset, judge: Callable[[dict[bool, pd.DataFrame], dict[bool, Arms]], Finding]
                    ) -> Finding:
    """`judge(configuration scores by family, their arms)` of each sweep and budget that has both families,
    combined; where every agent of one is at chance, its part is inconclusive whatever the judge finds."""
    scores = _sokoban_scores(sweep)[1]
    parts = {}
    for (name, budget), group in scores.groupby(["sweep", "budget"], sort=False):
        if group["recurrent"].nunique() < 2:
            continue
        tables = {r: group[group["recurrent"] == r].reset_index(drop=True) for r in (True, False)}
        found = judge(tables, {r: Arms.of_table(table) for r, table in tables.items()})
        runs = sweep["run"].values[(sweep["sweep"] == name).values & (sweep["budget"] == budget).values]
        if _at_chance(sweep, runs):
            found = Finding(INCONCLUSIVE, found.measured + "; every agent at chance on the test levels")
        parts[f"{name}, {budget} budget"] = found
    return combine(parts) if parts else not_run("a Sokoban sweep with both families")


def sokoban_fewer_layers(sweep: xr.Dataset) -> Finding:
    """Per sweep and budget with both families: the depth of the best recurrent configuration against the best
    non-recurrent one's. The test: is the family that is best deeper significantly better there than at its best
    within the other family's depth (depth_rules.FewerLayersRule against its own null)? Where the non-recurrent
    family also trains deeper than every recurrent run (the large budget's L = 16, §5.1's "still improving"), a
    second part: its best at the deepest depth against its best within the recurrent depths (`_still_improving`).
    Agents at chance decide nothing."""

    def judge(tables: dict[bool, pd.DataFrame], families: dict[bool, Arms]) -> Finding:
        found = _best_depths(tables, families)
        deeper = _still_improving(tables, families)
        return found if deeper is None else combine({"best depths": found, "still improving": deeper})

    return _per_comparison(sweep, judge)


def _best_depths(tables: dict[bool, pd.DataFrame], families: dict[bool, Arms]) -> Finding:
    found = depth_rules.fewer_layers(families[True], families[False])
    best = {True: tables[True].iloc[int(found.recurrent)], False: tables[False].iloc[int(found.nonrecurrent)]}
    rec, non = int(best[True]["depth"]), int(best[False]["depth"])
    measured = (f"best recurrent at L = {rec} ({best[True]['mean']:.3f}), non-recurrent at L = {non} "
                f"({best[False]['mean']:.3f})")
    if found.direction == 0:
        return Finding(INCONCLUSIVE, measured + "; the same depth")
    deeper = rec > non  # the family whose best is deeper: True for the recurrent one
    if found.rival < 0:
        return Finding(INCONCLUSIVE, measured + f"; no {definitions.family(deeper)} run at L ≤ {min(rec, non)}")
    return tested(depth_rules.FewerLayersRule(), families, measured,
                  f"{definitions.family(deeper)} L = {int(best[deeper]['depth'])} > its best at L ≤ {min(rec, non)}",
                  verdicts.PICKS)


def _still_improving(tables: dict[bool, pd.DataFrame], families: dict[bool, Arms]) -> Finding | None:
    """§5.1: the non-recurrent agents still improve at the deepest depth only they train (L = 16 at the large
    budget). Its best configuration there against its best at the recurrent runs' depths (L ≤ 8), both picked from
    the noisy means (depth_rules.BestAgainst); None where the non-recurrent family trains no deeper than the
    recurrent."""
    shared = int(tables[True]["depth"].max())
    depths = sorted(int(d) for d in tables[False]["depth"].unique())
    if depths[-1] <= shared:
        return None
    rule = depth_rules.BestAgainst((depths[-1],), tuple(d for d in depths if d <= shared), family=False)
    i, j = (tables[False].iloc[int(k)] for k in rule.picks(families[False]))
    gap = i["mean"] - j["mean"]
    return tested(rule, families,
                  f"non-recurrent at L = {depths[-1]} {i['mean']:.3f} (E = {int(i['experts'])}, "
                  f"d = {int(i['width'])}), "
                  f"its best at L ≤ {shared} {j['mean']:.3f} (L = {int(j['depth'])}; {gap:+.3f})",
                  f"non-recurrent L = {depths[-1]} {'>' if gap >= 0 else '<'} its best at L ≤ {shared}",
                  verdicts.PICKS)


def sokoban_recurrence_better(sweep: xr.Dataset) -> Finding:
    """Per sweep and budget with both families: the best recurrent configuration against the best non-recurrent
    one (depth_rules.RecurrenceBetter against its own null: each family's best is picked from its noisy means)."""

    def judge(tables: dict[bool, pd.DataFrame], families: dict[bool, Arms]) -> Finding:
        rec, non = (tables[r].iloc[int(i)] for r, i in zip((True, False), depth_rules.best_pair(*families.values())))
        gap = rec["mean"] - non["mean"]
        return tested(depth_rules.RecurrenceBetter(), families,
                      f"best recurrent {rec['mean']:.3f}, best non-recurrent {non['mean']:.3f} ({gap:+.3f})",
                      f"best recurrent {'>' if gap >= 0 else '<'} best non-recurrent", verdicts.PICKS)

    return _per_comparison(sweep, judge)


def _against_rival(data: xr.Dataset, setting: str, is_default: Callable[[pd.DataFrame], pd.Series], label: str,
                   margin: float, rule_text: str) -> Finding:
    """A Sokoban ablation's default value (the rows `is_default` picks, shown as `label`) against its best other
    value, with a `margin` for "competitive" (depth_rules.AgainstRival against its own null: the rival is picked from
    the noisy means); not run where the ablation lacks either side, inconclusive where every agent is at chance."""
    if setting not in store.ablation_members(data):
        return not_run(f"the Sokoban {setting} ablation")
    members = ablations.runs(data, setting)
    table = _sokoban_scores(members, (setting,))[1].reset_index(drop=True)
    default = is_default(table).to_numpy()
    if not default.any() or default.all():
        return not_run(f"the Sokoban {setting} ablation with the {label} and another value")
    rule = depth_rules.AgainstRival.of(default, margin)
    arms = Arms.of_table(table)
    mine, rival = table.iloc[rule.default], table.iloc[int(rule.rival(arms))]
    gap = mine["mean"] - rival["mean"]
    name = f"{setting} {rival[setting]}"
    measured = f"{label}: {mine['mean']:.3f}, best other ({name}): {rival['mean']:.3f} ({gap:+.3f})"
    if sokoban_scores.at_chance(members):  # nothing to test: the returns of agents at chance
        return Finding(INCONCLUSIVE, measured + "; every agent at chance", "no test: every agent at chance")
    within = f" + {margin}" if margin else ""
    return tested(rule, {True: arms}, measured, f"{label}{within} {'>' if gap + margin >= 0 else '<'} {name}",
                  rule_text)


def full_communication(ablations: xr.Dataset) -> Finding:
    """Fig. 11: the full radius significantly better than the best narrower radius."""
    return _against_rival(ablations, "radius", lambda t: t["radius"] >= t["experts"] // 2, "full radius", 0.0,
                          verdicts.PICKS)


def sokoban_sqrt_sum(ablations: xr.Dataset, margin: float) -> Finding:
    """Fig. 10 left, "consistently competitive": the sqrt-sum significantly less than `margin` (of return) below the
    best other rule (a non-inferiority test); contradicted where it is significantly more below it."""
    return _against_rival(ablations, "aggregation", lambda t: t["aggregation"] == "sqrt_sum", "sqrt_sum", margin,
                          verdicts.MARGIN)


def not_evidence(faults: Iterable[str]) -> Finding:
    """The finding of a claim whose results hold `faults` (scored_seeds.faults): untested, saying why."""
    return Finding(UNTESTED, verdicts.not_decided(list(faults)),
                   "no test: a missing or non-finite result is no evidence", verdicts.UNTESTED)


def sokoban_ablation(study: Study, setting: str, ablations: xr.Dataset, faults: Iterable[str] = ()) -> Finding:
    """The verdict of a Sokoban ablation, on the claims page and on the ablation's own report page (`faults`: what in
    `ablations` is no evidence, scored_seeds.faults; then none)."""
    if faults:
        return not_evidence(faults)
    if setting == "aggregation":
        return sokoban_sqrt_sum(ablations, study.margins.sokoban)
    return full_communication(ablations)


def sqrt_sum_default(sokoban: xr.Dataset | None, lm: xr.Dataset | None, margins: verdicts.Margins) -> Finding:
    """App. A.3's "consistently competitive": in each domain the sqrt-sum against the best other rule, non-inferior
    within the domain's margin."""
    parts = {"Sokoban": not_run("the Sokoban aggregation ablation") if sokoban is None
             else sokoban_sqrt_sum(sokoban, margins.sokoban),
             "FineWeb": not_run("the FineWeb aggregation ablation")}
    if lm is not None and "aggregation" in store.ablation_members(lm):
        runs = lm_ablations.members(lm_losses.run_table(lm), lm, "aggregation").dropna(subset=["validation_loss"])
        runs = runs.reset_index(drop=True)
        default = (runs["aggregation"] == "sqrt_sum").to_numpy()
        if default.any() and not default.all():
            rule = depth_rules.AgainstRival.of(default, margins.lm)
            arms = Arms.of_losses(runs)
            mine, rival = runs.iloc[rule.default], runs.iloc[int(rule.rival(arms))]
            gap = mine["validation_loss"] - rival["validation_loss"]
            parts["FineWeb"] = tested(rule, {True: arms},
                                      f"sqrt_sum: {lm_losses.loss_text(mine)}, best other ({rival['aggregation']}): "
                                      f"{lm_losses.loss_text(rival)} ({gap:+.3f} nats)",
                                      f"sqrt_sum {_within(gap, margins.lm)} nats worse", verdicts.MARGIN)
    return combine(parts)


def _within(gap: float, margin: float) -> str:
    return f"{'less' if gap <= margin else 'more'} than {margin}"


def plans_earlier(probes: xr.Dataset, deeper: str, shallower: str, margin: float = verdicts.RECALL_COMPARABLE
                  ) -> Finding:
    """Fig. 4's pattern, on the test levels every probed agent solves (App. F), tested over agents: each probed
    agent's state recall over the early steps (probe_analysis.EARLY) is its score, the deeper run's agents against
    the shallower run's (a one-sided Welch t, depth_rules.AgainstRival against its own null): "leads at first". Then
    "catches up", the paper's "after which both maintain similar recall": over the late steps (LATE) the shallower
    run's agents no more than `margin` of recall below the deeper run's (a non-inferiority test; a gap that narrows
    but stays, as App. F's L = 1 against L = 8, is not caught up). Supported where both parts are (`combine`). Each
    agent's score is a mean over the scored levels, so the test over agents carries their level-to-level noise too.
    First, every agent's state must read more than its controls; with one agent per run there is no test over
    agents, and the pattern is untested whichever way it leans."""
    test, rule = "the recall's intervals over test levels, early and late steps", verdicts.BOOTSTRAP
    if not probe_analysis.scored_levels(probes):
        return Finding(INCONCLUSIVE, "no test level is solved by every probed agent: no probe was scored", test, rule)
    view = probe_analysis.over_agents(probes)
    found = probe_analysis.compare_pattern(view, deeper, shallower, margin=margin)
    measured = (f"{probe_analysis.run_label(probes, deeper)} minus {probe_analysis.run_label(probes, shallower)} "
                f"recall: {probe_analysis.gaps_words(found)}, "
                f"{probe_analysis.scored_words(probes)}, {probe_analysis.agents_words(probes)}")
    if not all(probe_analysis.agents_beat_controls(probes, run)[0] for run in (deeper, shallower)):
        return Finding(INCONCLUSIVE, measured + "; the probes read no more from the state than from the controls",
                       test, rule)
    if probe_analysis.agents(probes) < 2:
        leans = ("the shallower agent leads early" if found["shallower_leads"] else
                 "the early intervals overlap" if not found["leads"] else
                 "the shallower agent catches up" if found["catches_up"] else "the gap stays")
        return Finding(UNTESTED, f"{measured}; {leans}", f"{test}; one agent per depth: agents are not resampled",
                       verdicts.UNTESTED)
    early, late = (probe_analysis.agent_scores(probes, (deeper, shallower), window)
                   for window in (probe_analysis.EARLY, probe_analysis.LATE))
    depths = [int(probes["depth"].sel(run=run)) for run in (deeper, shallower)]
    deep, shallow = (f"L = {depth}" for depth in depths)
    (e0, e1), (l0, l1) = probe_analysis.EARLY, probe_analysis.LATE
    first = np.array([True, False])  # the first row's agents against the second's
    leads = depth_rules.AgainstRival.of(first)
    caught_up = depth_rules.AgainstRival.of(first, margin)  # the shallower run's agents first
    found = combine({
        "leads at first": _agents_test(early, depths, f"recall over steps {e0}-{e1}", leads,
                                       f"{deep} {'>' if _gap(early) >= 0 else '<'} {shallow} over agents",
                                       verdicts.AGENTS),
        "catches up": _agents_test(late[::-1], depths[::-1], f"recall over steps {l0}-{l1}", caught_up,
                                   f"{shallow} {_within(_gap(late), margin)} below {deep} over agents",
                                   verdicts.AGENTS_MARGIN)})
    return replace(found, measured=f"{measured}; {found.measured}")


def _gap(scores: np.ndarray) -> float:
    """The first row's mean score minus the second's (rows: runs, columns: agents)."""
    mean = np.nanmean(scores, axis=1)
    return float(mean[0] - mean[1])


def _agents_test(scores: np.ndarray, depths: list[int], what: str, rule: depth_rules.AgainstRival, outcome: str,
                 rule_text: str) -> Finding:
    """`rule` on the probed agents' scores (one row per run, `depths` in its order; one column per agent): the first
    row's agents against the second's, a one-sided Welch t over agents against the rule's own null."""
    first, second = (f"L = {depth}" for depth in depths)
    measured = (f"{what} per agent: {first} {_agent_values(scores[0])}, {second} {_agent_values(scores[1])} "
                f"({_gap(scores):+.3f})")
    if np.isnan(scores).any():
        return Finding(INCONCLUSIVE, measured + "; an agent's scored episodes reach none of these steps")
    return tested(rule, {True: Arms.of_scores(scores, depths)}, measured, f"{what}: {outcome}", rule_text)


def _agent_values(values: np.ndarray) -> str:
    return "[" + ", ".join(f"{value:.3f}" for value in values) + "]"


# ------------------------------------------------------------------------------------------------ FineWeb


def _runs_at(runs: pd.DataFrame, budget: str, window: int) -> dict[bool, pd.DataFrame]:
    """A budget and window's runs with a validation loss, by family (recurrent: True), each in its table order."""
    here = runs[(runs["budget"] == budget) & (runs["window"] == window)].dropna(subset=["validation_loss"])
    return {r: here[here["recurrent"].astype(bool) == r].reset_index(drop=True) for r in (True, False)}


def lm_comparable_shallow(sweep: xr.Dataset, budget: str, window: int, margin: float) -> Finding:
    """Fig. 5: the best recurrent configuration at L ≤ 2 against the best non-recurrent one of the budget and
    window (means over seeds), comparable or better within `margin` nats: a non-inferiority test of the
    two picked from the noisy means (depth_rules.RecurrenceBetter with the margin), untested with one seed."""
    tables = _runs_at(lm_losses.run_table(sweep), budget, window)
    rec, non = tables[True], tables[False]
    if not (rec["depth"] <= 2).any() or not len(non):
        return not_run(f"recurrent runs at L ≤ 2 and non-recurrent runs at the {budget} budget, W = {window}")
    rule = depth_rules.RecurrenceBetter(shallow=2, margin=margin)
    families = {r: Arms.of_losses(table) for r, table in tables.items()}
    i, j = depth_rules.best_pair(families[True], families[False], rule.shallow)
    r, n = rec.iloc[int(i)], non.iloc[int(j)]
    gap = r["validation_loss"] - n["validation_loss"]
    measured = (f"recurrent {r['allocation']}: {lm_losses.loss_text(r)}, best non-recurrent {n['allocation']}: "
                f"{lm_losses.loss_text(n)} ({gap:+.3f} nats; {budget} budget, W = {window})")
    return tested(rule, families, measured, f"recurrent {_within(gap, margin)} nats worse",
                  verdicts.MARGIN)


def lm_fewer_layers(sweep: xr.Dataset) -> Finding:
    """Fig. 3 (right): per budget and window, the depth of each family's lowest loss (lm_losses.fewer_layers, the
    rule of the sweep reports): recurrent shallower, the same, or deeper; the deeper family's best must be
    significantly better than its best within the other's depth (depth_rules.FewerLayersRule against its own null),
    untested with one seed."""
    runs = lm_losses.run_table(sweep)
    table = lm_losses.fewer_layers(runs)
    if not len(table):
        return not_run("FineWeb losses of both families at one budget and window")
    parts = {}
    for row in table.itertuples():
        measured = (f"recurrent lowest at L = {row.recurrent_depth} ({row.recurrent_loss:.3f}), non-recurrent at "
                    f"L = {row.nonrecurrent_depth} ({row.nonrecurrent_loss:.3f})")
        direction = int(np.sign(row.nonrecurrent_depth - row.recurrent_depth))  # +1: the paper's pattern
        where = f"{row.budget} budget, W = {row.window}"
        if direction == 0:
            parts[where] = Finding(INCONCLUSIVE, measured + "; the same depth")
            continue
        deeper = definitions.family(direction < 0)  # the family whose best is deeper
        depths = sorted((row.recurrent_depth, row.nonrecurrent_depth))
        families = {r: Arms.of_losses(rows) for r, rows in _runs_at(runs, row.budget, row.window).items()}
        parts[where] = tested(depth_rules.FewerLayersRule(), families, measured,
                              f"{deeper} loss at L = {depths[1]} below its best at L ≤ {depths[0]}", verdicts.PICKS)
    return combine(parts)


def more_experts(points: pd.DataFrame, at_chance: Iterable[str] = ()) -> Finding:
    """Fig. 6: in each domain and family, each (L, d) group's score at its largest E against its smallest; the
    strongest gain or loss over the groups decides, against its own null (depth_rules.MoreExperts: a max-statistic,
    so that many groups do not make a chance gain likely), untested where every group has one seed (FineWeb's
    runs). Panels in `at_chance` (Sokoban agents no better than a random policy) decide nothing."""
    found = expert_count.families(points)
    chance = found["panel"].isin(list(at_chance))
    parts = {}
    for domain in expert_count.DOMAINS:
        for recurrent in (True, False):
            here = found["panel"].str.startswith(domain) & (found["recurrent"] == recurrent)
            rows = found[here & ~chance].reset_index(drop=True)
            where = f"{domain}, {definitions.family(recurrent)}"
            if not len(rows):
                count = found[here].groupby(expert_count.FAMILY).ngroups
                parts[where] = (Finding(INCONCLUSIVE, f"{_families(count)}, every agent at chance")
                                if (here & chance).any() else not_run("a family with two values of E"))
                continue
            groups = rows.groupby(expert_count.FAMILY, sort=False)["experts"]
            rule = depth_rules.MoreExperts(tuple(map(int, groups.idxmin())), tuple(map(int, groups.idxmax())))
            arms = _point_arms(rows)
            gains = rule.groups(arms)
            parts[where] = tested(rule, {recurrent: arms},
                                  f"the largest E scores higher in {int((gains > 0).sum())}, lower in "
                                  f"{int((gains < 0).sum())} of {_families(len(rule.first))} with seeds to test",
                                  "the strongest change over the groups", verdicts.MAX_OVER_GROUPS)
    return combine(parts)


def _point_arms(rows: pd.DataFrame) -> Arms:
    """Fig. 6 points as arms (higher is better: a loss is negated), their variance from the standard error."""
    seeds = rows["seeds"].to_numpy(int)
    variance = np.where(seeds > 1, rows["stderr"].to_numpy(float) ** 2 * seeds, np.nan)
    return Arms((rows["sign"] * rows["score"]).to_numpy(float), variance, seeds, rows["depth"].to_numpy(int))


def _families(count: int) -> str:
    return f"{count} (L, d) {'family' if count == 1 else 'families'}"


# Tables 5 and 6 written before their rows took turns in random rounds timed each row in one block of back-to-back
# calls: a drift of the machine's load between blocks moves a whole row, and no test over calls inside a block holds
# alpha (issue 41: 0.13-0.21 with no effect).
_ONE_BLOCK = "timed in one block per row, not in interleaved rounds: the load's drift between blocks is in no test"


def _time_ratio(seconds: xr.DataArray, row: str, slower: bool, measured: str) -> Finding:
    """`row` against the Transformer at one cell of a systems table (`seconds` over rounds): the paired t over rounds
    of their log time ratio (depth_rules.TimeRatio)."""
    if "round" not in seconds.dims:
        return Finding(UNTESTED, measured, _ONE_BLOCK, verdicts.UNTESTED)
    ratios = np.log(seconds.sel(allocation=row) / seconds.sel(allocation=systems.label(systems.TRANSFORMER)))
    arms = Arms.of_scores(ratios.values[None], [0])
    test = f"{'slower' if slower else 'quicker'} than the Transformer over {ratios.sizes['round']} rounds"
    return tested(depth_rules.TimeRatio(slower), {True: arms}, measured, test, verdicts.ROUNDS, "paired t")


def decode_faster(latency: xr.Dataset) -> Finding:
    """Table 5: recurrent L1 E16 against the Transformer L16 E1 at every C and B, tested over rounds."""

    rec, tra = systems.label((True, 1, 16)), systems.label(systems.TRANSFORMER)
    if {rec, tra} - set(latency["allocation"].values.tolist()):
        return not_run("both rows of Table 5 compared")
    parts = {}
    for context in latency["context"].values:
        for batch in latency["batch"].values:
            at = {"context": context, "batch": batch}
            ratio = float(latency["ratio"].sel(allocation=rec, **at))
            measured = f"ms/token ratio {ratio:.3f} ({'recurrent' if ratio < 1 else 'Transformer'} faster)"
            parts[f"C = {int(context)}, B = {int(batch)}"] = _time_ratio(latency["decode_seconds"].sel(**at), rec,
                                                                         False, measured)
    return combine(parts)


def training_slower(throughput: xr.Dataset) -> Finding:
    """Table 6: every recurrent row's time per update against the Transformer's at each C, tested over rounds; a
    cell out of memory is no speed, so not part of the test (it is said as such)."""

    tra = systems.label(systems.TRANSFORMER)
    rows = [r for r in throughput["allocation"].values.tolist() if r != tra and r.startswith("recurrent")]
    if tra not in throughput["allocation"].values or not rows:
        return not_run("the Transformer and a recurrent row of Table 6")
    parts = {}
    for row in rows:
        for context in throughput["context"].values:
            at, name = {"allocation": row, "context": context}, f"{row}, C = {int(context)}"
            if bool(throughput["oom"].sel(allocation=tra, context=context)):
                parts[name] = Finding(NOT_RUN, "the Transformer is out of memory")
            elif bool(throughput["oom"].sel(**at)):
                parts[name] = Finding(NOT_RUN, "out of memory where the Transformer fits (a memory limit, not a speed)")
            else:
                ratio = float(throughput["vs_transformer"].sel(**at))
                measured = f"tokens/s ratio {ratio:.3f} ({'recurrent' if ratio < 1 else 'Transformer'} slower)"
                seconds = throughput["round_seconds" if "round_seconds" in throughput else "update_seconds"]  # older
                parts[name] = _time_ratio(seconds.sel(context=context), row, True, measured)
    return combine(parts)


# ------------------------------------------------------------------------------------------------ the claims


def _fine_web(data: Mapping[str, xr.Dataset], study: Study) -> Finding:
    if "lm_sweep" not in data:
        return not_run("the FineWeb sweep")
    return lm_comparable_shallow(data["lm_sweep"], *study.fig5, study.margins.lm)


def _experts(data: Mapping[str, xr.Dataset], study: Study) -> Finding:
    sokoban = [data[name] for name in ("sokoban_sweep", "expert_count") if name in data]
    if not sokoban and "lm_sweep" not in data:
        return not_run("runs with two values of E at one (L, d)")
    found = expert_count.points(sokoban, data.get("lm_sweep"), study.fig5[1])
    return more_experts(found, expert_count.chance_panels(sokoban))


def _plans(data: Mapping[str, xr.Dataset], study: Study) -> Finding:
    probes = study.sokoban.settings.probes
    pair = probes.compare if probes is not None else ()
    if "probes" not in data or not pair:
        return not_run("probes on two recurrent depths (sokoban.probes.compare)")
    return plans_earlier(data["probes"], *probe_analysis.deeper_first(data["probes"], pair),
                         study.margins.recall)


def _aggregation(data: Mapping[str, xr.Dataset], study: Study) -> Finding:
    return sqrt_sum_default(data.get("sokoban_ablations"), data.get("lm_ablations"), study.margins)


@dataclass(frozen=True)
class Decision:
    reads: tuple[str, ...]  # the results it may read, by name
    decide: Callable[[Mapping[str, xr.Dataset], Study], Finding]  # (the results there are, the study) -> Finding


def _one(name: str, rule: Callable[[xr.Dataset], Finding], what: str) -> Decision:
    return Decision((name,), lambda data, study: rule(data[name]) if name in data else not_run(what))


# Each claim's decision, in the order of the paper. The names are the claims page's (reporting.claims.CLAIMS); the
# results' names its notebook's parameters.
DECISIONS: dict[str, Decision] = {
    "sokoban_fewer_layers": _one("sokoban_sweep", sokoban_fewer_layers, "the Sokoban sweeps"),
    "sokoban_recurrence_better": _one("sokoban_sweep", sokoban_recurrence_better, "the Sokoban sweeps"),
    "plans_earlier": Decision(("probes",), _plans),
    "lm_comparable_shallow": Decision(("lm_sweep",), _fine_web),
    "lm_fewer_layers": _one("lm_sweep", lm_fewer_layers, "the FineWeb sweep"),
    "more_experts": Decision(("sokoban_sweep", "expert_count", "lm_sweep"), _experts),
    "full_communication": _one("sokoban_ablations", full_communication, "the Sokoban ablations"),
    "sqrt_sum_default": Decision(("sokoban_ablations", "lm_ablations"), _aggregation),
    "decode_faster": _one("latency", decode_faster, "Table 5"),
    "training_slower": _one("throughput", training_slower, "Table 6"),
}


def judge(study: Study, data: Mapping[str, xr.Dataset], faults: Mapping[str, list[str]] | None = None
          ) -> pd.DataFrame:
    """The table of verdicts: one row per claim of DECISIONS, in its order, with the claim's name, our measurement,
    the test, the rule that decided, the verdict, its chance with no effect (NaN where it is no tested verdict) and
    the parts that decided it. `data`: the results this config produces, by name (targets.catalogue.CLAIM_INPUTS);
    a claim whose results are missing is not run. `faults`: what in each result is no evidence
    (scored_seeds.faults), by name; a claim that reads such a result is untested, and says why."""
    columns = ["claim", "measured", "test", "rule", "verdict", "no_effect", "decided_by"]
    rows, faults = [], faults or {}
    for name, decision in DECISIONS.items():
        unsound = [f"{result}: {fault}" for result in decision.reads for fault in faults.get(result, ())]
        found = not_evidence(unsound) if unsound else decision.decide(data, study)
        rows.append([name, found.measured, found.test, found.rule, found.verdict,
                     np.nan if found.no_effect is None else found.no_effect, found.decided_by])
    return pd.DataFrame(rows, columns=columns)
