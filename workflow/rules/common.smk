# Shared by every stage: the validated config, where jobs find the library, per-rule resources, and the
# registry of reports that each stage fills in. Functions only; the rules live in the stage files.

import sys
from pathlib import Path

# The Snakefile and every job import the library from this checkout, whether or not it is pip-installed
# (under `--sdm conda` the environments in envs/ hold only its dependencies).
SRC = Path(workflow.basedir) / "src"
sys.path.insert(0, str(SRC))
shell.prefix("set -euo pipefail; export PYTHONPATH=" + str(SRC) + "${{PYTHONPATH:+:$PYTHONPATH}}; ")

from parallel_experts import config as configuration

try:
    configuration.validate(config)
except configuration.ConfigError as error:
    sys.exit(f"config error: {' + '.join(workflow.configfiles) or 'config'}: {error}")

CONFIG_JSON = "results/config.json"
CONDA_ENV = str(Path(workflow.basedir) / "envs" / f"{config['accelerator']}.yaml")

# name -> the paper item a report reproduces and the results its notebook reads (notebook parameters by
# name). Each stage registers its reports; workflow/rules/reports.smk renders them all.
REPORTS = {}


def resources(family="default"):
    """Scheduler resources of a rule family from the config; `threads(family)` gives the same cpus."""
    spec = config["resources"].get(family, config["resources"]["default"])
    return {"mem_mb": spec["mem_mb"], "runtime": spec["runtime"], "cpus_per_task": spec["cpus"], "gpu": spec["gpus"]}


def threads(family="default"):
    return config["resources"].get(family, config["resources"]["default"])["cpus"]


def report_inputs(wildcards):
    return REPORTS[wildcards.report]["inputs"] | {
        "config": CONFIG_JSON,
        "notebook": f"workflow/notebooks/{wildcards.report}.ipynb",
    }


def notebook_parameters(wildcards, input):
    return " ".join(f"-p {name}={input[name]}" for name in REPORTS[wildcards.report]["inputs"])
