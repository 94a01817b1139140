"""A plan as tables: what each target costs, the throughput behind it, and how the predictions met the measured
job times; printed by `python -m parallel_experts plan`, written as CSV for `reports/plan.html`.

The prices come from `costs`, which builds the models to count their FLOPs; this module does not import them, so
that the report's notebook reads a written plan without Jumanji (which, imported in a notebook, switches
Matplotlib to a widget backend that is not installed).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from parallel_experts.config.settings import Resources
from parallel_experts.core import atomic
from parallel_experts.core.tables import fmt
from parallel_experts.core.tables import table as format_table
from parallel_experts.planning import resources
from parallel_experts.study import Study

TOTAL = "total (distinct jobs)"


def per_target(table: pd.DataFrame) -> pd.DataFrame:
    """Per target: the jobs and device-hours its DAG runs, and those of the runs its reports show (a target whose
    report reads a whole dataset builds all of it); then the total over distinct jobs (a shared job once)."""
    table = table.assign(shown_hours=table["device_hours"].where(table["shown"], 0.0))
    sums = (table.groupby("target", sort=False)
            .agg(jobs=("rule", "size"), device_hours=("device_hours", "sum"), shown_jobs=("shown", "sum"),
                 shown_hours=("shown_hours", "sum"))
            .reindex(table.attrs.get("targets"), fill_value=0))
    distinct = table.drop_duplicates(["rule", "wildcards"])
    shown = table[table["shown"]].drop_duplicates(["rule", "wildcards"])
    sums.loc[TOTAL] = [len(distinct), distinct["device_hours"].sum(), len(shown), shown["device_hours"].sum()]
    return sums


def unit(resources: Resources) -> str:
    """GPU-hours, or CPU-hours where the config gives no rule a GPU."""
    return "GPU-hours" if resources.any_gpu else "CPU-hours"


def assumptions(table: pd.DataFrame) -> pd.DataFrame:
    """The throughput each group of jobs (a rule, and its family where that matters) was priced at, and where it
    comes from: the median over its jobs, whose rates differ where a model prices each job (`lm_time`)."""
    distinct = table.drop_duplicates(["rule", "wildcards"])
    return (distinct.groupby(["group", "source"], as_index=False)["flops_per_s"].median()
            [["group", "flops_per_s", "source"]])


def per_group(table: pd.DataFrame) -> pd.DataFrame:
    """Per group of jobs (a rule, and its family where that matters) and device: the device-hours of its distinct
    jobs, how many, and how many outlive their time limit (`attempts` > 1), cheapest first."""
    distinct = table.drop_duplicates(["rule", "wildcards"])
    return (distinct.groupby(["group", "device"], as_index=False)
            .agg(hours=("device_hours", "sum"), jobs=("rule", "size"),
                 past=("attempts", lambda attempts: int((attempts > 1).sum())))
            .sort_values("hours"))


def over_time_limit(table: pd.DataFrame) -> pd.DataFrame:
    """Per rule, the jobs predicted to outlive their time limit: how many, the longest, the attempts it needs
    (`costs.attempts_needed`), the resubmissions the config allows, and how many jobs would still not finish."""
    distinct = table.drop_duplicates(["rule", "wildcards"])
    over = distinct[distinct["attempts"] > 1]
    return (over.groupby("rule")
            .agg(jobs=("rule", "size"), longest_hours=("seconds", lambda s: s.max() / 3600),
                 runtime_hours=("runtime_s", lambda s: s.max() / 3600), attempts=("attempts", "max"),
                 resubmissions=("resubmissions", "min"), unfinished=("finishes", lambda f: int((~f).sum())))
            .reset_index())


def time_limit_lines(table: pd.DataFrame) -> list[str]:
    """`over_time_limit` in words: every rule with a job longer than its limit, and what to set."""
    lines = []
    for row in over_time_limit(table).itertuples():
        line = (f"{row.jobs} {row.rule} jobs outlive their {fmt(row.runtime_hours)} h time limit (the longest: "
                f"{fmt(row.longest_hours)} h), needing up to {row.attempts} attempts; resubmissions: {row.resubmissions}")
        if row.unfinished and row.rule in resources.RESUMABLE:
            line += (f" -- {row.unfinished} would NOT finish: set resources.{resources.FAMILY[row.rule]}.resubmissions"
                     f" >= {row.attempts - 1}")
        elif row.unfinished:
            line += " -- they do NOT finish (no resume): raise their runtime"
        lines.append(line)
    return lines


def calibration_lines(calibration: pd.DataFrame) -> list[str]:
    """`costs.paper_efficiency` in words."""
    return [f"{row.run}: {row.flops:.3g} FLOPs in {row.paper_hours} h on {row.gpus} GPUs (App. G.1) = "
            f"{row.lowest:.1%} to {row.highest:.1%} of the peak; the plan uses {row.assumed}"
            for row in calibration.itertuples()]


def printed(table: pd.DataFrame, unit: str, jobs: bool = False, calibration: pd.DataFrame | None = None) -> str:
    sums = per_target(table)
    lines = [format_table([[target, str(int(row.jobs)), fmt(row.device_hours), str(int(row.shown_jobs)),
                            fmt(row.shown_hours)] for target, row in sums.iterrows()],
                          ["target", "jobs", unit, "jobs it shows", f"{unit} it shows"])]
    limits = time_limit_lines(table)
    lines += ["", "time limits:", *(f"  {line}" for line in limits or ["every job fits in its time limit"])]
    lines += ["", "throughput per job:"]
    lines += [f"  {row.group}: {row.flops_per_s / 1e9:,.1f} GFLOP/s, the median job ({row.source})"
              for row in assumptions(table).itertuples()]
    if calibration is not None and not calibration.empty:
        lines += ["", "the paper's Sokoban run times as a fraction of the train family's peak:"]
        lines += [f"  {line}" for line in calibration_lines(calibration)]
    if jobs:
        distinct = table.drop_duplicates(["rule", "wildcards"])
        lines += ["", format_table([[row.rule, row.wildcards, f"{row.flops:.3g}", fmt(row.seconds),
                                     fmt(row.measured_seconds)] for row in distinct.itertuples()],
                                   ["rule", "wildcards", "FLOPs", "predicted s", "measured s"])]
    return "\n".join(lines)


def check_by_rule(check: pd.DataFrame) -> pd.DataFrame:
    """The reality check summed per rule: measured seconds beside both predictions, and the median over jobs of
    predicted ÷ measured (1: exact)."""
    ratios = check.assign(held_out_ratio=check["held_out_seconds"] / check["measured_seconds"],
                          assumed_ratio=check["assumed_seconds"] / check["measured_seconds"])
    # a rule none of whose jobs has a prediction (one timed job: no other to learn from): NaN
    def total(values: pd.Series) -> float:
        return values.sum(min_count=1)

    return ratios.groupby("rule").agg(jobs=("rule", "size"), measured_s=("measured_seconds", "sum"),
                                      held_out_s=("held_out_seconds", total), assumed_s=("assumed_seconds", total),
                                      held_out_ratio=("held_out_ratio", "median"),
                                      assumed_ratio=("assumed_ratio", "median"))


FILES = ("targets", "jobs", "check", "calibration")  # what `write` puts in a plan's folder, read back by `read`


def write(study: Study, table: pd.DataFrame, check: pd.DataFrame, calibration: pd.DataFrame,
          folder: str | Path) -> None:
    """A plan as CSV files (the report reads them): per target, every (target, job) row, the reality check, the
    paper's own run times as efficiencies (`costs.paper_efficiency`); the config's scale and unit on the first line
    of each."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    header = f"scale={study.scale} unit={unit(study.resources)}\n"
    for name, frame in zip(FILES, (per_target(table), table, check, calibration)):
        atomic.write_text(folder / f"{name}.csv", header + frame.to_csv(index=name == "targets"))


