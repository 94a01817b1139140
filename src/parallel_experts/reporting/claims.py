"""The claims page (reports/claims.html, target `claims`): each claim of the paper in its words, beside the verdict
that analysis.findings decides from this reproduction's results.

A `Claim` holds the paper's statement and number with its section and the reports that show our evidence; the
rule that decides it is analysis.findings' decision of the same name. The page is one table, a tally of the
verdicts and the rules in words, a chart of the verdicts at a glance, each report linked.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import matplotlib.pyplot as plt
import pandas as pd
from pandas.io.formats.style import Styler

from parallel_experts.analysis import calibration, findings, scored_seeds
from parallel_experts.analysis import probes as probe_analysis
from parallel_experts.analysis import sokoban_ablations as ablations
from parallel_experts.analysis import verdicts
from parallel_experts.config.settings import Margins
from parallel_experts.lm import systems
from parallel_experts.reporting import markup
from parallel_experts.results import paper as published
from parallel_experts.results import store
from parallel_experts.study import Study


@dataclass(frozen=True)
class Claim:
    statement: str  # the paper's statement
    paper: str  # the paper's number(s)
    section: str
    reports: tuple[str, ...]  # the reports that show our evidence, the first the config has is linked


# The paper's numbers the claims quote, from results.paper (its constants and reference tables), not retyped.
def _allocation(setting: str) -> str:
    """An ablation's run as the paper's prose writes it: (L, E, d)."""
    return str(published.SOKOBAN_ABLATION_RUNS[setting][1])


def _systems(table: str, column: str, row: tuple[bool, int, int], context: int) -> float:
    """One cell of Table 5 or 6: the row (recurrent, L, E) at context C."""
    recurrent, depth, experts = row
    return published.value(table, column, recurrent=recurrent, depth=depth, experts=experts, context=context)


_SHALLOW, _C = (True, 1, 16), 128  # the rows and the context the systems claims quote
_LATENCY = {row: _systems("table5_latency", "ms_per_token", row, _C) for row in (_SHALLOW, systems.TRANSFORMER)}
_TOKENS = {row: _systems("table6_throughput", "tokens_per_s", row, _C) for row in (_SHALLOW, systems.TRANSFORMER)}
_B = int(_systems("table5_latency", "batch", systems.TRANSFORMER, _C))
_FINEWEB_ABLATION = published.FINEWEB_ABLATION_RUNS["aggregation"][2]


def _thousands(tokens_per_s: float) -> str:
    return f"{tokens_per_s / 1000:,.1f}k"


# The paper's claims by the name of their decision (findings.DECISIONS, whose order the page keeps). Statements
# are the paper's (arXiv 2609.12531), numbers formatted from results.paper.
CLAIMS = {
    "sokoban_fewer_layers": Claim(
        "With temporal recurrence the best Sokoban allocation uses fewer layers than without, at every budget.",
        "small budget: recurrent best at L = 4, non-recurrent at L = 8; recurrent saturates by L = 2–4, "
        "non-recurrent still improves at L = 16 (large budget)", "§5.1, Figs. 2–3", ("sokoban_depth",)),
    "sokoban_recurrence_better": Claim(
        "Recurrent Sokoban agents perform better than non-recurrent ones, at every budget.",
        "recurrent better across all settings; small budget: best recurrent (L = 4) above the best "
        "non-recurrent (L = 8)", "§5.1, Figs. 2–3", ("sokoban_tables",)),
    "plans_earlier": Claim(
        "Deeper recurrent agents plan earlier, and shallower ones catch up within a few steps.",
        "L = 4 against L = 2, large budget: L = 4's recall higher at first, L = 2 catches up "
        f"({probe_analysis.PAPER_PROTOCOL})",
        "§5.1, Fig. 4, App. F", ("sokoban_probe_recall",)),
    "lm_comparable_shallow": Claim(
        "The recurrent Transformer with two layers is comparable to the best non-recurrent allocation.",
        f"validation loss ≈ {published.FIG5_RECURRENT_L2_LOSS} at L = 2 (small budget, W = 128), comparable to the "
        "best non-recurrent at L = 16",
        "§5.2, Fig. 5", ("lm_{budget}_W{window}", "lm_depth")),
    "lm_fewer_layers": Claim(
        "With recurrence the best FineWeb allocation uses fewer layers than without, in every setting.",
        "recurrent models reach their best loss at L = 2 or 4, non-recurrent ones keep improving up to L = 16 "
        "or 32 (both budgets, W = 128 and 1,024)", "§5.2, Fig. 3 (right)", ("lm_depth",)),
    "more_experts": Claim(
        "More experts per layer help both recurrent and non-recurrent models.",
        "both families, both domains; Sokoban keeps improving beyond 8 experts", "§5.3, Fig. 6", ("expert_count",)),
    "full_communication": Claim(
        "Full shared-state access is best; narrower communication radii lower performance.",
        "full radius best, narrower radii lower the return monotonically (medium budget, "
        f"{_allocation('radius')}; full: {ablations.paper_value('radius'):.3f})", "§5.3, App. E, Fig. 11",
        ("sokoban_radius",)),
    "sqrt_sum_default": Claim(
        "The sqrt-sum is a good default aggregation rule: parameter-free and consistently competitive.",
        f"Sokoban {_allocation('aggregation')}: the sqrt-sum best of four rules "
        f"({ablations.paper_value('aggregation'):.3f}); FineWeb {_FINEWEB_ABLATION}: "
        f"≈ {published.FINEWEB_ABLATION_VALUES['aggregation']}",
        "App. A.3, D, Fig. 10", ("sokoban_aggregation", "lm_ablations")),
    "decode_faster": Claim(
        "Shallow recurrent models decode faster than the Transformer.",
        f"recurrent L1 E16 {_LATENCY[_SHALLOW]:.3f} ms/token against the Transformer L16 E1's "
        f"{_LATENCY[systems.TRANSFORMER]:.3f} at C = {_C}, B = {_B} "
        f"(ratio {_LATENCY[_SHALLOW] / _LATENCY[systems.TRANSFORMER]:.2f}); four H100s", "App. H.1, Table 5",
        ("lm_latency",)),
    "training_slower": Claim(
        "Recurrent training is slower per token than the Transformer's.",
        f"L1 E16 {_thousands(_TOKENS[_SHALLOW])} against {_thousands(_TOKENS[systems.TRANSFORMER])} tokens/s at "
        f"C = {_C} ({_TOKENS[_SHALLOW] / _TOKENS[systems.TRANSFORMER]:.2f}); recurrent rows out of memory where "
        "L·C is large; four H100s", "App. H.2, Table 6", ("lm_throughput",)),
}


COST = "to decide it (paper scale, power 0.8)"
NO_EFFECT = "chance of this verdict with no effect"


def table(study: Study, results: Mapping[str, str], reports: Iterable[str], costs: Mapping[str, str]
          ) -> pd.DataFrame:
    """The claims table: one row per claim with the paper's statement, number and section, our measurement, the
    test, the verdict, its chance with no effect at this design (tested verdicts), the parts that decided it, the
    report that shows it (the first of its reports in `reports`, else "") and, where the verdict is open, what
    deciding it would cost (`costs`, by claim: planning.power.claim_costs). `results`: the claims notebook's
    parameters, the path of each result this config produces by name (targets.catalogue.CLAIM_INPUTS), "" where it
    produces none."""
    data = {name: store.open_dataset(path) for name, path in results.items() if path}
    judged = findings.judge(study, data, scored_seeds.of_results(study, results, data))
    present = set(reports)
    budget, window = study.fig5  # names Fig. 5's page
    rows = []
    for found in judged.itertuples():
        claim = CLAIMS[found.claim]
        names = [name.format(budget=budget, window=window) for name in claim.reports]
        decided = found.verdict in (findings.SUPPORTED, findings.CONTRADICTED)
        rows.append({"claim": claim.statement, "section": claim.section, "paper": claim.paper,
                     "measured": found.measured, "test": found.test, "rule": found.rule, "verdict": found.verdict,
                     NO_EFFECT: found.no_effect if decided else None,
                     "decided by": "; ".join(found.decided_by),
                     "report": next((name for name in names if name in present), ""),
                     COST: "" if decided else costs[found.claim]})
    return pd.DataFrame(rows)


def tally(table: pd.DataFrame) -> str:
    """How many claims got each verdict, in words: the tested verdicts first, then those without a test."""
    counts = table["verdict"].value_counts()
    count = lambda verdicts: ", ".join(f"{int(counts.get(v, 0))} {v}" for v in verdicts)  # noqa: E731
    untested = [v for v in findings.VERDICTS if v not in findings.TESTED]
    return f"{count(findings.TESTED)} by a test at alpha = {verdicts.ALPHA}; {count(untested)} (of {len(table)} claims)"


def rules(margins: Margins) -> str:
    """How the page's rules decide, in words."""
    return ("Each verdict names the rule that decided it (column rule; parallel_experts/analysis/verdicts.py), and each"
            " part's rule is a test at alpha = 0.05 against its own null at this design: the share of simulated studies"
            " with no effect, of the same seeds and allocations, in which the rule points the same way at least as "
            "strongly, so that picking the best of several noisy allocations is inside the test. Where a rule picks the"
            " best of one side against the best of another, no effect is not one configuration: the p-value is the "
            "largest over every allocation equal and the least favourable one, the side that must win tied at the top "
            "against one allocation of the other, the rest far below (parallel_experts/analysis/calibration.py). Its "
            "chance of the verdict it gives with no effect, at the observed spread, is in the column beside it; a rule "
            "whose chance exceeds alpha there, or that has no test (one seed, one probed agent per depth, one timing "
            "round), says untested, whichever way the measurement leans. Where the paper says comparable or "
            f"competitive, the test is non-inferiority within a margin ({margins.lm} nats in FineWeb, "
            f"{margins.sokoban} of return in Sokoban, {margins.recall} of recall where a shallower agent catches up: "
            "the config's claims.margins), and its no-effect chance is taken at that margin. Where a rule sets one "
            "family's best against the other's, its null also depends on the ratio of the families' seed-to-seed "
            f"spreads: its p-value is the largest over a {1 - calibration.GAMMA:.1%} confidence interval of that "
            f"ratio, plus {calibration.GAMMA} (Berger and Boos), which holds alpha whatever the ratio. A claim with "
            "parts (budgets, domains, families, contexts) is supported where every part that ran is (each at alpha), "
            "and contradicted where a tested part is at alpha over the number of tested parts (Bonferroni); the parts "
            "that decided are named. A part that did not run is listed and does not count. Sokoban agents that solve no"
            " more test levels than a random policy decide nothing.")


