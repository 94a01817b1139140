import atexit
import fcntl
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import REPO
from slurm_cluster import LocalSlurmCluster, slurm_available

# One XLA compilation cache for the whole session, in this process and every CLI, Snakemake job and subprocess it
# starts: the kill tests, the smoke DAG and the unit tests compile many of the same programs, and a program
# compiled once is loaded from disk after that. Set before anything imports JAX; a cache the caller chose is kept.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="parallel-experts-xla-")
    atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)
CACHE_ON = "JAX_ENABLE_COMPILATION_CACHE"  # set to false by core/compile_cache.off (see below)

# The tests compile hundreds of programs and run each for milliseconds on tiny shapes, so LLVM's optimisation of the
# code XLA emits is most of their time: without it (`--xla_backend_optimization_level=0`, inherited by every process
# the tests start) XLA compiles in half the time, and two Sokoban training tests took 41 s instead of 61 s. It changes
# how fast the code runs, not what it computes; the demo and the paper keep XLA's default, as their programs run for
# minutes (a demo Sokoban run took 3 times as long without it). Flags the caller set are kept.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")


# The longest tests, with their seconds in a full run on a 2-core machine like CI's (rounded; `--durations`): each part
# of the order below starts longest first, so that neither worker is left running a long test alone at the end. A
# test missing here only starts later in its part; a renamed one is simply not moved up.
LONG = {
    "test_pipeline.py::test_smoke_dag_runs_locally_and_is_idempotent": 522,
    "test_rehearsal.py::test_the_smoke_rehearsal_compiles_every_program": 215,
    "test_gpu_check.py::test_the_check_measures_every_section": 119,
    "test_sokoban_train.py::test_seeds_in_groups_train": 140,  # both tests of the module's `four_seeds`
    "test_power.py::test_the_shipped_claim_configs_are_what_power_writes_today": 108,  # its `written` fixture
    "test_sokoban_train.py::test_rematerialised_gradients_equal_the_stored_ones": 64,
    "test_lm_train.py::test_cli_training_survives_a_kill": 34,
    "test_sokoban_train.py::test_cli_training_survives_a_kill": 31,
    "test_sokoban_train.py::test_a_rematerialised_rollout_step_keeps_only_its_inputs": 29,
    "test_lm_train.py::test_data_parallel_on_two_host_devices_matches_one_device": 28,
    "test_power.py::test_power_runs_on_the_smoke_config_and_a_rerun_reads_its_cache": 27,
    "test_lm_systems.py::test_table6_splits_each_update_over_the_bench_devices": 21,
    "test_lm_commits.py::test_two_commits_are_timed_side_by_side": 21,
    # 22 s alone; 108 s when it ran last, beside the SLURM test
    "test_compile_cache.py::test_a_second_process_loads_every_training_program_from_the_cache": 22,
}


def _expected_seconds(item) -> float:
    name = item.nodeid.split("/")[-1]
    return max((seconds for test, seconds in LONG.items() if name.startswith(test)), default=0)


def _part(item) -> tuple[int, float]:
    seconds = _expected_seconds(item)
    if item.get_closest_marker("slurm"):
        return 2, -seconds
    if item.get_closest_marker("pipeline"):
        return 0, -seconds
    return (1 if seconds else 3), -seconds


def pytest_collection_modifyitems(items):
    """Two workers share the tests (pytest-xdist, `-n 2 --dist loadgroup --no-loadscope-reorder` in pyproject.toml),
    handed out one test (or one `xdist_group`) at a time in this order: the pipelines (longest first), the other
    long tests (LONG), the SLURM tests, the rest; so that neither worker runs a long test alone at the end. The SLURM
    tests are one group (test_resubmission.py, test_slurm_cluster.py), several minutes on one worker: it runs them one
    after another, never waiting for the other's cluster (`slurm_cluster`), and starts them once the pipelines'
    busiest part is over (their training jobs must checkpoint within a one-minute time limit). Tests that share an
    expensive module fixture are a group too, so that one worker builds it once."""
    items.sort(key=_part)


def pytest_runtest_setup(item):
    """Stop a grouped test that pytest-xdist handed out alone: with pytest 9.2 its loadgroup drops every group without
    a word (pytest-dev/pytest-xdist#1386), the SLURM tests then wait minutes for each other's cluster and the shared
    fixtures are built twice."""
    grouped = item.get_closest_marker("xdist_group") and getattr(item.config.option, "loadgroup", False)
    if grouped and "@" not in item.nodeid:
        pytest.fail("pytest-xdist lost this test's xdist_group: install the dev lock's pytest "
                    "(pytest-dev/pytest-xdist#1386)", pytrace=False)


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_programs():
    """Drop each module's compiled programs when it ends. A worker runs hundreds of tests, and XLA's CPU backend
    keeps every executable it compiled until the process ends; a worker crashed in CI inside a compile after
    twenty minutes of them (jax-ml/jax#27201 reports the same accumulation). The disk cache keeps them."""
    yield
    jax = sys.modules.get("jax")  # never import JAX here: the cache directory above must be set first
    if jax is not None:
        jax.clear_caches()


@pytest.fixture(autouse=True)
def _session_compilation_cache_kept():
    """The benchmarks turn JAX's compilation cache off for their process and every process it starts
    (core/compile_cache.off, which sets JAX_ENABLE_COMPILATION_CACHE=false): test_sokoban_bench.py runs sokoban-bench
    in this process, test_compile_cache.py tests `off` itself. Left so, every later test of the worker, and each CLI,
    Snakemake job and subprocess it starts, would compile without the session's cache; so it is restored."""
    before = os.environ.get(CACHE_ON)
    yield
    if os.environ.get(CACHE_ON) != before:
        if before is None:
            del os.environ[CACHE_ON]
        else:
            os.environ[CACHE_ON] = before
    jax = sys.modules.get("jax")  # never import JAX here (see above)
    if jax is not None and before is None and not jax.config.jax_enable_compilation_cache:
        jax.config.update("jax_enable_compilation_cache", True)  # JAX's default, which `off` changed


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def slurm_cluster(tmp_path):
    """A real single-node SLURM cluster for the test (tests/slurm_cluster.py); skips where none can run."""
    reason = slurm_available()
    if reason:
        pytest.skip(reason)
    # One cluster per machine (it links /run/slurm/conf): a test on the other worker waits for this one to stop.
    with open(Path(tempfile.gettempdir()) / "parallel-experts-slurm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with LocalSlurmCluster(tmp_path / "slurm") as cluster:
            yield cluster
