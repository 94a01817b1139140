"""The reports a configuration defines: one per paper figure or table that its experiments can fill.

Each `Report` names the notebook that renders it, the result files it reads (by notebook parameter), its other
parameters, and the named Snakemake target (`fig2`, `tables_1_7`, ...) that regenerates it: its title and target
come from the paper item that lists its page (`items`). The workflow loops over `reports(study)` for its report
rules and targets, the planner for what each target costs, the index for its rows; nothing else decides what pages
exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pandas as pd

from parallel_experts.analysis import expert_count
from parallel_experts.core import budget
from parallel_experts.lm import experiment as lm_experiment
from parallel_experts.results import paths
from parallel_experts.sokoban import experiment as sokoban_experiment
from parallel_experts.study import Study
from parallel_experts.targets import items
from parallel_experts.targets.items import Item

# What each notebook reads, by its parameter name.
ALLOCATION_GRIDS = {domain: paths.allocations(domain) for domain in budget.DOMAINS}
SOKOBAN_SWEEP = {"sweep": paths.SOKOBAN_SWEEP}
SOKOBAN_PROBES = {"probes": paths.SOKOBAN_PROBES}
SOKOBAN_ABLATIONS = {"ablations": paths.ablations("sokoban")}
LM_SWEEP = {"sweep": paths.LM_SWEEP}
LM_ABLATIONS = {"ablations": paths.ablations("lm")}
# The systems tables (lm.latency, lm.throughput), each read by its own notebook (lm_<table>).
LM_SYSTEMS = {"latency": paths.LATENCY, "throughput": paths.THROUGHPUT}
EXPERT_COUNT = paths.EXPERT_COUNT
# The plans of this config and of config/paper.yaml (rule plan_costs; planning.tables.write).
PLAN = {"plan": f"{paths.PLAN}/targets.csv", "paper_plan": f"{paths.PAPER_PLAN}/targets.csv"}
# The power analyses of this config and of config/paper.yaml (rule power_analysis; planning.power).
POWER = {"power": paths.POWER, "paper_power": paths.PAPER_POWER}
# The results the claims page reads (its notebook parameters), where some other report of the config reads them.
CLAIM_INPUTS = {"sokoban_sweep": SOKOBAN_SWEEP["sweep"], "probes": SOKOBAN_PROBES["probes"],
                "sokoban_ablations": SOKOBAN_ABLATIONS["ablations"], "expert_count": EXPERT_COUNT,
                "lm_sweep": LM_SWEEP["sweep"], "lm_ablations": LM_ABLATIONS["ablations"], **LM_SYSTEMS}


@dataclass(frozen=True)
class Report:
    name: str  # reports/{name}.html
    paper: str  # the paper's figure or table it reproduces
    notebook: str  # workflow/notebooks/{notebook}.ipynb
    inputs: Mapping[str, str]  # notebook parameter -> result file it reads
    params: Mapping[str, str | int] = field(default_factory=dict)  # the notebook's other parameters
    target: str | None = None  # the named Snakemake target that renders it

    @property
    def caption(self) -> str:
        return items.CAPTIONS[self.notebook]


def _page(name: str, inputs: Mapping[str, str], params: Mapping[str, str | int] | None = None,
          key: tuple[str, ...] | None = None) -> Report:
    """The report `name` of the page `key` (its notebook, then its setting; by default the notebook `name`), titled
    and targeted by the paper item that lists it."""
    key = key or (name,)
    title, target = items.page(*key)
    return Report(name, title, key[0], inputs, params or {}, target)


def shows(report: Report, run: object, ablations: Mapping[str, list]) -> bool:
    """Whether `report` shows the results of `run` of a dataset it reads: a sweep page its sweep (or budget and
    window), an ablation page its ablation's runs (`ablations`: the config's Sokoban ablations, setting -> runs);
    every other page all of them. What a figure costs on its own, where its target's DAG builds the whole dataset."""
    params = report.params
    if isinstance(run, sokoban_experiment.Run):
        if report.notebook == "sokoban_sweep":
            return (run.sweep, run.budget) == (params["sweep_name"], params["budget"])
        if report.notebook == "expert_count" and "sweep_name" in params:  # Fig. 18: one sweep's runs
            return run.sweep == params["sweep_name"]
    if isinstance(run, lm_experiment.Run) and report.notebook == "lm_sweep":
        return (run.budget, run.window) == (params["budget"], params["window"])
    if report.notebook == "sokoban_ablation":
        return run in ablations[str(params["setting"])]
    return True


