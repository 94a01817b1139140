"""What a config's DAG would cost before it runs: every training and evaluation job as FLOPs ÷ a throughput.

`python -m parallel_experts plan --configfile FILE [TARGET ...]` (tables: `plan`) and `reports/plan.html`.

* FLOPs of a job: XLA's count of one forward step of its model (`agent_step_flops`, `token_flops`, the lowered
  program) × the steps or tokens the job computes; a training step counts TRAIN_PASSES forward passes (one more
  where the Sokoban rollout is rematerialised: REMAT_PASSES). The
  models of a family of FIT_FROM or more (one expert, recurrence, window, ...) are fitted from 12 counts of small
  models, exactly where F = a + b·L + c·E + e·L·E with coefficients quadratic in the width (shared encoder and
  head, per-level and per-expert work), so that pricing the paper's 360 models takes seconds, not minutes.
* Throughput, per rule (and per family where the two differ): the median achieved FLOP/s of this project's
  timed jobs of that rule (Snakemake's benchmark files) in a results folder of a run on the same accelerator;
  otherwise the config's stated assumption (`plan`: a device, its peak, and the fraction of it a job reaches). An LM
  job whose family states a serial latency (`plan.<family>.serial`) is priced by `lm_time` instead: its FLOPs at
  that fraction plus the level-steps its recurrence runs one after another.
* Device-hours: a job's seconds × its GPUs, or × its CPUs where the config gives the rule no GPU.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np
import pandas as pd

from parallel_experts.config.errors import ConfigError
from parallel_experts.config.settings import PlanAssumptions, Serial
from parallel_experts.core.budget import Allocation
from parallel_experts.core.definitions import Identified, family
from parallel_experts.core.flops import TRAIN_PASSES
from parallel_experts.core.records import benchmark_seconds, read_json
from parallel_experts.core.run_folder import attempts, records
from parallel_experts.lm import experiment as lm_experiment
from parallel_experts.lm import systems
from parallel_experts.planning import lm_time, resources
from parallel_experts.results import paper, paths
from parallel_experts.sokoban import experiment as sokoban_experiment
from parallel_experts.sokoban.settings import CLASSES, REPRESENTATIONS, TARGETS
from parallel_experts.study import Study
from parallel_experts.targets import catalogue

# A rematerialised rollout (sokoban.training.remat) reruns the agent's forward pass in the backward pass: XLA's count
# of one unrolled update of one seed is 4.05 forward steps per environment step instead of 3.05, at every paper
# allocation counted. The planner prices the work the hardware does, so a job with remat counts one pass more.
REMAT_PASSES = 1
EVAL_MODES = 2  # greedy and sampled
FIT_FROM = 8  # a family of at least this many models is fitted (12 counts), a smaller one counted model by model


@dataclass(frozen=True)
class Job:
    """One timed job of the DAG, as Snakemake names it, and the FLOPs it computes."""

    rule: str
    wildcards: str  # as `snakemake -n` prints them ("run=..."); "" for a rule with one job
    flops: float
    benchmark: str  # its Snakemake benchmark file
    family: str = ""  # recurrent or non-recurrent, where the rule's throughput depends on it
    run: Identified | None = None  # the run it trains or evaluates (a systems table: None)
    folder: str = ""  # the run's folder (`paths.run_dir`), where its definition and attempts are recorded
    seeds: int = 0  # the seeds a Sokoban job trains or plays together (0: an LM or systems job)
    budget: str | None = None  # the run's budget (None: the expert-count sweep, a systems table)
    remat: bool = False  # a Sokoban job whose rollout is rematerialised (REMAT_PASSES)
    # An LM job's work on one of its GPUs, (update, how many), where `lm_time` prices it; () where FLOPs alone do
    work: tuple[tuple[lm_time.Update, int], ...] = ()

    @property
    def group(self) -> str:
        """Jobs that share one throughput."""
        return f"{self.rule} {self.family}".strip()


# ------------------------------------------------------------------------------------------------ FLOPs


class FlopCounter(Protocol):
    """What planning needs of a domain's count of forward FLOPs (`sokoban.flops` of an agent's environment step on
    its view, `lm.flops` of a model's token at its window). Counting lowers the models (JAX), so the caller hands
    the counters in and planning never imports them."""

    def family(self, model: Any, context: int) -> Hashable | None:
        """The models one fit covers (None: a model counted as it is)."""

    def forward(self, model: Any, context: int, fit: bool = False) -> float:
        """Forward FLOPs of one step or token of `model`, fitted from its family or counted."""

    def allocation_flops(self, settings: Any) -> Callable[[Allocation], Any]:
        """Measured FLOPs of one step of an allocation of the domain's budgets (`settings`: the domain's, as
        `Study.families` holds them), for the allocation grids."""

    def flops_per(self, settings: Any) -> str:
        """What `allocation_flops` counts, in words."""


@dataclass(frozen=True)
class Counters:
    """Each domain's FLOP counter."""

    sokoban: FlopCounter
    lm: FlopCounter

    def of(self, domain: str) -> FlopCounter:
        return {"sokoban": self.sokoban, "lm": self.lm}[domain]


