"""`python -m parallel_experts power --configfile FILE`: what each claim costs to decide, before any GPU-hour.

For each decision of the claims page that has a statistical rule over seeds, and each of the authors' Welch depth
tests (Tables 1 and 7), at each budget of the config's ConvLSTM sweep and each budget and window of its FineWeb sweep:
the power of designs (which allocations, how many seeds each; analysis.power) and their device-hours (the planner's
prices of the runs' training and evaluation, per seed, on each device the config knows). It reports the cheapest
design that reaches 80 % and 90 % power, and the power of the config's own design.

Inputs, each printed with its source: the recurrent ConvLSTM family's per-allocation means and seed-to-seed SDs are
the authors' per-seed returns (Table 7) where the budget is the paper's; every other family and budget takes the
config's `power.sokoban` or `power.lm` assumption, with its stated reason (none is assumed silently: a missing one is
an error).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from parallel_experts.analysis import calibration, comparison, depth_rules, sokoban_scores, verdicts
from parallel_experts.analysis import power as stats
from parallel_experts.analysis.power import Decision, Truth
from parallel_experts.config.errors import ConfigError, PipelineError
from parallel_experts.config.options import at_least, configfile, count, option, output
from parallel_experts.config.settings import FamilyAssumption, PowerAssumptions
from parallel_experts.core import atomic, records
from parallel_experts.core.definitions import family
from parallel_experts.lm import experiment as lm_experiment
from parallel_experts.lm.settings import ModelConfig
from parallel_experts.planning import costs, designs, resources
from parallel_experts.results import paths
from parallel_experts.sokoban import experiment as sokoban_experiment
from parallel_experts.sokoban.settings import AgentConfig
from parallel_experts.study import Study

SWEEP = sokoban_scores.PAPER_EXPERT  # the sweep whose claims are analysed: the authors' ConvLSTM
TARGETS = (0.8, 0.9)  # the powers a design is sought for
SEEDS = (2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 15, 20, 25, 30, 40, 50)  # the seeds per allocation a design may take
# The designs of a test: every allocation of the budget the decision reads, or only the best (by the inputs) at each
# depth, the cheapest way to ask the same question when the inputs are right; an ablation's values have no depths;
# Fig. 6 is decided by one (L, d) family that gains, the one whose gain is largest in standard deviations.
DESIGNS = {"sokoban": ("every allocation", "best per depth"), "lm": ("every allocation", "best per depth"),
           "ablation": ("every allocation",), "experts": ("every allocation", "one (L, d) family")}
# Each Sokoban ablation's claim: (the claims page's name, the default value, whether it is tested within the
# Sokoban margin (non-inferiority), its decision).
PRICED_AS = {"experts": "sokoban"}  # a decision's domain -> the domain whose prices it reads
ABLATIONS = {"radius": ("full_communication", "full", False, verdicts.PICKS),
             "aggregation": ("sqrt_sum_default", "sqrt_sum", True, verdicts.MARGIN)}
# The claims of the page whose power this analysis does not model, and why (the claims page's cost column says so).
_TIMING = ("not a question of seeds: a timing benchmark tested over its rounds (lm.latency.rounds, "
           "lm.throughput.rounds; the plan prices rule bench)")
NOT_MODELLED = {
    "plans_earlier": "not modelled: Welch t tests over probed agents (sokoban.probes.seeds) of their early recall and, "
                     "within claims.margins.recall, their late recall, whose agent-to-agent spread nobody has "
                     "published (the paper probes one agent per depth); more probed agents, and more test levels that "
                     "all of them solve, decide it",
    "decode_faster": _TIMING,
    "training_slower": _TIMING,
}
# Why a modelled claim has no decision at a config, by the claims page's name: what its decisions need of the config.
_BOTH = "trains both families (recurrent: [true, false]), which its decisions compare"
NEEDS = {
    "sokoban_fewer_layers": f"no budget of the sweep sokoban.sweeps.{SWEEP} {_BOTH}",
    "sokoban_recurrence_better": f"no budget of the sweep sokoban.sweeps.{SWEEP} {_BOTH}",
    "more_experts": f"no (L, d) of the sweep sokoban.sweeps.{SWEEP} has two values of E at a budget that {_BOTH}",
    "lm_fewer_layers": f"no budget and window of the config's FineWeb sweep (lm.sweeps) {_BOTH}",
    "lm_comparable_shallow": f"Fig. 5's setting (Study.fig5: the small budget at the config's first window) "
                             f"is not a budget and window of the FineWeb sweep that {_BOTH}",
    "full_communication": "no Sokoban radius ablation with the full value and another (sokoban.ablations.radius)",
    "sqrt_sum_default": "no Sokoban aggregation ablation with sqrt_sum and another (sokoban.ablations.aggregation)",
}


@dataclass(frozen=True, kw_only=True)
class Power:
    """what deciding each claim costs: the power of designs (allocations, seeds) and their device-hours, the
    cheapest design at power 0.8 and 0.9, and the power of the config's own design"""

    config: tuple[str, ...] = configfile()
    directory: str = option("the working directory whose results/ holds timed jobs (as `plan`) and the cache",
                            default=".")
    gpu_hours: float | None = option("the designs that decide the most claims, each at power 0.8, within this "
                                     "many device-hours (an hour on any device counts as one; what the choice "
                                     "spends is printed per device)", "--gpu-hours",
                                     type=at_least(float, 0, "a finite number of device-hours above 0", above=True),
                                     default=None)
    json: bool = option("print the analysis as JSON", action="store_true", default=False)
    out: str | None = output("also write the analysis as JSON to this file (the power page reads it)", default=None)
    write: str | None = output("a folder for runnable configs: each decision's cheapest design at power 0.8, and "
                               "with --gpu-hours the union of the chosen ones", folder=True, default=None)
    draws: int | None = option(f"simulated studies per design (default: the config's power.draws, else "
                               f"{stats.DRAWS:,})", type=count, default=None)
    seed: int = option("the simulator's seed", type=at_least(int, 0, "a whole number, at least 0"), default=0)


