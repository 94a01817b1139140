"""The reports a configuration defines: one per paper figure or table that its experiments can fill.

Each `Report` names the notebook that renders it, the result files it reads (by notebook parameter), its other
parameters, and the named Snakemake target (`fig2`, `tables_1_7`, ...) that regenerates it. The workflow loops
over `reports(config)` for its report rules and targets; nothing else decides what pages exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pandas as pd

from parallel_experts.analysis import expert_count
from parallel_experts.core import budget
from parallel_experts.results import paths
from parallel_experts.sokoban import experiment as sokoban_experiment

# What each notebook reads, by its parameter name.
ALLOCATION_GRIDS = {domain: paths.allocations(domain) for domain in budget.DOMAINS}
SOKOBAN_SWEEP = {"sweep": paths.SOKOBAN_SWEEP}
SOKOBAN_PROBES = {"probes": paths.SOKOBAN_PROBES}
SOKOBAN_ABLATIONS = {"ablations": paths.ablations("sokoban")}
LM_SWEEP = {"sweep": paths.LM_SWEEP}
LM_ABLATIONS = {"ablations": paths.ablations("lm")}
# The systems tables (lm.latency, lm.throughput): report name, the paper's table, the target, the result it reads.
LM_SYSTEMS = {
    "latency": ("lm_latency", "Table 5: per-token decode latency after pre-filling the caches", "table5",
                paths.LATENCY),
    "throughput": ("lm_throughput", "Table 6: training throughput and memory, the complete update", "table6",
                   paths.THROUGHPUT),
}
EXPERT_COUNT = paths.EXPERT_COUNT
# The plans of this config and of config/paper.yaml (rule plan_costs; planning.tables.write).
PLAN = {"plan": f"{paths.PLAN}/targets.csv", "paper_plan": f"{paths.PAPER_PLAN}/targets.csv"}
# The results the claims page reads (its notebook parameters), where some other report of the config reads them.
CLAIM_INPUTS = {"sokoban_sweep": SOKOBAN_SWEEP["sweep"], "probes": SOKOBAN_PROBES["probes"],
                "sokoban_ablations": SOKOBAN_ABLATIONS["ablations"], "expert_count": EXPERT_COUNT,
                "lm_sweep": LM_SWEEP["sweep"], "lm_ablations": LM_ABLATIONS["ablations"],
                **{table: path for table, (_, _, _, path) in LM_SYSTEMS.items()}}

# Each Sokoban ablation (sokoban.ablations.<setting>): report name, the paper's figure, the target; one notebook.
SOKOBAN_ABLATION_FIGURES = {
    "aggregation": ("sokoban_aggregation", "Fig. 10 (left): Sokoban aggregation rules", "fig10_left"),
    "radius": ("sokoban_radius", "Fig. 11: Sokoban communication radius", "fig11"),
}
# Each LM ablation (lm.ablations.<setting>): the paper's item and its target. One report shows every setting; its
# target is the first listed setting's that the config has.
LM_ABLATION_FIGURES = {"aggregation": ("Fig. 10 (right): FineWeb aggregation rules", "fig10_right"),
                       "kv_cache": ("App. A.3: KV-cache sharing", "fig10_right")}  # one report, one target
# The paper's figure and our named target for each (expert, budget) Sokoban sweep. The paper has no large ConvGLU
# sweep (App. K): a config that adds one gets its sweep page without a target.
SOKOBAN_FIGURES = {
    ("convlstm", "small"): ("Fig. 2", "fig2"),
    ("convlstm", "medium"): ("Fig. 16", "fig16"),
    ("convlstm", "large"): ("Fig. 17", "fig17"),
    ("convglu", "small"): ("Fig. 19", "fig19"),
    ("convglu", "medium"): ("Fig. 20", "fig20"),
}
# App. K's Fig. 18: the ConvGLU runs' mean return across expert counts at fixed depths, the expert-count view (Fig.
# 6's notebook) of the first ConvGLU sweep alone.
CONVGLU_EXPERTS = ("convglu", "Fig. 18", "fig18")  # expert, the paper's figure, the target


@dataclass(frozen=True)
class Item:
    """A data figure or table of the paper, as the index lists it."""

    target: str  # the named Snakemake target of its reports
    paper: str
    needs: str  # what a config must hold for it: the index's reason where the config has no report of it


# Every data figure and table of the paper with its target, in the index's order (the claims page first).
PAPER_ITEMS = (
    Item("claims", "The paper's claims, each judged from the results", "any results"),
    Item("plan", "What each item costs: GPU- or CPU-hours per target, predicted and measured", "any results"),
    Item("allocations", "Sec. 4, App. J: allocation grids and their per-step work", "a budget"),
    Item("fig2", "Fig. 2: Sokoban allocation sweep, small budget", "a ConvLSTM sweep at a budget named small"),
    Item("fig3_left", "Fig. 3 (left): best Sokoban return with depth at most L", "a Sokoban sweep"),
    Item("fig3_right", "Fig. 3 (right): best FineWeb loss with depth at most L", "an LM budget"),
    Item("fig4", "Fig. 4: planning-probe recall by step, two depths", "sokoban.probes with compare"),
    Item("fig5", "Fig. 5: FineWeb allocation sweep, small budget", "an LM budget named small"),
    Item("fig6", "Fig. 6: score against the number of experts", "runs with two values of E at one (L, d): a "
         "budget grid that has them, or sokoban.expert_count"),
    Item("fig10_left", "Fig. 10 (left): Sokoban aggregation rules", "sokoban.ablations.aggregation"),
    Item("fig10_right", "Fig. 10 (right), App. A.3: FineWeb aggregation rules, KV-cache sharing", "lm.ablations"),
    Item("fig11", "Fig. 11: Sokoban communication radius", "sokoban.ablations.radius"),
    Item("fig12", "Fig. 12: planning-probe recall and macro-F1 of the depth family", "sokoban.probes"),
    Item("fig13", "Fig. 13: an agent's plan over its first steps", "sokoban.probes.picture"),
    Item("fig14_15", "Figs. 14-15: FineWeb sweeps at the other budgets and windows",
         "an LM budget or window besides Fig. 5's"),
    Item("fig16", "Fig. 16: Sokoban allocation sweep, medium budget", "a ConvLSTM sweep at a budget named medium"),
    Item("fig17", "Fig. 17: Sokoban allocation sweep, large budget", "a ConvLSTM sweep at a budget named large"),
    Item("fig18", "Fig. 18: ConvGLU Sokoban score against the number of experts at fixed depth",
         "a ConvGLU sweep with two values of E at one (L, d)"),
    Item("fig19", "Fig. 19: ConvGLU Sokoban allocation sweep, small budget", "a ConvGLU sweep at a budget named small"),
    Item("fig20", "Fig. 20: ConvGLU Sokoban allocation sweep, medium budget",
         "a ConvGLU sweep at a budget named medium"),
    Item("tables_1_7", "Tables 1 and 7: Sokoban solve rates and final-five scores, depth tests", "a Sokoban sweep"),
    Item("table2", "Table 2: the best Sokoban agents beside earlier DRC agents", "a Sokoban sweep"),
    Item("table5", "Table 5: per-token decode latency", "lm.latency"),
    Item("table6", "Table 6: training throughput and memory", "lm.throughput"),
)


# One caption per kind of report (its notebook): what it shows and how to read it. Snakemake's own report
# (`snakemake --report`) shows it beside each page (workflow/report/report.rst).
CAPTIONS = {
    "claims": "Every claim of the paper with our measurement, the rule that decided its verdict and the report that "
              "shows the evidence. Read the verdict with the scale: a demo run decides little.",
    "plan": "The GPU- or CPU-hours each target costs at this config and at the paper's, predicted from FLOPs and "
            "throughput, beside the measured time of every job that ran. Read the ratio column: 1 is exact.",
    "allocations": "Every budget's allocations (L, E, d) with their work relative to the anchor and XLA's FLOP count, "
                   "beside the authors' grids. Bars near 1 spend the budget; the table marks the anchor.",
    "sokoban_sweep": "Final-five return of every allocation of one budget, recurrent and not. Read where each family "
                     "peaks in depth L: the paper finds the recurrent peak at L = 2-4.",
    "sokoban_depth": "The best return with depth at most L, per budget and family. A curve that flattens early "
                     "saturates at shallow depth, the paper's finding for recurrent agents.",
    "sokoban_tables": "Solve rates (Table 1), final-five means and variances (Table 7) and the authors' Welch depth "
                      "tests on our runs. A row with p below the level shows that depth helps there.",
    "sokoban_table2": "Each budget's best agents' greedy and sampled solve rates beside earlier agents' published "
                      "ones; the banner says whether the levels and training length compare like for like.",
    "sokoban_probe_recall": "Planning-probe recall by environment step of two agents of different depth, with "
                            "encoder and untrained controls. The paper: the deeper one leads, the shallower catches up.",
    "sokoban_probe_depth": "Probe recall and macro-F1 of every probed run for both probe targets. Compare each state "
                           "with its controls: only recall above them is read as a plan.",
    "sokoban_plans": "What the probe reads from one agent's state on one test level over its first steps: an arrow "
                     "per square it predicts the agent will step onto, and how.",
    "sokoban_ablation": "One agent setting (aggregation rule or communication radius) varied at one allocation, "
                        "mean return ± 1 standard error. The paper: the sqrt-sum and full access are best.",
    "lm_sweep": "Validation loss of every allocation of one budget and attention window, recurrent and not. Read "
                "where each family's loss is lowest in depth L: the paper finds recurrent at L = 2-4.",
    "lm_depth": "The lowest validation loss with depth at most L, per budget, window and family. The paper finds "
                "recurrent models at their best by L = 2 or 4 and non-recurrent ones improving to L = 16 or 32.",
    "lm_ablation": "One model setting (aggregation rule, KV-cache sharing) varied at one allocation, one run per seed "
                   "(one by default): "
                   "a difference of a few hundredths of a nat may be noise.",
    "expert_count": "Score against the number of experts E at fixed depth and width, per family. Rising lines: more "
                    "experts help, as the paper finds for both families.",
    "lm_latency": "Per-token decode latency of every row after pre-filling the caches, and its ratio to the "
                  "Transformer L16 E1. Below 1: faster; the paper's L1 E16 is about five times faster on H100s.",
    "lm_throughput": "Training tokens/s and memory of every row at each context, and the ratio to the Transformer. "
                     "Below 1: slower; OOM marks a cell that does not fit the device.",
}


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
        return CAPTIONS[self.notebook]


def shows(report: Report, run, config: Mapping) -> bool:
    """Whether `report` shows the results of `run` of a dataset it reads: a sweep page its sweep (or budget and
    window), an ablation page its ablation's runs; every other page all of them. What a figure costs on its own,
    where its target's DAG builds the whole dataset."""
    params = report.params
    if report.notebook == "sokoban_sweep":
        return (run.sweep, run.budget) == (params["sweep_name"], params["budget"])
    if report.notebook == "lm_sweep":
        return (run.budget, run.window) == (params["budget"], params["window"])
    if report.notebook == "sokoban_ablation":
        return run in sokoban_experiment.ablation_runs(config)[params["setting"]]
    if report.notebook == "expert_count" and "sweep_name" in params:  # Fig. 18: one sweep's runs
        return run.sweep == params["sweep_name"]
    return True


