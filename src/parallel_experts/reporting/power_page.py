"""The power page's plots and tables, from a power analysis (the JSON of `python -m parallel_experts power`, and the
tables `planning.power` derives from it, which the notebook hands in): power against seeds per decision, claims
decided against device-hours, the cheapest designs, the config's own design and the inputs with their sources.
Strings from the config (an assumption's reason) are shown as typed, never as HTML."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import pandas as pd
from pandas.io.formats.style import Styler

from parallel_experts.analysis.power import seeds_text
from parallel_experts.reporting import markup, plots

DESIGN_STYLE = {"every allocation": "-", "best per depth": "--", "one (L, d) family": "-."}
SEED_TICKS = (2, 3, 5, 10, 20, 50)
DOMAINS = {"sokoban": "Sokoban", "ablation": "Sokoban", "experts": "Sokoban", "lm": "FineWeb"}


def power_curves(analysis: Mapping, title: str, columns: int = 3) -> plt.Figure:
    """Power against seeds per allocation, one panel per domain and setting (a budget, and a window in FineWeb), a
    line per decision and design, the targets dotted and labelled at the right; a black cross where a design reaches
    a target with a rule that says a verdict more often than alpha with no effect (never chosen); a panel with a
    curve of one point says why."""
    settings = list(dict.fromkeys((entry["domain"], entry["setting"]) for entry in analysis["tests"]))
    rows = -(-len(settings) // columns)
    fig, axes = plt.subplots(rows, min(columns, len(settings)), figsize=(5 * min(columns, len(settings)), 5.5 * rows),
                             sharey=True, squeeze=False, layout="constrained")  # room for the figure's title too
    top = max(analysis["targets"])
    for ax, where in zip(axes.flat, settings):
        entries = [e for e in analysis["tests"] if (e["domain"], e["setting"]) == where]
        name = min((e["part"] for e in entries), key=len)  # the setting in words: "small budget, W = 128"
        single = False
        for i, entry in enumerate(entries):
            for design, curve in entry["curves"].items():
                points = pd.DataFrame(curve)
                single |= len(points) == 1 and points["power"].iloc[0] >= top
                test = entry["part"].removeprefix(name).lstrip(", ")
                label = entry["claim"].replace("_", " ") + (f" {test}" if test else "")
                ax.errorbar(points["seeds"], points["power"], yerr=2 * points["stderr"], color=f"C{i}",
                            ls=DESIGN_STYLE[design], marker="o", ms=3, label=f"{label} ({design})")
                if "holds_alpha" in points:  # designs that would reach a target but whose rule does not hold alpha
                    above = points[points["holds_alpha"].eq(False)]
                    if len(above):
                        ax.scatter(above["seeds"], above["power"], marker="x", s=30, color="k", zorder=3,
                                   label="its rule does not hold alpha (never chosen)")
        for target in analysis["targets"]:
            ax.axhline(target, color="grey", lw=0.8, ls=":")
            ax.text(1.0, target, f" {target:g}", transform=ax.get_yaxis_transform(), va="center", fontsize=8,
                    color="grey")
        if single:  # a curve stops at the target it reaches: at the fewest seeds, one point
            ax.text(0.98, 0.04, f"a lone point: power ≥ {top:g} at the fewest seeds tried", transform=ax.transAxes,
                    ha="right", fontsize=8, color="0.35")
        plots.log_axis(ax)
        domain = DOMAINS[where[0]]
        ax.set(xlabel="seeds per allocation", title=name if name.startswith(domain) else f"{domain}, {name}",
               ylim=(0, 1.02), xlim=(SEED_TICKS[0] * 0.9, SEED_TICKS[-1] * 1.1))
        ax.set_xticks(SEED_TICKS, [str(n) for n in SEED_TICKS])
        ax.minorticks_off()
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))  # the cross once, however many curves have one
        ax.legend(unique.values(), unique.keys(), fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2),
                  frameon=False)  # below the panel: the curves fill it
    for ax in axes.flat[len(settings):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("power (± 2 Monte Carlo SE)")
    fig.suptitle(title)
    return fig


def decided_by_hours(steps: pd.DataFrame, title: str) -> plt.Figure:
    """Claims decided at power 0.8 against the device-hours of running every design so far, cheapest first, as the
    planner prices them together (`planning.power.decided_by_hours`)."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if len(steps):  # on a log axis from the first claim's hours, the last step drawn on for half a decade
        hours = steps["hours"].to_numpy()
        ax.step([hours[0], *hours, hours[-1] * 3], [0, *steps["decided"], steps["decided"].iloc[-1]], where="post")
        plots.log_axis(ax)
    else:
        ax.text(0.5, 0.5, "no claim reaches power 0.8 with the seeds tried", ha="center", transform=ax.transAxes)
    ax.set(xlabel="device-hours, the designs so far run together", ylabel="claims decided at power 0.8", title=title,
           ylim=(0, None))
    fig.tight_layout()
    return fig


