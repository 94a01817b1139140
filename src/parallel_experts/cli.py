"""`python -m parallel_experts <command>`: the one interface every Snakemake rule calls.

Commands that read the configuration validate it first, so a bad config stops here with one line (exit
status 2) before anything is computed. The Sokoban commands instead take the definition of what they compute
(a level source, a run) as JSON, which the workflow builds from the validated config. Expected failures
(`errors.PipelineError`: bad level files, diverged training) are reported in one line with exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from parallel_experts import atomic
from parallel_experts import config as configuration
from parallel_experts.errors import ConfigError, PipelineError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="parallel_experts", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser("check-config", help="validate config files (merged in order) and exit")
    check.add_argument("files", nargs="+")

    snapshot = commands.add_parser("snapshot-config", help="validate a config given as JSON and write it")
    snapshot.add_argument("--json", required=True, help="the effective configuration, as JSON")
    snapshot.add_argument("--out", required=True)

    allocations = commands.add_parser("allocations", help="write the allocation grid of one domain (netCDF)")
    add_config(allocations)
    allocations.add_argument("--domain", required=True, choices=["sokoban", "lm"])
    allocations.add_argument("--out", required=True)

    report = commands.add_parser("report", help="execute a notebook with papermill and render it to HTML")
    add_config(report)
    report.add_argument("--notebook", required=True)
    report.add_argument("--html", required=True)
    report.add_argument("--executed", required=True, help="where the executed notebook is kept")
    report.add_argument("--meta", required=True, help="sidecar JSON read by the index")
    report.add_argument("--paper", default="", help="the paper's figure or table this report reproduces")
    report.add_argument("--config-files", nargs="*", default=[], help="the config files the workflow was given")
    report.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                        help="notebook parameter (repeatable)")

    index = commands.add_parser("index", help="write reports/index.html from the reports' sidecar JSON")
    add_config(index)
    index.add_argument("--out", required=True)
    index.add_argument("meta", nargs="+")

    # The Sokoban commands take what defines their output (a level source, a run) as JSON, so that a rule
    # reruns exactly when that definition changes, not whenever anything else in the config does.
    levels = commands.add_parser("sokoban-levels", help="write a level set (.npz) from its source")
    levels.add_argument("--source", required=True, help='JSON: {"generate": {...}} or {"boxoban": split}')
    levels.add_argument("--boxoban", default="{}", help="JSON: where Boxoban splits come from (root, download)")
    levels.add_argument("--out", required=True)

    train = commands.add_parser("sokoban-train", help="train one Sokoban run (all its seeds), resumable")
    train.add_argument("--run", required=True, help="JSON definition of the run (see sokoban/experiment.py)")
    train.add_argument("--levels", required=True, help="training level set from sokoban-levels")
    train.add_argument("--run-dir", required=True, help="checkpoints and outputs of this run")

    evaluate = commands.add_parser("sokoban-evaluate", help="solve rate of a trained run on a level set")
    evaluate.add_argument("--run", required=True, help="JSON definition of the run")
    evaluate.add_argument("--run-dir", required=True)
    evaluate.add_argument("--levels", required=True, help="test level set from sokoban-levels")
    evaluate.add_argument("--out", required=True)

    tokens = commands.add_parser("lm-tokens", help="write the token shards of the configured corpus")
    tokens.add_argument("--corpus", required=True, help="JSON: the config's lm.corpus")
    tokens.add_argument("--shard-tokens", type=int, required=True)
    tokens.add_argument("--out", required=True, help="folder of shards")

    lm_train = commands.add_parser("lm-train", help="train one language-model run, resumable")
    lm_train.add_argument("--run", required=True, help="JSON definition of the run (see lm/experiment.py)")
    lm_train.add_argument("--tokens", required=True, help="folder of shards from lm-tokens")
    lm_train.add_argument("--run-dir", required=True)

    lm_evaluate = commands.add_parser("lm-evaluate", help="sliding-window validation loss of a trained run")
    lm_evaluate.add_argument("--run", required=True, help="JSON definition of the run")
    lm_evaluate.add_argument("--run-dir", required=True)
    lm_evaluate.add_argument("--tokens", required=True, help="folder of shards from lm-tokens")
    lm_evaluate.add_argument("--evaluation", required=True, help="JSON: the config's lm.evaluation")
    lm_evaluate.add_argument("--out", required=True)

    for domain, runs in (("sokoban", "Sokoban"), ("lm", "language-model")):
        sweep = commands.add_parser(f"{domain}-sweep", help=f"collect every {runs} run into one dataset")
        sweep.add_argument("--out", required=True)
        sweep.add_argument("--curves", nargs="+", required=True, help="the runs' learning curves")
        sweep.add_argument("--evals", nargs="+", required=True, help="the runs' evaluations, in the same order")

    commands.add_parser("sokoban-bench", add_help=False,
                        help="training env-steps/s, FLOPs per step and fraction of matmul peak per allocation "
                             "(options: sokoban-bench --help)")

    commands.add_parser("lm-bench", add_help=False,
                        help="training tokens/s, FLOPs and memory of the Transformer against recurrent allocations "
                             "(options: lm-bench --help)")

    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["sokoban-bench"]:  # its own parser: python -m parallel_experts sokoban-bench --help
        from parallel_experts.sokoban import bench

        return bench.main(argv[1:])
    if argv[:1] == ["lm-bench"]:
        from parallel_experts.lm import bench

        return bench.main(argv[1:])
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except ConfigError as error:
        print(f"config error: {error}", file=sys.stderr)
        return 2
    except PipelineError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def add_config(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, nargs="+", help="config files, merged in order")


def load_config(files: Sequence[str]) -> dict:
    loaded = configuration.load(files)
    try:
        configuration.validate(loaded)
    except ConfigError as error:
        raise ConfigError(f"{' + '.join(files)}: {error}") from None
    return loaded


def check_config(args) -> int:
    loaded = load_config(args.files)
    print(f"{' + '.join(args.files)}: valid (scale {loaded['scale']}, digest {configuration.digest(loaded)})")
    return 0


def snapshot_config(args) -> int:
    loaded = json.loads(args.json)
    configuration.validate(loaded)
    atomic.write_text(args.out, json.dumps(loaded, indent=2, sort_keys=True) + "\n")
    return 0


def allocations(args) -> int:
    from parallel_experts import results

    loaded = load_config(args.config)
    if args.domain == "sokoban":  # the recurrent ConvLSTM agent, which defines the Sokoban budgets
        from parallel_experts.sokoban.agent import AgentConfig, agent_step_flops

        def step_flops(a):
            return agent_step_flops(AgentConfig(a.depth, a.experts, a.width,
                                                encoder_channels=loaded["sokoban"]["encoder_channels"]))
    else:  # the forward pass of one token of each family, at each window
        import numpy as np

        from parallel_experts.lm.models import ModelConfig, token_flops

        def step_flops(a):
            return np.array([[token_flops(ModelConfig(a.depth, a.experts, a.width, a.q_heads, a.kv_heads,
                                                      vocab=loaded["lm"]["vocabulary"], recurrent=recurrent,
                                                      dtype=loaded["lm"]["dtype"]), window)
                              for recurrent in (False, True)] for window in loaded["lm"]["windows"]])
    ds = results.allocation_dataset(loaded, args.domain, step_flops)
    results.write_netcdf(ds, args.out)
    print(f"{args.out}: {ds.sizes['allocation']} allocations in {ds.sizes['budget_name']} budgets")
    return 0


def report(args) -> int:
    from parallel_experts import reports

    loaded = load_config(args.config)
    parameters = dict(param.split("=", 1) for param in args.param)
    provenance = {"paper": args.paper, "scale": loaded["scale"], "config_files": args.config_files,
                  "config_digest": configuration.digest(loaded)}
    parameters |= {"config_path": args.config[-1], "scale": loaded["scale"], "description": loaded["description"]}
    reports.render(args.notebook, args.html, args.executed, args.meta, parameters, provenance)
    print(f"{args.html}: rendered from {args.notebook}")
    return 0


def index(args) -> int:
    from parallel_experts import reports

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
    from parallel_experts.sokoban import experiment, train
    from parallel_experts.sokoban.levels import LevelSet

    run = experiment.Run.from_dict(json.loads(args.run))
    trainer = train.Trainer(run.agent, run.train, LevelSet.load(args.levels).levels)
    carry, log = train.train(trainer, run.seeds, args.run_dir)
    train.save_outputs(run, carry, log, args.run_dir)
    print(f"{args.run_dir}: final-five return per seed {[round(x, 3) for x in log.final_five()]}")
    return 0


def sokoban_evaluate(args) -> int:
    from parallel_experts import results
    from parallel_experts.sokoban import evaluate, experiment, train
    from parallel_experts.sokoban.levels import LevelSet

    run = experiment.Run.from_dict(json.loads(args.run))
    result = evaluate.evaluate_run(run, train.load_agents(run, args.run_dir), LevelSet.load(args.levels))
    results.write_netcdf(result, args.out)
    print(f"{args.out}: greedy solve rate per seed {result['solved'].sel(mode='greedy').mean('level').values}")
    return 0


def sweep(args) -> int:
    """sokoban-sweep, lm-sweep: every run of the domain's experiment in one dataset."""
    import importlib

    from parallel_experts import results

    experiment = importlib.import_module(f"parallel_experts.{args.command.split('-')[0]}.experiment")
    ds = experiment.collect(args.curves, args.evals)
    results.write_netcdf(ds, args.out)
    print(f"{args.out}: {ds.sizes['run']} runs")
    return 0


