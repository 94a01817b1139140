"""The matmul precision of each family: the CLI sets it for a job of that family before anything compiles, it reaches
the compiled programs, and a run's definition shows it only where it is not JAX's default (no demo run retrains)."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from helpers import REPO

from parallel_experts import study
from parallel_experts.config import files
from parallel_experts.core import precision
from parallel_experts.lm import experiment as lm_experiment
from parallel_experts.sokoban import experiment as sokoban_experiment
from parallel_experts.study import Study

SMOKE = str(REPO / "config/smoke.yaml")


@pytest.fixture
def restored(monkeypatch):
    """Whatever the test sets is undone after it: the variable and JAX's own setting."""
    monkeypatch.delenv(precision.VARIABLE, raising=False)
    yield
    jax.config.update("jax_default_matmul_precision", None)


def dot_precision() -> str:
    """The precision a float32 product is compiled at, as the lowered program states it."""
    x = jnp.ones((4, 4), jnp.float32)
    line = next(line for line in jax.jit(jnp.dot).lower(x, x).as_text().splitlines() if "dot_general" in line)
    return line.split("precision = [")[1].split(",")[0]


def test_a_job_computes_at_its_familys_precision(restored, tmp_path):
    override = tmp_path / "override.yaml"
    override.write_text("sokoban: {training: {matmul_precision: float32}}\n")
    study.load([SMOKE, str(override)], "sokoban")
    assert dot_precision() == "HIGHEST"
    started = subprocess.run([sys.executable, "-c", "import jax; print(jax.config.jax_default_matmul_precision)"],
                             capture_output=True, text=True, check=True)  # lm-throughput's process per cell
    assert started.stdout.split()[-1] == "float32"
    study.load([SMOKE, str(override)], "lm")  # the LM's: not given, JAX's default
    assert precision.VARIABLE not in os.environ and dot_precision() == "DEFAULT"
    study.load([SMOKE, str(override)])  # a command of neither family changes nothing
    assert dot_precision() == "DEFAULT"


def test_the_precision_defines_a_run_only_where_it_is_not_the_default():
    paper = files.load([REPO / "config/paper.yaml"])
    demo = files.load([REPO / "config/config.yaml"])
    for domain, experiment in (("sokoban", sokoban_experiment), ("lm", lm_experiment)):
        stated = paper[domain]["training"]["matmul_precision"]
        assert stated == Study.of(demo).matmul_precision(domain) == "default"
        for config in (paper, demo):
            assert all("matmul_precision" not in run.to_dict()["train"]
                       for run in Study.of(config).families(domain).by_id.values())
        demo[domain]["training"]["matmul_precision"] = "float32"
        run = next(iter(Study.of(demo).families(domain).by_id.values()))
        assert run.train.matmul_precision == "float32" and run.to_dict()["train"]["matmul_precision"] == "float32"
        assert experiment.Run.from_dict(json.loads(json.dumps(run.to_dict()))) == run
