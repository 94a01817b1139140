"""The paper's claims decided from this reproduction's results: for each claim, which results it reads, which test
it runs and which verdict follows (`judge`, the table of verdicts; the claims page, reporting.claims, puts the
paper's words beside it, and the planner may call the same rules).

A rule reads datasets and returns a `Finding`: a verdict, our measurement in words, and the statistical test where
seeds allow one. The verdicts:

* supported: the measurement shows the paper's statement, significant where a test exists;
* contradicted: it shows the opposite, significant where a test exists;
* inconclusive: it ran, but does not decide (one seed, a difference within noise, agents at chance);
* not run at this scale: the config does not produce the results the claim needs.

A claim with parts (a budget, a domain, a context) is supported only when every part that ran is, and
contradicted when any part is (`combine`). Every finding names the rule that decided it (`analysis.verdicts`: a
one-sided Welch test over seeds, two standard errors, verdicts.COMPARABLE nats between single LM runs or a margin test
over their seeds, bootstrap intervals). Findings are plain text; escaping is the page's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from parallel_experts import study
from parallel_experts.analysis import depth_rules
from parallel_experts.analysis import expert_count
from parallel_experts.analysis import lm_losses
from parallel_experts.analysis import lm_ablations
from parallel_experts.analysis import probes as probe_analysis
from parallel_experts.analysis import sokoban_scores
from parallel_experts.analysis import sokoban_ablations as ablations
from parallel_experts.analysis import verdicts
from parallel_experts.analysis.verdicts import welch_text, welch_toward
from parallel_experts.core import definitions
from parallel_experts.lm import systems
from parallel_experts.results import store

SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_RUN = "supported", "contradicted", "inconclusive", "not run at this scale"
VERDICTS = (SUPPORTED, CONTRADICTED, INCONCLUSIVE, NOT_RUN)
# The verdict of a rule's direction (analysis.verdicts): the paper's (+1), neither (0), the opposite (−1).
BY_DIRECTION = {1: SUPPORTED, 0: INCONCLUSIVE, -1: CONTRADICTED}
# Where one run per allocation decides: the depth of each family's lowest loss, compared.
LOWEST_LOSS_DEPTH = "depth of each family's lowest loss, one run per allocation"


@dataclass(frozen=True)
class Finding:
    verdict: str  # one of VERDICTS
    measured: str  # our measurement, in words and numbers
    test: str = ""  # the statistical test and its outcome, where seeds allow one
    rule: str = verdicts.NO_RULE  # the rule that decided the verdict (analysis.verdicts)


def not_run(what: str) -> Finding:
    return Finding(NOT_RUN, f"not run (this config does not produce {what})")


def combine(parts: Mapping[str, Finding]) -> Finding:
    """One finding from the parts of a claim: contradicted if any part is, supported if every part that ran
    is, not run if none ran; the measurements (a part that did not run says so) and tests are joined, each under
    its part's name."""
    ran = {name: f for name, f in parts.items() if f.verdict != NOT_RUN}
    verdicts = {f.verdict for f in ran.values()}
    verdict = (NOT_RUN if not ran else CONTRADICTED if CONTRADICTED in verdicts else
               SUPPORTED if verdicts == {SUPPORTED} else INCONCLUSIVE)
    rules = dict.fromkeys(f.rule for f in ran.values() if f.rule)
    return Finding(verdict, "; ".join(f"{name}: {f.measured}" for name, f in parts.items()),
                   "; ".join(f"{name}: {f.test}" for name, f in ran.items() if f.test), "; ".join(rules))


def _decided(direction: int, p: float | None) -> str:
    """The verdict of a difference in the paper's direction (+1) or against it (−1), tested by `p`."""
    return BY_DIRECTION[direction] if verdicts.significant(p) else INCONCLUSIVE


# ------------------------------------------------------------------------------------------------ Sokoban