def forward_flops(programs: Mapping[str, tuple], among: Iterable[tuple], counter: FlopCounter) -> dict[str, float]:
    """Forward FLOPs of one step or token of every program, (model, context) by run id: fitted where FIT_FROM or
    more programs `among` the config's share its family, counted program by program elsewhere."""
    sizes = Counter(counter.family(*program) for program in among)
    found = {}
    for name, (model, context) in programs.items():
        key = counter.family(model, context)
        found[name] = counter.forward(model, context, fit=key is not None and sizes[key] >= FIT_FROM)
    return found


def _agent(run: sokoban_experiment.Run) -> tuple:
    """The program a Sokoban run's jobs step: its agent on its view."""
    return run.agent, run.train.view


def _model(run: lm_experiment.Run) -> tuple:
    """The program an LM run's jobs step: its model at its window."""
    return run.model, run.window


def sokoban_train_job(run: sokoban_experiment.Run, forward: float) -> Job:
    """The training job of a Sokoban run as the plan prices it (`forward`: `forward_flops` of its agent)."""
    passes = TRAIN_PASSES + REMAT_PASSES * run.train.remat
    return _sokoban_job("sokoban_train", run, len(run.seeds) * run.train.env_steps * passes * forward)


def _sokoban_job(rule: str, run: sokoban_experiment.Run, flops: float, seed: int | None = None, split: str = ""
                 ) -> Job:
    """A job of one run (a probe job: of its agent of training `seed`, on `split`), its wildcards as Snakemake's."""
    wildcards = ({"run": run.id} | ({"seed": str(seed)} if seed is not None else {})
                 | ({"split": split} if split else {}))
    return Job(rule, ", ".join(f"{key}={value}" for key, value in wildcards.items()), flops,
               paths.benchmark(rule, **wildcards), family(run.agent.recurrent), run, paths.run_dir("sokoban", run.id),
               1 if seed is not None else len(run.seeds), run.budget, bool(run.train.remat))  # a probe job: one agent


def _sokoban_jobs(run: sokoban_experiment.Run, tests: int, forward: float) -> list[Job]:
    """Training, and evaluation on the `tests` test levels."""
    train = run.train
    return [sokoban_train_job(run, forward),
            _sokoban_job("sokoban_evaluate", run, len(run.seeds) * EVAL_MODES * tests * train.time_limit * forward)]


def _probe_jobs(run: sokoban_experiment.Run, families: sokoban_experiment.Families, forward: float) -> list[Job]:
    """Per probed agent (`families.probe_seeds`): the probe data of each split (the agent and its untrained control
    play every level to the time limit) and the probe fit (every representation and target, each probe seed, over
    the training split's squares)."""
    probes, played, train = families.settings.probes, families.probe_levels, run.train
    assert probes is not None  # a probed run: the config has probes
    fit = probes.fit
    per_square = 2 * fit.kernel**2 * run.agent.width * len(CLASSES)
    squares = played["train"] * train.time_limit * train.view**2
    probes_fitted = len(TARGETS) * len(REPRESENTATIONS) * fit.seeds
    found = []
    for seed in families.probe_seeds[run.id]:
        found += [_sokoban_job("sokoban_probe_data", run, 2 * count * train.time_limit * forward, seed, split)
                  for split, count in played.items()]
        found.append(_sokoban_job("sokoban_probe_fit", run,
                                  probes_fitted * fit.epochs * squares * per_square * TRAIN_PASSES, seed))
    return found


