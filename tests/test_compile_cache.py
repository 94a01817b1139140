"""The compilation cache (core/compile_cache.py): the config's `compile_cache` sets it for every command that
reads the config, a variable the caller set wins, and a second process training the same run loads every program
from the folder the first one wrote instead of compiling it, and computes the same numbers."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

from parallel_experts import study
from parallel_experts.core import compile_cache

SMOKE = str(REPO / "config/smoke.yaml")
# what a job's shell would not have (conftest.py undoes a benchmark test's `off()` after the test, not within it)
VARIABLES = (compile_cache.CACHE_DIR, compile_cache.ENABLE, *compile_cache.SETTINGS)

# One process of the test below: the CLI's own set-up from the config, then a tiny language model trained to the
# end (the programs of a real training job, at the tests' size), counting JAX's cache events.
TRAIN = """
import collections, json, sys
from parallel_experts import study
study.load(sys.argv[1:3])
from jax import monitoring
events = collections.Counter()
monitoring.register_event_listener(lambda event, **_: events.update([event]))
from helpers import model_config, shards, train_config
from parallel_experts.lm import train
carry, curve = train.train(train.Trainer(model_config(True), train_config(True)), shards(), sys.argv[3])
print(json.dumps({"events": events, "loss": curve[-1]["loss"]}))
"""


@pytest.fixture
def fresh_environment(monkeypatch):
    """No cache variable set, as in a job's shell; whatever the test sets is undone after it."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


def config_with(tmp_path: Path, text: str) -> list[str]:
    override = tmp_path / "override.yaml"
    override.write_text(f"external: [{tmp_path}]\n{text}")  # a cache here is outside the project, named on purpose
    return [SMOKE, str(override)]


def test_the_config_names_the_cache_folder(fresh_environment, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study.load([SMOKE])  # no key: inside the results folder of the working directory
    assert os.environ[compile_cache.CACHE_DIR] == str(tmp_path / "results/xla-cache")
    assert os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"


def test_a_relative_folder_is_made_absolute_and_false_means_none(fresh_environment, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study.load(config_with(tmp_path, "compile_cache: shared/xla\n"))
    assert os.environ[compile_cache.CACHE_DIR] == str(tmp_path / "shared/xla")
    monkeypatch.delenv(compile_cache.CACHE_DIR)
    study.load(config_with(tmp_path, "compile_cache: false\n"))
    assert compile_cache.CACHE_DIR not in os.environ


def test_a_variable_the_caller_set_wins(fresh_environment, tmp_path, monkeypatch):
    monkeypatch.setenv(compile_cache.CACHE_DIR, "/elsewhere")
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "2")
    study.load(config_with(tmp_path, f"compile_cache: {tmp_path / 'xla'}\n"))
    assert os.environ[compile_cache.CACHE_DIR] == "/elsewhere"
    assert os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "2"


def test_a_process_that_imported_jax_before_the_config_still_compiles_through_the_cache(tmp_path):
    """As sokoban-train does: its modules import JAX before it reads the config. Once, every job of the demo then
    compiled without a cache."""
    env = {name: value for name, value in os.environ.items() if name not in VARIABLES}
    script = ("import sys, jax; from parallel_experts.core import compile_cache; compile_cache.use(sys.argv[1]); "
              "jax.jit(lambda x: 2 * x + 1)(1.0).block_until_ready()")
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path / "xla")], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert any(path.name.startswith("jit__lambda") for path in (tmp_path / "xla").iterdir())


def test_off_holds_in_a_process_that_imported_jax_first_whatever_the_config_says(tmp_path):
    """As the benchmarks do: JAX imported, the cache turned off, then the config read, which names a cache."""
    env = {name: value for name, value in os.environ.items() if name not in VARIABLES}
    script = ("import sys, jax; from parallel_experts.core import compile_cache; compile_cache.off(); "
              "compile_cache.use(sys.argv[1]); jax.jit(lambda x: 2 * x + 1)(1.0).block_until_ready()")
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path / "xla")], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert not (tmp_path / "xla").exists() or not any((tmp_path / "xla").iterdir())


def test_off_holds_after_the_process_has_compiled_through_the_cache(tmp_path):
    """As the GPU check's sections and the benchmarks are: their modules compile while they are imported, and JAX
    keeps its first decision to use the cache; a second check read every update from it (0.2 s compiles)."""
    env = {name: value for name, value in os.environ.items() if name not in VARIABLES}
    script = ("import sys, pathlib, jax; from parallel_experts.core import compile_cache; "
              "compile_cache.use(sys.argv[1]); jax.jit(lambda x: 2 * x + 1)(1.0).block_until_ready(); "
              "entries = lambda: len(list(pathlib.Path(sys.argv[1]).glob('*-cache'))); before = entries(); "
              "compile_cache.off(); jax.jit(lambda x: 3 * x - 1)(1.0).block_until_ready(); print(before, entries())")
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path / "xla")], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    before, after = map(int, run.stdout.split())
    assert before >= 1 and after == before  # the program compiled after `off` was neither read nor written


def test_a_second_process_loads_every_training_program_from_the_cache(tmp_path):
    cache = tmp_path / "xla"
    config = config_with(tmp_path, f"compile_cache: {cache}\n")
    # The session's cache (tests/conftest.py) would win over the config's: the processes get none.
    env = {name: value for name, value in os.environ.items() if name not in VARIABLES}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(REPO / "tests")])

    def train(run_dir: str) -> dict:
        done = subprocess.run([sys.executable, "-c", TRAIN, *config, str(tmp_path / run_dir)], env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.splitlines()[-1])

    first = train("first")
    entries = list(cache.glob("*-cache"))
    requests = first["events"]["/jax/compilation_cache/compile_requests_use_cache"]
    assert requests > 0 and first["events"]["/jax/compilation_cache/cache_misses"] == len(entries) > 0
    assert any(entry.name.startswith("jit__update-") for entry in entries)  # the optimiser step itself

    second = train("second")
    assert second["events"].get("/jax/compilation_cache/cache_misses", 0) == 0  # nothing compiled, nothing written
    assert second["events"]["/jax/compilation_cache/cache_hits"] == requests
    assert sorted(cache.glob("*-cache")) == sorted(entries)
    assert second["loss"] == first["loss"]


def test_the_benchmarks_compile_without_the_cache_whatever_the_caller_set(monkeypatch):
    """sokoban-bench and Tables 5 and 6 time compiling itself: a warm cache would make it a read."""
    monkeypatch.setenv(compile_cache.CACHE_DIR, "/tmp/a-cache-the-caller-chose")
    monkeypatch.delenv("JAX_ENABLE_COMPILATION_CACHE", raising=False)
    compile_cache.off()
    seen = subprocess.run([sys.executable, "-c", "import jax; print(jax.config.jax_enable_compilation_cache)"],
                          capture_output=True, text=True, check=True, env=os.environ.copy()).stdout.strip()
    assert seen == "False"