# ------------------------------------------------------------------------------------------------ inputs


def _allocation(agent: AgentConfig | ModelConfig) -> tuple[int, int, int]:
    return agent.depth, agent.experts, agent.width


def _label(allocation: Sequence[int]) -> str:
    return f"L{allocation[0]} E{allocation[1]} d{allocation[2]}"


def _authors(budget_name: str, allocations: list) -> Truth | None:
    """The authors' recurrent ConvLSTM allocations of the paper's budget `budget_name` that the config also runs."""
    per_seed = sokoban_scores.paper_per_seed_scores()
    table = sokoban_scores.configuration_scores(per_seed)
    table = table[table["budget"] == budget_name]
    keyed = {(int(r.depth), int(r.experts), int(r.width)): r for r in table.itertuples()}
    shared = [tuple(a) for a in allocations if tuple(a) in keyed]
    if not shared:
        return None
    rows = [keyed[a] for a in shared]
    seeds = sorted({int(r.seeds) for r in rows})
    return Truth(tuple(map(_label, shared)), np.array([a[0] for a in shared]), np.array([r.mean for r in rows]),
                 np.sqrt([r.variance for r in rows]),
                 f"the authors' per-seed returns (Table 7, {'/'.join(map(str, seeds))} seeds per allocation): "
                 "mean and SD of each allocation",
                 tuple(sokoban_scores.seed_scores(per_seed, pd.Series(r._asdict())) for r in rows))


def _assumed(key: str, spec: FamilyAssumption, allocations: list, top: float) -> Truth:
    """A family profile from the config's assumption `spec` (at `key`): every allocation at `best_depth` scores
    `top`; the others fall linearly in log2 L, to `depth_gain` below it at the depth farthest from it."""
    depth = np.array([a[0] for a in allocations])
    best = depth.max() if spec.best_depth == "deepest" else spec.best_depth
    distance = np.abs(np.log2(depth) - np.log2(best))
    fall = distance / distance.max() if distance.max() > 0 else distance
    return Truth(tuple(map(_label, allocations)), depth, top - spec.depth_gain * fall,
                 np.full(len(depth), float(spec.sd)), f"assumed ({key}): {spec.reason}")


def _assumption(power: PowerAssumptions, domain: str, recurrent: bool) -> tuple[str, FamilyAssumption]:
    family_name = "recurrent" if recurrent else "nonrecurrent"
    key = f"power.{domain}.{family_name}"
    spec = getattr(power, domain).family(recurrent)
    if spec is None:
        raise ConfigError(f"{key}: no assumption for the {family_name} family, which the authors published no "
                          "per-seed scores for here; give best_depth, depth_gain, sd and reason")
    if not recurrent and spec.below_recurrent is None:
        raise ConfigError(f"{key}.below_recurrent: how far the non-recurrent best lies below the recurrent best")
    return key, spec


def truths(study: Study, budget_name: str, allocations: Mapping[bool, list]) -> dict[bool, Truth]:
    """The truth of each family that trains at one budget of the config's ConvLSTM sweep (the recurrent one, which the
    non-recurrent one's is set below, must)."""
    same = comparison.same_budget_as_paper(study.sokoban.budgets, "sokoban", budget_name)
    authors = _authors(budget_name, allocations[True]) if same else None
    found = {True: authors if authors is not None else
             _assumed(*_assumption(study.power, "sokoban", True), allocations[True], 0.0)}
    if False in allocations:
        found[False] = _below(study.power, "sokoban", found[True], allocations[False])
    return found


def _below(power: PowerAssumptions, domain: str, recurrent: Truth, allocations: list) -> Truth:
    """The non-recurrent family's assumed truth, its best `below_recurrent` under the recurrent best."""
    key, spec = _assumption(power, domain, False)
    assert spec.below_recurrent is not None  # _assumption refuses a non-recurrent assumption without it
    return _assumed(key, spec, allocations, float(recurrent.mean.max()) - spec.below_recurrent)


def lm_truths(power: PowerAssumptions, allocations: Mapping[bool, list]) -> dict[bool, Truth]:
    """Both FineWeb families' truth at one budget and window, in negated losses (higher is better): the config's
    `power.lm` assumptions (the paper's FineWeb runs are single seeds)."""
    recurrent = _assumed(*_assumption(power, "lm", True), allocations[True], 0.0)
    return {True: recurrent, False: _below(power, "lm", recurrent, allocations[False])}


def _grid(runs: Iterable[Any], where: Callable[[Any], tuple]) -> dict:
    """setting -> family -> the allocations (L, E, d) of `runs`, each once, by `where(run)`: (setting, recurrent,
    allocation)."""
    grid: dict = {}
    for run in runs:
        setting, recurrent, allocation = where(run)
        found = grid.setdefault(setting, {}).setdefault(recurrent, [])
        if allocation not in found:
            found.append(allocation)
    return grid


# A run's cell of the analysis: ((budget, window: None in Sokoban), recurrent, (L, E, d)).
def _sokoban_cell(run: sokoban_experiment.Run) -> tuple:
    return (run.budget, None), run.agent.recurrent, _allocation(run.agent)