def lm_train_job(run: lm_experiment.Run, forward: float, gpus: int) -> Job:
    """The training job of an LM run as the plan prices it (`forward`: `forward_flops` of its model), its updates
    split over `gpus`."""
    update = lm_time.training(run.model, run.train, gpus, forward)
    return _lm_job("lm_train", run, run.train.train_tokens * TRAIN_PASSES * forward, ((update, run.train.updates),))


def _lm_job(rule: str, run: lm_experiment.Run, flops: float, work: tuple) -> Job:
    return Job(rule, f"run={run.id}", flops, paths.benchmark(rule, run=run.id), family(run.model.recurrent), run,
               paths.run_dir("lm", run.id), budget=run.budget, work=work)


def _lm_jobs(run: lm_experiment.Run, lm: lm_experiment.Families, forward: float) -> list[Job]:
    """Training on the job's GPUs, and evaluation of the validation shard's tokens on one of them (`lm.evaluate`),
    a block of `lm.evaluation.lanes` streams at a time."""
    scan = lm_time.evaluation(run.model, lm.settings.shard_tokens, lm.settings.evaluation.lanes, forward)
    return [lm_train_job(run, forward, lm.devices),
            _lm_job("lm_evaluate", run, lm.settings.shard_tokens * forward, ((scan, 1),))]


def _latency_job(lm: lm_experiment.Families, counter: FlopCounter) -> Job:
    """Every row, context and batch: the prompt, then the warm-up and timed calls of the decode scan and the
    single step (our Table 5 protocol, see lm/latency.py)."""
    spec = systems.latency_settings(lm.settings.tables)
    calls = (spec["warmup"] + spec["rounds"]) * (spec["steps"] + 1)
    flops = sum(batch * (context + calls) * counter.forward(systems.model_config(row, spec["width"], lm.settings.shape),
                                                            context)
                for row in systems.selected(systems.LATENCY_ROWS, spec)
                for context in spec["contexts"] for batch in spec["batches"])
    return Job("lm_latency", "", flops, paths.benchmark("lm_latency"))


def _throughput_job(lm: lm_experiment.Families, counter: FlopCounter) -> Job:
    """Every row and context: the updates that measure its memory, then its turns of every round (lm/throughput.py),
    each split over the bench's GPUs."""
    spec = systems.throughput_settings(lm.settings.tables)
    updates, gpus = systems.PEAK_UPDATES + spec["rounds"] * spec["steps"], lm.bench_devices
    work = []
    for row in systems.selected(systems.THROUGHPUT_ROWS, spec):
        model = systems.model_config(row, spec["width"], lm.settings.shape)
        for context in spec["contexts"]:
            train = systems.train_config(model, context, spec["batch_tokens"])
            work.append((lm_time.training(model, train, gpus, counter.forward(model, context)), updates))
    flops = sum(update.flops * gpus * count for update, count in work)
    return Job("lm_throughput", "", flops, paths.benchmark("lm_throughput"), work=tuple(work))


def jobs_by_result(study: Study, counters: Counters, results: Iterable[str] | None = None
                   ) -> dict[str, list[Job]]:
    """Each result file a report reads (or those of `results`) -> the timed jobs behind it: its runs' training and
    evaluation, the probed runs' training, evaluation and probes, a systems table's one job."""
    systems_jobs = {path: job for table, path, job in (("latency", paths.LATENCY, _latency_job),
                                                       ("throughput", paths.THROUGHPUT, _throughput_job))
                    if table in study.lm.settings.tables}
    probed = study.sokoban.probed
    sokoban = study.sokoban_datasets | ({paths.SOKOBAN_PROBES: probed} if probed else {})
    lm = study.lm_datasets
    wanted = set(sokoban) | set(lm) | set(systems_jobs) if results is None else set(results)

    def forward(datasets: Mapping[str, list], program: Callable[[Any], tuple], counter: FlopCounter
                ) -> dict[str, float]:
        every = {run.id: program(run) for runs in datasets.values() for run in runs}
        priced = {run.id: program(run) for path in wanted & set(datasets) for run in datasets[path]}
        return forward_flops(priced, every.values(), counter)

    jobs = {}
    agent_flops = forward(sokoban, _agent, counters.sokoban)
    for path in wanted & set(sokoban):
        # the probes' runs: training, and the test evaluation that says which levels the probes score (App. F), then
        # the probes
        probes = path == paths.SOKOBAN_PROBES
        jobs[path] = [job for run in sokoban[path]
                      for job in [*_sokoban_jobs(run, study.sokoban.test_levels, agent_flops[run.id]),
                                  *(_probe_jobs(run, study.sokoban, agent_flops[run.id]) if probes else [])]]
    model_flops = forward(lm, _model, counters.lm)
    for path in wanted & set(lm):
        jobs[path] = [job for run in lm[path] for job in _lm_jobs(run, study.lm, model_flops[run.id])]
    for path in wanted & set(systems_jobs):
        jobs[path] = [systems_jobs[path](study.lm, counters.lm)]
    return jobs


