"""How our results stand beside the paper's, by the same rules for both domains: whether a budget of the config
is the paper's (so that the authors' numbers may be drawn beside ours), and which of the authors' allocations the
config also runs. The words and markup of the reports are `reporting`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from parallel_experts.core import budget as budgets
from parallel_experts.results import paper as published


def anchor(ours: Sequence[budgets.Budget], name: str) -> budgets.Allocation | None:
    """The anchor of the budget `name` among `ours` (a config's budgets of one domain; None where it has none)."""
    return next((b.anchor for b in ours if b.name == name), None)


def paper_anchor(domain: str, name: str) -> budgets.Allocation | None:
    """The anchor of the paper's budget `name` (None where the paper has no such budget)."""
    found = published.ANCHORS[domain].get(name)
    return budgets.Allocation(*found) if found else None


def budget_differences(config_budgets: Sequence[budgets.Budget], domain: str, name: str, window: int | None = None
                       ) -> list[str]:
    """Why the config's budget `name` of `domain` (among its `config_budgets`; at attention `window`, for the LM) is
    not the paper's; empty when it is: the same anchor and, where the domain has windows, one of the paper's."""
    ours, paper = anchor(config_budgets, name), paper_anchor(domain, name)
    reasons = []
    if paper is None:
        reasons.append(f"the paper has no {name!r} budget")
    elif ours != paper:
        shown = ours.label() if ours else "nothing"
        reasons.append(f"this config's {name} budget is anchored at {shown}, the paper's at {paper.label()}")
    paper_windows = published.DOMAIN_CONFIG[domain].get("windows")
    if window is not None and paper_windows and int(window) not in paper_windows:
        reasons.append(f"the {window}-token window is not one of the paper's ({', '.join(map(str, paper_windows))})")
    return reasons


def same_budget_as_paper(config_budgets: Sequence[budgets.Budget], domain: str, name: str, window: int | None = None
                         ) -> bool:
    """Whether the config's budget of this name (among its `config_budgets` of `domain`) is the paper's (same anchor,
    and for the LM one of the paper's windows), so that the authors' numbers for it compare with ours."""
    return not budget_differences(config_budgets, domain, name, window)


def in_this_config(paper: pd.DataFrame, ours: pd.DataFrame) -> pd.Series:
    """For each row of the authors' allocation table: whether this config's table has the same budget and L, E, d."""
    def key(table: pd.DataFrame) -> pd.Series:
        columns = [c for c in ("budget", "depth", "experts", "width") if c in table]
        return table[columns].astype(str).agg(" ".join, axis=1)

    return key(paper).isin(set(key(ours)))