def _lm_cell(run: lm_experiment.Run) -> tuple:
    return (run.budget, run.window), run.model.recurrent, _allocation(run.model)


def tests(study: Study) -> list[Decision]:
    """Every decision analysed: the authors' depth tests at each budget of the config's ConvLSTM sweep that trains the
    recurrent family, the family comparisons where it trains both, and at each budget and window of its FineWeb sweep
    that trains both."""
    found, by_budget = [], {}
    for (name, _), families in _grid(_sweep(study), _sokoban_cell).items():
        if True not in families:
            continue  # the depth tests are the recurrent family's, and the others compare it with the non-recurrent
        truth = truths(study, name, families)
        for deeper, shallower in sokoban_scores.DEPTH_TESTS:
            if {deeper, shallower} <= set(truth[True].depth):
                keep = np.flatnonzero(np.isin(truth[True].depth, (deeper, shallower)))
                found.append(Decision(stats.DEPTH_TEST, f"{name} budget, L={deeper} > L={shallower}", name,
                                      verdicts.PICKS, {True: truth[True].take(keep)},
                                      stats.depth_test(deeper, shallower)))
        if False not in truth:
            continue
        by_budget[name] = truth
        found.append(Decision("sokoban_fewer_layers", f"{name} budget", name, verdicts.PICKS, truth,
                              depth_rules.FewerLayersRule()))
        found.append(Decision("sokoban_recurrence_better", f"{name} budget", name, verdicts.PICKS, truth,
                              depth_rules.RecurrenceBetter()))
    for (name, window), families in _grid(study.lm.sweeps, _lm_cell).items():
        if set(families) != {True, False}:
            continue
        truth, part = lm_truths(study.power, families), f"{name} budget, W = {window}"
        where = {"domain": "lm", "window": window}
        found.append(Decision("lm_fewer_layers", part, name, verdicts.PICKS, truth, depth_rules.FewerLayersRule(),
                              **where))
        if (name, window) == study.fig5:
            found.append(Decision("lm_comparable_shallow", part, name, verdicts.MARGIN, truth,
                                  depth_rules.RecurrenceBetter(shallow=2, margin=study.margins.lm),
                                  **where))
    return found + _expert_tests(by_budget) + _ablation_tests(study.sokoban, study.power, study.margins.sokoban)


def unmodelled(decisions: Iterable[Decision]) -> dict[str, str]:
    """The claims the analysis models that have none of a config's `decisions` (`tests`), each with what it would
    need."""
    decided = {test.claim for test in decisions}
    return {claim: f"not modelled at this config: {why}" for claim, why in NEEDS.items() if claim not in decided}


def by_name(decisions: Iterable[Decision]) -> dict[tuple[str, str], Decision]:
    """`decisions` by (claim, part), as an analysis names them."""
    return {(test.claim, test.part): test for test in decisions}


def _families(truth: Truth) -> list[list[tuple[int, int]]]:
    """The (L, d) families of a truth's allocations with two values of E, each as its (E, index) pairs, in the order
    of their first appearance."""
    found: dict = {}
    for i, label in enumerate(truth.allocation):
        depth, experts, width = (int(part[1:]) for part in label.split())
        found.setdefault((depth, width), []).append((experts, i))
    return [arms for arms in found.values() if len({e for e, _ in arms}) > 1]


def _ends(truth: Truth) -> tuple[np.ndarray, np.ndarray]:
    """For each (L, d) family with two values of E (`_families`): the index of its smallest E and of its largest."""
    families = _families(truth)
    return np.array([min(arms)[1] for arms in families], int), np.array([max(arms)[1] for arms in families], int)


def _expert_decision(truth: Mapping[bool, Truth]) -> depth_rules.Rule:
    (one,) = truth.values()
    first, last = _ends(one)
    return depth_rules.MoreExperts(tuple(map(int, first)), tuple(map(int, last)))


def _expert_tests(by_budget: Mapping[str, Mapping[bool, Truth]]) -> list[Decision]:
    """Fig. 6's Sokoban parts (findings.more_experts), one per family: its arms every allocation of the ConvLSTM
    sweep's budgets whose (L, d) has two values of E there, each with its budget's truth."""
    found = []
    for recurrent in (True, False) if by_budget else ():  # no budget that trains both families: no part
        parts = [(name, truth[recurrent]) for name, truth in by_budget.items()]
        whole = Truth(tuple(a for _, t in parts for a in t.allocation), np.concatenate([t.depth for _, t in parts]),
                      np.concatenate([t.mean for _, t in parts]), np.concatenate([t.sd for _, t in parts]),
                      "; ".join(dict.fromkeys(t.source for _, t in parts)),
                      sum((t.per_seed for _, t in parts), ()) if all(t.per_seed for _, t in parts) else (),
                      tuple(name for name, t in parts for _ in t.allocation))
        kept = sorted(i for arms in _families(whole) for _, i in arms)
        if not kept:
            continue
        whole = whole.take(kept)
        found.append(Decision("more_experts", f"Sokoban ConvLSTM, {family(recurrent)}", "", verdicts.MAX_OVER_GROUPS,
                              {recurrent: whole}, _expert_decision({recurrent: whole}), domain="experts",
                              of_truth=_expert_decision))
    return found