def _sokoban_scores(data: xr.Dataset, variants: tuple[str, ...] = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    per_seed = sokoban_scores.per_seed_scores(data, variants)
    return per_seed, sokoban_scores.configuration_scores(per_seed, variants)


def _best(scores: pd.DataFrame, recurrent: bool) -> pd.Series:
    """The configuration of `scores` with the best mean in one family."""
    family = scores[scores["recurrent"] == recurrent]
    return family.loc[family["mean"].idxmax()]


def _at_chance(data: xr.Dataset, runs: Iterable[str]) -> bool:
    return sokoban_scores.at_chance(data.sel(run=list(runs)))


def _per_comparison(sweep: xr.Dataset, judge: Callable[[pd.DataFrame, pd.DataFrame], Finding]) -> Finding:
    """`judge(configuration scores, per-seed scores)` of each sweep and budget that has both families, combined;
    where every agent of one is at chance, its part is inconclusive whatever the judge finds."""
    per_seed, scores = _sokoban_scores(sweep)
    parts = {}
    for (name, budget), group in scores.groupby(["sweep", "budget"], sort=False):
        if group["recurrent"].nunique() < 2:
            continue
        found = judge(group, per_seed)
        runs = sweep["run"].values[(sweep["sweep"] == name).values & (sweep["budget"] == budget).values]
        if _at_chance(sweep, runs):
            found = Finding(INCONCLUSIVE, found.measured + "; every agent at chance on the test levels")
        parts[f"{name}, {budget} budget"] = found
    return combine(parts) if parts else not_run("a Sokoban sweep with both families")


def sokoban_fewer_layers(sweep: xr.Dataset) -> Finding:
    """Per sweep and budget with both families: the depth of the best recurrent configuration against the best
    non-recurrent one's. The test: is the family that is best deeper significantly better there than at its best
    within the other family's depth (one-sided Welch over seeds)? Where the non-recurrent family also trains
    deeper than every recurrent run (the large budget's L = 16, §5.1's "still improving"), a second part: its best
    at the deepest depth against its best within the recurrent depths (`_still_improving`). Agents at chance
    decide nothing."""

    def judge(group: pd.DataFrame, per_seed: pd.DataFrame) -> Finding:
        found = _best_depths(group)
        deeper = _still_improving(group, per_seed)
        return found if deeper is None else combine({"best depths": found, "still improving": deeper})

    return _per_comparison(sweep, judge)


def _best_depths(group: pd.DataFrame) -> Finding:
    families = {r: group[group["recurrent"] == r].reset_index(drop=True) for r in (True, False)}
    found = depth_rules.fewer_layers(*(depth_rules.Arms.of_table(families[r]) for r in (True, False)))
    best = {True: families[True].iloc[int(found.recurrent)], False: families[False].iloc[int(found.nonrecurrent)]}
    rec, non = int(best[True]["depth"]), int(best[False]["depth"])
    measured = (f"best recurrent at L = {rec} ({best[True]['mean']:.3f}), non-recurrent at L = {non} "
                f"({best[False]['mean']:.3f})")
    if found.direction == 0:
        return Finding(INCONCLUSIVE, measured + "; the same depth")
    deeper = rec > non  # the family whose best is deeper: True for the recurrent one
    if found.rival < 0:
        return Finding(INCONCLUSIVE, measured + f"; no {definitions.family(deeper)} run at L ≤ {min(rec, non)}")
    p = None if np.isnan(found.p) else float(found.p)
    return Finding(_decided(int(found.direction), p), measured,
                   f"{definitions.family(deeper)} L = {int(best[deeper]['depth'])} > its best at L ≤ "
                   f"{min(rec, non)}: {welch_text(p)}", verdicts.WELCH)


def _still_improving(group: pd.DataFrame, per_seed: pd.DataFrame) -> Finding | None:
    """§5.1: the non-recurrent agents still improve at the deepest depth only they train (L = 16 at the large
    budget). Its best configuration there against its best at the recurrent runs' depths (L ≤ 8), one-sided Welch
    in the direction of the difference; None where the non-recurrent family trains no deeper than the recurrent."""
    non = group[~group["recurrent"].astype(bool)]
    shared = int(group.loc[group["recurrent"].astype(bool), "depth"].max())
    deepest = int(non["depth"].max())
    if deepest <= shared:
        return None
    deep, within = _best(non[non["depth"] == deepest], False), _best(non[non["depth"] <= shared], False)
    gap = deep["mean"] - within["mean"]
    ours, theirs = sokoban_scores.seed_scores(per_seed, deep), sokoban_scores.seed_scores(per_seed, within)
    p = welch_toward(ours, theirs, gap >= 0)
    return Finding(_decided(1 if gap >= 0 else -1, p),
                   f"non-recurrent at L = {deepest} {deep['mean']:.3f} (E = {int(deep['experts'])}, "
                   f"d = {int(deep['width'])}), its best at L ≤ {shared} {within['mean']:.3f} (L = "
                   f"{int(within['depth'])}; {gap:+.3f})",
                   f"non-recurrent L = {deepest} {'>' if gap >= 0 else '<'} its best at L ≤ {shared}: "
                   f"{welch_text(p)}",
                   verdicts.WELCH)


def sokoban_recurrence_better(sweep: xr.Dataset) -> Finding:
    """Per sweep and budget with both families: the best recurrent configuration against the best non-recurrent
    one, beyond two standard errors of the difference (the sweep reports' rule, verdicts.direction)."""

    def judge(group: pd.DataFrame, per_seed: pd.DataFrame) -> Finding:
        rec, non = (group[group["recurrent"] == r].reset_index(drop=True) for r in (True, False))
        gap, stderr, direction = depth_rules.recurrence_better(depth_rules.Arms.of_table(rec),
                                                               depth_rules.Arms.of_table(non))
        test = (f"difference {gap:+.3f} against {verdicts.NOISE_TEXT} (± {verdicts.NOISE * stderr:.3f})"
                if np.isfinite(stderr) else "no test (fewer than two seeds)")
        return Finding(BY_DIRECTION[direction], f"best recurrent {_best(group, True)['mean']:.3f}, best "
                       f"non-recurrent {_best(group, False)['mean']:.3f} ({gap:+.3f})", test,
                       verdicts.TWO_STANDARD_ERRORS)

    return _per_comparison(sweep, judge)


def _against_rival(data: xr.Dataset, setting: str, is_default: Callable[[pd.DataFrame], pd.Series], label: str
                   ) -> tuple[float, float | None, str, str] | None:
    """A Sokoban ablation's default value (the rows `is_default` picks, shown as `label`) against its best other
    value: the difference of means, the one-sided Welch p of that difference's direction (None: no test, from
    one seed or agents at chance), the measurement and the test in words; None where the ablation lacks either
    side."""

    members = ablations.runs(data, setting)
    table = _sokoban_scores(members, (setting,))[1].reset_index(drop=True)
    default = is_default(table).to_numpy()
    if not default.any() or default.all():
        return None
    mine = int(np.flatnonzero(default)[0])
    rival, gap, p = (float(x) for x in depth_rules.against_rival(depth_rules.Arms.of_table(table), mine, ~default))
    rival = table.iloc[int(rival)]
    p = None if np.isnan(p) else p
    mine = table.iloc[mine]
    name = f"{setting} {rival[setting]}"
    measured = f"{label}: {mine['mean']:.3f}, best other ({name}): {rival['mean']:.3f} ({gap:+.3f})"
    if sokoban_scores.at_chance(members):  # nothing to test: the returns of agents at chance
        return gap, None, measured + "; every agent at chance", "no test: every agent at chance"
    return gap, p, measured, f"{label if gap >= 0 else name} better: {welch_text(p)}"


def full_communication(ablations: xr.Dataset) -> Finding:
    """Fig. 11: the full radius best, and significantly better than the best narrower radius (Welch over seeds)."""
    if "radius" not in store.ablation_members(ablations):
        return not_run("the radius ablation")
    found = _against_rival(ablations, "radius", lambda t: t["radius"] >= t["experts"] // 2, "full radius")
    if found is None:
        return not_run("the radius ablation with the full radius and a narrower one")
    gap, p, measured, test = found
    return Finding(_decided(1 if gap >= 0 else -1, p), measured, test, verdicts.WELCH if p is not None else "")


def sokoban_sqrt_sum(ablations: xr.Dataset) -> Finding:
    """Fig. 10 left: no rule significantly better than the sqrt-sum (Welch over seeds; one seed decides nothing)."""
    if "aggregation" not in store.ablation_members(ablations):
        return not_run("the Sokoban aggregation ablation")
    found = _against_rival(ablations, "aggregation", lambda t: t["aggregation"] == "sqrt_sum", "sqrt_sum")
    if found is None:
        return not_run("the Sokoban aggregation ablation with the sqrt-sum and another rule")
    gap, p, measured, test = found
    beaten = gap < 0 and verdicts.significant(p)
    return Finding(CONTRADICTED if beaten else INCONCLUSIVE if p is None else SUPPORTED, measured, test,
                   verdicts.WELCH if p is not None else "")


# The verdict of each Sokoban ablation, on the claims page and on the ablation's own report page.
SOKOBAN_ABLATION_FINDINGS = {"aggregation": sokoban_sqrt_sum, "radius": full_communication}


def sqrt_sum_default(sokoban: xr.Dataset | None, lm: xr.Dataset | None) -> Finding:
    """App. A.3's "consistently competitive": in Sokoban no rule significantly better than the sqrt-sum (Welch
    over seeds; one seed decides nothing), in FineWeb the sqrt-sum within verdicts.COMPARABLE nats of the best rule
    (tested over seeds where there are several, as `lm_comparable_shallow`)."""
    parts = {"Sokoban": not_run("the Sokoban aggregation ablation") if sokoban is None else sokoban_sqrt_sum(sokoban),
             "FineWeb": not_run("the FineWeb aggregation ablation")}
    if lm is not None and "aggregation" in store.ablation_members(lm):
        runs = lm_ablations.members(lm_losses.run_table(lm), lm, "aggregation").dropna(subset=["validation_loss"])
        default, others = runs[runs["aggregation"] == "sqrt_sum"], runs[runs["aggregation"] != "sqrt_sum"]
        if len(default) and len(others):
            mine, rival = default.iloc[0], others.loc[others["validation_loss"].idxmin()]
            gap = mine["validation_loss"] - rival["validation_loss"]
            measured = (f"sqrt_sum: {lm_losses.loss_text(mine)}, best other ({rival['aggregation']}): "
                        f"{lm_losses.loss_text(rival)} ({gap:+.3f} nats)")
            parts["FineWeb"] = _comparable_finding(measured, gap, "sqrt_sum",
                                                   verdicts.comparable_over_seeds(mine["losses"], rival["losses"]))
    return combine(parts)


def plans_earlier(probes: xr.Dataset, deeper: str, shallower: str) -> Finding:
    """Fig. 4's pattern, with the bootstrap intervals over levels of the probe stage (probe_analysis), on the test
    levels every probed run solves (App. F)."""

    test, rule = "the recall's intervals, early and late steps", verdicts.BOOTSTRAP
    if not probe_analysis.scored_levels(probes):
        return Finding(INCONCLUSIVE, "no test level is solved by every probed run: no probe was scored", test, rule)
    found = probe_analysis.compare_pattern(probes, deeper, shallower)
    measured = (f"{probe_analysis.run_label(probes, deeper)} minus {probe_analysis.run_label(probes, shallower)} "
                f"recall: {found['early_gap']:+.3f} early, {found['late_gap']:+.3f} late, "
                f"{probe_analysis.scored_words(probes)}")
    if not found["meaningful"]:
        return Finding(INCONCLUSIVE, measured + "; the probes read no more from the state than from the controls",
                       test, rule)
    if found["shallower_leads"]:
        return Finding(CONTRADICTED, measured + "; the shallower agent leads early", test, rule)
    if not found["leads"]:
        return Finding(INCONCLUSIVE, measured + "; the early intervals overlap", test, rule)
    return Finding(SUPPORTED if found["catches_up"] else CONTRADICTED,
                   measured + ("; the shallower agent catches up" if found["catches_up"] else "; the gap stays"), test,
                   rule)


# ------------------------------------------------------------------------------------------------ FineWeb


def lm_comparable_shallow(sweep: xr.Dataset, budget: str, window: int) -> Finding:
    """Fig. 5: the best recurrent configuration at L ≤ 2 against the best non-recurrent one of the budget and
    window (means over seeds), comparable or better within verdicts.COMPARABLE nats (depth_rules.comparable_shallow):
    tested over seeds where both have several, the single-run rule where not."""

    runs = lm_losses.run_table(sweep)
    runs = runs[(runs["budget"] == budget) & (runs["window"] == window)].dropna(subset=["validation_loss"])
    rec, non = runs[runs["recurrent"].astype(bool)], runs[~runs["recurrent"].astype(bool)]
    if not (rec["depth"] <= 2).any() or not len(non):
        return not_run(f"recurrent runs at L ≤ 2 and non-recurrent runs at the {budget} budget, W = {window}")
    i, j, direction, p = depth_rules.comparable_shallow(*(depth_rules.Arms.of_losses(rows) for rows in (rec, non)))
    r, n = rec.iloc[int(i)], non.iloc[int(j)]
    gap = r["validation_loss"] - n["validation_loss"]
    measured = (f"recurrent {r['allocation']}: {lm_losses.loss_text(r)}, best non-recurrent {n['allocation']}: "
                f"{lm_losses.loss_text(n)} ({gap:+.3f} nats; {budget} budget, W = {window})")
    return _comparable_finding(measured, gap, "recurrent", None if np.isnan(p) else (int(direction), float(p)))


def _comparable_finding(measured: str, gap: float, name: str, tested: tuple[int, float] | None) -> Finding:
    """"Comparable or better" of `name` against a rival whose mean loss is `gap` nats below: `tested`, the direction
    and p of the test over seeds (verdicts.comparable_over_seeds), or None for the single-run rule."""
    if tested is None:
        return Finding(BY_DIRECTION[verdicts.comparable(gap)], measured, "one run each, no test", verdicts.ONE_RUN)
    direction, p = tested
    side = "less" if gap <= verdicts.COMPARABLE else "more"
    return Finding(BY_DIRECTION[direction], measured,
                   f"{name} {side} than {verdicts.COMPARABLE} nats worse: {welch_text(p)}", verdicts.COMPARABLE_SEEDS)


def lm_fewer_layers(sweep: xr.Dataset) -> Finding:
    """Fig. 3 (right): per budget and window, the depth of each family's lowest loss (lm.lm_analysis.fewer_layers,
    the rule of the sweep reports): recurrent shallower, the same, or deeper. With several seeds, the deeper family's
    best must be significantly better than its best within the other's depth (one-sided Welch over seeds); with
    one, the depths alone decide."""

    table = lm_losses.fewer_layers(lm_losses.run_table(sweep))
    if not len(table):
        return not_run("FineWeb losses of both families at one budget and window")
    parts = {}
    for row in table.itertuples():
        measured = (f"recurrent lowest at L = {row.recurrent_depth} ({row.recurrent_loss:.3f}), non-recurrent at "
                    f"L = {row.nonrecurrent_depth} ({row.nonrecurrent_loss:.3f})")
        direction = int(np.sign(row.nonrecurrent_depth - row.recurrent_depth))  # +1: the paper's pattern
        if np.isnan(row.p):
            found = Finding(BY_DIRECTION[direction], measured, "one run per allocation, no test", LOWEST_LOSS_DEPTH)
        else:
            deeper = definitions.family(direction < 0)  # the family whose best is deeper
            depths = sorted((row.recurrent_depth, row.nonrecurrent_depth))
            found = Finding(_decided(direction, row.p), measured,
                            f"{deeper} loss at L = {depths[1]} below its best at L ≤ {depths[0]}: "
                            f"{welch_text(row.p)}", verdicts.WELCH)
        parts[f"{row.budget} budget, W = {row.window}"] = found
    return combine(parts)


def more_experts(points: pd.DataFrame, at_chance: Iterable[str] = ()) -> Finding:
    """Fig. 6: in each domain and family, the (L, d) families whose score rises from the smallest to the largest
    E beyond verdicts.NOISE standard errors (any change for single LM runs) against those where it falls.
    Panels in `at_chance` (Sokoban agents no better than a random policy) decide nothing."""
    trends = expert_count.expert_trends(expert_count.families(points))
    chance = trends["panel"].isin(list(at_chance))
    parts = {}
    for domain in expert_count.DOMAINS:
        for recurrent in (True, False):
            here = trends["panel"].str.startswith(domain) & (trends["recurrent"] == recurrent)
            rows = trends[here & ~chance]
            where = f"{domain}, {definitions.family(recurrent)}"
            if not len(rows):
                parts[where] = (Finding(INCONCLUSIVE, f"{_families(int(here.sum()))}, every agent at chance")
                                if (here & chance).any() else not_run("a family with two values of E"))
                continue
            helped, hurt = int((rows["gain"] > rows["noise"]).sum()), int((rows["gain"] < -rows["noise"]).sum())
            verdict = SUPPORTED if helped and not hurt else CONTRADICTED if hurt > helped else INCONCLUSIVE
            parts[where] = Finding(verdict,
                                   f"more experts help in {helped}, hurt in {hurt} of {_families(len(rows))}",
                                   f"gain beyond {verdicts.NOISE} standard errors over seeds",
                                   verdicts.TWO_STANDARD_ERRORS)
    return combine(parts)


def _families(count: int) -> str:
    return f"{count} (L, d) {'family' if count == 1 else 'families'}"


def _timed(ds: xr.Dataset, variable: str, row: str, **where) -> np.ndarray:
    values = ds[variable].sel(allocation=row, **where).values
    return values[~np.isnan(values)]


def decode_faster(latency: xr.Dataset) -> Finding:
    """Table 5: recurrent L1 E16 against the Transformer L16 E1 at every C and B, tested over the timed calls."""

    rec, tra = systems.label((True, 1, 16)), systems.label(systems.TRANSFORMER)
    if {rec, tra} - set(latency["allocation"].values.tolist()):
        return not_run("both rows of Table 5 compared")
    parts = {}
    for context in latency["context"].values:
        for batch in latency["batch"].values:
            at = {"context": context, "batch": batch}
            ratio = float(latency["ratio"].sel(allocation=rec, **at))
            faster = ratio < 1
            a, b = _timed(latency, "decode_seconds", tra, **at), _timed(latency, "decode_seconds", rec, **at)
            p = welch_toward(a, b, faster)
            parts[f"C = {int(context)}, B = {int(batch)}"] = Finding(
                _decided(1 if faster else -1, p), f"ms/token ratio {ratio:.3f}",
                f"{'Transformer slower' if faster else 'recurrent slower'} over the timed calls: {welch_text(p)}",
                verdicts.WELCH)
    return combine(parts)


def training_slower(throughput: xr.Dataset) -> Finding:
    """Table 6: every recurrent row's tokens/s against the Transformer's at each C, tested over the timed
    updates; an out-of-memory recurrent cell beside a Transformer that fits counts as slower."""

    tra = systems.label(systems.TRANSFORMER)
    rows = [r for r in throughput["allocation"].values.tolist() if r != tra and r.startswith("recurrent")]
    if tra not in throughput["allocation"].values or not rows:
        return not_run("the Transformer and a recurrent row of Table 6")
    parts = {}
    for row in rows:
        for context in throughput["context"].values:
            at = {"allocation": row, "context": context}
            where = f"{row}, C = {int(context)}"
            if bool(throughput["oom"].sel(allocation=tra, context=context)):
                parts[where] = Finding(INCONCLUSIVE, "the Transformer is out of memory")
            elif bool(throughput["oom"].sel(**at)):
                parts[where] = Finding(SUPPORTED, "out of memory where the Transformer fits")
            else:
                ratio = float(throughput["vs_transformer"].sel(**at))
                steps = slice(systems.SKIPPED, None)
                a = _timed(throughput, "update_seconds", row, context=context)[steps]
                b = _timed(throughput, "update_seconds", tra, context=context)[steps]
                p = welch_toward(a, b, ratio < 1)
                parts[where] = Finding(_decided(1 if ratio < 1 else -1, p), f"tokens/s ratio {ratio:.3f}",
                                       f"{'recurrent' if ratio < 1 else 'Transformer'} slower over the timed "
                                       f"updates: {welch_text(p)}", verdicts.WELCH)
    return combine(parts)


# ------------------------------------------------------------------------------------------------ the claims


def _fine_web(data: Mapping[str, xr.Dataset], config: Mapping) -> Finding:
    if "lm_sweep" not in data:
        return not_run("the FineWeb sweep")
    return lm_comparable_shallow(data["lm_sweep"], *study.fig5_setting(config))


def _experts(data: Mapping[str, xr.Dataset], config: Mapping) -> Finding:
    sokoban = [data[name] for name in ("sokoban_sweep", "expert_count") if name in data]
    if not sokoban and "lm_sweep" not in data:
        return not_run("runs with two values of E at one (L, d)")
    found = expert_count.points(sokoban, data.get("lm_sweep"), study.fig5_setting(config)[1])
    return more_experts(found, expert_count.chance_panels(sokoban))


def _plans(data: Mapping[str, xr.Dataset], config: Mapping) -> Finding:
    pair = config["sokoban"].get("probes", {}).get("compare")
    if "probes" not in data or not pair:
        return not_run("probes on two recurrent depths (sokoban.probes.compare)")
    return plans_earlier(data["probes"], *probe_analysis.deeper_first(data["probes"], pair))


def _needs(name: str, rule: Callable[[xr.Dataset], Finding], what: str):
    return lambda data, config: rule(data[name]) if name in data else not_run(what)


def _aggregation(data: Mapping[str, xr.Dataset], config: Mapping) -> Finding:
    return sqrt_sum_default(data.get("sokoban_ablations"), data.get("lm_ablations"))


# Each claim's decision, in the order of the paper: (the results there are, by name, config) -> Finding. The
# names are the claims page's (reporting.claims.CLAIMS); the results' names its notebook's parameters.
DECISIONS: dict[str, Callable[[Mapping[str, xr.Dataset], Mapping], Finding]] = {
    "sokoban_fewer_layers": _needs("sokoban_sweep", sokoban_fewer_layers, "the Sokoban sweeps"),
    "sokoban_recurrence_better": _needs("sokoban_sweep", sokoban_recurrence_better, "the Sokoban sweeps"),
    "plans_earlier": _plans,
    "lm_comparable_shallow": _fine_web,
    "lm_fewer_layers": _needs("lm_sweep", lm_fewer_layers, "the FineWeb sweep"),
    "more_experts": _experts,
    "full_communication": _needs("sokoban_ablations", full_communication, "the Sokoban ablations"),
    "sqrt_sum_default": _aggregation,
    "decode_faster": _needs("latency", decode_faster, "Table 5"),
    "training_slower": _needs("throughput", training_slower, "Table 6"),
}


def judge(config: Mapping, data: Mapping[str, xr.Dataset]) -> pd.DataFrame:
    """The table of verdicts: one row per claim of DECISIONS, in its order, with the claim's name, our measurement,
    the test, the rule that decided and the verdict. `data`: the results this config produces, by name
    (targets.catalogue.CLAIM_INPUTS); a claim whose results are missing is not run."""
    rows = []
    for name, decide in DECISIONS.items():
        found = decide(data, config)
        rows.append({"claim": name, "measured": found.measured, "test": found.test, "rule": found.rule,
                     "verdict": found.verdict})
    return pd.DataFrame(rows, columns=["claim", "measured", "test", "rule", "verdict"])
