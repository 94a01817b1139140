"""What report notebooks show besides their tables and figures: the scale banner at the top of every page (with
the display settings and the configuration that produced the results, in one call), the LM reports' note on what
a sweep reduced, and the allocation report's headings and grids."""

from __future__ import annotations


import matplotlib.pyplot as plt
import pandas as pd
import xarray as xr
from IPython.display import Markdown, display
from pandas.io.formats.style import Styler

from parallel_experts.analysis import lm_losses
from parallel_experts.config import files
from parallel_experts.reporting import figure_check, markup
from parallel_experts.results import snapshot
from parallel_experts.study import Study

# The allocation report's section titles, one per domain.
DOMAIN_TITLES = {"sokoban": "Sokoban (ConvLSTM experts, per environment step)",
                 "lm": "FineWeb language model (Transformer experts, per token)"}


def begin(scale: str, description: str, config_path: str | None = None, precision: int = 3) -> Study | None:
    """Show the banner of the page's scale and what the config reduced; return the study of the config read from
    `config_path` (the workflow's snapshot, results/config.json, validated when the workflow started), if given."""
    pd.set_option("display.precision", precision)
    plt.rcParams["text.parse_math"] = False  # a `$` in a name from a config or results file is text, not mathtext
    figure_check.watch()
    display(Markdown(markup.scale_banner(scale, description)))
    if not config_path:
        return None
    config = files.load([config_path])
    snapshot.verify(config, config_path)
    return Study.of(config, validated=True)


def scale_note(study: Study, sweep: xr.Dataset) -> str:
    """The paragraph under an LM report's scale banner: what this sweep reduced (Markdown), or that it is the
    paper's setting."""
    reduced = lm_losses.scale_differences(study, sweep)
    if reduced:
        return "What this run reduced or changed relative to the paper's FineWeb runs:\n" + markup.bullets(reduced)
    return "Same corpus, vocabulary, budget anchors, windows and training length as the paper's FineWeb runs."


def allocations_heading(domain: str, scale: str, allocations: int, budget_count: int, proxy: str = "",
                        measured: str = "") -> str:
    """The allocation report's heading of one domain and of this config's grid (Markdown), with its work proxy and
    what the measured FLOPs count, as the grid's dataset states them."""
    lines = [f"## {DOMAIN_TITLES[domain]}", f"### This configuration ({scale}): {allocations} allocations in "
             f"{budget_count} budgets"]
    lines += [f"Work proxy: W = {proxy}."] if proxy else []
    lines += [f"Measured: {measured}."] if measured else []
    return "\n\n".join(lines)


def allocation_grid(table: pd.DataFrame, flag: str, na_rep: str | None = None) -> Styler:
    """An allocation grid as the allocation report shows it: three decimals, the column `flag` as check marks."""
    return markup.table(table, {flag: markup.check_mark}, precision=3, na_rep=na_rep)