def reports(config: Mapping) -> list[Report]:
    """Every report of a validated config, in index order: the paper's claims judged, allocation grids, Sokoban,
    its probes, its ablations, language model, its ablations, number of experts, the systems tables."""
    found = [Report("allocations", "Sec. 4 and App. J grids: allocations of every budget and their per-step work",
                    "allocations", ALLOCATION_GRIDS, target="allocations")]
    found += _sokoban(config)
    found += _probes(config)
    found += _sokoban_ablations(config)
    found += _lm(config)
    found += _lm_ablations(config)
    found += _expert_count(config)
    found += _lm_systems(config)
    read = {path for report in found for path in report.inputs.values()}
    claimed = {name: path for name, path in CLAIM_INPUTS.items() if path in read}
    claims = Report("claims", "The paper's claims, each judged from this reproduction's results", "claims", claimed,
                    target="claims")
    cost = Report("plan", "What each target costs at this config (GPU- or CPU-hours), predicted beside the measured "
                  "job times, and the paper config's plan", "plan", PLAN, target="plan")
    return [claims, cost, *found]


def index_items(config: Mapping) -> list[tuple[Item, list[Report]]]:
    """Every paper item in PAPER_ITEMS order with the config's reports of its target (an empty list: the item is
    missing here), then each report without a target as an item of its own."""
    found = reports(config)
    listed = [(item, [r for r in found if r.target == item.target]) for item in PAPER_ITEMS]
    return listed + [(Item("", report.paper, ""), [report]) for report in found if report.target is None]


