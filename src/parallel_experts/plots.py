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