def jobs_by_target(study: Study, counters: Counters, targets: Sequence[str] = ()) -> dict[str, dict[Job, bool]]:
    """Each named target (all of the config's, or `targets`) -> every timed job its DAG runs, each once, and
    whether one of its reports shows that job's run (`catalogue.shows`: the figure's own cost)."""
    reports = catalogue.reports(study)
    named = catalogue.targets(reports)
    unknown = [t for t in targets if t not in named]
    if unknown:
        raise ConfigError(f"plan: unknown target {unknown[0]!r} at this config (targets: {', '.join(named)})")
    by_name = {report.name: report for report in reports}

    # the plan page's rule (plan_costs) waits for the results that the claims page reads
    def reads(report: catalogue.Report) -> Iterable[str]:
        return by_name["claims"].inputs.values() if report.name == "plan" else report.inputs.values()

    by_result = jobs_by_result(study, counters, {path for target in targets or named for name in named[target]
                                       for path in reads(by_name[name])})
    ablations = study.sokoban.ablations
    found = {}
    for target in targets or named:
        needed: dict[Job, bool] = {}
        for report in (by_name[name] for name in named[target]):
            for path in reads(report):
                for job in by_result.get(path, []):
                    shown = job.run is None or catalogue.shows(report, job.run, ablations)
                    needed[job] = needed.get(job, False) or shown
        found[target] = needed
    return found


# ------------------------------------------------------------------------------------------- throughput


@dataclass(frozen=True)
class Rate:
    flops_per_s: float  # of one job
    source: str
    device: str  # what its hours are hours of: "assumed on <plan device>" or "measured on <accelerator>"


def measured(jobs: Iterable[Job], results: str | Path, accelerator: str) -> dict[Job, float]:
    """Seconds of every job that a run on `accelerator` timed in `results` (its Snakemake benchmark file, plus the
    attempts before it that stopped at their time limit), of the run's present definition."""
    root = Path(results)
    snapshot = root / "config.json"
    if not snapshot.exists() or read_json(snapshot, {}, "a config snapshot").get("accelerator") != accelerator:
        return {}
    found = {}
    for job in jobs:
        path = root.parent / job.benchmark
        run_dir = root.parent / job.folder
        if path.exists() and (job.run is None or records(run_dir, job.run.to_dict())):
            # A resubmitted training job's benchmark times its last attempt only; the others' are in its run folder
            # (they are the training's: the run's evaluation and probe jobs are never resubmitted).
            resumed = job.run is not None and job.rule in resources.RESUMABLE
            earlier = sum(entry["seconds"] for entry in attempts(run_dir) if entry["event"] == "stop") if resumed else 0
            found[job] = benchmark_seconds(path) + earlier
    return found


def measured_rates(seconds: Mapping[Job, float]) -> dict[str, list[float]]:
    """Achieved FLOP/s of each timed job, by throughput group."""
    rates: dict[str, list[float]] = {}
    for job, s in seconds.items():
        rates.setdefault(job.group, []).append(job.flops / s)
    return rates


class Assumption(NamedTuple):
    """The config's stated throughput for one rule and model family, and the keys it is read from."""

    spec_key: str  # plan.<family>, else plan.default
    efficiency_key: str  # <spec_key>.efficiency, with .<model family> where it is given per family
    device: str
    peak_tflops: float
    efficiency: float
    serial: Serial | None = None  # plan.<family>.serial: the LM jobs of the family are priced by `lm_time`

    def speed(self) -> lm_time.Speed:
        """The LM time model's speed of our code as the config states it (a family with `serial`)."""
        if self.serial is None:
            raise ValueError(f"{self.spec_key}: no serial latency, so no LM time model")
        return lm_time.speed(self.peak_tflops, self.efficiency, self.serial)