def targets(catalogue: Iterable[Report]) -> dict[str, list[str]]:
    """Named target -> the names of the reports it renders."""
    found: dict[str, list[str]] = {}
    for report in catalogue:
        if report.target:
            found.setdefault(report.target, []).append(report.name)
    return found


def _sokoban(config: Mapping) -> list[Report]:
    found, named = [], set()
    for sweep_name, sweep in config["sokoban"].get("sweeps", {}).items():
        for budget_name in sweep["budgets"]:
            figure, target = SOKOBAN_FIGURES.get((sweep["expert"], budget_name), ("", None))
            if target in named:  # the first sweep of an (expert, budget) pair is the figure
                target = None
            elif target:
                named.add(target)
            found.append(Report(f"sokoban_{sweep_name}_{budget_name}",
                                f"{figure} Sokoban allocation sweep: {sweep_name}, {budget_name} budget".strip(),
                                "sokoban_sweep", SOKOBAN_SWEEP, {"sweep_name": sweep_name, "budget": budget_name},
                                target))
    if found:  # a sweep report exists exactly where the config trains Sokoban runs
        found.append(Report("sokoban_depth", "Fig. 3 (left): best Sokoban return with depth at most L",
                            "sokoban_depth", SOKOBAN_SWEEP, target="fig3_left"))
        found.append(Report("sokoban_tables",
                            "Tables 1 and 7, depth tests: Sokoban solve rates and final-five scores",
                            "sokoban_tables", SOKOBAN_SWEEP, target="tables_1_7"))
        found.append(Report("sokoban_table2", "Table 2: solve rates of the best Sokoban agents beside earlier DRC "
                            "agents", "sokoban_table2", SOKOBAN_SWEEP, target="table2"))
    return found


