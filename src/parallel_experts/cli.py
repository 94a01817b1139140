"""`python -m parallel_experts <command>`: the one interface every Snakemake rule calls.

This module only parses and dispatches: each command reads its arguments, calls the library and prints one
line. Commands that read the configuration validate it first, so a bad config stops here with one line (exit
status 2) before anything is computed; the training, evaluation and probe commands read their run from it by
id. A level source comes as JSON, which the workflow builds from the validated config. Expected failures
(`config.errors.PipelineError`: bad level files, diverged training) are reported in one line with exit status 1;
a trainer that stopped cleanly before its time limit exits with 75 (`core.walltime`: resubmit it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from parallel_experts.config import files
from parallel_experts.config.errors import ConfigError, PipelineError
from parallel_experts.core import atomic, budget, compile_cache, precision
from parallel_experts.results import paths as results_paths
from parallel_experts.results import snapshot


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="parallel_experts", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, run, help: str, **options) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help, **options)
        sub.set_defaults(handler=run)
        return sub

    p = command("check-config", check_config, "validate config files (merged in order) and exit")
    p.add_argument("files", nargs="+")

    p = command("allocations", allocations, "write the allocation grid of one domain (netCDF)")
    add_config(p)
    p.add_argument("--domain", required=True, choices=budget.DOMAINS)
    p.add_argument("--out", required=True)

    p = command("report", report, "execute a notebook with papermill and render it to HTML")
    add_config(p)
    p.add_argument("--notebook", required=True)
    p.add_argument("--html", required=True)
    p.add_argument("--executed", required=True, help="where the executed notebook is kept")
    p.add_argument("--meta", required=True, help="sidecar JSON read by the index")
    p.add_argument("--paper", default="", help="the paper's figure or table this report reproduces")
    p.add_argument("--config-files", nargs="*", default=[], help="the config files the workflow was given")
    p.add_argument("-p", "--param", nargs="*", action="extend", default=[], metavar="KEY=VALUE",
                   help="notebook parameters")

    p = command("plan", plan, "the cost of every training and evaluation job the DAG runs for the named targets "
                "(all of them by default): FLOPs ÷ throughput, per target and in total, with its assumptions")
    p.add_argument("--configfile", required=True, action="append", metavar="FILE",
                   help="a config file; repeat it to merge several in order")
    p.add_argument("--directory", default=".", help="the working directory whose results/ holds timed jobs of an "
                   "earlier run (as Snakemake's); their throughput replaces the config's assumptions")
    p.add_argument("--jobs", action="store_true", help="print every job, not only the sums per target")
    p.add_argument("--out", help="a folder for the plan as CSV: targets.csv (per target), jobs.csv (every target "
                   "and job), check.csv (every timed job beside its predictions)")
    p.add_argument("targets", nargs="*", help="named targets (fig2, table5, ...); default: every one")

    p = command("rehearse", rehearse, "compile every distinct program of the config's DAG at its exact shapes with "
                "abstract inputs; per program: compile seconds, parameters, XLA's FLOPs and memory per device (JSON)")
    add_config(p)
    p.add_argument("--out", required=True)
    what = p.add_mutually_exclusive_group()
    what.add_argument("--only", nargs="+", metavar="KEY", help="compile only the programs with these keys")
    what.add_argument("--part", type=int, metavar="N", help="compile only part N of the programs (rehearsal.parts)")
    what.add_argument("--merge", nargs="+", metavar="FILE", help="compile nothing: merge the parts' files, which "
                      "must hold every program of the config")
    p.add_argument("--levels", help="the Sokoban training level set (sokoban-levels): also run training updates for "
                   "real at the config's shapes (rehearsal_updates)")
    p.add_argument("--run-dir", help="where those runs checkpoint")
    p.add_argument("--seeds", type=int, help="train this many of each run's seeds (default: all of them, or as "
                   "many as fit this machine)")

    p = command("index", index, "write reports/index.html from the reports' sidecar JSON")
    add_config(p)
    p.add_argument("--out", required=True)
    p.add_argument("meta", nargs="+")

    # A job reads its run from the config by id (`--config` + `--run`), not as JSON on its command line: a run's
    # definition (all its seeds) has no size limit, a command line has. Level sources are small and come as JSON.
    p = command("sokoban-levels", sokoban_levels, "write a level set (.npz) from its source")
    p.add_argument("--source", required=True, help='JSON: {"generate": {...}} or {"boxoban": split}')
    p.add_argument("--boxoban", default="{}", help="JSON: where Boxoban splits come from (root, download)")
    p.add_argument("--out", required=True)

    p = command("sokoban-train", sokoban_train, "train one Sokoban run (all its seeds), resumable")
    add_run(p, "sokoban/experiment.py")
    p.add_argument("--levels", required=True, help="training level set from sokoban-levels")
    add_training(p)

    p = command("sokoban-evaluate", sokoban_evaluate, "solve rate of a trained run on a level set")
    add_run(p, "sokoban/experiment.py")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--levels", required=True, help="test level set from sokoban-levels")
    p.add_argument("--out", required=True)

    p = command("sokoban-probe-data", sokoban_probe_data,
                "greedy episodes of one trained agent as probe data: states, encoder outputs, control, labels")
    add_run(p, "sokoban/experiment.py")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--seed", type=int, required=True, help="the training seed whose agent plays")
    p.add_argument("--levels", required=True, help="level set from sokoban-levels")
    p.add_argument("--count", type=level_count, default=None, help="play the first COUNT levels, or all")
    p.add_argument("--out", required=True)

    p = command("sokoban-probe-fit", sokoban_probe_fit, "fit, calibrate and score the planning probes of one run")
    p.add_argument("--train", required=True, help="probe data of the training levels")
    p.add_argument("--calibration", required=True, help="probe data of the calibration levels")
    p.add_argument("--test", required=True, help="probe data of the test levels")
    p.add_argument("--solved", nargs="+", required=True,
                   help="every probed run's test evaluation: only the levels all of them solve are scored")
    p.add_argument("--seeds", required=True, help='JSON: {"run id": its probed seed} of every --solved run')
    p.add_argument("--fit", default="{}", help="JSON: the config's sokoban.probes.fit")
    p.add_argument("--picture", default="{}", help='JSON: {"level": test level, "steps": first steps} of Fig. 13')
    p.add_argument("--out", required=True)

    p = command("sokoban-probes", sokoban_probes, "collect every probed run's scores into one dataset")
    p.add_argument("--out", required=True)
    p.add_argument("scores", nargs="+")

    p = command("lm-tokens", lm_tokens, "write the token shards of the configured corpus")
    p.add_argument("--corpus", required=True, help="JSON: the config's lm.corpus")
    p.add_argument("--shard-tokens", type=int, required=True)
    p.add_argument("--out", required=True, help="folder of shards")

    p = command("lm-train", lm_train, "train one language-model run, resumable")
    add_run(p, "lm/experiment.py")
    p.add_argument("--tokens", required=True, help="folder of shards from lm-tokens")
    add_training(p)

    p = command("lm-evaluate", lm_evaluate, "sliding-window validation loss of a trained run")
    add_run(p, "lm/experiment.py")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--tokens", required=True, help="folder of shards from lm-tokens")
    p.add_argument("--evaluation", required=True, help="JSON: the config's lm.evaluation")
    p.add_argument("--out", required=True)

    for domain, runs, collect in (("sokoban", "Sokoban", sokoban_sweep), ("lm", "language-model", lm_sweep)):
        p = command(f"{domain}-sweep", collect, f"collect every {runs} run into one dataset")
        p.add_argument("--out", required=True)
        p.add_argument("--curves", nargs="+", required=True, help="the runs' learning curves")
        p.add_argument("--evals", nargs="+", required=True, help="the runs' evaluations, in the same order")
        # A run may belong to several ablations, so their dataset names each one's runs.
        p.add_argument("--ablations", type=json.loads, help="JSON {setting: run ids in the order of its "
                       f"values}}: the dataset of the ablations ({domain}.ablations)")
        if domain == "sokoban":
            p.add_argument("--family", help="label every run a run of this sweep, without a budget: the dataset "
                           "of sokoban.expert_count, some of whose runs may be the budget sweeps' runs")

    add_sokoban_bench(command("sokoban-bench", sokoban_bench, "Sokoban training throughput: env-steps/s, FLOPs "
                              "per step and fraction of the matmul peak per allocation, measured side by side",
                              formatter_class=argparse.ArgumentDefaultsHelpFormatter))
    p = command("lm-latency", lm_latency, "Table 5: per-token decode latency of every row after pre-filling the "
                "caches (the config's lm.latency), side by side; netCDF")
    add_config(p)
    p.add_argument("--out", required=True)

    p = command("lm-throughput", lm_throughput, "Table 6: training tokens/s and memory of every row, the complete "
                "update read from token shards (the config's lm.throughput), side by side; netCDF")
    add_config(p)
    p.add_argument("--tokens", required=True, help="folder of shards from lm-tokens")
    p.add_argument("--batch-tokens", type=int, help="tokens per update instead of the config's")
    p.add_argument("--devices", type=int, help="devices an update's streams split over instead of the config's "
                   "resources.bench.gpus")
    p.add_argument("--out", required=True)

    p = command("gpu-check", gpu_check, "on one GPU, in under ten minutes: a training update of each family compiled "
                "(XLA's memory plan beside the CPU rehearsal's), timed and priced as the plan's efficiency, and "
                "Table 5's decode latency of L1 E16 against L16 E1 (JSON; gpu_check.py)")
    add_config(p)
    p.add_argument("--out", required=True)
    p.add_argument("--rehearsal", help="a rehearsal file (rehearse) with the CPU's plan of the programs (default: "
                   "the config's scale's, results/rehearsal/SCALE.json, where it exists)")
    p.add_argument("--sokoban-run", action="append", default=[], metavar="RUN", help="a Sokoban run to time "
                   "(repeatable; default: the largest budget's anchor and its allocation of the most experts)")
    p.add_argument("--lm-run", action="append", default=[], metavar="RUN", help="an LM run to time (repeatable; "
                   "default: the first budget's anchor at the longest window, both families)")
    p.add_argument("--sokoban-updates", type=int, help="updates per timed Sokoban call (default: 2)")
    p.add_argument("--context", type=int, help="Table 5's context (default: the config's longest)")
    p.add_argument("--batch", type=int, help="Table 5's batch (default: the config's smallest)")
    p.add_argument("--peak-tflops", action="append", default=[], metavar="FAMILY=TFLOPS", help="the peak of this "
                   "GPU for a plan family (train, lm_train) instead of the config's plan.FAMILY.peak_tflops")
    p.add_argument("--budget-seconds", type=float, help="no section starts after this (default: 540)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.handler(args)
    except ConfigError as error:
        print(f"config error: {error}", file=sys.stderr)
        return 2
    except PipelineError as error:
        print(f"error: {error}", file=sys.stderr)
        return getattr(error, "exit_status", 1)  # a trainer stopped before its time limit: RESUBMIT
    except Exception as error:  # a write outside atomic_path (a library's own file) refused by the file system
        refused = atomic.refusal(error)
        if refused is None:
            raise
        print(f"error: {refused.filename or 'a file'}: cannot write ({os.strerror(refused.errno)})", file=sys.stderr)
        return 1


def add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, nargs="+", help="config files, merged in order")


def level_count(text: str) -> int | None:
    return None if text == "all" else int(text)


def add_run(parser: argparse.ArgumentParser, defined_in: str) -> None:
    add_config(parser)
    parser.add_argument("--run", required=True, help=f"the run's id in the config (see {defined_in})")


def add_training(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run-dir", required=True, help="checkpoints and outputs of this run")
    parser.add_argument("--time-limit", type=float, metavar="SECONDS",
                        help="stop cleanly (checkpoint, exit status 75) before this many seconds have passed; "
                             "default: the time SLURM leaves the job, if it runs in one, else none")


def config_run(args, runs_by_id, domain: str):
    """The run `args.run` names in the config `args.config`, built by the `domain`'s `runs_by_id`."""
    found = runs_by_id(load_config(args.config, domain))
    if args.run not in found:
        raise ConfigError(f"{' + '.join(args.config)}: defines no run {args.run!r}")
    return found[args.run]


