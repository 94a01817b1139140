"""What the two systems tables' reports share (Tables 5 and 6): the paper's numbers beside ours, and where ours
were measured."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pandas as pd
import xarray as xr

from parallel_experts.lm.systems import label
from parallel_experts.results import paper


def paper_table(name: str, value: str) -> pd.DataFrame:
    """The paper's numbers of one table (reference/`name`.csv) by allocation label and context."""
    table = paper.reference(name)
    table["allocation"] = [label((bool(r), int(d), int(e))) for r, d, e in
                           zip(table["recurrent"], table["depth"], table["experts"])]
    return table.set_index(["allocation", "context"])[[value] + [c for c in ("oom",) if c in table]]


def beside_paper(ours: pd.DataFrame, paper: pd.DataFrame, ds: xr.Dataset, order: Sequence[str]) -> pd.DataFrame:
    """Our rows joined with the paper's by allocation and context, sorted by `order` (rows in the table's order)."""
    rank = {name: i for i, name in enumerate(ds["allocation"].values)}
    joined = ours.join(paper, on=["allocation", "context"])
    return joined.sort_values(list(order), key=lambda c: c.map(rank) if c.name == "allocation" else c
                              ).reset_index(drop=True)


def machine_line(ds: xr.Dataset) -> str:
    """Where and how the numbers were measured, in one line: the machine, and the rounds the rows took turns in with
    the load over them (a table written before rounds: its load at the start)."""
    machine = json.loads(ds.attrs["machine"])
    devices = ", ".join(sorted(set(machine["devices"])))
    where = (f"measured on {machine['cpu']} ({machine['usable_cpus']} usable CPUs), JAX {machine['jax']} on "
             f"{machine['backend']} ({devices})")
    if "load" not in ds:
        return f"{where}; load average {machine['loadavg_start'][0]:.1f} when it started."
    load = ds["load"].values
    return (f"{where}, in {len(load)} rounds, the rows in a new random order each round (the claims page tests each "
            f"ratio to the Transformer over the rounds); load average {load.min():.1f} to {load.max():.1f}.")