def not_modelled(analysis: Mapping) -> str:
    """The claims of the claims page that the analysis does not model, each with why (Markdown)."""
    reasons = analysis["not_modelled"]
    return "Claims not modelled:\n\n" + markup.bullets(f"{claim}: {why}" for claim, why in reasons.items())


def cheapest(tables: Mapping[float, pd.DataFrame]) -> Styler:
    """The cheapest design of each decision at each target power (`planning.power.cheapest` by target), its
    device-hours on each device the config knows, with the config's own design's power."""
    found = pd.concat([table.assign(target=target) for target, table in tables.items()])
    found["device-hours"] = [", ".join(f"{h:,.0f} {device}" if h >= 10 else f"{h:.2g} {device}"
                                       for device, h in on.items()) or None
                             for on in found["hours_on"]]
    found = found[["claim", "part", "target", "design", "seeds", "power", "closed_form", "device-hours",
                   "config_power"]]
    return markup.table(found, {"target": "{:.0%}", "seeds": "{:.0f}", "power": "{:.3f}", "closed_form": "{:.3f}",
                                "config_power": "{:.3f}"}, na_rep="—")


def config_design(analysis: Mapping) -> Styler:
    """The config's own design per decision: its seeds, the rule that decides with them, power and Monte Carlo error,
    the rule's chance of "supported" and of "contradicted" with no effect at this design (at the assumed SDs), the
    approximate closed form and the resampling of the authors' seeds where they apply, its device-hours. One seed is
    no test: such a part is untested on the claims page whatever its scores."""
    decides = analysis["targets"][0]

    def verdict(ours: Mapping) -> str:
        if "rule" in ours:
            return "no test: one seed"
        return "yes" if ours["power"] >= decides else f"no: below {decides}"

    rows = [{"claim": e["claim"], "part": e["part"], "rule": e["config_design"].get("rule", e["rule"]),
             "seeds": seeds_text(e["config_design"]["seeds"]),
             "power": e["config_design"]["power"], "stderr": e["config_design"]["stderr"],
             "supported with no effect": e["config_design"]["no_effect"]["supported"],
             "contradicted with no effect": e["config_design"]["no_effect"]["contradicted"],
             "closed_form": e["config_design"].get("closed_form"),
             "resampled": e["config_design"].get("bootstrap", {}).get("power"),
             "hours": e["config_design"]["hours"],
             "decides": verdict(e["config_design"])}
            for e in analysis["tests"]]
    return markup.table(pd.DataFrame(rows), {"power": "{:.3f}", "stderr": "{:.3f}", "closed_form": "{:.3f}",
                                             "supported with no effect": "{:.3f}",
                                             "contradicted with no effect": "{:.3f}",
                                             "resampled": "{:.3f}", "hours": "{:,.1f}"}, na_rep="—")


def inputs(analysis: Mapping) -> Styler:
    """Every family's allocations per budget with their mean and SD (each family's source is listed above it)."""
    rows = [{"budget, family": where, "allocation": allocation, "mean": values["mean"], "sd": values["sd"]}
            for where, given in analysis["inputs"].items() for allocation, values in given["allocations"].items()]
    return markup.table(pd.DataFrame(rows), {"mean": "{:.3f}", "sd": "{:.3f}"})