def assumption(plan: PlanAssumptions, rule: str, kind: str = "") -> Assumption:
    """The config's stated assumption for a job of `rule` and model family `kind` (`plan.<family>` of the rule's
    resources family, else `plan.default`)."""
    name = resources.FAMILY[rule]
    where = plan.where(name)
    if where is None:
        raise ConfigError(f"plan.{name}: no assumed throughput for {rule}, and no timed job of it on "
                          f"this accelerator; give plan.{name} or plan.default (device, peak_tflops, efficiency)")
    spec = plan.families[where]
    key, efficiency = f"plan.{where}.efficiency", spec.efficiency
    if isinstance(efficiency, Mapping):
        if (kind or "default") not in efficiency:
            raise ConfigError(f"plan.{name}.efficiency: no value for {rule}, which has no model family; "
                              "give a default")
        key, efficiency = f"{key}.{kind or 'default'}", efficiency[kind or "default"]
    return Assumption(f"plan.{where}", key, spec.device, spec.peak_tflops, efficiency, spec.serial)


def assumed_rate(study: Study, job: Job) -> Rate:
    """The config's stated assumption for the job's resources family (`assumption`), over the job's GPUs; or, for an
    LM job where the family states a serial latency, its FLOPs over `lm_time`'s seconds."""
    assumed = assumption(study.plan, job.rule, job.family)
    if job.work and assumed.serial:
        return modelled_rate(assumed, job)
    gpus = resources.spec(study.resources, job.rule).gpus
    return Rate(assumed.peak_tflops * 1e12 * assumed.efficiency * max(gpus, 1),
                f"assumed: {assumed.efficiency:.1%} of {assumed.device}'s {assumed.peak_tflops:g} TFLOP/s"
                + (f" × {gpus} GPUs" if gpus > 1 else ""), f"assumed on {assumed.device}")


def modelled_rate(assumed: Assumption, job: Job) -> Rate:
    """An LM job's FLOPs over its seconds on `lm_time`'s model of our code (`assumed`: plan.<family>)."""
    speed = assumed.speed()
    compute = sum(count * speed.compute(update) for update, count in job.work)
    serial = sum(count * speed.serial(update) for update, count in job.work)
    return Rate(job.flops / (compute + serial),
                f"modelled ({assumed.spec_key}): compute at {assumed.efficiency:.1%} of {assumed.device}'s "
                f"{assumed.peak_tflops:g} TFLOP/s" + (f" + level-steps in turn, {lm_time.latency(speed)}"
                                                      if serial else ""), f"assumed on {assumed.device}")


def rates(study: Study, jobs: Iterable[Job], timed: Mapping[Job, float]) -> dict[Job, Rate]:
    """Each job's throughput: the median of the timed jobs of its group where there are any, else assumed."""
    by_group = measured_rates(timed)
    found = {}
    for job in jobs:
        seen = by_group.get(job.group)
        found[job] = (Rate(statistics.median(seen), f"measured: median of {len(seen)} timed {job.group} jobs",
                           f"measured on {study.accelerator}") if seen else assumed_rate(study, job))
    return found


# ------------------------------------------------------------------------------------------------ plans