def _ablation_tests(sokoban: sokoban_experiment.Families, power: PowerAssumptions, margin: float) -> list[Decision]:
    """Each Sokoban ablation's claim (ABLATIONS), its values as arms: the default `lead` above every other value, as
    the config's `power.sokoban.ablations.<setting>` assumes (the paper publishes no ablation spread)."""
    found = []
    for setting, spec in sokoban.settings.ablations.items():
        given = spec.values
        claim, default, within_margin, rule = ABLATIONS[setting]
        values = np.array([str(v) for v in given])
        if default not in values or len(values) < 2:
            continue
        key = f"power.sokoban.ablations.{setting}"
        assumed = power.sokoban.ablations.get(setting)
        if assumed is None:
            raise ConfigError(f"{key}: no assumption for the {setting} ablation, whose seed spread the paper does not "
                              "publish; give lead, sd and reason")
        is_default = values == default
        truth = Truth(tuple(values), np.zeros(len(values), int), np.where(is_default, float(assumed.lead), 0.0),
                      np.full(len(values), float(assumed.sd)), f"assumed ({key}): {assumed.reason}")
        found.append(Decision(claim, f"{setting} ablation, {sokoban.ablations[setting][0].budget} budget", setting,
                              rule, {True: truth},
                              depth_rules.AgainstRival.of(is_default, margin if within_margin else 0.0),
                              domain="ablation"))
    return found


# ------------------------------------------------------------------------------------------------ costs


def _cells(study: Study) -> dict[str, tuple[str, Callable[[Any], list]]]:
    """Per domain, the run dataset whose jobs price it, and the price keys (setting, recurrent, allocation label) of
    one of its runs: none for a run no decision reads, one for a sweep's run, one per (ablation, value) it is."""
    first_seed = {name: seeds[0] for name, seeds in study.lm.seeds.items()}
    values: dict[str, list[tuple]] = {}
    for setting, runs in study.sokoban.ablations.items():
        for value, run in zip(study.sokoban.settings.ablations[setting].values, runs):
            values.setdefault(run.id, []).append((setting, True, str(value)))

    def sokoban(run: sokoban_experiment.Run) -> list:
        (name, _), recurrent, allocation = _sokoban_cell(run)
        return [(stats.setting(name), recurrent, _label(allocation))] if run.sweep == SWEEP else []

    def lm(run: lm_experiment.Run) -> list:
        where, recurrent, allocation = _lm_cell(run)
        return [(stats.setting(*where), recurrent, _label(allocation))] if run.seed == first_seed[run.budget] else []

    return {"sokoban": (paths.SOKOBAN_SWEEP, sokoban), "lm": (paths.LM_SWEEP, lm),
            "ablation": (paths.ablations("sokoban"), lambda run: values.get(run.id, []))}


def prices(study: Study, counters: costs.Counters, directory: Path) -> dict[str, dict[str, dict]]:
    """Per domain, device-hours of one seed of each analysed run, training and evaluation, by (setting, recurrent,
    allocation label), on each device the config knows: the timed jobs' accelerator where an earlier run timed every
    group of the domain's jobs (as `plan` measures them), and the device of the config's `plan` assumption. The first
    is the one designs are chosen on."""
    cells = _cells(study)
    by_result = costs.jobs_by_result(study, counters, [result for result, _ in cells.values()])
    found: dict[str, dict[str, dict]] = {}
    for domain, (result, keys) in cells.items():
        jobs = [job for job in by_result.get(result, []) if keys(job.run)]
        timed = costs.measured(jobs, directory / paths.ROOT, study.accelerator)
        pricings = {}
        timed_groups = costs.measured_rates(timed)
        if jobs and all(job.group in timed_groups for job in jobs):
            pricings[f"measured on {study.accelerator}"] = costs.rates(study, jobs, timed)
        devices = sorted({costs.assumption(study.plan, job.rule, job.family).device for job in jobs})
        pricings[f"assumed on {' and '.join(devices)}"] = {job: costs.assumed_rate(study, job) for job in jobs}
        found[domain] = {}
        for device, rates in pricings.items():
            hours: dict[tuple, float] = {}
            found[domain][device] = hours
            for job in jobs:
                seconds = job.flops / rates[job].flops_per_s * resources.devices(study.resources, job.rule)
                for key in keys(job.run):
                    hours[key] = hours.get(key, 0.0) + seconds / 3600 / max(job.seeds, 1)  # a Sokoban job's seeds
    return found


# ------------------------------------------------------------------------------------------------ designs


def design_hours(test: Decision, keep: Mapping[bool, list[int]], seeds: Mapping[bool, stats.Seeds], prices: Mapping
                 ) -> dict[str, float]:
    """A design's device-hours on each device of `prices`."""
    def cost(hours: Mapping, fam: bool, i: int) -> float:
        truth = test.truth[fam]
        where = truth.budget[i] if truth.budget else test.setting
        return hours[(where, fam, truth.allocation[i])] * np.broadcast_to(seeds[fam], len(truth.allocation))[i]

    return {device: float(sum(cost(hours, fam, i) for fam in test.truth for i in keep[fam]))
            for device, hours in prices.items()}


def _priced(hours: Mapping[str, float]) -> dict:
    """A design's hours on the first device (the one designs are chosen on), and on every device."""
    return {"hours": next(iter(hours.values())), "hours_on": dict(hours)}