def _probes(config: Mapping) -> list[Report]:
    probes = config["sokoban"].get("probes")
    if not probes:
        return []
    found = [Report("sokoban_probe_depth", "Fig. 12: planning-probe recall of every probed run, C_A and C_B, macro-F1",
                    "sokoban_probe_depth", SOKOBAN_PROBES, target="fig12")]
    if "compare" in probes:
        found.insert(0, Report("sokoban_probe_recall", "Fig. 4: planning-probe recall by step, two depths compared",
                               "sokoban_probe_recall", SOKOBAN_PROBES, {"compare": ",".join(probes["compare"])},
                               "fig4"))
    if "picture" in probes:
        found.append(Report("sokoban_plans", "Fig. 13: an agent's plan over its first steps, read by the probe",
                            "sokoban_plans", SOKOBAN_PROBES, {"run": probes["picture"]["run"]}, "fig13"))
    return found


def _sokoban_ablations(config: Mapping) -> list[Report]:
    # One report per ablation the config trains; it reads the ablations dataset (rule ablations).
    return [Report(name, paper, "sokoban_ablation", SOKOBAN_ABLATIONS, {"setting": setting}, target)
            for setting, (name, paper, target) in SOKOBAN_ABLATION_FIGURES.items()
            if setting in config["sokoban"].get("ablations", {})]


def fig5_setting(config: Mapping) -> tuple[str, int]:
    """Fig. 5's LM sweep: the small budget at the config's first window (128 tokens in the paper)."""
    return "small", config["lm"]["windows"][0]


def _lm(config: Mapping) -> list[Report]:
    # Every budget trains both families at every window (lm.experiment.runs), one sweep report for each setting.
    settings = [(name, window) for name in config["lm"]["budgets"] for window in sorted(config["lm"]["windows"])]
    # Every (budget, window) sweep other than Fig. 5's is one of the appendix's fixed-compute panels (Figs. 14-15).
    fig5 = fig5_setting(config)
    found = []
    for budget_name, window in settings:
        figure, target = ("Fig. 5", "fig5") if (budget_name, window) == fig5 else ("Figs. 14-15", "fig14_15")
        found.append(Report(f"lm_{budget_name}_W{window}",
                            f"{figure} FineWeb allocation sweep: {budget_name} budget, {window}-token window",
                            "lm_sweep", LM_SWEEP, {"budget": budget_name, "window": window}, target))
    if settings:
        found.append(Report("lm_depth", "Fig. 3 (right): best FineWeb validation loss with depth at most L",
                            "lm_depth", LM_SWEEP, target="fig3_right"))
    return found


