# Shared by every stage: the validated config, where jobs find the library, per-rule resources, the runs and
# the reports that the config defines. Functions only; the rules live in the stage files.

import dataclasses
import functools
import json
import re
import sys
from pathlib import Path

from snakemake.settings.types import DeploymentMethod

# The Snakefile and every job import the library from this checkout, whether or not it is pip-installed
# (under `--sdm conda` the environments in envs/ hold only its dependencies). Jobs run `python`: the
# interpreter that runs Snakemake, activated or not, except under `--sdm conda`, where the job's
# environment comes first.
SRC = Path(workflow.basedir) / "src"
sys.path.insert(0, str(SRC))
_python_first = (
    ""
    if DeploymentMethod.CONDA in workflow.deployment_settings.deployment_method
    else f"export PATH={Path(sys.executable).parent}:$PATH; "
)
# Snakemake formats the prefix too: {{{{ }}}} reaches the shell as a single pair of braces.
shell.prefix(f"set -euo pipefail; {_python_first}export PYTHONPATH={SRC}${{{{PYTHONPATH:+:$PYTHONPATH}}}}; ")

from parallel_experts import study
from parallel_experts.config.errors import ConfigError, PipelineError
from parallel_experts.core import budget
from parallel_experts.lm import systems
from parallel_experts.planning import resources as job_resources
from parallel_experts.planning import tables as plan
from parallel_experts.targets import catalogue
from parallel_experts.results import paths, snapshot
from parallel_experts.sokoban import experiment as sokoban_experiment

try:
    # Snakemake has read the files already, but leniently (YAML 1.1: `4e-4` a string); read them as check-config
    # does, a problem blamed on the file or the --config that holds it, and run on that reading.
    STUDY = study.given(workflow.configfiles, workflow.config_settings.config)
except ConfigError as error:
    sys.exit(f"config error: {error}")
# The study, built once: what every rule and input function reads (`STUDY.config`, the mapping it was built from, for
# the params that copy a block of it verbatim into a job's command line, and for the snapshot). Snakemake's `config`
# holds that mapping too, for the report's template (workflow/report/report.rst).
config.clear()
config.update(STUDY.config)

# The effective configuration (files plus any --config overrides), which every job reads: written when a real run
# starts (the onstart hook, results.snapshot), never while the Snakefile is read. Where it changed, no rule writes
# it: a rule's output would make Snakemake skip the params check of every job reading it in the run that rewrites
# it, so a run whose definition changed would not be retrained until the next invocation.
CONFIG_JSON = paths.CONFIG_JSON
# For that reason a job that reads the whole config (a report, the plan, the power analysis) names its digest as a
# param: its input, the snapshot, is rewritten only after Snakemake has decided what to run.
CONFIG_DIGEST = STUDY.digest
CONDA_ENV = str(Path(workflow.basedir) / "envs" / f"{STUDY.accelerator}.yaml")

# Every report of the config (parallel_experts.targets.catalogue): its notebook, the results it reads, its target.
REPORTS = {report.name: report for report in catalogue.reports(STUDY)}


def resources(rule):
    """Scheduler resources of a job of `rule`, from its resources family in the config (planning.resources, the
    planner's table too); `threads(rule)` gives the same cpus."""
    return job_resources.snakemake(STUDY.resources, rule)


def threads(rule):
    return job_resources.spec(STUDY.resources, rule).cpus


def retries(rule):
    # Only the Snakemake that submits jobs resubmits them: Snakemake applies a rule's `retries` in a job step on a
    # node too, where it would rerun a trainer that stopped before the time limit inside the same allocation.
    return job_resources.resubmissions(STUDY.resources, rule) if workflow.is_main_process else 0


def config_files():
    """The config files the workflow was given, relative to the repository when they lie in it."""
    names = []
    for path in map(Path, workflow.configfiles):
        path = path if path.is_absolute() else Path.cwd() / path
        names.append(str(path.relative_to(workflow.basedir)) if path.is_relative_to(workflow.basedir) else str(path))
    return names


def report_inputs(entry):
    """The files a report reads: its results, the config snapshot and its notebook."""
    return dict(entry.inputs) | {
        "config": CONFIG_JSON,
        "notebook": str(Path(workflow.basedir) / "workflow" / "notebooks" / f"{entry.notebook}.ipynb"),
    }


def verbatim(value):
    """A param that is `value` as given: Snakemake formats a string param with the wildcards, which would rewrite
    braces in it (a config file's name, a caption)."""
    return lambda wildcards: value


def notebook_parameters(entry, input):
    values = {name: input[name] for name in entry.inputs} | dict(entry.params)
    return [f"{name}={value}" for name, value in values.items()]