def _kept(test: Decision, design: str) -> dict[bool, list[int]]:
    """The allocations (indices into each family's truth) of a design. Best per depth: the recurrent family's best
    at each depth; the non-recurrent family, whose assumed scores are the same at every allocation of a depth, the
    same allocation where it has it (so that a written config trains one set for both), else its first. One (L, d)
    family: its smallest and largest E."""
    if design == "one (L, d) family":
        (fam, truth), = test.truth.items()
        first, last = _ends(truth)
        gain = (truth.mean[last] - truth.mean[first]) / np.hypot(truth.sd[first], truth.sd[last])
        best = int(np.argmax(gain))
        return {fam: [int(first[best]), int(last[best])]}
    if design != "best per depth":
        return {fam: list(range(len(truth.depth))) for fam, truth in test.truth.items()}
    found = {True: test.truth[True].best_per_depth()}
    if False in test.truth:
        shared = {test.truth[True].allocation[i] for i in found[True]}
        non = test.truth[False]
        found[False] = [next((int(i) for i in np.flatnonzero(non.depth == d) if non.allocation[i] in shared),
                             int(np.flatnonzero(non.depth == d)[0])) for d in np.unique(non.depth)]
    return found


def _with(test: Decision, keep: Mapping[bool, list[int]]) -> Decision:
    truth = {f: t.take(keep[f]) for f, t in test.truth.items()}
    return replace(test, truth=truth, statistic=test.of_truth(truth) if test.of_truth else test.statistic)


def search(test: Decision, prices: Mapping, draws: int, seed: int) -> tuple[list[dict], dict[str, list[dict]]]:
    """For each design: the fewest seeds per allocation (of SEEDS) reaching each of TARGETS with a rule that holds
    alpha there (`holds_alpha`), with power, its standard error, its chance of each verdict with no effect and
    device-hours (seeds None where no number of SEEDS reaches it); and its power curve, every number of seeds tried up
    to the last target reached."""
    rows: list[dict] = []
    curves: dict[str, list[dict]] = {}
    for design in DESIGNS[test.domain]:
        keep = _kept(test, design)
        simulated = _with(test, keep)
        reached: dict[float, dict] = {}
        curve: list[dict] = []
        curves[design] = curve
        for n in SEEDS:
            seeds = dict.fromkeys(test.truth, n)
            found = stats.power(simulated, seeds, draws, seed)
            priced = _priced(design_hours(test, keep, seeds, prices))
            curve.append({"seeds": n, "power": found.power, "stderr": found.stderr, "hours": priced["hours"]})
            new = [target for target in TARGETS if target not in reached and found.power >= target]
            # Only where the design may be chosen; four times the draws, since the search asks up to len(SEEDS) designs
            # and a rule truly above alpha would pass a coarser check at one of them.
            if not new:
                continue
            chance = stats.no_effect(simulated, seeds, 4 * draws, seed)
            if not chance.holds_alpha:
                curve[-1]["holds_alpha"] = False
                continue
            for target in new:
                reached[target] = {"seeds": n, "power": found.power, "stderr": found.stderr, **priced,
                                   "closed_form": closed_form(simulated, seeds), "no_effect": chance.as_dict()}
            if len(reached) == len(TARGETS):
                break
        rows += [{"design": design, "target": target, **reached.get(target, {"seeds": None})} for target in TARGETS]
    return rows, curves


def _sweep(study: Study) -> list:
    """The runs of the config's ConvLSTM sweep."""
    return [run for run in study.sokoban.sweeps if run.sweep == SWEEP]


def config_designs(study: Study) -> dict[tuple[str, bool], int]:
    """The seeds per allocation the config gives each (setting, family) of its analysed sweeps."""
    found = {(stats.setting(run.budget), run.agent.recurrent): len(run.seeds) for run in _sweep(study)}
    for run in study.lm.sweeps:
        found[(stats.setting(run.budget, run.window), run.model.recurrent)] = len(study.lm.seeds[run.budget])
    for setting, runs in study.sokoban.ablations.items():
        found[(setting, True)] = min(len(run.seeds) for run in runs)
    return found


def _given(given: Mapping, test: Decision, fam: bool) -> stats.Seeds:
    """The config's seeds of a decision's family: one count, or each allocation's where they span budgets."""
    truth = test.truth[fam]
    if truth.budget:
        return np.array([given[(where, fam)] for where in truth.budget])
    return given[(test.setting, fam)]


def analyse(study: Study, counters: costs.Counters, directory: Path, draws: int, seed: int) -> dict:
    """The whole analysis as plain data (what --json prints and the cache keeps)."""
    priced = prices(study, counters, directory)
    entries: list[dict[str, Any]] = []
    inputs: dict[str, dict] = {}
    given, decisions = config_designs(study), tests(study)
    for test in decisions:
        ours = {fam: _given(given, test, fam) for fam in test.truth}
        every = _kept(test, "every allocation")
        found = stats.power(test, ours, draws, seed)
        prices_of = priced[PRICED_AS.get(test.domain, test.domain)]
        designs, curves = search(test, prices_of, draws, seed)
        ours_hours = _priced(design_hours(test, every, ours, prices_of))
        entry: dict[str, Any] = {"claim": test.claim, "part": test.part, "domain": test.domain, "setting": test.setting,
                 "rule": test.rule,
                 "config_design": {"seeds": {family(f): np.asarray(n).tolist() for f, n in ours.items()},
                                   "power": found.power,
                                   "stderr": found.stderr, **ours_hours},
                 "designs": designs, "curves": curves}
        chance = stats.no_effect(test, ours, draws, seed)
        entry["config_design"]["no_effect"] = chance.as_dict()
        entry["config_design"]["holds_alpha"] = chance.holds_alpha
        entry["config_design"]["no_effect_per_allocation"] = stats.no_effect(test, ours, draws, seed, True).as_dict()
        if min(np.min(n) for n in ours.values()) < 2:
            entry["config_design"]["rule"] = "one seed: no test, untested"
        closed, resampled = closed_form(test, ours), stats.bootstrap_power(test, ours, draws, seed)
        if closed is not None:
            entry["config_design"]["closed_form"] = closed
        if resampled is not None:
            entry["config_design"]["bootstrap"] = {"power": resampled.power, "stderr": resampled.stderr}
        entries.append(entry)
        if test.claim == stats.DEPTH_TEST or test.domain == "experts":
            continue  # its inputs are a subset of the budgets'
        for fam, truth in test.truth.items():
            inputs[f"{test.setting}, {family(fam)}"] = {
                "source": truth.source,
                "allocations": {a: {"mean": float(m), "sd": float(s)}
                                for a, m, s in zip(truth.allocation, truth.mean, truth.sd)}}
    analysis: dict[str, Any] = {"alpha": verdicts.ALPHA,
             "correction": ("each part tested against its rule's own null (the picking of best allocations included); "
                            "a claim supported where every part is"),
             "draws": draws, "seed": seed, "targets": list(TARGETS),
             "devices": {domain: list(by_device) for domain, by_device in priced.items()},
             "inputs": inputs, "tests": entries, "not_modelled": NOT_MODELLED | unmodelled(decisions)}
    timed = costs.timed_jobs(study, counters, directory / paths.ROOT)
    named = by_name(decisions)
    return analysis | {"decided": decided(analysis, lambda rows: union_hours(study, counters, timed,
                                                                         _chosen(named, rows)))}