def load_config(paths: Sequence[str], domain: str | None = None) -> dict:
    """The validated config; a command that computes one domain's jobs (`sokoban`, `lm`) names it, and computes at
    that family's matmul precision."""
    loaded = files.load(paths)  # before the domains are imported (seconds): a file that is not a config fails fast
    from parallel_experts import study

    try:
        study.check(loaded)
    except ConfigError as error:
        raise ConfigError(f"{' + '.join(paths)}: {error}") from None
    for path in paths:  # a job of a workflow: the snapshot it started with
        snapshot.verify(loaded, path)
    # Every command that compiles reads the config first, and imports JAX only after: here, the cache is set once.
    compile_cache.use(loaded.get("compile_cache", results_paths.XLA_CACHE) or None)
    if domain is not None:
        precision.use(precision.of(loaded, domain))
    return loaded


def check_config(args) -> int:
    loaded = load_config(args.files)
    print(f"{' + '.join(args.files)}: valid (scale {loaded['scale']}, digest {files.digest(loaded)})")
    return 0


def allocations(args) -> int:
    from parallel_experts.results import grids, store

    loaded = load_config(args.config)
    from parallel_experts.lm import flops as lm_flops  # after the config's check: counting FLOPs loads JAX
    from parallel_experts.sokoban import flops as sokoban_flops

    counted = {"sokoban": sokoban_flops, "lm": lm_flops}[args.domain]
    ds = grids.allocation_dataset(loaded, args.domain, counted.allocation_flops(loaded), counted.flops_per(loaded))
    store.write_netcdf(ds, args.out)
    print(f"{args.out}: {ds.sizes['allocation']} allocations in {ds.sizes['budget_name']} budgets")
    return 0


