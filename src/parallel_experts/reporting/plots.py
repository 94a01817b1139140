"""One function per paper figure, shared by the report notebooks and the tests."""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import ticker
from matplotlib.colors import ListedColormap
from matplotlib.patches import Circle, Rectangle

from parallel_experts.core import definitions
from parallel_experts.sokoban.levels import AGENT, BOX, FIXED, MOVES, TARGET, VARIABLE, WALL


def count_axis(axis) -> None:
    """Counts on an axis in SI prefixes (160k, 1.3G): six-digit step counts ran into each other as tick labels. A
    formatter of its own per axis: matplotlib ties a formatter to one axis."""
    axis.set_major_formatter(ticker.EngFormatter(sep=""))


def log_axis(ax: plt.Axes, base: int = 10, which: str = "x") -> None:
    """A log axis (x, or y with `which`) labelled in plain numbers: pages read no mathtext (page.begin), and
    matplotlib's default log labels are mathtext ($\\mathdefault{10^{1}}$ shown as typed)."""
    getattr(ax, f"set_{which}scale")("log", base=base)
    axis = getattr(ax, f"{which}axis")
    axis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(ticker.NullFormatter())


def work_ratios(table: pd.DataFrame, title: str, tolerance: dict[str, float] | None = None) -> plt.Figure:
    """Work of each allocation relative to its budget's anchor, against depth L (one panel per budget): colour is
    width d, area experts E, shape the attention window where there are several; shaded, the budget's tolerance."""
    ratio_columns = [c for c in table.columns if c.startswith("work ratio")]
    budgets = list(dict.fromkeys(table["budget"]))
    fig, axes = plt.subplots(1, len(budgets), figsize=(4.2 * len(budgets), 3.4), squeeze=False, sharey=True,
                             layout="constrained")
    palette = dict(zip(sorted(table["width"].unique()), sns.color_palette("viridis", table["width"].nunique())))
    markers = dict(zip(ratio_columns, "os^"))
    handles = []
    for ax, name in zip(axes[0], budgets):
        rows = table[table["budget"] == name]
        if tolerance and name in tolerance:
            ax.axhspan(1 - tolerance[name], 1 + tolerance[name], color="0.92", zorder=0)
            handles.append(plt.Rectangle((0, 0), 1, 1, color="0.92", label=f"{name} budget's tolerance "
                                                                             f"(± {tolerance[name]:g})"))
        ax.axhline(1.0, color="0.5", lw=0.8)
        for column in ratio_columns:
            ax.scatter(rows["depth"], rows[column], c=[palette[w] for w in rows["width"]], marker=markers[column],
                       s=_marker_area(rows["experts"]), edgecolor="k", linewidth=0.4, alpha=0.85)
        _depth_axis(ax, rows["depth"])
        ax.set_title(f"{name} budget")
        ax.set_xlabel("depth L")
    axes[0][0].set_ylabel("work / anchor work")
    handles += [plt.Line2D([], [], marker="o", ls="", color=colour, label=f"d={width}")
                for width, colour in palette.items()]
    handles += _size_key(table["experts"])
    if len(ratio_columns) > 1:
        handles += [plt.Line2D([], [], marker=markers[c], ls="", color="0.4", label=c[len("work ratio "):])
                    for c in ratio_columns]
    fig.legend(handles=handles, loc="outside right center", frameon=False, fontsize="small")
    fig.suptitle(title)
    return fig


MOST_EXPERTS_DRAWN = 40  # a point's area stops growing here (the paper's LM grids end at 32, Sokoban's reach 208)


def _marker_area(experts):
    """A point's area in points², growing with its experts E up to MOST_EXPERTS_DRAWN."""
    return 25 + 4 * np.minimum(experts, MOST_EXPERTS_DRAWN)