def closed_form(test: Decision, seeds: Mapping[bool, stats.Seeds]) -> float | None:
    """The closed-form Welch power of a depth test whose two depths hold one allocation each."""
    if test.claim != stats.DEPTH_TEST or len(test.truth[True].depth) != 2 or np.ndim(seeds[True]) or seeds[True] < 2:
        return None  # a depth test's two arms have one seed count (`_given`)
    truth, n = test.truth[True], int(seeds[True])
    deeper = int(np.argmax(truth.depth))
    shallower = 1 - deeper
    return stats.welch_power(truth.mean[deeper] - truth.mean[shallower], truth.sd[deeper], n, truth.sd[shallower], n)


# ------------------------------------------------------------------------------------------------ the command


# What an analysis holds (`analyse`), checked wherever one is read back (the cache, the pages), so that a file with
# the right keys and nothing under them, or a truncated one, is refused naming the file and the place in it.
_ANALYSIS: records.Fields = {"alpha": (int, float), "draws": int, "targets": list, "devices": dict, "inputs": dict,
                             "tests": list, "not_modelled": dict, "decided": list}
_TEST: records.Fields = {"claim": str, "part": str, "domain": str, "config_design": dict, "designs": list,
                         "curves": dict}
_OURS: records.Fields = {"seeds": dict, "power": (int, float), "stderr": (int, float), "hours": (int, float),
                         "hours_on": dict, "no_effect": dict, "holds_alpha": bool, "no_effect_per_allocation": dict}
_DESIGN: records.Fields = {"design": str, "target": (int, float), "seeds": (int, type(None))}
_REACHED: records.Fields = {"power": (int, float), "stderr": (int, float), "hours": (int, float),
                            "hours_on": dict}
_STEP: records.Fields = {"claim": str, "decided": int, "hours": (int, float, type(None)), "hours_on": dict}


def read(path: str | Path, what: str = "a power analysis (python -m parallel_experts power --out)") -> dict:
    """The analysis in `path`, every field a page or --gpu-hours reads present and of its type."""
    found = records.read_json(path, _ANALYSIS, what)
    where = f"{path}: not {what}"
    for i, entry in enumerate(found["tests"]):
        records.fields_of(entry, _TEST, f"{where}: tests[{i}]")
        records.fields_of(entry["config_design"], _OURS, f"{where}: tests[{i}].config_design")
        for j, design in enumerate(entry["designs"]):
            records.fields_of(design, _DESIGN, f"{where}: tests[{i}].designs[{j}]")
            if design["seeds"] is not None:
                records.fields_of(design, _REACHED, f"{where}: tests[{i}].designs[{j}]")
    for k, step in enumerate(found["decided"]):
        records.fields_of(step, _STEP, f"{where}: decided[{k}]")
    return found


def cached(study: Study, counters: costs.Counters, options: Power) -> dict:
    """`analyse`, kept in results/power/cache/ under a hash of the config, the options, the authors' numbers and the
    code that decides (a changed rule is a new analysis). Timed jobs that arrive later change the prices only:
    delete the cache to reprice."""
    code = [Path(file).read_text() for file in (stats.__file__, depth_rules.__file__, verdicts.__file__,
                                                 calibration.__file__, __file__)]
    draws = options.draws or study.power.draws
    inputs = [study.config, draws, options.seed, sokoban_scores.paper_per_seed_scores().to_csv(), code]
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:16]
    path = Path(options.directory) / paths.power(key)
    if path.is_file():
        try:
            return read(path, "a cached power analysis")
        except PipelineError:
            pass  # a damaged cache: computed again and rewritten
    found = analyse(study, counters, Path(options.directory), draws, options.seed)
    atomic.write_text(path, json.dumps(found, indent=1))
    return found