def lm_tokens(args) -> int:
    from parallel_experts.lm import corpus, shards

    paths = corpus.corpus_shards(json.loads(args.corpus), args.out, args.shard_tokens)
    counts = [len(shards.read_shard(p)) for p in paths]
    print(f"{args.out}: {len(paths)} shards, {counts[0]} validation and {sum(counts[1:])} training tokens")
    return 0


def lm_vocabulary(run, folder):
    """(vocabulary map or None, validation shard path, training shard paths) of a folder of shards."""
    from parallel_experts.lm import shards

    validation, training = shards.shard_paths(folder)
    return shards.compact_vocabulary(training, run.model.vocab), validation, training


def lm_train(args) -> int:
    from parallel_experts.lm import experiment, shards, train

    run = experiment.Run.from_dict(json.loads(args.run))
    vocabulary, _, training = lm_vocabulary(run, args.tokens)
    trainer = train.Trainer(run.model, run.train, train.device_mesh())
    carry, curve = train.train(trainer, [shards.load_tokens(p, vocabulary) for p in training], args.run_dir)
    train.save_outputs(run, carry, curve, args.run_dir)
    print(f"{args.run_dir}: final training loss {curve[-1]['loss']:.4f} after {curve[-1]['tokens']} tokens")
    return 0


def lm_evaluate(args) -> int:
    from parallel_experts import results
    from parallel_experts.lm import evaluate, experiment, shards, train

    run = experiment.Run.from_dict(json.loads(args.run))
    spec = json.loads(args.evaluation)
    vocabulary, validation, _ = lm_vocabulary(run, args.tokens)
    model = train.load_model(run.model, args.run_dir)
    loss, scored = evaluate.validation_loss(model, shards.load_tokens(validation, vocabulary), run.window,
                                            spec["streams"], spec["lanes"])
    results.write_netcdf(evaluate.as_dataset(run, loss, scored, spec, validation), args.out)
    print(f"{args.out}: validation loss {loss:.4f} over {scored} tokens (window {run.window})")
    return 0


COMMANDS = {"check-config": check_config, "snapshot-config": snapshot_config, "allocations": allocations,
            "report": report, "index": index, "sokoban-levels": sokoban_levels, "sokoban-train": sokoban_train,
            "sokoban-evaluate": sokoban_evaluate, "sokoban-sweep": sweep, "lm-tokens": lm_tokens,
            "lm-train": lm_train, "lm-evaluate": lm_evaluate, "lm-sweep": sweep}
