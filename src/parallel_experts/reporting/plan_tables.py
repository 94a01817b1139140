"""The plan report's tables as the page shows them: the device hours per target, the throughput each group of jobs
is priced at, the measured job times beside their predictions, and each rehearsed job's memory beside its
device's. The tables come from the plan's folder (`planning.tables.read`, `planning.memory.read`); the strings a
config put in them (a device's name, a throughput's source) are shown as typed, never as HTML."""

from __future__ import annotations

import pandas as pd
from pandas.io.formats.style import Styler

from parallel_experts.core.tables import fmt
from parallel_experts.reporting import markup

MEMORY_ROWS = 40  # the rehearsed jobs shown, largest peak first


def targets(sums: pd.DataFrame, unit: str) -> Styler:
    """Device hours and jobs per target (`planning.tables.per_target`), in `unit` (GPU or CPU hours)."""
    names = {"device_hours": unit, "shown_hours": f"{unit} it shows", "jobs": "jobs", "shown_jobs": "jobs it shows"}
    return markup.table(sums.rename(columns=names), {unit: fmt, f"{unit} it shows": fmt}, index=True)


def throughput(assumed: pd.DataFrame) -> Styler:
    """The FLOP/s each group of jobs is priced at, and its source (`planning.tables.assumptions`)."""
    found = assumed.assign(gflops_per_s=lambda t: t["flops_per_s"] / 1e9)
    return markup.table(found[["group", "gflops_per_s", "source"]], {"gflops_per_s": "{:,.1f}"})


def check_by_rule(by_rule: pd.DataFrame) -> Styler:
    """Measured job times beside both predictions, per rule (`planning.tables.check_by_rule`)."""
    return markup.table(by_rule, {"measured_s": "{:,.0f}", "held_out_s": "{:,.0f}", "assumed_s": "{:,.0f}",
                                  "held_out_ratio": "{:.2f}", "assumed_ratio": "{:.2f}"}, index=True, na_rep="—")


def check(jobs: pd.DataFrame) -> Styler:
    """Every timed job beside its two predictions (the plan's `check` table)."""
    return markup.table(jobs, {c: "{:,.1f}" for c in jobs.columns if c.endswith("seconds")}, na_rep="—")


def memory(jobs: pd.DataFrame) -> Styler | None:
    """The rehearsed jobs (`planning.memory.read`), largest predicted peak first, beside their devices' memory and
    whether they fit (✓, ✗; — where the device's memory is not known); None where no job was rehearsed."""
    rehearsed = jobs[jobs["programs"] > 0].sort_values("peak_bytes", ascending=False)
    if rehearsed.empty:
        return None
    shown = rehearsed.assign(peak_gb=rehearsed["peak_bytes"] / 1e9,
                             fits=rehearsed["fits"].map({True: "✓", False: "✗"}).fillna("—"))
    return markup.table(shown[["rule", "wildcards", "peak_gb", "device", "memory_gb", "fits"]].head(MEMORY_ROWS),
                        {"peak_gb": "{:,.2f}", "memory_gb": "{:g}"}, na_rep="—")


def lm_time(check: pd.DataFrame) -> Styler:
    """The LM time model beside every GPU timing (`planning.lm_time.validation`), each prediction's ratio to the
    measured time."""
    shown = check.assign(**{f"{c.removesuffix('_s')} ÷ measured": check[c] / check["measured_s"]
                            for c in ("authors_s", "held_out_s", "ours_s")})
    return markup.table(shown, {c: "{:.4g}" for c in shown.columns if c not in ("source", "cell")}, na_rep="—")