def plan(args) -> int:
    from parallel_experts.planning import costs, tables
    from parallel_experts.results import paths

    loaded = load_config(args.configfile)
    from parallel_experts.lm import flops as lm_flops  # after the config's check: counting FLOPs loads JAX
    from parallel_experts.sokoban import flops as sokoban_flops

    counters = costs.Counters(sokoban_flops, lm_flops)
    # every benchmark file read once, for the prices and the check
    timed = costs.timed_jobs(loaded, counters, Path(args.directory) / paths.ROOT)
    table = costs.plan(loaded, counters, timed, args.targets)
    calibration = costs.paper_efficiency(loaded, table)
    print(tables.printed(table, tables.unit(loaded), args.jobs, calibration))
    if args.out:
        tables.write(loaded, table, costs.held_out(loaded, timed), calibration, args.out)
    _plan_memory(loaded, table, Path(args.directory) / paths.rehearsal(loaded["scale"]), args.out)
    return 0


def _plan_memory(loaded, table, rehearsal_path: Path, out: str | None) -> None:
    """Each job's rehearsed peak memory beside its device's (planning.memory), printed and written beside the plan."""
    from parallel_experts.planning import memory

    rehearsal = memory.read_rehearsal(rehearsal_path)
    frame = memory.per_job(loaded, table, rehearsal)
    print("\nmemory per device:\n  " + "\n  ".join(memory.summary(frame, memory.backend(rehearsal))))
    if out:
        memory.write(frame, rehearsal, out)