def read(folder: str | Path) -> tuple[dict[str, str], dict[str, pd.DataFrame]]:
    """A plan that `write` wrote: its scale and unit, and its tables by name."""
    folder = Path(folder)
    header = (folder / "targets.csv").read_text().splitlines()[0]
    frames = {name: pd.read_csv(folder / f"{name}.csv", skiprows=1, index_col=0 if name == "targets" else None)
              for name in FILES}
    return dict(item.split("=", 1) for item in header.split()), frames


LM_TIME = "lm_time.csv"  # beside FILES where the config prices LM jobs by `lm_time`: its validation table


def write_lm_time(check: pd.DataFrame, folder: str | Path) -> None:
    """`lm_time.validation` as the plan folder's lm_time.csv."""
    atomic.write_text(Path(folder) / LM_TIME, check.to_csv(index=False))


def read_lm_time(folder: str | Path) -> pd.DataFrame | None:
    """What `write_lm_time` wrote, or None for a plan without it."""
    path = Path(folder) / LM_TIME
    return pd.read_csv(path) if path.exists() else None


def check_summary(check: pd.DataFrame) -> list[str]:
    """The reality check in words: how far each prediction lands from the measured total, over the jobs where it
    exists."""
    lines = []
    for column, how in (("held_out_seconds", "from the other timed jobs of its rule and family"),
                        ("assumed_seconds", "from the config's assumption alone")):
        found = check.dropna(subset=[column])
        if found.empty:
            continue
        predicted, measured = found[column].sum(), found["measured_seconds"].sum()
        ratio = found[column] / found["measured_seconds"]
        lines.append(f"{how}: {predicted / 60:,.1f} min predicted for {len(found)} jobs that took "
                     f"{measured / 60:,.1f} min (×{predicted / measured:.2f}); per job, the prediction is within a "
                     f"factor of 2 of the measured time for {((ratio > 0.5) & (ratio < 2)).sum()} of {len(found)}")
    return lines
