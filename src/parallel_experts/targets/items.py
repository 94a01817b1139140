"""The paper's data figures and tables, one row each, in the index's order: the named target that regenerates it,
the paper's title for it, what a config needs for it, and which of a config's reports are its own; and one caption
per kind of report (its notebook).

A report is selected by its page key: its notebook, then the setting it shows where the notebook renders several
pages (a Sokoban sweep's expert and budget, an ablation's setting). `catalogue` builds a config's reports and takes
each one's title and target from the row that lists its key. Adding a figure of an existing kind is one row here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Item:
    """A data figure or table of the paper, as the index lists it."""

    target: str  # the named Snakemake target of its reports
    paper: str  # the paper's title for it
    needs: str  # what a config must hold for it: the index's reason where the config has no report of it
    # Its reports' page keys (notebook, setting...) -> the title each report begins with: the whole title of a page
    # of its own; the figure of a sweep's pages, which add their setting.
    pages: Mapping[tuple[str, ...], str] = field(default_factory=dict)


# The claims page first. The paper has no large ConvGLU sweep (App. K): a config that adds one gets its sweep page
# without a target. Fig. 5 is the LM sweep at the small budget and the config's first window (Study.fig5);
# every other LM sweep is one of the appendix's fixed-compute panels (Figs. 14-15).
ITEMS = (
    Item("claims", "The paper's claims, each judged from the results", "any results",
         {("claims",): "The paper's claims, each judged from this reproduction's results"}),
    Item("plan", "What each item costs: GPU- or CPU-hours per target, predicted and measured", "any results",
         {("plan",): "What each target costs at this config (GPU- or CPU-hours), predicted beside the measured job "
                     "times, and the paper config's plan"}),
    Item("power", "What each claim costs to decide: power per design and its GPU-hours", "any results",
         {("power",): "What each claim costs to decide: the power of designs and their GPU- or CPU-hours, at this "
                      "config and at the paper's"}),
    Item("allocations", "Sec. 4, App. J: allocation grids and their per-step work", "a budget",
         {("allocations",): "Sec. 4 and App. J grids: allocations of every budget and their per-step work"}),
    Item("fig2", "Fig. 2: Sokoban allocation sweep, small budget", "a ConvLSTM sweep at a budget named small",
         {("sokoban_sweep", "convlstm", "small"): "Fig. 2"}),
    Item("fig3_left", "Fig. 3 (left): best Sokoban return with depth at most L", "a Sokoban sweep",
         {("sokoban_depth",): "Fig. 3 (left): best Sokoban return with depth at most L"}),
    Item("fig3_right", "Fig. 3 (right): best FineWeb loss with depth at most L", "an LM budget",
         {("lm_depth",): "Fig. 3 (right): best FineWeb validation loss with depth at most L"}),
    Item("fig4", "Fig. 4: planning-probe recall by step, two depths", "sokoban.probes with compare",
         {("sokoban_probe_recall",): "Fig. 4: planning-probe recall by step, two depths compared"}),
    Item("fig5", "Fig. 5: FineWeb allocation sweep, small budget", "an LM budget named small",
         {("lm_sweep", "fig5_setting"): "Fig. 5"}),
    Item("fig6", "Fig. 6: score against the number of experts", "runs with two values of E at one (L, d): a "
         "budget grid that has them, or sokoban.expert_count",
         {("expert_count",): "Fig. 6: score against the number of experts E at fixed depth and width"}),
    Item("fig10_left", "Fig. 10 (left): Sokoban aggregation rules", "sokoban.ablations.aggregation",
         {("sokoban_ablation", "aggregation"): "Fig. 10 (left): Sokoban aggregation rules"}),
    # One report shows every LM ablation the config trains, its title joined from theirs.
    Item("fig10_right", "Fig. 10 (right), App. A.3: FineWeb aggregation rules, KV-cache sharing", "lm.ablations",
         {("lm_ablation", "aggregation"): "Fig. 10 (right): FineWeb aggregation rules",
          ("lm_ablation", "kv_cache"): "App. A.3: KV-cache sharing"}),
    Item("fig11", "Fig. 11: Sokoban communication radius", "sokoban.ablations.radius",
         {("sokoban_ablation", "radius"): "Fig. 11: Sokoban communication radius"}),
    Item("fig12", "Fig. 12: planning-probe recall and macro-F1 of the depth family", "sokoban.probes",
         {("sokoban_probe_depth",): "Fig. 12: planning-probe recall of every probed run, C_A and C_B, macro-F1"}),
    Item("fig13", "Fig. 13: an agent's plan over its first steps", "sokoban.probes.picture",
         {("sokoban_plans",): "Fig. 13: an agent's plan over its first steps, read by the probe"}),
    Item("fig14_15", "Figs. 14-15: FineWeb sweeps at the other budgets and windows",
         "an LM budget or window besides Fig. 5's", {("lm_sweep", "other_settings"): "Figs. 14-15"}),
    Item("fig16", "Fig. 16: Sokoban allocation sweep, medium budget", "a ConvLSTM sweep at a budget named medium",
         {("sokoban_sweep", "convlstm", "medium"): "Fig. 16"}),
    Item("fig17", "Fig. 17: Sokoban allocation sweep, large budget", "a ConvLSTM sweep at a budget named large",
         {("sokoban_sweep", "convlstm", "large"): "Fig. 17"}),
    # App. K: the expert-count view (Fig. 6's notebook) of the first ConvGLU sweep alone.
    Item("fig18", "Fig. 18: ConvGLU Sokoban score against the number of experts at fixed depth",
         "a ConvGLU sweep with two values of E at one (L, d)", {("expert_count", "convglu"): "Fig. 18"}),
    Item("fig19", "Fig. 19: ConvGLU Sokoban allocation sweep, small budget", "a ConvGLU sweep at a budget named small",
         {("sokoban_sweep", "convglu", "small"): "Fig. 19"}),
    Item("fig20", "Fig. 20: ConvGLU Sokoban allocation sweep, medium budget",
         "a ConvGLU sweep at a budget named medium", {("sokoban_sweep", "convglu", "medium"): "Fig. 20"}),
    Item("tables_1_7", "Tables 1 and 7: Sokoban solve rates and final-five scores, depth tests", "a Sokoban sweep",
         {("sokoban_tables",): "Tables 1 and 7, depth tests: Sokoban solve rates and final-five scores"}),
    Item("table2", "Table 2: the best Sokoban agents beside earlier DRC agents", "a Sokoban sweep",
         {("sokoban_table2",): "Table 2: solve rates of the best Sokoban agents beside earlier DRC agents"}),
    Item("table5", "Table 5: per-token decode latency", "lm.latency",
         {("lm_latency",): "Table 5: per-token decode latency after pre-filling the caches"}),
    Item("table6", "Table 6: training throughput and memory", "lm.throughput",
         {("lm_throughput",): "Table 6: training throughput and memory, the complete update"}),
)

# Page key -> (the title its report begins with, its item's target).
PAGES = {key: (title, item.target) for item in ITEMS for key, title in item.pages.items()}


def page(*key: str) -> tuple[str, str | None]:
    """The title and target of the page `key`; ("", None) where no paper item lists it."""
    return PAGES.get(key, ("", None))


def settings(notebook: str) -> list[tuple[str, ...]]:
    """The settings of `notebook`'s pages of a setting (not its page of its own) that paper items list, in the
    index's order."""
    return [key[1:] for key in PAGES if key[0] == notebook and key[1:]]


# One caption per kind of report (its notebook): what it shows and how to read it. Snakemake's own report
# (`snakemake --report`) shows it beside each page (workflow/report/report.rst).
CAPTIONS = {
    "claims": "Every claim of the paper with our measurement, the rule that decided its verdict and the report that "
              "shows the evidence. Read the verdict with the scale: a demo run decides little.",
    "plan": "The GPU- or CPU-hours each target costs at this config and at the paper's, predicted from FLOPs and "
            "throughput, beside the measured time of every job that ran. Read the ratio column: 1 is exact.",
    "power": "The power of each modelled claim and depth test per design (allocations, seeds) and its device-hours, "
             "simulated through the claims page's own rules. Read the config design's power: below 0.8 it cannot "
             "decide the claim.",
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
    "sokoban_probe_recall": "Planning-probe recall by environment step of two runs of different depth (the mean "
                            "over each run's probed agents), with encoder and untrained controls. The paper: the "
                            "deeper one leads, the shallower catches up.",
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