def rehearse(args) -> int:
    compile_cache.off()  # compile seconds are what a rehearsal measures, not reads from the cache
    loaded = load_config(args.config)
    # A job that splits its data over N GPUs is compiled for N devices; on a CPU the host can pose as N devices,
    # if told before JAX starts.
    devices = max(1, *(spec["gpus"] for spec in loaded["resources"].values()))
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
    from parallel_experts import rehearsal

    if args.merge:
        records = rehearsal.merge(loaded, args.merge)
        rehearsal.write(loaded, records, args.out)
    else:
        keys = rehearsal.part_keys(loaded, args.part) if args.part is not None else args.only and set(args.only)
        records = rehearsal.rehearse(loaded, args.out, keys=keys)
    if args.levels:
        from parallel_experts import rehearsal_updates
        from parallel_experts.sokoban.levels import LevelSet

        if not args.run_dir:
            raise ConfigError("rehearse: --levels needs --run-dir, where the runs checkpoint")
        updates = rehearsal_updates.run_all(loaded, records, LevelSet.load(args.levels).levels, args.run_dir,
                                            args.seeds)
        rehearsal.write(loaded, records, args.out, updates)
    failed = [r for r in records if "error" in r]
    print(f"{args.out}: {len(records) - len(failed)} programs compiled on {records[0]['backend'] if records else '-'}"
          + (f", {len(failed)} not ({failed[0]['error']})" if failed else ""))
    return 0