def reports(study: Study) -> list[Report]:
    """Every report of a study, in index order: the paper's claims judged, allocation grids, Sokoban, its probes,
    its ablations, language model, its ablations, number of experts, the systems tables."""
    found = [_page("allocations", ALLOCATION_GRIDS)]
    found += _sokoban(study.sokoban)
    found += _probes(study.sokoban)
    found += _sokoban_ablations(study.sokoban)
    found += _lm(study)
    found += _lm_ablations(study.lm)
    found += _expert_count(study)
    found += _lm_systems(study.lm)
    read = {path for report in found for path in report.inputs.values()}
    claimed = {name: path for name, path in CLAIM_INPUTS.items() if path in read}
    # The claims page also says what deciding each open claim would cost at the paper's scale.
    claimed["paper_power"] = POWER["paper_power"]
    return [_page("claims", claimed), _page("plan", PLAN), _page("power", POWER), *found]


def index_items(study: Study) -> list[tuple[Item, list[Report]]]:
    """Every paper item in items.ITEMS order with the study's reports of its target (an empty list: the item is
    missing here), then each report without a target as an item of its own."""
    found = reports(study)
    listed = [(item, [r for r in found if r.target == item.target]) for item in items.ITEMS]
    return listed + [(Item("", report.paper, ""), [report]) for report in found if report.target is None]


def targets(catalogue: Iterable[Report]) -> dict[str, list[str]]:
    """Named target -> the names of the reports it renders."""
    found: dict[str, list[str]] = {}
    for report in catalogue:
        if report.target:
            found.setdefault(report.target, []).append(report.name)
    return found


def _sokoban(sokoban: sokoban_experiment.Families) -> list[Report]:
    found, named = [], set()
    for sweep_name, sweep in sokoban.settings.sweeps.items():
        for budget_name in sweep.budgets:
            figure, target = items.page("sokoban_sweep", sweep.expert, budget_name)
            if target in named:  # the first sweep of an (expert, budget) pair is the figure
                target = None
            elif target:
                named.add(target)
            found.append(Report(f"sokoban_{sweep_name}_{budget_name}",
                                f"{figure} Sokoban allocation sweep: {sweep_name}, {budget_name} budget".strip(),
                                "sokoban_sweep", SOKOBAN_SWEEP, {"sweep_name": sweep_name, "budget": budget_name},
                                target))
    if found:  # a sweep report exists exactly where the config trains Sokoban runs
        found += [_page(name, SOKOBAN_SWEEP) for name in ("sokoban_depth", "sokoban_tables", "sokoban_table2")]
    return found


def _probes(sokoban: sokoban_experiment.Families) -> list[Report]:
    if not sokoban.probed:
        return []
    probes = sokoban.settings.probes
    assert probes is not None  # the runs it names are probed
    found = [_page("sokoban_probe_depth", SOKOBAN_PROBES)]
    if probes.compare:
        found.insert(0, _page("sokoban_probe_recall", SOKOBAN_PROBES, {"compare": ",".join(probes.compare)}))
    if probes.picture is not None:
        found.append(_page("sokoban_plans", SOKOBAN_PROBES, {"run": probes.picture.run}))
    return found


def _sokoban_ablations(sokoban: sokoban_experiment.Families) -> list[Report]:
    # One report per ablation the config trains; it reads the ablations dataset (rule ablations).
    return [_page(f"sokoban_{setting}", SOKOBAN_ABLATIONS, {"setting": setting}, key=("sokoban_ablation", setting))
            for (setting,) in items.settings("sokoban_ablation") if setting in sokoban.ablations]


def _lm(study: Study) -> list[Report]:
    # Every budget trains both families at every window (lm.experiment.runs), one sweep report for each setting.
    settings = [(b.name, window) for b in study.lm.budgets for window in sorted(study.lm.settings.windows)]
    fig5 = study.fig5
    found = []
    for budget_name, window in settings:
        figure, target = items.page("lm_sweep", "fig5_setting" if (budget_name, window) == fig5 else "other_settings")
        found.append(Report(f"lm_{budget_name}_W{window}",
                            f"{figure} FineWeb allocation sweep: {budget_name} budget, {window}-token window",
                            "lm_sweep", LM_SWEEP, {"budget": budget_name, "window": window}, target))
    if settings:
        found.append(_page("lm_depth", LM_SWEEP))
    return found


