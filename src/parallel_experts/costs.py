"""What a config's DAG would cost before it runs: every training and evaluation job as FLOPs ÷ a throughput.

`python -m parallel_experts plan --configfile FILE [TARGET ...]` (tables: `plan`) and `reports/plan.html`.

* FLOPs of a job: XLA's count of one forward step of its model (`agent_step_flops`, `token_flops`, the lowered
  program) × the steps or tokens the job computes; a training step counts TRAIN_PASSES forward passes. The
  models of a family of FIT_FROM or more (one expert, recurrence, window, ...) are fitted from 12 counts of small
  models, exactly where F = a + b·L + c·E + e·L·E with coefficients quadratic in the width (shared encoder and
  head, per-level and per-expert work), so that pricing the paper's 360 models takes seconds, not minutes.
* Throughput, per rule (and per family where the two differ): the median achieved FLOP/s of this project's
  timed jobs of that rule (Snakemake's benchmark files) in a results folder of a run on the same accelerator;
  otherwise the config's stated assumption (`plan`: a device, its peak, and the fraction of it a job reaches).
* Device-hours: a job's seconds × its GPUs, or × its CPUs where the config gives the rule no GPU.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from parallel_experts import catalogue, checkpoint
from parallel_experts.errors import ConfigError
from parallel_experts.lm import latency, throughput
from parallel_experts.lm import systems
from parallel_experts.lm.models import ModelConfig, token_flops
from parallel_experts.results import family
from parallel_experts.sokoban import experiment as sokoban_experiment
from parallel_experts.sokoban.agent import AgentConfig, agent_step_flops
from parallel_experts.sokoban.boxoban import SPLIT_LEVELS
from parallel_experts.sokoban import probes
from parallel_experts.sokoban.probe_scores import ProbeConfig

TRAIN_PASSES = 3  # forward + backward ≈ 3 forward passes (sokoban-bench counts 3.19 for a whole A2C update)
EVAL_MODES = 2  # greedy and sampled
SOKOBAN_WIDTHS = (4, 8, 12)  # the widths a Sokoban model's count is fitted at
LM_HEADS = (2, 4, 6)  # the query heads (× the head width) an LM model's count is fitted at
FIT_FROM = 8  # a family of at least this many models is fitted (12 counts), a smaller one counted model by model
# The resources family of each timed rule (workflow/rules/*.smk: `resources: **resources(...)`); a test checks
# the planned jobs, their benchmark files and GPUs against Snakemake's own dry run.
RESOURCES = {"sokoban_train": "train", "sokoban_evaluate": "train", "sokoban_probe_data": "train",
             "sokoban_probe_fit": "train", "lm_train": "lm_train", "lm_evaluate": "lm_train",
             "lm_latency": "bench", "lm_throughput": "bench"}


@dataclass(frozen=True)
class Job:
    """One timed job of the DAG, as Snakemake names it, and the FLOPs it computes."""

    rule: str
    wildcards: str  # as `snakemake -n` prints them ("run=..."); "" for a rule with one job
    flops: float
    benchmark: str  # its Snakemake benchmark file
    family: str = ""  # recurrent or non-recurrent, where the rule's throughput depends on it
    run: object = None  # the run it trains or evaluates (a systems table: None)

    @property
    def group(self) -> str:
        """Jobs that share one throughput."""
        return f"{self.rule} {self.family}".strip()


# ------------------------------------------------------------------------------------------------ FLOPs


def _fitted(measure, depth: int, experts: int, width: int, widths: Sequence[int]) -> float:
    """F(depth, experts, width) from F at (L, E) ∈ {1, 2}² and three `widths`: exact wherever F = a + b·L + c·E
    + e·L·E with a, b, c, e quadratic in the width (shared encoder and head, per-level and per-expert work)."""
    per_width = []
    for w in widths:
        f11, f21, f12, f22 = (measure(l, e, w) for l, e in ((1, 1), (2, 1), (1, 2), (2, 2)))
        e = f22 - f21 - f12 + f11
        b, c = f21 - f11 - e, f12 - f11 - e
        per_width.append((f11 - b - c - e, b, c, e))
    a, b, c, e = (_quadratic(widths, [coefficients[i] for coefficients in per_width], width) for i in range(4))
    return a + b * depth + c * experts + e * depth * experts


def _quadratic(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """The parabola through three points, at x (Lagrange)."""
    return sum(y * math.prod((x - xj) / (xi - xj) for xj in xs if xj != xi) for xi, y in zip(xs, ys))


def sokoban_family(agent: AgentConfig, view: int):
    """The models one fit covers (None: an agent counted as it is; a limited radius couples the experts of a
    level unevenly)."""
    return None if agent.radius is not None else (dataclasses.replace(agent, depth=1, experts=1, width=1), view)


@functools.cache
def sokoban_step_flops(agent: AgentConfig, view: int, fit: bool = False) -> float:
    """Forward FLOPs of one environment step of `agent` on a view×view grid, fitted from its family or counted."""
    if not fit or sokoban_family(agent, view) is None:
        return _agent_flops(agent, view)
    return _fitted(lambda l, e, w: _agent_flops(dataclasses.replace(agent, depth=l, experts=e, width=w), view),
                   agent.depth, agent.experts, agent.width, SOKOBAN_WIDTHS)


@functools.cache
def _agent_flops(agent: AgentConfig, view: int) -> float:
    return agent_step_flops(agent, view, view)


def lm_family(model: ModelConfig, window: int):
    """The models one fit covers: the grid's heads (K = H/2 of one head width) at every width; None otherwise."""
    head = model.width // model.q_heads
    if model.width != head * model.q_heads or model.q_heads != 2 * model.kv_heads:
        return None
    return dataclasses.replace(model, depth=1, experts=1, width=2 * head, q_heads=2, kv_heads=1), window