def one_of(names):
    """A wildcard constraint that matches exactly these names."""
    return "|".join(map(re.escape, names))


# The runs behind each run dataset (Study.dataset_runs; the planner reads the same). Every Sokoban run trains
# and is evaluated alike (SOKOBAN_RUNS); the budget sweeps' sweep.nc and the expert-count sweep's expert_count.nc
# come from one rule (sokoban_dataset). Each domain's ablations.nc names each ablation's runs; a run at the sweep's
# setting is the sweep's run, and two ablations' default agent is one run.
DATASET_RUNS = STUDY.dataset_runs


def dataset_ids(path):
    return [run.id for run in DATASET_RUNS.get(path, [])]


SOKOBAN_DATASETS = {Path(path).stem: dataset_ids(path) for path in (paths.SOKOBAN_SWEEP, paths.EXPERT_COUNT)}
SOKOBAN_ABLATIONS = STUDY.sokoban.ablations
SOKOBAN_ABLATION_RUNS = dataset_ids(paths.ablations("sokoban"))
SOKOBAN_RUNS = STUDY.sokoban.by_id
PROBED_RUNS = {run.id: run for run in STUDY.sokoban.probed}
# Every training seed some probed run's agent is probed at (sokoban.probes.seeds, else each run's first).
PROBED_SEEDS = sorted({seed for seeds in STUDY.sokoban.probe_seeds.values() for seed in seeds})
LM_ABLATIONS = STUDY.lm.ablations
LM_ABLATION_RUNS = dataset_ids(paths.ablations("lm"))
LM_RUNS = STUDY.lm.by_id
LM_SWEEP_RUNS = dataset_ids(paths.LM_SWEEP)


def members_json(ablations):
    """Each ablation's run ids in the order of its values, as an ablations dataset names them (--ablations)."""
    return json.dumps({setting: [run.id for run in runs] for setting, runs in ablations.items()})


# Each domain's ablations dataset (rule ablations).
ABLATIONS = {  # domain -> each ablation's runs, every run once, the command that collects them
    "sokoban": (SOKOBAN_ABLATIONS, SOKOBAN_ABLATION_RUNS, "sokoban-sweep"),
    "lm": (LM_ABLATIONS, LM_ABLATION_RUNS, "lm-sweep"),
}


def ablation_files(result):
    """Every ablation run's learning curve (`result` = paths.curve) or evaluation file (paths.evaluation) of the
    job's domain."""
    return lambda wildcards: [result(wildcards.domain, run) for run in ABLATIONS[wildcards.domain][1]]


def run_json(runs):
    """A job's run's full definition (a param, not on its command line): its rules rerun exactly when it changes."""
    return lambda wildcards: json.dumps(runs[wildcards.run].to_dict(), sort_keys=True)


def systems_settings(table):
    """What a systems table (lm.latency, lm.throughput) reads from the config: its rows' models and its protocol,
    our protocol's defaults filled in (lm.systems), so that a change of those defaults reruns the table too."""
    protocol = {"latency": systems.latency_settings, "throughput": systems.throughput_settings}[table]
    spec = protocol(STUDY.lm.settings.tables) if table in STUDY.lm.settings.tables else None
    return json.dumps({table: spec} | STUDY.lm.settings.shape, sort_keys=True)


def dataset_files(result):
    """The curve (`result` = paths.curve) or evaluation file (paths.evaluation) of every run of a dataset's family
    (see SOKOBAN_DATASETS)."""
    return lambda wildcards: [result("sokoban", run) for run in SOKOBAN_DATASETS[wildcards.dataset]]


def probe_levels(wildcards):
    return paths.levels(sokoban_experiment.PROBE_SPLITS[wildcards.split])


def probe_count(wildcards):
    """How many levels a probe split plays (sokoban.experiment.probe_episodes, as the planner prices them)."""
    count = sokoban_experiment.probe_episodes(STUDY.sokoban.settings.probes)[wildcards.split]
    return "all" if count is None else count


def probe_score_files():
    """Every probed agent's scores: each probed run's, at each of its probed seeds, in that order."""
    return [
        paths.probe_scores(run.id, seed) for run in PROBED_RUNS.values() for seed in STUDY.sokoban.probe_seeds[run.id]
    ]


def run_dir(domain):
    """The folder of the job's run (a param: the trainer writes its checkpoints there)."""
    return lambda wildcards: paths.run_dir(domain, wildcards.run)


@functools.cache
def rehearsal_parts():
    """The config's programs in parts (imports JAX: only where the rehearsal is in the DAG)."""
    from parallel_experts.rehearsal import programs

    return programs.parts(STUDY)


def rehearsal_part_files(wildcards):
    return [paths.rehearsal_part(STUDY.scale, part) for part in range(len(rehearsal_parts()))]