def _size_key(experts) -> list[plt.Line2D]:
    """Legend entries for `_marker_area`: the smallest, middle and largest E drawn."""
    sizes = sorted(set(experts))
    return [plt.Line2D([], [], marker="o", ls="", color="0.6", markersize=np.sqrt(_marker_area(e)),
                       label=f"E={e}" if e < MOST_EXPERTS_DRAWN else f"E ≥ {MOST_EXPERTS_DRAWN}")
            for e in dict.fromkeys([sizes[0], sizes[len(sizes) // 2], sizes[-1]])]


def _sweep_closed(fig, ax, palette, widths, experts, ylabel: str, title: str) -> plt.Figure:
    """A sweep figure finished: the axes' labels, and a legend beside the plot of the families' lines, a marker per
    width (`palette`'s colour) and a size key of `experts` (the smallest, middle and largest E), then the title."""
    ax.set_xlabel("within-step depth L")
    ax.set_ylabel(ylabel)
    handles, _ = ax.get_legend_handles_labels()
    handles += [plt.Line2D([], [], marker="o", ls="", color=palette[w], label=f"d={w}") for w in widths]
    handles += _size_key(experts)
    fig.legend(handles=handles, loc="outside right center", frameon=False, fontsize="small")
    ax.set_title(title)
    return fig


def sokoban_sweep(scores: pd.DataFrame, paper: pd.DataFrame | None, title: str) -> plt.Figure:
    """Figs. 2, 16-17, 19-20: mean final-five return of every allocation against depth L, recurrent vs not.

    Points are allocations (colour: width d, size: experts E), bars one standard error over seeds; the
    authors' recurrent scores for the same budget, where published, are drawn as grey crosses."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
    widths = sorted(scores["width"].unique())
    palette = dict(zip(widths, sns.color_palette("viridis", len(widths))))
    offsets = {True: -0.06, False: 0.06}
    for recurrent, rows in scores.groupby("recurrent"):
        x = rows["depth"] * (1 + offsets[recurrent])
        ax.errorbar(x, rows["mean"], yerr=rows["stderr"].fillna(0), fmt="none", ecolor="0.6", lw=0.8, zorder=1)
        ax.scatter(x, rows["mean"], s=_marker_area(rows["experts"]), zorder=2,
                   c=[palette[w] if recurrent else "white" for w in rows["width"]],
                   edgecolors=[palette[w] for w in rows["width"]], linewidths=1.5,
                   marker="o" if recurrent else "s")
        best = rows.loc[rows["mean"].idxmax()]
        frontier = rows.groupby("depth")["mean"].max()  # the best allocation at each depth
        ax.plot(frontier.index * (1 + offsets[recurrent]), frontier.values, color="k" if recurrent else "0.5",
                ls="-" if recurrent else "--", lw=1, zorder=0,
                label=f"{definitions.family(recurrent)} (best: L{best['depth']} E{best['experts']} "
                      f"d{best['width']}, {best['mean']:.2f})")
    if paper is not None and len(paper):
        ax.scatter(paper["depth"], paper["mean"], marker="x", color="0.45", s=30, zorder=3,
                   label="paper, recurrent (authors' per-seed scores)")
    depths = sorted(set(scores["depth"]) | (set(paper["depth"]) if paper is not None else set()))
    log_axis(ax, base=2)
    ax.set_xticks(depths, [str(d) for d in depths])
    return _sweep_closed(fig, ax, palette, widths, scores["experts"], "mean return (final five logs) ± 1 s.e.", title)


def _band_key(label: str) -> plt.Rectangle:
    """A legend entry for the shaded bands around curves of any colour."""
    return plt.Rectangle((0, 0), 1, 1, color="0.5", alpha=0.25, lw=0, label=label)


def _curves_legend(fig, axes, extra: list) -> None:
    """The hue legend seaborn drew on the last panel, moved beside the panels with `extra` entries after it."""
    handles, labels = axes[-1].get_legend_handles_labels()
    if axes[-1].get_legend():
        axes[-1].get_legend().remove()
    fig.legend(handles=[*handles, *extra], labels=[*labels, *(h.get_label() for h in extra)],
               loc="outside right center", frameon=False, fontsize="small", ncol=-(-len(handles) // 12))


SCORE_WINDOW = dict(facecolor="none", edgecolor="0.75", hatch="//", lw=0, zorder=0)  # unlike a band of any colour


def sokoban_learning_curves(curves: pd.DataFrame, title: str) -> plt.Figure:
    """Episodic return (mean of the last completed episodes) against environment steps, per allocation: the mean
    over seeds, shaded ± one standard error, and the window of the final five logs that the score averages."""
    panels = sorted(curves["recurrent"].unique(), reverse=True)
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.4), sharey=True, squeeze=False,
                             layout="constrained")
    logged = sorted(curves["env_steps"].unique())
    for ax, recurrent in zip(axes[0], panels):
        rows = curves[curves["recurrent"] == recurrent]
        ax.axvspan(logged[-min(5, len(logged))], logged[-1], **SCORE_WINDOW)
        sns.lineplot(rows, x="env_steps", y="episodic_return", hue="allocation", ax=ax, errorbar="se",
                     legend=ax is axes[0][-1], lw=1)
        ax.set_title(definitions.family(recurrent))
        ax.set_xlabel("environment steps")
        count_axis(ax.xaxis)
    axes[0][0].set_ylabel("episodic return")
    _curves_legend(fig, axes[0], [_band_key("± 1 s.e. over seeds"),
                                  plt.Rectangle((0, 0), 1, 1, **SCORE_WINDOW, label="final five logs (the score)")])
    fig.suptitle(title)
    return fig


def sokoban_best_up_to_depth(ours: pd.DataFrame, paper: pd.DataFrame | None, title: str) -> plt.Figure:
    """Fig. 3 (left): best mean return among allocations with depth ≤ L, per budget and recurrence."""
    budgets = list(dict.fromkeys(ours["budget"]))
    fig, axes = plt.subplots(1, len(budgets), figsize=(4.2 * len(budgets), 3.4), squeeze=False,
                             layout="constrained")
    for ax, budget in zip(axes[0], budgets):
        for recurrent, rows in ours[ours["budget"] == budget].groupby("recurrent"):
            errors = rows["best_stderr"].fillna(0)
            ax.errorbar(rows["max_depth"], rows["best_mean"], yerr=errors if errors.any() else None, marker="o",
                        ls="-" if recurrent else "--", color="k" if recurrent else "0.5", capsize=2,
                        label=definitions.family(recurrent))
        if paper is not None:
            rows = paper[paper["budget"] == budget]
            if len(rows):
                ax.plot(rows["max_depth"], rows["best_mean"], marker="x", color="tab:red", lw=0.8,
                        label="paper, recurrent")
        log_axis(ax, base=2)
        ticks = sorted(ours[ours["budget"] == budget]["max_depth"].unique())
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_title(f"{budget} budget")
        ax.set_xlabel("max within-step depth L")
    axes[0][0].set_ylabel("best mean return")
    axes[0][-1].legend(frameon=False, fontsize="small")
    fig.suptitle(title)
    return fig


FAMILY_STYLE = {definitions.family(True): dict(color="k", ls="-", marker="o"),
                definitions.family(False): dict(color="0.5", ls="--", marker="s")}


def _paper_losses(ax, paper: pd.DataFrame | None) -> None:
    """The authors' published FineWeb losses in red: best with depth ≤ L as a dotted line, single runs as stars."""
    if paper is None or not len(paper):
        return
    caps = paper[paper["max_depth"].notna()].sort_values("max_depth")
    if len(caps):
        ax.plot(caps["max_depth"].astype(float), caps["loss"], marker="x", color="tab:red", ls=":", lw=0.9, zorder=3,
                label="paper: best with depth ≤ L (rebuttal\nTable 1; family, window not stated)")
    for _, row in paper[paper["depth"].notna()].iterrows():
        ax.scatter(float(row["depth"]), row["loss"], marker="*", s=110, color="tab:red", zorder=4,
                   label=f"paper: {row['family']} L={row['depth']}, {'≈' if row['approximate'] else ''}"
                         f"{row['loss']:.2f} ({row['source']})")


ONE_RUN_SPAN = 0.1  # nats: the least y-range of a loss panel whose runs have one seed each (below, run-to-run noise)


def _one_run_range(ax, losses) -> None:
    """A loss panel whose allocations ran once each: at least ONE_RUN_SPAN of y-range, so that a difference of a few
    hundredths of a nat (one seed's noise) does not fill the panel, and the words that say so."""
    low, high = np.nanmin(losses), np.nanmax(losses)
    middle, span = (low + high) / 2, max(high - low, ONE_RUN_SPAN) * 1.15
    ax.set_ylim(middle - span / 2, middle + span / 2)
    ax.text(0.02, 0.03, "one run each: a few hundredths\nof a nat may be one seed's noise", transform=ax.transAxes,
            fontsize="small", color="0.35", va="bottom")


def _depth_axis(ax, depths) -> None:
    """Log-2 depth axis with a tick at every depth, labelled at powers of two (7 and 13 would collide with 8, 16)."""
    depths = sorted({int(d) for d in depths})
    log_axis(ax, base=2)
    ax.set_xticks(depths, [str(d) if d & (d - 1) == 0 or len(depths) < 6 else "" for d in depths])
    ax.minorticks_off()


def lm_sweep(runs: pd.DataFrame, paper: pd.DataFrame | None, title: str) -> plt.Figure:
    """Figs. 5, 14-15: validation loss of every allocation against depth L, recurrent vs non-recurrent.

    Lower is better. Points are allocations (colour: width d, size: experts E; filled circles recurrent, open
    squares non-recurrent), the mean over seeds with bars of one standard error where there are several; lines
    join each family's lowest loss at each depth. The authors' published values for the same budget and window,
    where comparable, are drawn in red."""
    runs = runs.dropna(subset=["validation_loss"])
    fig, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
    widths = sorted(runs["width"].unique())
    palette = dict(zip(widths, sns.color_palette("viridis", len(widths))))
    offsets = {"recurrent": -0.06, "non-recurrent": 0.06}
    for family, rows in runs.groupby("family", sort=False):
        x = rows["depth"] * (1 + offsets[family])
        if rows["stderr"].notna().any():
            ax.errorbar(x, rows["validation_loss"], yerr=rows["stderr"].fillna(0), fmt="none", ecolor="0.6", lw=0.8,
                        zorder=1)
        ax.scatter(x, rows["validation_loss"], s=_marker_area(rows["experts"]), zorder=2,
                   c=[palette[w] if family == "recurrent" else "white" for w in rows["width"]],
                   edgecolors=[palette[w] for w in rows["width"]], linewidths=1.5,
                   marker=FAMILY_STYLE[family]["marker"])
        best = rows.loc[rows["validation_loss"].idxmin()]
        frontier = rows.groupby("depth")["validation_loss"].min()  # the best allocation at each depth
        style = FAMILY_STYLE[family]
        ax.plot(frontier.index * (1 + offsets[family]), frontier.values, color=style["color"], ls=style["ls"], lw=1,
                zorder=1)
        ax.plot([], [], color=style["color"], ls=style["ls"], marker=style["marker"], lw=1,
                mfc=style["color"] if family == "recurrent" else "white",
                label=f"{family} (best: {best['allocation']}, {best['validation_loss']:.3f})")
    _paper_losses(ax, paper)
    if runs["stderr"].isna().all() and (paper is None or not len(paper)):
        _one_run_range(ax, runs["validation_loss"])
    paper_depths = [] if paper is None else [*paper["depth"].dropna(), *paper["max_depth"].dropna()]
    _depth_axis(ax, [*runs["depth"], *paper_depths])
    errors = " ± 1 s.e." if runs["stderr"].notna().any() else ""
    return _sweep_closed(fig, ax, palette, widths, runs["experts"],
                         f"validation loss{errors} (nats/token, lower is better)", title)


def lm_learning_curves(curves: pd.DataFrame, title: str) -> plt.Figure:
    """Training cross-entropy (without the recurrent state penalty) against training tokens, per allocation (the
    mean over seeds, shaded ± one standard error where there are several)."""
    panels = [f for f in FAMILY_STYLE if f in set(curves["family"])]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.4), sharey=True, squeeze=False,
                             layout="constrained")
    order = list(dict.fromkeys(curves.sort_values(["depth", "experts", "width"])["allocation"]))
    palette = dict(zip(order, sns.color_palette("viridis", len(order))))  # colour follows depth, then experts
    for ax, family in zip(axes[0], panels):
        rows = curves[curves["family"] == family]
        sns.lineplot(rows, x="tokens", y="train_ce_loss", hue="allocation", hue_order=order, palette=palette, ax=ax,
                     errorbar="se", legend=ax is axes[0][-1], lw=1)  # the mean over seeds, ± one standard error
        ax.set_title(family)
        ax.set_xlabel("training tokens")
        count_axis(ax.xaxis)
    axes[0][0].set_ylabel("training cross-entropy (nats/token)")
    several = curves.groupby(["allocation", "family", "tokens"]).size().max() > 1
    _curves_legend(fig, axes[0], [_band_key("± 1 s.e. over seeds")] if several else [])
    fig.suptitle(title)
    return fig


def lm_best_up_to_depth(ours: pd.DataFrame, paper: pd.DataFrame | None, title: str) -> plt.Figure:
    """Fig. 3 (right): lowest validation loss among allocations with depth ≤ L, one panel per budget and window
    (bars: one standard error over seeds, where there are several)."""
    settings = list(dict.fromkeys(zip(ours["budget"], ours["window"])))
    columns = min(2, len(settings))
    rows_of_panels = -(-len(settings) // columns)
    fig, axes = plt.subplots(rows_of_panels, columns, figsize=(4.6 * columns, 3.4 * rows_of_panels), squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(settings):]:
        ax.set_visible(False)
    for ax, (budget, window) in zip(axes.flat, settings):
        here = ours[(ours["budget"] == budget) & (ours["window"] == window)]
        for family, rows in here.groupby("family", sort=False):
            style = FAMILY_STYLE[family]
            if rows["best_stderr"].notna().any():
                ax.errorbar(rows["max_depth"], rows["best_loss"], yerr=rows["best_stderr"].fillna(0), fmt="none",
                            ecolor=style["color"], capsize=2, lw=0.8)
            ax.plot(rows["max_depth"], rows["best_loss"], marker=style["marker"], ls=style["ls"],
                    color=style["color"], mfc="white" if family != "recurrent" else style["color"], label=family)
        shown = None
        if paper is not None:
            shown = paper[(paper["budget"] == budget) & (paper["window"] == window)]
            _paper_losses(ax, shown)
        if here["best_stderr"].isna().all() and (shown is None or not len(shown)):
            _one_run_range(ax, here["best_loss"])
        paper_depths = [] if shown is None else [*shown["depth"].dropna(), *shown["max_depth"].dropna()]
        _depth_axis(ax, [*here["max_depth"], *paper_depths])
        ax.tick_params(axis="x", labelsize="small")
        ax.set_title(f"{budget} budget, window {window}")
        ax.set_xlabel("max within-step depth L")
    for ax in axes[:, 0]:
        ax.set_ylabel("best validation loss (lower is better)")
    handles = {}
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.legend(handles.values(), handles.keys(), loc="outside right center", frameon=False, fontsize="small")
    fig.suptitle(title)
    return fig


def _ablation_closed(fig, ax, means, errors, paper: float | None, xlabel: str, ylabel: str,
                     title: str) -> plt.Figure:
    """An ablation figure finished: a y-range that shows differences of a few standard errors between settings and
    the paper's value (not a baseline at 0, which is why the settings are points, not bars: a bar's length would
    read as its value), the axes' labels, the legend and the title."""
    extra = [] if paper is None else [paper]
    low = min([*(means - errors), *extra])
    high = max([*(means + errors), *extra])
    pad = 0.15 * (high - low) + 0.05
    ax.set_ylim(low - pad, high + pad)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    fig.legend(frameon=False, fontsize="small", loc="outside right center")  # beside: the points fill the panel
    ax.set_title(title)
    return fig


def _default_apart(ax, settings: pd.Series, values: pd.Series, default: str) -> None:
    """An ablation's points, the default (the sweep's setting) black and the others grey, each keyed."""
    is_default = (settings == default).to_numpy()
    ax.scatter(settings[is_default], values[is_default], color="k", s=40, zorder=3, label=f"ours, {default} (default)")
    if (~is_default).any():
        ax.scatter(settings[~is_default], values[~is_default], color="0.6", s=40, zorder=3, label="ours, the others")


def aggregation_ablation(scores: pd.DataFrame, paper: float | None, title: str) -> plt.Figure:
    """Fig. 10 (left): mean final-five return ± 1 standard error over seeds for each aggregation rule, the
    default (sqrt-sum) black; the authors' sqrt-sum value, where comparable, as a red cross beside them."""
    fig, ax = plt.subplots(figsize=(6, 3.6), layout="constrained")
    errors = scores["stderr"].fillna(0)
    ax.errorbar(scores["aggregation"], scores["mean"], yerr=errors, fmt="none", ecolor="k", capsize=4)
    _default_apart(ax, scores["aggregation"], scores["mean"], "sqrt_sum")
    if paper is not None:
        ax.scatter(["paper:\nsqrt_sum"], [paper], marker="x", s=60, color="tab:red", zorder=3,
                   label=f"paper, sqrt-sum ({paper:.3f})")
    ax.margins(x=0.2)
    return _ablation_closed(fig, ax, scores["mean"], errors, paper,
                            f"aggregation rule (seeds per rule: {', '.join(map(str, scores['seeds']))})",
                            "mean return (final five logs)", title)


def radius_ablation(scores: pd.DataFrame, paper: float | None, title: str) -> plt.Figure:
    """Fig. 11: mean final-five return ± 1 standard error over seeds against the communication radius r (the
    last tick is the full radius); the authors' full-radius value, where comparable, as a red cross."""
    fig, ax = plt.subplots(figsize=(5.5, 3.6), layout="constrained")
    errors = scores["stderr"].fillna(0)
    if errors.any():
        ax.errorbar(scores["radius"], scores["mean"], yerr=errors, fmt="none", ecolor="k", capsize=4,
                    label="± 1 s.e. over seeds")
    ax.scatter(scores["radius"], scores["mean"], color="k", zorder=3, label="ours")
    radii = scores["radius"].to_numpy()
    for run in np.split(np.arange(len(radii)), np.flatnonzero(np.diff(radii) != 1) + 1):  # only radii one apart:
        if len(run) > 1:  # no line across a radius never run
            ax.plot(radii[run], scores["mean"].to_numpy()[run], color="k", lw=1)
    ticks = [f"full\n(r={r})" if full else str(r) for r, full in zip(scores["radius"], scores["full"])]
    ax.set_xticks(scores["radius"], ticks)
    if paper is not None:
        full = scores.loc[scores["full"], "radius"]
        ax.scatter(full if len(full) else [scores["radius"].max()], [paper], marker="x", s=60, color="tab:red",
                   zorder=3, label=f"paper, full radius ({paper:.3f})")
    return _ablation_closed(fig, ax, scores["mean"], errors, paper, "communication radius r on the ring of experts",
                            "mean return (final five logs)", title)


def lm_ablation(scores: pd.DataFrame, setting: str, default: str, paper: float | None, title: str) -> plt.Figure:
    """Fig. 10 (right): validation loss for each value of an LM ablation's `setting` (the mean over seeds, ± one
    standard error where there are several), the `default` (the sweep's run) black; the paper's value of the
    default, where comparable, as a red cross beside them."""
    fig, ax = plt.subplots(figsize=(6, 3.6), layout="constrained")
    losses = scores["validation_loss"]
    errors = scores["stderr"].fillna(0) if "stderr" in scores else 0 * losses  # with several seeds only
    if "stderr" in scores:
        ax.errorbar(scores[setting].astype(str), losses, yerr=errors, fmt="none", ecolor="0.6", capsize=4, zorder=2)
    _default_apart(ax, scores[setting].astype(str), losses, default)
    if paper is not None:
        ax.scatter([f"paper:\n{default}"], [paper], marker="x", s=60, color="tab:red", zorder=3,
                   label=f"paper, {default} (≈ {paper:.2f})")
    runs = ("one run each" if "seeds" not in scores else
            "mean ± 1 standard error over seeds: " + ", ".join(map(str, scores["seeds"])))
    ax.margins(x=0.2)
    return _ablation_closed(fig, ax, losses, errors, paper, f"{setting} ({runs}; lower is better)",
                            "validation loss (nats/token)", title)


CONTROL_LINES = {"encoder": (".", "encoder output"), "control": ("x", "untrained control")}


def ablation(setting: str, scores: pd.DataFrame, paper: float | None, title: str) -> plt.Figure:
    """The figure of one Sokoban ablation (`sokoban.ablations.<setting>`): Fig. 10 (left) or Fig. 11."""
    return {"aggregation": aggregation_ablation, "radius": radius_ablation}[setting](scores, paper, title)


def _recall_lines(ax, curves: pd.DataFrame, label: str, color, ls: str = "-",
                  controls=("encoder", "control")) -> None:
    """One run's state recall with its shaded 95 % interval, and (thin, dotted) the same probe on `controls`."""
    rows = curves[(curves["label"] == label) & (curves["representation"] == "state")]
    ax.plot(rows["step"], rows["recall"], color=color, ls=ls, lw=1.5, label=f"{label}: final state")
    ax.fill_between(rows["step"], rows["recall_low"], rows["recall_high"], color=color, alpha=0.2, lw=0)
    for representation in controls:
        marker, name = CONTROL_LINES[representation]
        rows = curves[(curves["label"] == label) & (curves["representation"] == representation)]
        ax.plot(rows["step"], rows["recall"], color=color, ls=":", lw=0.8, marker=marker, ms=3,
                label=f"{label}: {name}")


def _flat_recall_note(ax, curves: pd.DataFrame) -> None:
    """Words in a panel whose every state recall is zero, which would otherwise read as a broken plot."""
    recall = curves.loc[curves["representation"] == "state", "recall"]
    if len(recall) and not recall.fillna(0).any():
        ax.text(0.5, 0.5, "recall 0 at every step:\nthe probe reads no plan here", transform=ax.transAxes,
                ha="center", va="center", color="0.3")


def probe_recall(curves: pd.DataFrame, labels: list[str], band: str, title: str) -> plt.Figure:
    """Fig. 4: probe recall by step of the compared agents, shaded `band` (`probes.band_words`), precision dashed
    where the probe predicted anything, the controls dotted; below, the test episodes still running."""
    fig, (ax, below) = plt.subplots(2, 1, figsize=(7.5, 5.2), sharex=True, height_ratios=[3, 1], layout="constrained")
    for label, color in zip(labels, sns.color_palette("deep", len(labels))):
        _recall_lines(ax, curves, label, color)
        rows = curves[(curves["label"] == label) & (curves["representation"] == "state")]
        if rows["precision"].notna().any():  # none where the probe never predicts a move
            ax.plot(rows["step"], rows["precision"], color=color, ls="--", lw=0.9, label=f"{label}: precision")
        below.plot(rows["step"], rows["episodes"], color=color, lw=1)
    _flat_recall_note(ax, curves)
    ax.set_ylabel("recall (precision dashed)")
    ax.set_ylim(0, 1)
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(handles=[*handles, _band_key(f"band: {band}")], loc="center left", bbox_to_anchor=(1, 0.5),
              frameon=False, fontsize="small")
    below.set_ylabel("episodes\nrunning")
    below.set_xlabel("environment step")
    fig.suptitle(title)
    return fig


def probe_depth(curves: dict[str, pd.DataFrame], band: str, title: str) -> plt.Figure:
    """Fig. 12: state recall by step of every probed run, one panel per target; colour = depth, dashed =
    non-recurrent, shaded `band`; the untrained control of each run dotted."""
    fig, axes = plt.subplots(1, len(curves), figsize=(5.2 * len(curves), 3.6), sharey=True, squeeze=False,
                             layout="constrained")
    for ax, (target, table) in zip(axes[0], curves.items()):
        runs = table.drop_duplicates("label").sort_values(["recurrent", "depth"], ascending=[False, True])
        depths = sorted(runs["depth"].unique())
        colors = dict(zip(depths, sns.color_palette("viridis", len(depths))))
        for _, run in runs.iterrows():
            _recall_lines(ax, table, run["label"], colors[run["depth"]], ls="-" if run["recurrent"] else "--",
                          controls=("control",))
        _flat_recall_note(ax, table)
        ax.set_title(target)
        ax.set_xlabel("environment step")
        ax.set_ylim(0, 1)
    axes[0][0].set_ylabel("recall (dotted: untrained control)")
    handles, _ = axes[0][-1].get_legend_handles_labels()
    axes[0][-1].legend(handles=[*handles, _band_key(f"band: {band}")], loc="center left", bbox_to_anchor=(1, 0.5),
                       frameon=False, fontsize="small")
    fig.suptitle(title)
    return fig


def plan_pictures(picture, plan, steps, title: str) -> plt.Figure:
    """Fig. 13: the level at each pictured step with an arrow on every square the probe reads as positive, in
    its direction ĉ. `picture` (steps, H, W, 2) in Jumanji's codes, `plan` (steps, H, W) classes."""
    fig, axes = plt.subplots(1, len(steps), figsize=(3.2 * len(steps), 3.4), squeeze=False, layout="constrained")
    for ax, grid, arrows, step in zip(axes[0], picture, plan, steps):
        variable, fixed = grid[..., VARIABLE], grid[..., FIXED]
        ax.imshow(fixed == WALL, cmap=ListedColormap(["white", "0.35"]), vmin=0, vmax=1)
        for row, col in zip(*(fixed == TARGET).nonzero()):
            ax.add_patch(Rectangle((col - 0.35, row - 0.35), 0.7, 0.7, fill=False, ec="tab:red", lw=1.5))
        for row, col in zip(*(variable == BOX).nonzero()):
            ax.add_patch(Rectangle((col - 0.3, row - 0.3), 0.6, 0.6, color="tab:brown"))
        for row, col in zip(*(variable == AGENT).nonzero()):
            ax.add_patch(Circle((col, row), 0.28, color="tab:blue"))
        for row, col in zip(*arrows.nonzero()):
            dy, dx = MOVES[int(arrows[row, col]) - 1]  # class c is action c - 1; image rows grow downwards
            ax.annotate("", xy=(col + 0.38 * dx, row + 0.38 * dy), xytext=(col - 0.38 * dx, row - 0.38 * dy),
                        arrowprops=dict(arrowstyle="->", color="tab:green", lw=1.8))
        ax.set_title(f"t = {step}")
        ax.set_xticks([])
        ax.set_yticks([])
    if not np.asarray(plan).any():  # else the title promises a plan and nothing is drawn
        fig.supxlabel("the probe marks no square at any pictured step: no plan is read here", color="0.3",
                      fontsize="medium")
    fig.suptitle(title)
    return fig


def expert_count(families: pd.DataFrame, title: str) -> plt.Figure:
    """Fig. 6: score against the number of experts E (log 2) of each family at fixed L and d, one panel per Sokoban
    sweep (mean final-five return ± 1 s.e. over seeds) and for FineWeb (validation loss), Sokoban left.

    Colour is depth L, solid lines recurrent, dashed non-recurrent (open markers)."""
    order = families.sort_values(["sign", "panel"], ascending=[False, True])
    panels = list(dict.fromkeys(order["panel"]))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.6), squeeze=False, layout="constrained")
    depths = sorted(families["depth"].unique())
    palette = dict(zip(depths, sns.color_palette("viridis", len(depths))))
    for ax, panel in zip(axes[0], panels):
        here = families[families["panel"] == panel]
        for (recurrent, depth), rows in here.groupby(["recurrent", "depth"], sort=False):
            rows = rows.sort_values("experts")
            style = FAMILY_STYLE[definitions.family(recurrent)]
            ax.errorbar(rows["experts"], rows["score"], yerr=rows["stderr"].fillna(0), color=palette[depth],
                        ls=style["ls"], marker=style["marker"], mfc=palette[depth] if recurrent else "white",
                        capsize=2, lw=1.2)
        experts = sorted(here["experts"].unique())
        log_axis(ax, base=2)
        ax.set_xticks(experts, [str(e) for e in experts])
        ax.minorticks_off()
        ax.set_xlabel("experts per level E")
        ax.set_ylabel("mean return (final five logs) ± 1 s.e." if here["sign"].iloc[0] > 0
                      else "validation loss ± 1 s.e. (lower is better)")
        ax.set_title(f"{panel}, d={here['width'].iloc[0]}")
    handles = [plt.Line2D([], [], color=palette[d], lw=2, label=f"L={d}") for d in depths]
    drawn = {definitions.family(recurrent) for recurrent in families["recurrent"].unique()}
    handles += [plt.Line2D([], [], color="0.3", ls=FAMILY_STYLE[f]["ls"], marker=FAMILY_STYLE[f]["marker"],
                           mfc="0.3" if f == definitions.family(True) else "white", label=f)
                for f in FAMILY_STYLE if f in drawn]
    fig.legend(handles=handles, loc="outside right center", frameon=False, fontsize="small")
    fig.suptitle(title)
    return fig


def solve_rates_beside_prior_work(ours: pd.DataFrame, prior: pd.DataFrame, random_rate: float | None,
                                  same_levels: bool, title: str) -> plt.Figure:
    """Table 2 as bars: greedy and sampled solve rate of each budget's best agents, and a uniformly random policy's
    rate on the same levels as a line. The earlier agents' published rates are lines on the same axis only where
    `same_levels`; on other levels they are bars in a panel of their own, which a reader cannot read across."""
    labels = [f"{row['budget']}\n{row['family']}" for _, row in ours.iterrows()]
    width = max(7.5, 1.3 * len(labels) + 5.5)
    fig, axes = plt.subplots(1, 1 if same_levels else 2, figsize=(width if same_levels else width + 4, 3.6),
                             squeeze=False, layout="constrained", width_ratios=None if same_levels else [1, 1.2])
    ax = axes[0][0]
    x = range(len(labels))
    for offset, mode, color in ((-0.2, "greedy", "tab:blue"), (0.2, "sampled", "tab:orange")):
        ax.bar([i + offset for i in x], ours[mode], width=0.4, color=color, label=f"ours, {mode}")
    if random_rate is not None:
        ax.axhline(random_rate, color="k", lw=1, ls=(0, (1, 3)), zorder=3,
                   label=f"uniformly random policy: {random_rate:.3f}")
    ax.set_xticks(list(x), labels, fontsize="small")
    ax.set_xlabel("budget and family of the best agent")
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("solve rate on the test levels")
    levels = prior["levels"].iloc[0] if len(prior) else ""
    if same_levels:
        styles = itertools.product(["0.3", "tab:green"], ["--", ":", "-."])  # a colour per source, a line per row
        for (_, row), (color, ls) in zip(prior.iterrows(), styles):
            ax.axhline(row["solve rate"], color=color, ls=ls, lw=1,
                       label=f"{row['agent']}, {row['trained']} steps: {row['solve rate']:.3f}")
        ax.set_title(title)
        fig.legend(loc="outside right center", frameon=False, fontsize="small", title=f"published ({levels}) and ours",
                   title_fontsize="small")
        return fig
    ax.set_title("ours, on this config's test levels", fontsize="medium")
    ax.legend(frameon=False, fontsize="small", loc="upper left")
    published = axes[0][1]
    names = [f"{row['agent']}, {row['trained']}" for _, row in prior.iterrows()]
    bars = published.barh(range(len(prior)), prior["solve rate"], color="0.6")
    published.bar_label(bars, fmt="%.3f", fontsize="small", padding=2)
    published.set_yticks(range(len(prior)), names, fontsize="small")
    published.invert_yaxis()
    published.set_ylabel("agent, environment steps")
    published.set_xlim(0, 1.12)
    published.set_xlabel(f"published solve rate on {levels}")
    published.set_title("earlier agents, on other levels: not comparable", fontsize="medium")
    fig.suptitle(title)
    return fig


def plan_costs(targets: pd.DataFrame, groups: pd.DataFrame, unit: str, title: str) -> plt.Figure:
    """The plan at a glance: per target (`planning.tables.per_target`), the device-hours of the jobs whose runs its
    reports show beside those of every job its DAG runs; per group of jobs (`planning.tables.per_group`), its
    device-hours coloured by device, with its jobs and those past their time limit written on the bar."""
    shown = targets.drop(index=[name for name in targets.index if name.startswith("total")])
    shown = shown[shown["device_hours"] > 0].iloc[::-1]
    fig, (per_target, per_group) = plt.subplots(1, 2, figsize=(12, 0.22 * max(len(shown), len(groups)) + 2.2),
                                                layout="constrained")
    y = range(len(shown))
    per_target.barh(y, shown["device_hours"], color="0.85", label="every job its DAG runs")
    per_target.barh(y, shown["shown_hours"].where(shown["shown_hours"] > 0), color="tab:blue", height=0.5,
                    label="the jobs whose runs its report shows")
    per_target.set_yticks(list(y), shown.index, fontsize="small")
    per_target.set_ylabel("target")
    per_target.set_xlabel(unit)
    fig.legend(handles=per_target.get_legend_handles_labels()[0], frameon=False, fontsize="small",
               loc="outside lower left")
    devices = dict(zip(dict.fromkeys(groups["device"]), sns.color_palette("deep")))
    y = range(len(groups))
    for device, colour in devices.items():
        here = groups["device"] == device
        per_group.barh([i for i, h in zip(y, here) if h], groups.loc[here, "hours"], color=colour,
                       label=device.removeprefix("assumed on "))
    for i, row in zip(y, groups.itertuples()):
        past = f", {row.past} past the time limit" if row.past else ""
        per_group.text(row.hours, i, f" {row.jobs} job{'s' * (row.jobs > 1)}{past}", va="center", fontsize="small")
    per_group.set_yticks(list(y), groups["group"], fontsize="small")
    per_group.set_ylabel("group of jobs")
    per_group.set_xlabel(f"{unit} (distinct jobs)")
    per_group.margins(x=0.35)
    fig.legend(handles=per_group.get_legend_handles_labels()[0], frameon=False, fontsize="small",
               loc="outside lower right")
    for ax in (per_target, per_group):
        log_axis(ax)  # from minutes of a probe fit to thousands of hours of training
    fig.suptitle(title)
    return fig


def ratios_beside_paper(table: pd.DataFrame, ours: str, paper: str, cell: list[str], ylabel: str,
                        title: str) -> plt.Figure:
    """Tables 5 and 6 as bars: each recurrent allocation's ratio to the Transformer L16 E1 of the same cell (the
    columns `cell`: context C and batch B), ours (column `ours`) beside the paper's (`paper`), each bar drawn from 1
    (the Transformer) on a log axis; a cell that ran out of memory (`oom`, `paper_oom`) or has no value is said in
    words."""
    rows = table[~table["allocation"].str.startswith("Transformer")]
    cells = rows.groupby(cell, sort=False)
    fig, axes = plt.subplots(1, cells.ngroups, figsize=(3.2 * cells.ngroups + 2.5, 4), squeeze=False, sharey=True,
                             layout="constrained")
    for ax, (key, here) in zip(axes[0], cells):
        x = np.arange(len(here))
        for offset, column, colour, name in ((-0.2, ours, "tab:blue", "ours"), (0.2, paper, "0.65", "the paper's")):
            ax.bar(x + offset, here[column] - 1, bottom=1, width=0.4, color=colour, label=name)  # a bar from 1
        for i, row in zip(x, here.itertuples()):
            for offset, whose, column, oom in ((-0.2, "ours", ours, "oom"), (0.2, "paper", paper, "paper_oom")):
                if pd.isna(getattr(row, column)):
                    missing = "OOM" if getattr(row, oom, False) else "not run" if whose == "ours" else "not published"
                    ax.text(i + offset, 0.5, f"{whose}: {missing}", rotation=90, ha="center", va="center",
                            fontsize="small", transform=ax.get_xaxis_transform())  # mid-panel, whatever the ratios
        ax.axhline(1, color="k", lw=0.8, ls="--", label="the Transformer L16 E1")
        ax.set_xlim(-0.7, len(here) - 0.3)  # room inside the panel for the words of an outer bar's missing value
        ax.set_xticks(x, [name.removeprefix("recurrent ") for name in here["allocation"]], fontsize="small")
        ax.set_title(", ".join(f"{'C' if name == 'context' else 'B'} = {value:,}" for name, value in zip(cell, key)))
        ax.set_xlabel("recurrent allocation")
        log_axis(ax, which="y")
        ax.yaxis.set_major_locator(ticker.LogLocator(subs=(1, 2, 5)))  # ratios span under a decade: 0.2, 0.5, 1, 2
    axes[0][0].set_ylabel(ylabel)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right center", frameon=False, fontsize="small")
    fig.suptitle(title)
    return fig


P_FLOOR = 1e-5  # smaller p-values are drawn at the floor: the published ones are given as "< 0.0001"


def depth_tests(ours: pd.DataFrame, paper: pd.DataFrame, alpha: float, title: str) -> plt.Figure:
    """Tables 1 and 7's depth tests at a glance: each test's one-sided p (deeper better) on a log axis, ours as the
    authors compute it (filled) and with the picking of the best per depth inside the test (open), the authors' on
    their per-seed scores (red crosses), and alpha dashed: a mark left of it says the deeper best is better."""
    def label(row) -> str:
        return f"{row['sweep']} {definitions.family(row['recurrent'])}, {row['budget']}: {row['test']}"

    rows = list(dict.fromkeys([*map(label, ours.to_dict("records")), *map(label, paper.to_dict("records"))]))
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(rows) + 2.2), layout="constrained")
    y = {name: i for i, name in enumerate(rows)}
    for table, column, style in ((ours, "p", dict(color="tab:blue", label="ours (the authors' test)")),
                                 (ours, "p_picked", dict(facecolor="white", edgecolor="tab:blue",
                                                         label="ours, the picking of the best per depth included")),
                                 (paper, "p", dict(color="tab:red", marker="x", label="the authors' sweeps"))):
        if len(table):
            ax.scatter(table[column].clip(lower=P_FLOOR), [y[label(r)] for r in table.to_dict("records")], s=40,
                       zorder=3, **style)
    ax.axvline(alpha, color="k", ls="--", lw=1, label=f"alpha = {alpha}")
    log_axis(ax)
    ax.set_xlim(P_FLOOR / 2, 1.5)
    ax.set_yticks(range(len(rows)), rows, fontsize="small")
    ax.invert_yaxis()
    ax.grid(axis="y", color="0.92", zorder=0)
    ax.set_xlabel(f"one-sided Welch p, deeper best better (at most {P_FLOOR:g} drawn at {P_FLOOR:g})")
    ax.set_ylabel("sweep, family, budget: test")
    fig.legend(loc="outside lower center", ncol=2, frameon=False, fontsize="small")
    fig.suptitle(title)
    return fig