def report(args) -> int:
    from parallel_experts.reporting import render as reports

    loaded = load_config(args.config)
    parameters = dict(param.split("=", 1) for param in args.param)
    provenance = {"paper": args.paper, "scale": loaded["scale"], "config_files": args.config_files,
                  "config_digest": files.digest(loaded)}
    parameters |= {"config_path": args.config[-1], "scale": loaded["scale"], "description": loaded["description"]}
    reports.render(args.notebook, args.html, args.executed, args.meta, parameters, provenance)
    print(f"{args.html}: rendered from {args.notebook}")
    return 0


def index(args) -> int:
    from parallel_experts.reporting import render as reports

    reports.write_index(args.meta, args.out, load_config(args.config))
    print(f"{args.out}: {len(args.meta)} reports")
    return 0


def sokoban_levels(args) -> int:
    from parallel_experts.sokoban import experiment

    level_set = experiment.level_set(json.loads(args.source), json.loads(args.boxoban))
    level_set.save(args.out)
    print(f"{args.out}: {level_set.source}")
    return 0


def sokoban_train(args) -> int:
    from parallel_experts.core.run_folder import run_lock
    from parallel_experts.core.tensorboard import TrainingCurves
    from parallel_experts.core.walltime import Deadline
    from parallel_experts.sokoban import experiment, train
    from parallel_experts.sokoban.levels import LevelSet

    run = config_run(args, experiment.runs_by_id, "sokoban")
    with run_lock(args.run_dir, run.to_dict()), Deadline(args.time_limit).listening() as deadline:
        if deadline.source:  # a SLURM job, or --time-limit: say when it must stop (a local run stays as it was)
            print(f"{args.run_dir}: {deadline}", file=sys.stderr)
        trainer = train.Trainer(run.agent, run.train, LevelSet.load(args.levels).levels)
        steps = len(run.seeds) * run.train.num_envs * run.train.num_steps  # per update, all seeds
        with TrainingCurves(args.run_dir, "env_steps", steps, run.seeds) as curves:
            carry, log = train.train(trainer, run.seeds, args.run_dir, on_log=curves.log, deadline=deadline)
        train.save_outputs(run, carry, log, args.run_dir)
    print(f"{args.run_dir}: final-five return per seed {[round(x, 3) for x in log.final_five()]}")
    return 0


def sokoban_evaluate(args) -> int:
    from parallel_experts.results import store
    from parallel_experts.sokoban import evaluate, experiment, train
    from parallel_experts.sokoban.levels import LevelSet

    run = config_run(args, experiment.runs_by_id, "sokoban")
    result = evaluate.evaluate_run(run, train.load_agents(run, args.run_dir), LevelSet.load(args.levels))
    store.write_netcdf(result, args.out)
    print(f"{args.out}: greedy solve rate per seed {result['solved'].sel(mode='greedy').mean('level').values}")
    return 0


def sokoban_probe_data(args) -> int:
    from parallel_experts.results import store
    from parallel_experts.sokoban import experiment, probes
    from parallel_experts.sokoban.levels import LevelSet

    run = config_run(args, experiment.runs_by_id, "sokoban")
    data = probes.run_data(run, args.run_dir, LevelSet.load(args.levels), args.seed, args.count)
    store.write_netcdf(data, args.out)
    print(f"{args.out}: {data.attrs['levels']} episodes, {data.sizes['sample']} steps")
    return 0


def sokoban_probe_fit(args) -> int:
    from parallel_experts.results import store
    from parallel_experts.sokoban import probe_scores

    picture = json.loads(args.picture)
    train, calibration, test = (store.open_dataset(path) for path in (args.train, args.calibration, args.test))
    scored = probe_scores.solved_by_all([store.open_dataset(path) for path in args.solved], json.loads(args.seeds),
                                        int(test.attrs["levels"]))
    scores = probe_scores.score(train, calibration, test, scored, probe_scores.ProbeConfig(**json.loads(args.fit)),
                                picture.get("level", 0), picture.get("steps", 3))
    store.write_netcdf(scores, args.out)
    recall = scores["recall"].sel(representation="state", target="agent_onto", estimate="value")
    print(f"{args.out}: {len(scored)} of {test.attrs['levels']} test levels solved by every probed run; C_A recall "
          f"of the state at steps 0-4 {recall.values[:5].round(3).tolist()}")
    return 0