@functools.cache
def lm_token_flops(model: ModelConfig, window: int, fit: bool = False) -> float:
    """Forward FLOPs of one token of `model` with a full window, fitted from its family or counted."""
    if not fit or lm_family(model, window) is None:
        return _model_flops(model, window)
    head = model.width // model.q_heads

    def at(depth, experts, width):
        q = width // head
        return _model_flops(dataclasses.replace(model, depth=depth, experts=experts, width=width, q_heads=q,
                                                kv_heads=q // 2), window)
    return _fitted(at, model.depth, model.experts, model.width, [head * q for q in LM_HEADS])


@functools.cache
def _model_flops(model: ModelConfig, window: int) -> float:
    return token_flops(model, window)


# ------------------------------------------------------------------------------------------------- jobs


def level_count(source: Mapping) -> int:
    """How many levels a `sokoban.levels.<set>` source holds, without reading them."""
    return source["generate"]["count"] if "generate" in source else SPLIT_LEVELS[source["boxoban"]]


def forward_flops(runs: Iterable, among: Iterable) -> dict[str, float]:
    """Forward FLOPs of one step (Sokoban) or token (LM) of every run, by id: fitted where FIT_FROM or more runs
    `among` the config's share its family, counted run by run elsewhere."""
    def family_and_count(run):
        if isinstance(run, sokoban_experiment.Run):
            return sokoban_family(run.agent, run.train.view), sokoban_step_flops, (run.agent, run.train.view)
        return lm_family(run.model, run.window), lm_token_flops, (run.model, run.window)

    sizes = Counter(family_and_count(run)[0] for run in among)
    found = {}
    for run in runs:
        key, count, args = family_and_count(run)
        found[run.id] = count(*args, fit=key is not None and sizes[key] >= FIT_FROM)
    return found


def _sokoban_jobs(run, config: Mapping, forward: float) -> list[Job]:
    train, kind = run.train, family(run.agent.recurrent)
    seeds, tests = len(run.seeds), level_count(config["sokoban"]["levels"]["test"])
    return [Job("sokoban_train", f"run={run.id}", seeds * train.env_steps * TRAIN_PASSES * forward,
                f"results/benchmarks/sokoban/train/{run.id}.tsv", kind, run),
            Job("sokoban_evaluate", f"run={run.id}", seeds * EVAL_MODES * tests * train.time_limit * forward,
                f"results/benchmarks/sokoban/evaluate/{run.id}.tsv", kind, run)]


def _probe_jobs(run, config: Mapping, forward: float) -> list[Job]:
    """The probe data of each split (the agent and its untrained control play every level to the time limit)
    and the probe fit (every representation and target, each probe seed, over the training split's squares)."""
    spec, levels, train = config["sokoban"]["probes"], config["sokoban"]["levels"], run.train
    played = {"train": spec["episodes"], "calibration": spec["calibration"], "test": level_count(levels["test"])}
    kind = family(run.agent.recurrent)
    found = [Job("sokoban_probe_data", f"run={run.id}, split={split}", 2 * count * train.time_limit * forward,
                 f"results/benchmarks/sokoban/probe_data/{run.id}/{split}.tsv", kind, run)
             for split, count in played.items()]
    fit = ProbeConfig(**spec.get("fit", {}))
    per_square = 2 * fit.kernel**2 * run.agent.width * len(probes.CLASSES)
    squares = played["train"] * train.time_limit * train.view**2
    probes_fitted = len(probes.TARGETS) * len(probes.REPRESENTATIONS) * fit.seeds
    found.append(Job("sokoban_probe_fit", f"run={run.id}", probes_fitted * fit.epochs * squares * per_square
                     * TRAIN_PASSES, f"results/benchmarks/sokoban/probe_fit/{run.id}.tsv", kind, run))
    return found


def _lm_jobs(run, config: Mapping, forward: float) -> list[Job]:
    kind = family(run.model.recurrent)
    return [Job("lm_train", f"run={run.id}", run.train.train_tokens * TRAIN_PASSES * forward,
                f"results/benchmarks/lm/train/{run.id}.tsv", kind, run),
            Job("lm_evaluate", f"run={run.id}", config["lm"]["shard_tokens"] * forward,
                f"results/benchmarks/lm/evaluate/{run.id}.tsv", kind, run)]


def _latency_job(config: Mapping) -> Job:
    """Every row, context and batch: the prompt, then the warm-up and timed calls of the decode scan and the
    single step (ANALYSES §6)."""
    spec = latency.settings(config)
    calls = (spec["warmup"] + spec["repeats"]) * (spec["steps"] + 1)
    flops = sum(batch * (context + calls) * lm_token_flops(systems.model_config(row, spec["width"], config["lm"]),
                                                            context)
                for row in systems.selected(systems.LATENCY_ROWS, spec)
                for context in spec["contexts"] for batch in spec["batches"])
    return Job("lm_latency", "", flops, "results/benchmarks/lm/latency.tsv")


def _throughput_job(config: Mapping) -> Job:
    spec = throughput.settings(config)
    flops = sum(spec["steps"] * spec["batch_tokens"] * TRAIN_PASSES
                * lm_token_flops(systems.model_config(row, spec["width"], config["lm"]), context)
                for row in systems.selected(systems.THROUGHPUT_ROWS, spec) for context in spec["contexts"])
    return Job("lm_throughput", "", flops, "results/benchmarks/lm/throughput.tsv")


def jobs_by_result(config: Mapping, paths: Iterable[str] | None = None) -> dict[str, list[Job]]:
    """Each result file a report reads (or those of `paths`) -> the timed jobs behind it: its runs' training and
    evaluation, the probed runs' training and probes, a systems table's one job."""
    runs = catalogue.dataset_runs(config)
    probed = sokoban_experiment.probed_runs(config)
    if probed:
        runs[catalogue.SOKOBAN_PROBES["probes"]] = probed
    systems_jobs = {path: table for table, (_, _, _, path) in catalogue.LM_SYSTEMS.items() if table in config["lm"]}
    wanted = set(runs) | set(systems_jobs) if paths is None else set(paths)
    every = {run.id: run for members in runs.values() for run in members}
    forward = forward_flops({run.id: run for path in wanted & set(runs) for run in runs[path]}.values(),
                            every.values())
    found = {}
    for path in wanted & set(runs):
        if path == catalogue.SOKOBAN_PROBES["probes"]:
            found[path] = [job for run in probed for job in [_sokoban_jobs(run, config, forward[run.id])[0],
                                                             *_probe_jobs(run, config, forward[run.id])]]
        else:
            jobs = _sokoban_jobs if path.startswith("results/sokoban/") else _lm_jobs
            found[path] = [job for run in runs[path] for job in jobs(run, config, forward[run.id])]
    for path in wanted & set(systems_jobs):
        found[path] = [{"latency": _latency_job, "throughput": _throughput_job}[systems_jobs[path]](config)]
    return found


def jobs_by_target(config: Mapping, targets: Sequence[str] = ()) -> dict[str, dict[Job, bool]]:
    """Each named target (all of the config's, or `targets`) -> every timed job its DAG runs, each once, and
    whether one of its reports shows that job's run (`catalogue.shows`: the figure's own cost)."""
    reports = catalogue.reports(config)
    named = catalogue.targets(reports)
    unknown = [t for t in targets if t not in named]
    if unknown:
        raise ConfigError(f"plan: unknown target {unknown[0]!r} at this config (targets: {', '.join(named)})")
    by_name = {report.name: report for report in reports}

    def reads(report):  # the plan page's rule (plan_costs) waits for the results that the claims page reads
        return by_name["claims"].inputs.values() if report.name == "plan" else report.inputs.values()

    by_result = jobs_by_result(config, {path for target in targets or named for name in named[target]
                                        for path in reads(by_name[name])})
    found = {}
    for target in targets or named:
        needed: dict[Job, bool] = {}
        for report in map(by_name.get, named[target]):
            for path in reads(report):
                for job in by_result.get(path, []):
                    needed[job] = needed.get(job, False) or job.run is None or catalogue.shows(report, job.run, config)
        found[target] = needed
    return found


# ------------------------------------------------------------------------------------------- throughput


@dataclass(frozen=True)
class Rate:
    flops_per_s: float  # of one job
    source: str


def measured(jobs: Iterable[Job], results: str | Path, accelerator: str) -> dict[Job, float]:
    """Seconds of every job that a run on `accelerator` timed in `results` (its Snakemake benchmark file), of the
    run's present definition."""
    root = Path(results)
    snapshot = root / "config.json"
    if not snapshot.exists() or json.loads(snapshot.read_text()).get("accelerator") != accelerator:
        return {}
    found = {}
    for job in jobs:
        path = root.parent / job.benchmark
        if path.exists() and (job.run is None or checkpoint.records(run_dir(root, job), job.run.to_dict())):
            found[job] = float(pd.read_csv(path, sep="\t")["s"].iloc[-1])
    return found


def run_dir(results: Path, job: Job) -> Path:
    """The folder of a job's run, whose run.json names the definition that its benchmark file timed."""
    return results / job.rule.split("_")[0] / "runs" / job.run.id


def measured_rates(seconds: Mapping[Job, float]) -> dict[str, list[float]]:
    """Achieved FLOP/s of each timed job, by throughput group."""
    rates: dict[str, list[float]] = {}
    for job, s in seconds.items():
        rates.setdefault(job.group, []).append(job.flops / s)
    return rates


def assumed_rate(config: Mapping, job: Job) -> Rate:
    """The config's stated assumption for the job's resources family (`plan.<family>`, else `plan.default`)."""
    name = RESOURCES[job.rule]
    spec = config.get("plan", {}).get(name, config.get("plan", {}).get("default"))
    if spec is None:
        raise ConfigError(f"plan.{name}: no assumed throughput for {job.rule}, and no timed job of it on "
                          f"this accelerator; give plan.{name} or plan.default (device, peak_tflops, efficiency)")
    efficiency = spec["efficiency"]
    if isinstance(efficiency, Mapping):
        if (job.family or "default") not in efficiency:
            raise ConfigError(f"plan.{name}.efficiency: no value for {job.rule}, which has no model family; "
                              "give a default")
        efficiency = efficiency[job.family or "default"]
    gpus = resources(config, job.rule)["gpus"]
    return Rate(spec["peak_tflops"] * 1e12 * efficiency * max(gpus, 1),
                f"assumed: {efficiency:.1%} of {spec['device']}'s {spec['peak_tflops']:g} TFLOP/s"
                + (f" × {gpus} GPUs" if gpus > 1 else ""))


def resources(config: Mapping, rule: str) -> Mapping:
    """The resources of one job of `rule` (its family's, or the default)."""
    return config["resources"].get(RESOURCES[rule], config["resources"]["default"])


def devices(config: Mapping, rule: str) -> int:
    """The GPUs of one job of `rule`, or its CPUs where the config gives it no GPU."""
    spec = resources(config, rule)
    return spec["gpus"] or spec["cpus"]


def rates(config: Mapping, jobs: Iterable[Job], timed: Mapping[Job, float]) -> dict[Job, Rate]:
    """Each job's throughput: the median of the timed jobs of its group where there are any, else assumed."""
    by_group = measured_rates(timed)
    found = {}
    for job in jobs:
        seen = by_group.get(job.group)
        found[job] = (Rate(statistics.median(seen), f"measured: median of {len(seen)} timed {job.group} jobs")
                      if seen else assumed_rate(config, job))
    return found


# ------------------------------------------------------------------------------------------------ plans


def plan(config: Mapping, timed: Mapping[Job, float], targets: Sequence[str] = ()) -> pd.DataFrame:
    """One row per (target, job): FLOPs, the throughput and its source, predicted seconds and device-hours; the
    throughput measured from `timed` (`timed_jobs`: every timed job of the config, not only the targets')."""
    by_target = jobs_by_target(config, targets)
    every = {job for jobs in by_target.values() for job in jobs}
    chosen = rates(config, every, timed)
    rows = [{"target": target, "rule": job.rule, "wildcards": job.wildcards, "group": job.group, "shown": shown,
             "flops": job.flops, "flops_per_s": chosen[job].flops_per_s, "source": chosen[job].source,
             "seconds": job.flops / chosen[job].flops_per_s, "devices": devices(config, job.rule),
             "measured_seconds": timed.get(job, float("nan"))}
            for target, jobs in by_target.items() for job, shown in jobs.items()]
    table = pd.DataFrame(rows, columns=["target", "rule", "wildcards", "group", "shown", "flops", "flops_per_s",
                                        "source", "seconds", "devices", "measured_seconds"])
    table["device_hours"] = table["seconds"] * table["devices"] / 3600
    table.attrs["targets"] = list(by_target)  # a target without timed jobs (allocations) still gets its row
    return table


def timed_jobs(config: Mapping, results: str | Path = "results") -> dict[Job, float]:
    """Seconds of every job of the config that a run on its accelerator timed in `results`."""
    every = {job for jobs in jobs_by_target(config).values() for job in jobs}
    return measured(every, results, config["accelerator"])


def held_out(config: Mapping, timed: Mapping[Job, float]) -> pd.DataFrame:
    """The reality check: every timed job beside its prediction from the other timed jobs of its group (leave one
    out) and from the config's assumption alone."""
    rows = []
    for job, seconds in timed.items():
        others = measured_rates({j: s for j, s in timed.items() if j != job}).get(job.group)
        rows.append({"rule": job.rule, "wildcards": job.wildcards, "measured_seconds": seconds,
                     "held_out_seconds": job.flops / statistics.median(others) if others else float("nan"),
                     "assumed_seconds": job.flops / assumed_rate(config, job).flops_per_s})
    return pd.DataFrame(rows, columns=["rule", "wildcards", "measured_seconds", "held_out_seconds",
                                       "assumed_seconds"]).sort_values(["rule", "wildcards"], ignore_index=True)