def cheapest(analysis: Mapping, target: float = TARGETS[0]) -> pd.DataFrame:
    """Per test, its cheapest design reaching `target` (NaN hours where none does)."""
    rows = []
    for entry in analysis["tests"]:
        reached = [d for d in entry["designs"] if d["target"] == target and d["seeds"] is not None]
        best = min(reached, key=lambda d: d["hours"]) if reached else {"design": "none", "seeds": None,
                                                                         "power": np.nan, "hours": np.nan,
                                                                         "hours_on": {}}
        rows.append({"claim": entry["claim"], "part": entry["part"], "design": best["design"],
                     "seeds": best["seeds"], "power": best["power"], "hours": best["hours"],
                     "device": next(iter(best["hours_on"]), None), "hours_on": best["hours_on"],
                     "closed_form": best.get("closed_form"),
                     "config_power": entry["config_design"]["power"]})
    return pd.DataFrame(rows)


def claim_costs(analysis: Mapping, target: float = TARGETS[0]) -> dict[str, str]:
    """What deciding each claim of the page costs at power `target`, in words: the cheapest design of its cheapest
    part (one part that runs decides a claim: findings.combine), or why the analysis does not model it."""
    table = cheapest(analysis, target)
    found = {}
    for claim, rows in table[table["claim"] != stats.DEPTH_TEST].groupby("claim", sort=False):
        if rows["hours"].notna().any():
            row = rows.loc[rows["hours"].idxmin()]
            found[claim] = (f"{_on(row.hours_on, named=True)} at power {row.power:.2f}: {row.part}, {row.design}, "
                            f"{int(row.seeds)} seeds per allocation")
        else:
            found[claim] = f"more than {SEEDS[-1]} seeds per allocation at every budget analysed"
    return found | {claim: why for claim, why in analysis["not_modelled"].items() if claim not in found}


def decided(analysis: Mapping, price: Callable[[pd.DataFrame], Mapping[str, float]]) -> list[dict]:
    """Claims (every part of a claim; each depth test its own) decided at power 0.8 against the device-hours spent,
    cheapest claims (by their own designs' hours) first: after each, the hours on each device of running every
    design so far, as `price` gives them (`union_hours`: the planner's, a run that several decisions share trained
    once), and their sum (an hour on any device counts as one). Where the project refuses a union (`price` raises
    ConfigError), the steps stop there and say why."""
    table = _claims(cheapest(analysis))
    own = table.groupby("key", sort=False)["hours"].agg(lambda h: h.sum(skipna=False)).dropna().sort_values()
    steps = []
    for count, claim in enumerate(own.index, 1):
        try:
            hours_on = dict(price(table[table["key"].isin(own.index[:count])].drop(columns="key")))
        except ConfigError as error:
            steps.append({"claim": claim, "decided": count, "hours": None, "hours_on": {}, "refused": str(error)})
            break
        steps.append({"claim": claim, "decided": count, "hours": sum(hours_on.values()), "hours_on": hours_on})
    return steps


def decided_by_hours(analysis: Mapping) -> pd.DataFrame:
    """`decided`'s steps that the planner priced, as a table (claim, decided, hours, hours_on)."""
    steps = pd.DataFrame(analysis["decided"], columns=["claim", "decided", "hours", "hours_on"])
    return steps.dropna(subset=["hours"]).astype({"hours": float})


def _claims(table: pd.DataFrame) -> pd.DataFrame:
    """`cheapest` with a key per claim: its name, or the part of a depth test (each one a claim of its own)."""
    return table.assign(key=table["claim"].where(table["claim"] != stats.DEPTH_TEST, table["part"]))


def within(analysis: Mapping, gpu_hours: float) -> tuple[pd.DataFrame, dict[str, float]]:
    """The claims (every part of a claim, each at its cheapest 80 % design) that fit `gpu_hours`, cheapest first,
    and the hours on each device of running them all (`decided`): with unit value per claim, taking the cheapest
    first decides the most claims."""
    steps = decided_by_hours(analysis)
    fits = steps[steps["hours"] <= gpu_hours]
    claims = _claims(cheapest(analysis))
    return (claims[claims["key"].isin(fits["claim"])].drop(columns="key"),
            dict(fits["hours_on"].iloc[-1]) if len(fits) else {})


Chosen = list[tuple[Decision, dict[bool, list[int]], int, float]]  # what designs.config takes


def _chosen(named: Mapping[tuple[str, str], Decision], rows: pd.DataFrame) -> Chosen:
    """The designs of `cheapest`'s rows as `designs.config` takes them: (decision, allocations kept, seeds, power),
    the decisions looked up in `named` (`by_name`)."""
    return [(named[(row.claim, row.part)], _kept(named[(row.claim, row.part)], row.design), int(row.seeds),
             row.power) for row in rows.itertuples() if not pd.isna(row.seeds)]


def union_hours(study: Study, counters: costs.Counters, timed: Mapping[costs.Job, float], chosen: Chosen
                ) -> dict[str, float]:
    """Device-hours on each device of the config that runs every design of `chosen` (`designs.config`, as --write
    writes it), as `plan` prices its targets: each distinct job once, however many decisions share it, with the seeds
    the config gives its budget."""
    union = Study.of(designs.config(study.config, chosen, SWEEP, "A union"))
    targets = list(dict.fromkeys(designs.TARGET[test.claim] for test, *_ in chosen))
    jobs = costs.plan(union, counters, timed, targets).drop_duplicates(["rule", "wildcards"])
    return {device: float(hours) for device, hours in jobs.groupby("device", sort=False)["device_hours"].sum().items()}


