"""Nothing outside the project is read or written unless a config names it on purpose (config/locations.py): path
keys resolve inside the working directory or a folder of `external`, symbolic links followed; a run reads its
checkpoint only from inside its folder; a config file may have any name, braces included."""

import copy
import re
import shutil
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from helpers import REPO, snakemake

from parallel_experts import study
from parallel_experts.config import files
from parallel_experts.config.errors import ConfigError
from parallel_experts.core import checkpoint
from parallel_experts.core.run_folder import CheckpointError

SMOKE = REPO / "config/smoke.yaml"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A working directory with a sibling whose name extends it (`project-evil`), a data folder beside it and a
    link inside it that leads out."""
    root = tmp_path / "project"
    for folder in (root, tmp_path / "project-evil", tmp_path / "data"):
        folder.mkdir()
    (root / "link").symlink_to(tmp_path / "data")
    monkeypatch.chdir(root)
    return tmp_path


def with_path(key: str, value, external=None) -> dict:
    config = copy.deepcopy(files.load([SMOKE]))
    *parents, name = key.split(".")
    block = config
    for parent in parents:
        block = block.setdefault(parent, {})
    if key.startswith("lm.corpus"):
        config["lm"]["corpus"] = {"files": ["corpus.txt"]}
        block = config["lm"]["corpus"]
    block[name] = value
    if external is not None:
        config["external"] = external
    return config


OUTSIDE = {  # key, value ({tmp}: the folder that holds the project), the key path the message names
    "cache up and out": ("sokoban.boxoban.cache", "../../x", "sokoban.boxoban.cache"),
    "system file as corpus": ("lm.corpus.files", ["corpus.txt", "/etc/passwd"], "lm.corpus.files[1]"),
    "absolute compile cache": ("compile_cache", "{tmp}/data/xla", "compile_cache"),
    "a sibling that shares the prefix": ("lm.corpus.cache_dir", "{tmp}/project-evil/cache", "lm.corpus.cache_dir"),
    "a link inside that leads out": ("sokoban.boxoban.root", "link", "sokoban.boxoban.root"),
    "a link's subfolder": ("compile_cache", "link/xla", "compile_cache"),
}
INSIDE = {  # key, value, external
    "relative": ("sokoban.boxoban.cache", "results/boxoban", None),
    "absolute, in the project": ("compile_cache", "{tmp}/project/results/xla", None),
    "named external": ("sokoban.boxoban.root", "{tmp}/data", ["{tmp}/data"]),
    "a link to a named external": ("sokoban.boxoban.root", "link", ["../data"]),
    "below a named external": ("lm.corpus.files", ["{tmp}/data/a.txt", "b.txt"], ["{tmp}/data"]),
}


def fill(value, tmp):
    return [fill(item, tmp) for item in value] if isinstance(value, list) else value.format(tmp=tmp)


@pytest.mark.parametrize("case", OUTSIDE)
def test_a_path_key_that_leads_outside_the_project_is_refused_naming_the_key(project, case):
    key, value, named = OUTSIDE[case]
    with pytest.raises(ConfigError) as error:
        study.check(with_path(key, fill(value, project)))
    message = str(error.value)
    assert message.startswith(f"{named}: ") and "outside the project" in message and "`external`" in message
    assert str((project / "project").resolve()) in message


@pytest.mark.parametrize("case", INSIDE)
def test_a_path_inside_the_project_or_a_named_external_folder_is_accepted(project, case):
    key, value, external = INSIDE[case]
    study.check(with_path(key, fill(value, project), external and fill(external, project)))


@pytest.mark.parametrize("key, value, external, named", [
    ("compile_cache", "results/a\0b", None, "compile_cache"),
    ("lm.corpus.files", ["a.txt", "b\0.txt"], None, "lm.corpus.files[1]"),
    ("compile_cache", "results/xla", ["data\0"], "external[0]"),
])
def test_a_path_with_a_nul_byte_is_refused_naming_the_key(project, key, value, external, named):
    with pytest.raises(ConfigError, match=rf"^{re.escape(named)}: .* holds a NUL byte"):
        study.check(with_path(key, value, external))


def test_the_cli_refuses_a_path_outside_in_one_line(tmp_path):
    config = tmp_path / "outside.yaml"
    shutil.copy(SMOKE, config)
    with config.open("a") as file:
        file.write("compile_cache: /tmp/elsewhere\n")
    run = subprocess.run([sys.executable, "-m", "parallel_experts", "check-config", str(config)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr, run.stderr
    assert str(config) in run.stderr and 'compile_cache: "/tmp/elsewhere"' in run.stderr


TREE = {"w": jnp.arange(6.0).reshape(2, 3)}


def test_a_checkpoint_is_read_only_from_inside_its_run_folder(tmp_path):
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    run.mkdir(), elsewhere.mkdir()
    checkpoint.save_checkpoint(run, TREE, {"update": 4})
    checkpoint.save_weights(run / "weights.eqx", TREE)
    for name in ("checkpoint-000000004.eqx", "weights.eqx"):  # each swapped for a link to a copy elsewhere
        (run / name).rename(elsewhere / name)
        (run / name).symlink_to(elsewhere / name)
    with pytest.raises(CheckpointError, match=r"checkpoint-000000004\.eqx: a link to .*elsewhere.*outside its run"):
        checkpoint.load_checkpoint(run, TREE)
    with pytest.raises(CheckpointError, match=r"weights\.eqx: a link to .*elsewhere.*outside its run folder"):
        checkpoint.load_weights(run / "weights.eqx", TREE, "the model")
    (run / "latest").unlink()
    (run / "latest").symlink_to(elsewhere / "latest")
    with pytest.raises(CheckpointError, match="latest: a link to"):
        checkpoint.load_checkpoint(run, TREE)


def test_a_run_folder_that_is_itself_a_link_still_reads_its_own_files(tmp_path):
    """A results folder on scratch space, linked into the project: the files resolve inside the folder's target."""
    (tmp_path / "scratch").mkdir()
    (tmp_path / "run").symlink_to(tmp_path / "scratch")
    checkpoint.save_checkpoint(tmp_path / "run", TREE, {"update": 2})
    carry, host = checkpoint.load_checkpoint(tmp_path / "run", TREE)
    np.testing.assert_array_equal(carry["w"], TREE["w"])
    assert host["update"] == 2


