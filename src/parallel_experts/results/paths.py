"""Where every result lives, relative to the working directory: the one module that knows the layout of results/.

    results/config.json                            the effective configuration, which every job reads its run from
    results/config.lock                            held by every running workflow of that config (results.snapshot)
    results/allocations/{domain}.nc                the allocation grids
    results/sokoban/levels/{set}.npz               level sets; results/lm/tokens/: token shards
    results/{domain}/runs/{run id}/                one run: its learning curve, weights, evaluation, checkpoints
                                                   and TensorBoard event files (`tensorboard --logdir results`)
    results/sokoban/probes/{run id}/seed-{seed}/   one probed agent: its probe data per split ({split}.nc) and its
                                                   fitted probes (scores.nc)
    results/{domain}/{dataset}.nc                  the datasets the reports read (sweeps, ablations, probes, ...)
    results/benchmarks/...                         Snakemake's timing of each job, which the planner reads
    results/xla-cache/                             compiled programs, shared by every job (core.compile_cache)
    results/logs/...                               every job's log, by its rule and wildcards
    results/rehearsal/...                          the rehearsal of a config's DAG (results.rehearsal_file)

The workflow's rules build their patterns from these functions (`run_dir(domain, "{run}")`), the library its
paths, so that the two cannot disagree.
"""

from __future__ import annotations

ROOT = "results"
CONFIG_JSON = f"{ROOT}/config.json"
LM_TOKENS = f"{ROOT}/lm/tokens"
XLA_CACHE = f"{ROOT}/xla-cache"  # the default of the config's compile_cache
BOXOBAN_CACHE = f"{ROOT}/boxoban"  # the default of sokoban.boxoban.cache: parsed splits, a downloaded copy
# The datasets that reports read, one file each.
SOKOBAN_SWEEP = f"{ROOT}/sokoban/sweep.nc"  # every run of the budget sweeps
EXPERT_COUNT = f"{ROOT}/sokoban/expert_count.nc"  # the runs of sokoban.expert_count (no budget)
SOKOBAN_PROBES = f"{ROOT}/sokoban/probes.nc"
LM_SWEEP = f"{ROOT}/lm/sweep.nc"
LATENCY = f"{ROOT}/lm/latency.nc"  # Table 5
THROUGHPUT = f"{ROOT}/lm/throughput.nc"  # Table 6
PLAN = f"{ROOT}/plan/config"  # the plan of the workflow's config (planning.tables.write), a folder
PAPER_PLAN = f"{ROOT}/plan/paper"  # the plan of config/paper.yaml
POWER = f"{ROOT}/power/config.json"  # the power analysis of the workflow's config (planning.power)
PAPER_POWER = f"{ROOT}/power/paper.json"  # of config/paper.yaml
REPORTS = f"{ROOT}/reports"  # executed notebooks and the sidecar JSON that the index reads
# What the scripts outside the DAG write by default (workflow/scripts/gpu_check.sh, systems_one_gpu.sh).
GPU_CHECK = f"{ROOT}/gpu_check.json"  # the first GPU's check at config/paper.yaml's shapes
GPU_CHECK_SMOKE = f"{ROOT}/gpu_check-smoke.json"  # the same at config/smoke.yaml's
SYSTEMS_ONE_GPU = f"{ROOT}/systems_one_gpu"  # Tables 5 and 6 at paper width on one GPU, a folder
# The files of a run's folder: its learning curve, its trained weights and its evaluation (per domain).
CURVE = "curve.nc"
WEIGHTS = {"sokoban": "agents.eqx", "lm": "model.eqx"}
EVALUATION = {"sokoban": "eval.nc", "lm": "validation.nc"}
# Snakemake's benchmark file of each timed rule, by the rule's wildcards.
BENCHMARKS = {
    "sokoban_train": "sokoban/train/{run}", "sokoban_evaluate": "sokoban/evaluate/{run}",
    "sokoban_probe_data": "sokoban/probe_data/{run}/seed-{seed}/{split}",
    "sokoban_probe_fit": "sokoban/probe_fit/{run}/seed-{seed}",
    "lm_train": "lm/train/{run}", "lm_evaluate": "lm/evaluate/{run}",
    "lm_latency": "lm/latency", "lm_throughput": "lm/throughput",
}


def allocations(domain: str) -> str:
    return f"{ROOT}/allocations/{domain}.nc"


def levels(name: str) -> str:
    return f"{ROOT}/sokoban/levels/{name}.npz"


def ablations(domain: str) -> str:
    """The dataset of a domain's ablations, which names each ablation's runs."""
    return f"{ROOT}/{domain}/ablations.nc"


def run_dir(domain: str, run: str) -> str:
    return f"{ROOT}/{domain}/runs/{run}"


def curve(domain: str, run: str) -> str:
    return f"{run_dir(domain, run)}/{CURVE}"


def weights(domain: str, run: str) -> str:
    return f"{run_dir(domain, run)}/{WEIGHTS[domain]}"


def evaluation(domain: str, run: str) -> str:
    return f"{run_dir(domain, run)}/{EVALUATION[domain]}"


def probe_data(run: str, seed: int | str, split: str) -> str:
    """The probe data of one probed agent (a run's agent of training seed `seed`) on one split."""
    return f"{ROOT}/sokoban/probes/{run}/seed-{seed}/{split}.nc"


def probe_scores(run: str, seed: int | str) -> str:
    """The fitted and scored probes of one probed agent."""
    return f"{ROOT}/sokoban/probes/{run}/seed-{seed}/scores.nc"


def benchmark(rule: str, **wildcards: str) -> str:
    """A timed job's benchmark file: `benchmark("sokoban_train", run="{run}")` is the rule's pattern."""
    return f"{ROOT}/benchmarks/{BENCHMARKS[rule].format(**wildcards)}.tsv"


def power(key: str) -> str:
    """The power analysis of one config and its inputs (planning.power), by their hash."""
    return f"{ROOT}/power/cache/{key}.json"


def log(name: str) -> str:
    """A job's log file: `log("sokoban/train/{run}")` is the rule's pattern, results/logs/sokoban/train/{run}.log."""
    return f"{ROOT}/logs/{name}.log"


def rehearsal(scale: str) -> str:
    """The rehearsal of a config of scale `scale`: every distinct program compiled, with XLA's memory per device."""
    return f"{ROOT}/rehearsal/{scale}.json"


def rehearsal_part(scale: str, part: int | str) -> str:
    """Part `part` of that rehearsal (`rehearsal.parts`), compiled as a job of its own."""
    return f"{ROOT}/rehearsal/{scale}-parts/{part}.json"


def rehearsal_runs(scale: str) -> str:
    """The folder in which that rehearsal trains its chosen runs for a few updates (`rehearsal_updates`)."""
    return f"{ROOT}/rehearsal/{scale}-runs"
