"""Table 6 read back: our training throughput and memory beside the paper's, and what the ratios say."""

from __future__ import annotations

import json

import pandas as pd
import xarray as xr

from parallel_experts.analysis import systems as tables
from parallel_experts.core.tables import fmt, table
from parallel_experts.lm import systems
from parallel_experts.results import paper


def comparison_table(ds: xr.Dataset) -> pd.DataFrame:
    """One row per allocation and context: ours (tokens/s, ratio, memory, OOM) and the paper's (its B)."""
    columns = ["tokens_per_s", "vs_transformer", "planned_bytes", "peak_bytes", "oom", "fraction_of_peak"]
    ours = ds[columns].reset_coords(["recurrent", "depth", "experts"], drop=True).to_dataframe().reset_index()
    ours["planned_MiB"], ours["peak_MiB"] = ours.pop("planned_bytes") / 2**20, ours.pop("peak_bytes") / 2**20
    paper = tables.paper_table("table6_throughput", "tokens_per_s").rename(
        columns={"tokens_per_s": "paper_tokens_per_s", "oom": "paper_oom"})
    paper["paper_vs_transformer"] = paper["paper_tokens_per_s"] / paper["paper_tokens_per_s"].xs(
        systems.label(systems.TRANSFORMER))
    return tables.beside_paper(ours, paper, ds, ["context", "allocation"])


def summary(ds: xr.Dataset) -> list[str]:
    """The lines under Table 6: the ratio of each recurrent row, the memory pattern, the paper's setting."""
    spec = json.loads(ds.attrs["settings"])
    lines = []
    for context in ds["context"].values:
        at = ds.sel(context=context)
        ratios = ", ".join(f"{name.removeprefix('recurrent ')} {'OOM' if bool(at['oom'].sel(allocation=name)) else f'{float(r):.2f}'}"
                           for name, r in zip(at["allocation"].values[1:], at["vs_transformer"].values[1:]))
        lines.append(f"C = {int(context)} (B = {int(at['batch'])}): recurrent tokens/s over the Transformer's: {ratios}.")
    fits = ds["planned_bytes"] <= ds["planned_bytes"].sel(allocation=systems.label(systems.TRANSFORMER))
    recurrent = fits.where(ds["recurrent"], drop=True)
    lines.append(f"memory: {int(recurrent.sum())} of {recurrent.size} recurrent cells plan at most the Transformer's "
                 "memory at the same C (the paper's code ran out of memory wherever L·C ≥ 1,024).")
    devices = spec.get("devices", 1)  # a dataset written before Table 6 split its updates ran on one device
    lines.append(f"{spec['batch_tokens']:,} tokens per update on {devices} device{'s' * (devices > 1)} (memory per "
                 f"device), width {spec['width']}; the paper: {paper.FINEWEB_RUN['batch_tokens']:,} tokens per "
                 f"update on four H100s, d = {paper.ANCHORS['lm']['small'][2]}, {paper.FINEWEB_RUN['dtype']} "
                 "(tokens/s summed over the four).")
    return lines + [tables.machine_line(ds)]


def printed(ds: xr.Dataset) -> str:
    rows = [[r.allocation, str(r.context), "OOM" if r.oom else fmt(r.tokens_per_s),
             "" if r.oom else f"{r.vs_transformer:.2f}", f"{r.planned_MiB:,.0f}",
             "" if pd.isna(r.peak_MiB) else f"{r.peak_MiB:,.0f}",
             "" if pd.isna(r.fraction_of_peak) else f"{100 * r.fraction_of_peak:.0f}%",
             "OOM" if pd.notna(r.paper_oom) and bool(r.paper_oom) else ("" if pd.isna(r.paper_tokens_per_s) else fmt(r.paper_tokens_per_s))]
            for r in comparison_table(ds).itertuples()]
    return table(rows, ["allocation", "C", "tokens/s", "vs Transformer", "planned MiB", "peak MiB", "% peak",
                        "paper tokens/s"])
