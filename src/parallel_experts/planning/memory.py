"""Whether each job fits its device: the peak memory per device that the rehearsal predicts for the job's programs
(`parallel_experts.rehearsal`, a JSON file that `results.rehearsal_file` reads without JAX) beside the memory of
the device the config names (`plan.<family>.memory_gb`).

A job's predicted peak is the largest of its programs' (XLA's arguments + outputs + temporaries − aliases +
code, per device); its programs run one after another. The figures are those of the backend that compiled them:
on a CPU, XLA:CPU's plan, which the report says, not a GPU's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from parallel_experts.config.settings import PlanAssumptions
from parallel_experts.core import atomic
from parallel_experts.planning import resources

FILE = "memory.csv"  # beside the plan's tables (planning.tables.FILES)
COLUMNS = ["rule", "wildcards", "programs", "peak_bytes", "device", "memory_gb", "fits"]


def device(plan: PlanAssumptions, rule: str) -> tuple[str, float]:
    """The device of a job of `rule` and its memory in GB (NaN where the config gives none): `plan.<family>`,
    else `plan.default`."""
    where = plan.where(resources.FAMILY.get(rule, "default"))
    if where is None:
        return "", float("nan")
    spec = plan.families[where]
    return spec.device, float("nan") if spec.memory_gb is None else float(spec.memory_gb)


def per_job(plan: PlanAssumptions, jobs: pd.DataFrame, rehearsal: Mapping | None) -> pd.DataFrame:
    """Every distinct job of a plan's table (`costs.plan`) with its programs' predicted peak per device, its
    device's memory and whether it fits (NA where either is unknown)."""
    peaks: dict[tuple[str, str], list[int]] = {}
    for record in (rehearsal or {}).get("programs", []):
        for rule, wildcards in record["jobs"]:
            peaks.setdefault((rule, wildcards), []).append(record.get("peak_bytes"))
    rows = []
    for job in jobs.drop_duplicates(["rule", "wildcards"]).itertuples():
        wildcards = "" if pd.isna(job.wildcards) else job.wildcards
        found = [p for p in peaks.get((job.rule, wildcards), []) if p is not None]
        peak = max(found) if found else float("nan")
        name, memory_gb = device(plan, job.rule)
        fits = pd.NA if pd.isna(peak) or pd.isna(memory_gb) else bool(peak <= memory_gb * 1e9)
        rows.append([job.rule, wildcards, len(found), peak, name, memory_gb, fits])
    return pd.DataFrame(rows, columns=COLUMNS)


def backend(rehearsal: Mapping | None) -> str:
    """Which backend's compiler the figures come from ("" where there are none)."""
    found = sorted({record["backend"] for record in (rehearsal or {}).get("programs", [])})
    return ", ".join(found)


def write(frame: pd.DataFrame, rehearsal: Mapping | None, folder: str | Path) -> None:
    """`per_job` as the plan folder's memory.csv, the backend on its first line."""
    atomic.write_text(Path(folder) / FILE, f"backend={backend(rehearsal) or 'none'}\n" + frame.to_csv(index=False))


def read(folder: str | Path) -> tuple[str, pd.DataFrame] | None:
    """What `write` wrote: (the backend, the table), or None for a plan written without it."""
    path = Path(folder) / FILE
    if not path.exists():
        return None
    found = pd.read_csv(path, skiprows=1, keep_default_na=False, na_values=[""])
    found["wildcards"] = found["wildcards"].fillna("")
    # True, False or empty (unknown): read back as pandas' nullable booleans whichever of them the file holds
    found["fits"] = found["fits"].map(lambda v: {"True": True, "False": False}.get(str(v), pd.NA)).astype("boolean")
    return path.read_text().splitlines()[0].split("=", 1)[1], found


def summary(frame: pd.DataFrame, backend_name: str) -> list[str]:
    """The memory check in words: what was rehearsed, on which backend, the largest peak per rule against its
    device, and the jobs that would not fit."""
    rehearsed = frame[frame["programs"] > 0]
    if rehearsed.empty:
        return ["No rehearsal of this config yet (`snakemake rehearsal`): no job's memory is predicted."]
    cpu = " (the CPU compiler's figures, not a GPU's)" if backend_name == "cpu" else ""
    lines = [f"{len(rehearsed)} of {len(frame)} jobs rehearsed; peak memory per device from XLA's plan on the "
             f"{backend_name} backend{cpu}"]
    for rule, group in rehearsed.groupby("rule"):
        top = group.loc[group["peak_bytes"].idxmax()]
        limit = f" of the {top['device']}'s {top['memory_gb']:g} GB" if not pd.isna(top["memory_gb"]) else ""
        lines.append(f"{rule}: largest {size(top['peak_bytes'])}{limit} ({top['wildcards'] or 'its one job'})")
    judged = rehearsed[rehearsed["fits"].notna()]
    if judged.empty:
        return lines + ["no device memory given (`plan.<family>.memory_gb`): no job is marked"]
    over = judged[~judged["fits"].astype(bool)]
    lines.append(f"{len(over)} of {len(judged)} jobs would not fit their device" + (": " + "; ".join(
        f"{row.rule} {row.wildcards} ({size(row.peak_bytes)})" for row in over.itertuples()) if len(over) else ""))
    return lines


def size(n: float) -> str:
    """Bytes in words: "24.3 MB", "14.83 GB"."""
    return f"{n / 1e9:,.2f} GB" if n >= 1e9 else f"{n / 1e6:,.1f} MB"
