"""What a job of each rule asks the scheduler for: the rule's resources family in the config (`resources.<family>`:
cpus, memory, runtime, GPUs). The workflow's rules and the planner read this one table, so that the GPUs a plan
prices are the GPUs a job gets."""

from __future__ import annotations

from parallel_experts.config.settings import Resource, Resources

# The rules whose jobs are heavy, by the family of resources they take; every other rule takes `default`.
FAMILY = {"sokoban_train": "train", "sokoban_evaluate": "train", "sokoban_probe_data": "train",
          "sokoban_probe_fit": "train", "lm_train": "lm_train", "lm_evaluate": "lm_train",
          "lm_latency": "bench", "lm_throughput": "bench"}
RESUMABLE = {"sokoban_train", "lm_train"}  # their jobs stop before the time limit and resume (core/walltime.py)


def spec(resources: Resources, rule: str) -> Resource:
    """The resources of one job of `rule` (its family's, or the default)."""
    return resources.of_family(FAMILY.get(rule, "default"))


def snakemake(resources: Resources, rule: str) -> dict:
    """`resources:` of `rule` as Snakemake and its SLURM executor name them."""
    found = spec(resources, rule)
    return {"mem_mb": found.mem_mb, "runtime": found.runtime, "cpus_per_task": found.cpus, "gpu": found.gpus}


def resubmissions(resources: Resources, rule: str) -> int:
    """How many more times a failed job of `rule` is submitted (Snakemake's `retries`): the training rules only,
    whose jobs resume from their checkpoint; another rule's job would start over."""
    return spec(resources, rule).resubmissions if rule in RESUMABLE else 0


def devices(resources: Resources, rule: str) -> int:
    """The GPUs of one job of `rule`, or its CPUs where the config gives it no GPU."""
    return spec(resources, rule).devices