def _lm_ablations(lm: lm_experiment.Families) -> list[Report]:
    # One report for every LM ablation the config trains, titled by all of them; it reads the ablations dataset
    # (rule ablations). Its target is the first listed setting's that the config has.
    present = [items.page("lm_ablation", setting) for (setting,) in items.settings("lm_ablation")
               if setting in lm.ablations]
    if not present:
        return []
    return [Report("lm_ablations", "; ".join(paper for paper, _ in present), "lm_ablation", LM_ABLATIONS,
                   target=present[0][1])]


def _expert_count(study: Study) -> list[Report]:
    """Fig. 6, where the config's runs hold a family (fixed L and d, at least two E): its inputs are exactly the
    result files that hold one (the Sokoban budget sweeps, the expert-count sweep, the LM sweep at Fig. 5's window).
    Fig. 18, where the first ConvGLU sweep's runs alone hold one: the same page of that sweep only."""
    sokoban, (_, window) = study.sokoban, study.fig5  # Fig. 6 reads Fig. 5's window
    by_name = {b.name: b for b in study.sokoban.budgets}
    sweeps = {name: [(expert_count.sokoban_panel(name), recurrent, budget_name,
                      by_name[budget_name].allocations_of(recurrent))
                     for budget_name in sweep.budgets for recurrent in sweep.recurrent]
              for name, sweep in sokoban.settings.sweeps.items()}
    families = dict.fromkeys(run.agent.recurrent for run in sokoban.expert_count)
    extra = [(expert_count.sokoban_panel("expert_count"), recurrent, "",
              [budget.Allocation(run.agent.depth, run.agent.experts, run.agent.width)
               for run in sokoban.expert_count if run.agent.recurrent == recurrent]) for recurrent in families]
    # Every LM budget trains both families at every window (lm.experiment.runs).
    lm = [(expert_count.lm_panel(window), recurrent, b.name, b.allocations) for b in study.lm.budgets
          for recurrent in (False, True)]
    sources: dict[str, tuple[str, list[tuple]]] = {
        "sweep": (SOKOBAN_SWEEP["sweep"], [row for rows in sweeps.values() for row in rows]),
        "expert_count": (EXPERT_COUNT, extra), "lm_sweep": (LM_SWEEP["sweep"], lm)}
    inputs = {name: path for name, (path, planned) in sources.items() if _has_family(planned)}
    found = [_page("expert_count", inputs, {"window": window})] if inputs else []
    for (expert,) in items.settings("expert_count"):  # one sweep's own view, Fig. 18's of the first ConvGLU sweep
        figure, target = items.page("expert_count", expert)
        name = next((name for name, sweep in sokoban.settings.sweeps.items() if sweep.expert == expert), None)
        if name is not None and _has_family(sweeps[name]):
            found.append(Report(f"expert_count_{name}", f"{figure}: {expert} Sokoban score against the number of "
                                f"experts E at fixed depth and width ({name} sweep)", "expert_count", SOKOBAN_SWEEP,
                                {"sweep_name": name}, target))
    return found


def _has_family(planned: Iterable[tuple]) -> bool:
    """Whether the allocations a config will train, (panel, recurrent, budget name, allocations) each, hold a
    family: one panel, recurrence, L and d with two values of E."""
    rows = [{"panel": panel, "recurrent": recurrent, "budget": name, "depth": a.depth, "experts": a.experts,
             "width": a.width} for panel, recurrent, name, allocations in planned for a in allocations]
    return len(expert_count.families(pd.DataFrame(rows, columns=expert_count.POINT))) > 0


def _lm_systems(lm: lm_experiment.Families) -> list[Report]:
    """Tables 5 and 6, where the config defines them (`lm.latency`, `lm.throughput`); one notebook each."""
    return [_page(f"lm_{table}", {table: path}) for table, path in LM_SYSTEMS.items() if table in lm.settings.tables]