def plan(study: Study, counters: Counters, timed: Mapping[Job, float], targets: Sequence[str] = ()
         ) -> pd.DataFrame:
    """One row per (target, job): FLOPs, the throughput and its source, predicted seconds and device-hours, the
    attempts the job needs within its time limit and whether its resubmissions allow them; the throughput measured
    from `timed` (`timed_jobs`: every timed job of the config, not only the targets')."""
    by_target = jobs_by_target(study, counters, targets)
    every = {job for jobs in by_target.values() for job in jobs}
    chosen = rates(study, every, timed)
    family = {job: resources.spec(study.resources, job.rule) for job in every}
    rows = [{"target": target, "rule": job.rule, "wildcards": job.wildcards, "group": job.group, "shown": shown,
             "flops": job.flops, "flops_per_s": chosen[job].flops_per_s, "source": chosen[job].source,
             "device": chosen[job].device, "seconds": job.flops / chosen[job].flops_per_s,
             "devices": family[job].devices,
             "measured_seconds": timed.get(job, float("nan")),
             "seeds": job.seeds, "budget": job.budget, "remat": job.remat,
             "runtime_s": family[job].runtime * 60,
             "resubmissions": resources.resubmissions(study.resources, job.rule)}
            for target, jobs in by_target.items() for job, shown in jobs.items()]
    table = pd.DataFrame(rows, columns=["target", "rule", "wildcards", "group", "shown", "flops", "flops_per_s",
                                        "source", "device", "seconds", "devices", "measured_seconds", "seeds",
                                        "budget", "remat", "runtime_s", "resubmissions"])
    table["device_hours"] = table["seconds"] * table["devices"] / 3600
    table["attempts"] = attempts_needed(table["seconds"], table["runtime_s"])
    table["finishes"] = table["attempts"] <= 1 + table["resubmissions"]
    table.attrs["targets"] = list(by_target)  # a target without timed jobs (allocations) still gets its row
    return table


USABLE = 0.9  # of an attempt's time limit, the share a job trains: start-up, compiling and the early stop take the rest


def attempts_needed(seconds: pd.Series, runtime_s: pd.Series) -> pd.Series:
    """Attempts a job needs to finish, each computing for USABLE of its time limit."""
    return np.maximum(1, np.ceil(seconds / (USABLE * runtime_s))).astype(int)


def paper_efficiency(plan: PlanAssumptions, table: pd.DataFrame) -> pd.DataFrame:
    """The fraction of the `train` family's peak that the paper's own Sokoban run times imply (App. G.1,
    `paper.SOKOBAN_RUN_TIMES`), as a range over its hours and GPUs, beside the config's assumption. A run there is one
    seed; a job here trains all of a run's seeds, so its FLOPs are divided by its seeds. The authors' rollout keeps its
    activations, so a rematerialised job's extra pass is taken out: the efficiency is that of the authors' program."""
    where = plan.where("train")
    train = table[table["rule"] == "sokoban_train"].drop_duplicates("wildcards")
    columns = ["run", "flops", "paper_hours", "gpus", "lowest", "highest", "assumed"]
    if where is None or train.empty:
        return pd.DataFrame(columns=columns)
    per_run = train["flops"] / train["seeds"] * TRAIN_PASSES / (TRAIN_PASSES + REMAT_PASSES * train["remat"])
    runs = {"small budget, median run": per_run[train["budget"] == "small"].median(),
            "the largest run": per_run.max()}
    peak = plan.families[where].peak_tflops * 1e12
    rows = []
    for what, ((fewest, most), (one, two)) in paper.SOKOBAN_RUN_TIMES.items():
        flops = runs[what]
        rows.append({"run": what, "flops": flops, "paper_hours": f"{fewest}-{most}" if fewest != most else str(most),
                     "gpus": f"{one}-{two}", "lowest": flops / (most * 3600 * peak * two),
                     "highest": flops / (fewest * 3600 * peak * one), "assumed": train["source"].iloc[0]})
    return pd.DataFrame(rows, columns=columns)


def timed_jobs(study: Study, counters: Counters, results: str | Path = paths.ROOT) -> dict[Job, float]:
    """Seconds of every job of the config that a run on its accelerator timed in `results`."""
    every = {job for jobs in jobs_by_target(study, counters).values() for job in jobs}
    return measured(every, results, study.accelerator)


def held_out(study: Study, timed: Mapping[Job, float]) -> pd.DataFrame:
    """The reality check: every timed job beside its prediction from the other timed jobs of its group (leave one
    out) and from the config's assumption alone."""
    rows = []
    for job, seconds in timed.items():
        others = measured_rates({j: s for j, s in timed.items() if j != job}).get(job.group)
        rows.append({"rule": job.rule, "wildcards": job.wildcards, "measured_seconds": seconds,
                     "held_out_seconds": job.flops / statistics.median(others) if others else float("nan"),
                     "assumed_seconds": job.flops / assumed_rate(study, job).flops_per_s})
    return pd.DataFrame(rows, columns=["rule", "wildcards", "measured_seconds", "held_out_seconds",
                                       "assumed_seconds"]).sort_values(["rule", "wildcards"], ignore_index=True)