def sokoban_probes(args) -> int:
    from parallel_experts.results import store
    from parallel_experts.sokoban import probe_scores

    ds = probe_scores.collect(args.scores)
    store.write_netcdf(ds, args.out)
    print(f"{args.out}: {ds.sizes['run']} probed runs")
    return 0


def sokoban_sweep(args) -> int:
    """Every Sokoban run given, in one dataset."""
    from parallel_experts.sokoban import experiment

    return _write_sweep(experiment.collect(args.curves, args.evals, args.ablations, family=args.family), args.out)


def lm_sweep(args) -> int:
    """Every language-model run given, in one dataset."""
    from parallel_experts.lm import experiment

    return _write_sweep(experiment.collect(args.curves, args.evals, args.ablations), args.out)


def _write_sweep(ds, out: str) -> int:
    from parallel_experts.results import store

    store.write_netcdf(ds, out)
    print(f"{out}: {ds.sizes['run']} runs")
    return 0


def lm_tokens(args) -> int:
    from parallel_experts.lm import corpus, shards

    paths = corpus.corpus_shards(json.loads(args.corpus), args.out, args.shard_tokens)
    counts = [len(shards.read_shard(p)) for p in paths]
    print(f"{args.out}: {len(paths)} shards, {counts[0]} validation and {sum(counts[1:])} training tokens")
    return 0


def lm_train(args) -> int:
    from parallel_experts.core.run_folder import run_lock
    from parallel_experts.core.tensorboard import TrainingCurves
    from parallel_experts.core.walltime import Deadline
    from parallel_experts.lm import experiment, shards, train

    run = config_run(args, experiment.runs_by_id, "lm")
    with run_lock(args.run_dir, run.to_dict()), Deadline(args.time_limit).listening() as deadline:
        if deadline.source:  # a SLURM job, or --time-limit: say when it must stop (a local run stays as it was)
            print(f"{args.run_dir}: {deadline}", file=sys.stderr)
        vocabulary, _, training = shards.model_shards(args.tokens, run.model.vocab)
        trainer = train.Trainer(run.model, run.train, train.device_mesh(), seed=run.seed)
        tokens = [shards.load_tokens(p, vocabulary) for p in training]
        with TrainingCurves(args.run_dir, "tokens", run.train.batch_tokens) as curves:
            carry, curve = train.train(trainer, tokens, args.run_dir, on_log=curves.log, deadline=deadline)
        train.save_outputs(run, carry, curve, args.run_dir)
    print(f"{args.run_dir}: final training loss {curve[-1]['loss']:.4f} after {curve[-1]['tokens']} tokens")
    return 0


def lm_evaluate(args) -> int:
    from parallel_experts.lm import evaluate, experiment, shards, train
    from parallel_experts.results import store

    run = config_run(args, experiment.runs_by_id, "lm")
    spec = json.loads(args.evaluation)
    vocabulary, validation, _ = shards.model_shards(args.tokens, run.model.vocab)
    model = train.load_model(run.model, args.run_dir)
    loss, scored = evaluate.validation_loss(model, shards.load_tokens(validation, vocabulary), run.window,
                                            spec["streams"], spec["lanes"])
    store.write_netcdf(evaluate.as_dataset(run, loss, scored, spec, validation), args.out)
    print(f"{args.out}: validation loss {loss:.4f} over {scored} tokens (window {run.window})")
    return 0




# ---------------------------------------------------------------------------------------------- benchmarks