def _lm_ablations(config: Mapping) -> list[Report]:
    # One report for every LM ablation the config trains; it reads the ablations dataset (rule ablations).
    present = [item for setting, item in LM_ABLATION_FIGURES.items() if setting in config["lm"].get("ablations", {})]
    if not present:
        return []
    return [Report("lm_ablations", "; ".join(paper for paper, _ in present), "lm_ablation", LM_ABLATIONS,
                   target=present[0][1])]


def _expert_count(config: Mapping) -> list[Report]:
    """Fig. 6, where the config's runs hold a family (fixed L and d, at least two E): its inputs are exactly the
    result files that hold one (the Sokoban budget sweeps, the expert-count sweep, the LM sweep at Fig. 5's window).
    Fig. 18, where the first ConvGLU sweep's runs alone hold one: the same page of that sweep only."""
    sokoban, (_, window) = config["sokoban"], fig5_setting(config)  # Fig. 6 reads Fig. 5's window
    by_name = {b.name: b for b in budget.budgets(config, "sokoban")}
    sweeps = {name: [(expert_count.sokoban_panel(name), recurrent, budget_name,
                      by_name[budget_name].allocations_of(recurrent))
                     for budget_name in sweep["budgets"] for recurrent in sweep["recurrent"]]
              for name, sweep in sokoban.get("sweeps", {}).items()}
    dedicated = sokoban.get("expert_count")
    extra = [] if dedicated is None else [
        (expert_count.sokoban_panel("expert_count"), recurrent, "",
         [budget.Allocation(L, E, d) for L in dedicated["depths"] for d in dedicated["widths"]
          for E in dedicated["experts"]]) for recurrent in dedicated["recurrent"]]
    # Every LM budget trains both families at every window (lm.experiment.runs).
    lm = [(expert_count.lm_panel(window), recurrent, b.name, b.allocations) for b in budget.budgets(config, "lm")
          for recurrent in (False, True)]
    sources = {"sweep": (SOKOBAN_SWEEP["sweep"], [row for rows in sweeps.values() for row in rows]),
               "expert_count": (EXPERT_COUNT, extra), "lm_sweep": (LM_SWEEP["sweep"], lm)}
    inputs = {name: path for name, (path, planned) in sources.items() if _has_family(planned)}
    found = [Report("expert_count", "Fig. 6: score against the number of experts E at fixed depth and width",
                    "expert_count", inputs, {"window": window}, target="fig6")] if inputs else []
    expert, figure, target = CONVGLU_EXPERTS
    name = next((name for name, sweep in sokoban.get("sweeps", {}).items() if sweep["expert"] == expert), None)
    if name is not None and _has_family(sweeps[name]):
        found.append(Report(f"expert_count_{name}", f"{figure}: {expert} Sokoban score against the number of "
                            f"experts E at fixed depth and width ({name} sweep)", "expert_count", SOKOBAN_SWEEP,
                            {"sweep_name": name}, target=target))
    return found


def _has_family(planned: Iterable[tuple]) -> bool:
    """Whether the allocations a config will train, (panel, recurrent, budget name, allocations) each, hold a
    family: one panel, recurrence, L and d with two values of E."""
    rows = [{"panel": panel, "recurrent": recurrent, "budget": name, "depth": a.depth, "experts": a.experts,
             "width": a.width} for panel, recurrent, name, allocations in planned for a in allocations]
    return len(expert_count.families(pd.DataFrame(rows, columns=expert_count.POINT))) > 0


def _lm_systems(config: Mapping) -> list[Report]:
    """Tables 5 and 6, where the config defines them (`lm.latency`, `lm.throughput`); one notebook each."""
    return [Report(name, paper, f"lm_{table}", {table: path}, target=target)
            for table, (name, paper, target, path) in LM_SYSTEMS.items() if table in config["lm"]]
