"""One function per paper figure, shared by the report notebooks and the tests."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns


def work_ratios(table: pd.DataFrame, title: str, tolerance: dict[str, float] | None = None) -> plt.Figure:
    """Work of each allocation relative to its budget's anchor, against depth L (one panel per budget)."""
    ratio_columns = [c for c in table.columns if c.startswith("work ratio")]
    budgets = list(dict.fromkeys(table["budget"]))
    fig, axes = plt.subplots(1, len(budgets), figsize=(4.2 * len(budgets), 3.4), squeeze=False, sharey=True,
                             layout="constrained")
    palette = dict(zip(sorted(table["width"].unique()), sns.color_palette("viridis", table["width"].nunique())))
    markers = dict(zip(ratio_columns, "os^"))
    for ax, name in zip(axes[0], budgets):
        rows = table[table["budget"] == name]
        if tolerance and name in tolerance:
            ax.axhspan(1 - tolerance[name], 1 + tolerance[name], color="0.92", zorder=0, label="tolerance")
        ax.axhline(1.0, color="0.5", lw=0.8)
        for column in ratio_columns:
            ax.scatter(rows["depth"], rows[column], c=[palette[w] for w in rows["width"]], marker=markers[column],
                       s=22 + 3 * rows["experts"].clip(upper=30), edgecolor="k", linewidth=0.4, alpha=0.85)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(rows["depth"].unique()), [str(d) for d in sorted(rows["depth"].unique())])
        ax.set_title(f"{name} budget")
        ax.set_xlabel("depth L")
    axes[0][0].set_ylabel("work / anchor work")
    handles = [plt.Line2D([], [], marker="o", ls="", color=color, label=f"d={width}") for width, color in palette.items()]
    if len(ratio_columns) > 1:
        handles += [plt.Line2D([], [], marker=markers[c], ls="", color="0.4", label=c[len("work ratio "):])
                    for c in ratio_columns]
    fig.legend(handles=handles, loc="outside right center", frameon=False, fontsize="small")
    fig.suptitle(title + " (marker area grows with experts E)")
    return fig


def sokoban_sweep(scores: pd.DataFrame, paper: pd.DataFrame | None, title: str) -> plt.Figure:
    """Figs. 2, 16-20: mean final-five return of every allocation against depth L, recurrent vs not.

    Points are allocations (colour: width d, size: experts E), bars one standard error over seeds; the
    authors' recurrent scores for the same budget, where published, are drawn as grey crosses."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2), layout="constrained")
    widths = sorted(scores["width"].unique())
    palette = dict(zip(widths, sns.color_palette("viridis", len(widths))))
    offsets = {True: -0.06, False: 0.06}
    for recurrent, rows in scores.groupby("recurrent"):
        x = rows["depth"] * (1 + offsets[recurrent])
        ax.errorbar(x, rows["mean"], yerr=rows["stderr"].fillna(0), fmt="none", ecolor="0.6", lw=0.8, zorder=1)
        ax.scatter(x, rows["mean"], s=25 + 4 * rows["experts"].clip(upper=40), zorder=2,
                   c=[palette[w] if recurrent else "white" for w in rows["width"]],
                   edgecolors=[palette[w] for w in rows["width"]], linewidths=1.5,
                   marker="o" if recurrent else "s")
        best = rows.loc[rows["mean"].idxmax()]
        frontier = rows.groupby("depth")["mean"].max()  # the best allocation at each depth
        ax.plot(frontier.index * (1 + offsets[recurrent]), frontier.values, color="k" if recurrent else "0.5",
                ls="-" if recurrent else "--", lw=1, zorder=0,
                label=f"{'recurrent' if recurrent else 'non-recurrent'} (best: L{best['depth']} E{best['experts']} "
                      f"d{best['width']}, {best['mean']:.2f})")
    if paper is not None and len(paper):
        ax.scatter(paper["depth"], paper["mean"], marker="x", color="0.45", s=30, zorder=3,
                   label="paper, recurrent (authors' per-seed scores)")
    depths = sorted(set(scores["depth"]) | (set(paper["depth"]) if paper is not None else set()))
    ax.set_xscale("log", base=2)
    ax.set_xticks(depths, [str(d) for d in depths])
    ax.set_xlabel("within-step depth L")
    ax.set_ylabel("mean return (final five logs)")
    handles, labels = ax.get_legend_handles_labels()
    handles += [plt.Line2D([], [], marker="o", ls="", color=palette[w], label=f"d={w}") for w in widths]
    fig.legend(handles=handles, loc="outside right center", frameon=False, fontsize="small")
    ax.set_title(title)
    return fig


def learning_curves(curves: pd.DataFrame, title: str) -> plt.Figure:
    """Episodic return (mean of the last completed episodes) against environment steps, per allocation."""
    panels = sorted(curves["recurrent"].unique(), reverse=True)
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.4), sharey=True, squeeze=False,
                             layout="constrained")
    for ax, recurrent in zip(axes[0], panels):
        rows = curves[curves["recurrent"] == recurrent]
        sns.lineplot(rows, x="env_steps", y="episodic_return", hue="allocation", ax=ax, errorbar="se",
                     legend=ax is axes[0][-1], lw=1)
        ax.set_title("recurrent" if recurrent else "non-recurrent")
        ax.set_xlabel("environment steps")
    axes[0][0].set_ylabel("episodic return")
    if axes[0][-1].get_legend():
        sns.move_legend(axes[0][-1], "center left", bbox_to_anchor=(1, 0.5), frameon=False, fontsize="small")
    fig.suptitle(title)
    return fig


def best_up_to_depth(ours: pd.DataFrame, paper: pd.DataFrame | None, title: str) -> plt.Figure:
    """Fig. 3 (left): best mean return among allocations with depth ≤ L, per budget and recurrence."""
    budgets = list(dict.fromkeys(ours["budget"]))
    fig, axes = plt.subplots(1, len(budgets), figsize=(4.2 * len(budgets), 3.4), squeeze=False,
                             layout="constrained")
    for ax, budget in zip(axes[0], budgets):
        for recurrent, rows in ours[ours["budget"] == budget].groupby("recurrent"):
            ax.errorbar(rows["max_depth"], rows["best_mean"], yerr=rows["best_stderr"].fillna(0), marker="o",
                        ls="-" if recurrent else "--", color="k" if recurrent else "0.5", capsize=2,
                        label="recurrent" if recurrent else "non-recurrent")
        if paper is not None:
            rows = paper[paper["budget"] == budget]
            if len(rows):
                ax.plot(rows["max_depth"], rows["best_mean"], marker="x", color="tab:red", lw=0.8,
                        label="paper, recurrent")
        ax.set_xscale("log", base=2)
        ticks = sorted(ours[ours["budget"] == budget]["max_depth"].unique())
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_title(f"{budget} budget")
        ax.set_xlabel("max within-step depth L")
    axes[0][0].set_ylabel("best mean return")
    axes[0][-1].legend(frameon=False, fontsize="small")
    fig.suptitle(title)
    return fig