def add_sokoban_bench(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", nargs="+", default=["config/paper.yaml"],
                   help="config files (merged in order) naming the budget, its anchor and the training settings")
    p.add_argument("--budget", default="small", help="Sokoban budget whose allocations (and anchor) are used")
    p.add_argument("--allocations", nargs="+", type=allocation, metavar="L,E,d",
                   help="allocations to time instead of the budget's (the work ratio stays against its anchor)")
    p.add_argument("--expert", choices=["convlstm", "convglu"], default="convlstm")
    rec = p.add_mutually_exclusive_group()
    rec.add_argument("--recurrent", dest="recurrent", action="store_true", default=True)
    rec.add_argument("--nonrecurrent", dest="recurrent", action="store_false")
    p.add_argument("--num-envs", type=int, default=32)
    p.add_argument("--num-steps", type=int, default=20, help="rollout length of one update")
    p.add_argument("--log-interval", type=int, default=1,
                   help="updates per compiled call (one update of the anchor takes ~7 s on 2 cores)")
    p.add_argument("--seeds", type=int, default=1, help="seeds vmapped together, as training does")
    p.add_argument("--warmup", type=int, default=1, help="untimed calls after compiling")
    p.add_argument("--repeats", type=int, default=1, help="timed calls, at least")
    p.add_argument("--min-time", type=float, default=4.0, help="add timed calls until they sum to this (s)")
    p.add_argument("--max-repeats", type=int, default=5, help="cap on timed calls added by --min-time")
    p.add_argument("--levels", type=int, default=200, help="generated 10×10 4-box levels to train on")
    p.add_argument("--matmul-size", type=int, default=2048)
    p.add_argument("--matmul-repeats", type=int, default=7, help="timed matmuls of the start/end peak")
    p.add_argument("--local-peak-repeats", type=int, default=3,
                   help="timed matmuls right before and after each allocation's timed calls (0: use the start peak)")
    p.add_argument("--env-steps", type=int, default=500, help="steps per env-only call (× num-envs env steps)")
    p.add_argument("--env-repeats", type=int, default=5)
    p.add_argument("--json", help="write every number, the settings and the machine here")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes for tests: one small allocation, 4 envs × 5 steps, small matmul")


def allocation(text: str) -> budget.Allocation:
    """`L,E,d` on the command line."""
    try:
        depth, experts, width = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected L,E,d (three integers), got {text!r}") from None
    if min(depth, experts, width) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return budget.Allocation(depth, experts, width)


def sokoban_bench(args) -> int:
    from parallel_experts.sokoban import bench

    compile_cache.off()
    return bench.run(args, load_config(args.config, "sokoban"))


def lm_latency(args) -> int:
    from parallel_experts.analysis import latency as table5
    from parallel_experts.lm import latency
    from parallel_experts.results import store

    compile_cache.off()
    ds = latency.run(load_config(args.config, "lm"))
    store.write_netcdf(ds, args.out)
    print(table5.printed(ds))
    print(f"{args.out}: {table5.goal_line(ds)}")
    return 0


def gpu_check(args) -> int:
    from parallel_experts import gpu_check as checking

    loaded = load_config(args.config)
    peaks = checking.peaks(args.peak_tflops)
    chosen = checking.sections(loaded, args.sokoban_run, args.lm_run, args.context, args.batch,
                               args.sokoban_updates or checking.SOKOBAN_UPDATES)
    rehearsal = args.rehearsal or results_paths.rehearsal(loaded["scale"])
    found = checking.check(loaded, chosen, args.out, rehearsal, peaks, args.budget_seconds or checking.BUDGET_SECONDS)
    print(f"{args.out}: {len(chosen) - len(found['errors'])} of {len(chosen)} sections measured in "
          f"{found['seconds']:.0f} s" + "".join(f"\n  failed: {error}" for error in found["errors"]))
    for key, entry in found["plan_updates"].items():
        print(f"  {key}: {entry['value']:.4f} (the config assumes {entry['assumed']})")
    return 1 if found["errors"] else 0


def lm_throughput(args) -> int:
    from parallel_experts.analysis import throughput as table6
    from parallel_experts.lm import throughput
    from parallel_experts.results import store

    # Set before JAX starts its backend: on a GPU this process only coordinates, and the fresh process of each
    # cell must get the memory, not JAX's default preallocation of 75 % here.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    compile_cache.off()
    ds = throughput.run(load_config(args.config, "lm"), args.tokens, batch_tokens=args.batch_tokens,
                        devices=args.devices)
    store.write_netcdf(ds, args.out)
    print(table6.printed(ds))
    print(f"{args.out}: {ds.sizes['allocation']} allocations at {ds.sizes['context']} contexts")
    return 0