def run(options: Power, study: Study, counters: costs.Counters) -> int:
    analysis = cached(study, counters, options)
    if options.gpu_hours is not None:
        chosen, hours_on = within(analysis, options.gpu_hours)
        analysis = analysis | {"gpu_hours": options.gpu_hours, "chosen": chosen.to_dict("records"),
                               "chosen_hours_on": hours_on}
    if options.out:
        atomic.write_text(options.out, json.dumps(analysis, indent=1))
    if options.write:
        write_configs(study, analysis, Path(options.write))
    print(json.dumps(analysis, indent=1) if options.json else printed(analysis))
    return 0


def _hours(hours: float) -> str:
    return f"{hours:,.0f} h" if hours >= 10 else f"{hours:.2g} h"


def _spent(hours_on: Mapping[str, float]) -> str:
    """What a choice of designs spends, on each device apart (an L40S-hour is not an H100-hour)."""
    return _on(hours_on, named=True) if hours_on else "nothing"


def _on(hours: Mapping[str, float], named: bool = False) -> str:
    """Hours on each device, the device named where there are several (or where `named`)."""
    if len(hours) == 1 and not named:
        return _hours(next(iter(hours.values())))
    return ", ".join(f"{_hours(h)} {device}" for device, h in hours.items())


def write_configs(study: Study, analysis: Mapping, folder: Path) -> list[Path]:
    """Each decision's cheapest design at power 0.8 as a config (`designs.config`), named for the decision; with a
    --gpu-hours choice, their union for it too."""
    written, named = [], by_name(tests(study))
    for row in cheapest(analysis).itertuples():
        if pd.isna(row.seeds):
            continue
        name = f"{row.claim}-{row.part}".replace(" budget", "").replace(" > ", " over ").replace("=", "")
        path = folder / (re.sub(r"[^\w.]+", "-", name) + ".yaml")
        designs.write(path, designs.config(study.config, _chosen(named, pd.DataFrame([row])), SWEEP,
                                           f"The design for {row.claim}"))
        written.append(path)
    if "chosen" in analysis:
        hours = analysis["gpu_hours"]
        path = folder / f"within-{hours:g}-gpu-hours.yaml"
        designs.write(path, designs.config(study.config, _chosen(named, pd.DataFrame(analysis["chosen"])), SWEEP,
                                           f"The claims that fit {hours:g} device-hours "
                                           f"({_spent(analysis['chosen_hours_on'])})"))
        written.append(path)
    return written


def printed(analysis: Mapping) -> str:
    lines = [f"power at alpha = {analysis['alpha']}, {analysis['correction']}; {analysis['draws']} simulated "
             "studies per design", "", "inputs:"]
    lines += [f"  {where}: {given['source']}" for where, given in analysis["inputs"].items()]
    lines += ["", "device-hours (designs chosen on the first):"]
    lines += [f"  {domain}: {'; '.join(devices)}" for domain, devices in analysis["devices"].items()] + [""]
    for target in TARGETS:
        table = cheapest(analysis, target)
        lines.append(f"cheapest design at {target:.0%} power (seeds per allocation; hours):")
        for row in table.itertuples():
            closed = "" if pd.isna(row.closed_form) else f" (closed form {row.closed_form:.3f})"
            what = (f"{row.design}, {int(row.seeds)} seeds, power {row.power:.3f}{closed}, {_on(row.hours_on)}"
                    if row.seeds is not None and not pd.isna(row.seeds) else f"no design of up to {SEEDS[-1]} seeds")
            lines.append(f"  {row.claim}, {row.part}: {what}")
        lines.append("")
    lines.append("the config's own design:")
    for entry in analysis["tests"]:
        ours = entry["config_design"]
        note = "" if ours["power"] >= TARGETS[0] else "  <- cannot decide it at 80 % power"
        if not ours["holds_alpha"]:
            note = "  <- its rule does not hold alpha at these SDs: no verdict (untested)"
        if "rule" in ours:
            note = "  <- one seed: no test at alpha, untested on the claims page"
        chance = ours["no_effect"]
        apart = ours["no_effect_per_allocation"]
        note = (f"; with no effect {chance['supported']:.3f} supported, {chance['contradicted']:.3f} contradicted "
                f"({apart['supported']:.3f}, {apart['contradicted']:.3f} at each allocation's SD){note}")
        closed = f", closed form {ours['closed_form']:.3f}" if "closed_form" in ours else ""
        if "bootstrap" in ours:
            closed += f", resampling the authors' seeds {ours['bootstrap']['power']:.3f}"
        lines.append(f"  {entry['claim']}, {entry['part']}: seeds {stats.seeds_text(ours['seeds'])}, power {ours['power']:.3f} "
                     f"± {ours['stderr']:.3f}{closed}, {_on(ours['hours_on'])}{note}")
    lines += ["", "not modelled:"] + [f"  {claim}: {why}" for claim, why in analysis["not_modelled"].items()]
    if "chosen" in analysis:
        chosen = analysis["chosen"]
        lines += ["", f"within {analysis['gpu_hours']:,.0f} device-hours (an hour on any device counts as one): "
                  f"{len({c['claim'] if c['claim'] != stats.DEPTH_TEST else c['part'] for c in chosen})} claims and "
                  f"tests, {_spent(analysis['chosen_hours_on'])} as the planner prices them all together"]
        lines += [f"  {c['claim']}, {c['part']}: {c['design']}, {int(c['seeds'])} seeds, "
                  f"{_on({c['device']: c['hours']}, named=True)} alone" for c in chosen]
        refused = [step for step in analysis["decided"] if "refused" in step]
        lines += [f"  not priced beyond: {step['claim']}, whose union with the cheaper ones the project refuses: "
                  f"{step['refused']}" for step in refused]
    return "\n".join(lines)