def summary(table: pd.DataFrame, margins: Margins) -> str:
    """The page's first line, in Markdown: the tally of verdicts, then the rules that decided them."""
    return f"**{tally(table)}.** {rules(margins)}"


VERDICT_COLOURS = {findings.SUPPORTED: "tab:green", findings.CONTRADICTED: "tab:red",
                   findings.INCONCLUSIVE: "0.45", findings.UNTESTED: "white", findings.NOT_RUN: "white"}
UNDECIDED = {findings.INCONCLUSIVE: "tested: neither verdict at alpha", findings.UNTESTED: "no test at this design",
             findings.NOT_RUN: "not run at this scale"}


def at_a_glance(table: pd.DataFrame, title: str) -> plt.Figure:
    """The claims table as a chart: each claim's verdict in its column (open marks: no test decided it), and beside
    it, for a verdict a test gave, its chance with no effect at this design against alpha."""
    names = [f"{section}: {textwrap.shorten(claim, 52, placeholder='…')}"
             for claim, section in zip(table["claim"], table["section"])]
    y = range(len(table))
    fig, (ax, chance) = plt.subplots(1, 2, figsize=(11, 0.42 * len(table) + 1.6), sharey=True, width_ratios=[1.1, 1],
                                     layout="constrained")
    column = {verdict: i for i, verdict in enumerate(findings.VERDICTS)}
    ax.scatter([column[v] for v in table["verdict"]], y, s=90, c=[VERDICT_COLOURS[v] for v in table["verdict"]],
               edgecolors="k", linewidths=0.8, zorder=2)
    ax.set_xticks(range(len(column)), [v.replace(" at this scale", "") for v in column], fontsize="small",
                  rotation=90)
    ax.set_xlim(-0.5, len(column) - 0.5)
    ax.set_yticks(list(y), names, fontsize="small")
    ax.set_ylabel("claim (section: statement)")
    ax.invert_yaxis()
    ax.grid(axis="y", color="0.9", zorder=0)
    ax.set_xlabel("verdict from this reproduction")
    rates = table[NO_EFFECT].astype(float)
    chance.barh([i for i in y if pd.notna(rates[i])], rates.dropna(), color="0.6", height=0.5)
    for i in (i for i in y if pd.isna(rates[i])):
        chance.text(0.002, i, UNDECIDED.get(table["verdict"].iloc[i], ""), va="center", fontsize="small", color="0.4",
                    bbox=dict(facecolor="white", edgecolor="none", pad=1), zorder=3)  # over the alpha line
    chance.axvline(verdicts.ALPHA, color="k", ls="--", lw=1,
                   label=f"alpha = {verdicts.ALPHA} (a rate within {calibration.HELD_WITHIN} Monte\nCarlo s.e. of it "
                         "holds: calibration.Rates)")
    chance.set_xlim(0, max(2 * verdicts.ALPHA, rates.max() * 1.2 if rates.notna().any() else 0))
    chance.set_xlabel("chance of this verdict with no effect")
    fig.legend(frameon=False, fontsize="small", loc="outside lower right")
    fig.suptitle(title)
    return fig


def styled(table: pd.DataFrame) -> Styler:
    """The claims table as the page shows it: every cell escaped, each report linked to its page, the verdicts of a
    test in bold."""
    def link(name: str) -> str:
        return f'<a href="{name}.html">{name}</a>' if name else "(no report at this scale)"

    def bold(verdict: str) -> str:
        return "font-weight: bold" if verdict in (findings.SUPPORTED, findings.CONTRADICTED) else ""

    return (markup.table(table, {"report": link, NO_EFFECT: "{:.3f}"}, na_rep="")
            .set_properties(**{"text-align": "left", "vertical-align": "top"})
            .map(bold, subset=["verdict"])
            .set_table_styles([{"selector": "th", "props": [("text-align", "left")]}]))
