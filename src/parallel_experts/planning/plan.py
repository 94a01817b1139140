"""The `plan` and `allocations` commands: what each named target costs (its jobs' FLOPs ÷ throughput, calibrated
against the paper's own run times, each job's memory beside its device's), and a domain's allocation grid.

Counting FLOPs lowers the models (JAX), which planning never imports: the caller hands the domains' counters in
(`costs.Counters`), once the config has been checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from parallel_experts.config.options import config_files, configfile, option, output
from parallel_experts.core import budget
from parallel_experts.planning import costs, lm_time, memory, tables
from parallel_experts.results import grids, paths, rehearsal_file, store
from parallel_experts.study import Study


@dataclass(frozen=True, kw_only=True)
class Plan:
    """the cost of every training and evaluation job the DAG runs for the named targets (all of them by default):
    FLOPs ÷ throughput, per target and in total, with its assumptions"""

    config: tuple[str, ...] = configfile()
    directory: str = option("the working directory whose results/ holds timed jobs of an earlier run (as "
                            "Snakemake's); their throughput replaces the config's assumptions", default=".")
    jobs: bool = option("print every job, not only the sums per target", action="store_true", default=False)
    out: str | None = output("a folder for the plan as CSV: targets.csv (per target), jobs.csv (every target and "
                             "job), check.csv (every timed job beside its predictions)", folder=True, default=None)
    targets: tuple[str, ...] = option("named targets (fig2, table5, ...); default: every one", "targets", nargs="*",
                                      default=())


@dataclass(frozen=True, kw_only=True)
class Allocations:
    """write the allocation grid of one domain (netCDF)"""

    config: tuple[str, ...] = config_files()
    domain: str = option(None, choices=budget.DOMAINS)
    out: str = output()


def run(options: Plan, study: Study, counters: costs.Counters) -> int:
    """The plan of `options.targets`, printed (every job with `--jobs`) and written as CSV to `options.out`, with
    each job's rehearsed peak memory beside its device's (`planning.memory`)."""
    directory = Path(options.directory)
    timed = costs.timed_jobs(study, counters, directory / paths.ROOT)  # every benchmark file read once
    table = costs.plan(study, counters, timed, options.targets)
    calibration = costs.paper_efficiency(study.plan, table)
    print(tables.printed(table, tables.unit(study.resources), options.jobs, calibration))
    if options.out:
        tables.write(study, table, costs.held_out(study, timed), calibration, options.out)
    lm_train = costs.assumption(study.plan, "lm_train", "recurrent")
    if lm_train.serial:  # the LM time model's check against every GPU timing
        check = lm_time.validation(lm_train.speed(), counters.lm.forward)
        print("\nthe LM time model (plan.lm_train) against every GPU timing:\n  " + "\n  ".join(lm_time.summary(check)))
        if options.out:
            tables.write_lm_time(check, options.out)
    rehearsal = rehearsal_file.read(directory / paths.rehearsal(study.scale))
    frame = memory.per_job(study.plan, table, rehearsal)
    print("\nmemory per device:\n  " + "\n  ".join(memory.summary(frame, memory.backend(rehearsal))))
    if options.out:
        memory.write(frame, rehearsal, options.out)
    return 0


def allocations(options: Allocations, study: Study, counters: costs.Counters) -> int:
    """Every allocation of the domain's budgets with its FLOPs, as netCDF."""
    counted, families = counters.of(options.domain), study.families(options.domain)
    settings = families.settings
    ds = grids.allocation_dataset(families.budgets, settings.proxy, counted.allocation_flops(settings),
                                  counted.flops_per(settings))
    ds = store.with_provenance(ds, study.config)
    store.write_netcdf(ds, options.out)
    print(f"{options.out}: {ds.sizes['allocation']} allocations in {ds.sizes['budget_name']} budgets")
    return 0