def test_a_config_file_name_with_braces_reaches_the_jobs_unchanged(tmp_path):
    """Snakemake formats string params with the wildcards: `{report}` in a config file's name would become each
    report's name, and an unknown `{x}` a WildcardError, in the name the report records."""
    config = tmp_path / "c_{report}{x}.yaml"
    shutil.copy(SMOKE, config)
    run = snakemake("-n", "-p", "reports/claims.html", "--configfile", str(config), "--directory", str(tmp_path))
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"--config-files '{config}'" in run.stdout, run.stdout[-3000:]


# Every place under results/ that a job writes through, as a link out of the project: (what is linked, relative to
# the project, and the write that goes through it). Each is refused in one line and writes nothing outside.
def _curves(run):
    from parallel_experts.core.tensorboard import TrainingCurves
    TrainingCurves(run, "env_steps", 1, seeds=[0])


def _attempt(run):
    from parallel_experts.core import walltime
    walltime.begin(run, 0, walltime.Deadline(100.0))


def _lock(run):
    from parallel_experts.core.run_folder import run_lock
    with run_lock(run, {"run": "x"}):
        pass


def _result(run):
    from parallel_experts.core import atomic
    atomic.write_text(run / "eval.json", "{}")


def _snapshot(_run):
    from parallel_experts.results import snapshot
    snapshot.claim(files.load([SMOKE]), "results/config.json", ["smoke.yaml"])


def _cache(_run):
    study.load([str(SMOKE)])


RUN = "results/sokoban/runs/r"
LINKS = [  # (linked path, a file or a folder outside, the write)
    ("results/xla-cache", "folder", _cache),  # the compile cache, JAX's writes
    (f"{RUN}/seed0", "folder", _curves),  # a seed's TensorBoard run
    (RUN, "folder", _curves),  # the run folder itself: its TensorBoard file
    (RUN, "folder", _lock),
    (f"{RUN}/.lock", "file", _lock),  # the lock, overwritten when followed
    (f"{RUN}/attempts.jsonl", "file", _attempt),  # appended to when followed
    ("results/sokoban", "folder", _result),  # a folder above a result
    (f"{RUN}/eval.json", "file", _result),
    ("results/config.lock", "file", _snapshot),  # the workflows' lock
    ("results", "folder", _snapshot),  # results/ itself, not listed in `external`
]


@pytest.mark.parametrize("linked, kind, write", LINKS, ids=lambda case: getattr(case, "__name__", case))
def test_nothing_is_written_outside_the_project_through_a_link(project, linked, kind, write):
    from parallel_experts.config import locations
    from parallel_experts.config.errors import PipelineError

    locations.allow({})
    outside = project / "data" / "target"
    if kind == "folder":
        outside.mkdir()
    else:
        outside.write_text("someone else's file\n")
    before = sorted(p.name for p in (project / "data").rglob("*"))
    link = project / "project" / linked
    (project / "project" / RUN).mkdir(parents=True, exist_ok=True)
    if link.is_dir() and not link.is_symlink():
        shutil.rmtree(link)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside)
    with pytest.raises(PipelineError) as refused:
        write(project / "project" / RUN)
    message = str(refused.value)
    assert "\n" not in message and ("link" in message), message
    assert sorted(p.name for p in (project / "data").rglob("*")) == before  # nothing new outside
    if kind == "file":
        assert outside.read_text() == "someone else's file\n"  # nor changed


def test_a_results_folder_listed_in_external_is_written_through_its_link(project):
    """results/ on scratch space, linked into the project and listed in `external`: writes go through."""
    from parallel_experts.config import locations
    from parallel_experts.core import atomic

    (project / "project" / "results").symlink_to(project / "data")
    locations.allow({"external": [str(project / "data")]})
    try:
        atomic.write_text("results/x.json", "{}")
    finally:
        locations.allow({})
    assert (project / "data" / "x.json").read_text() == "{}"
