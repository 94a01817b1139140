"""The package stands on its own: a wheel built from the sources, installed away from the checkout, validates
the shipped configs (schema and reference tables travel as package data)."""

import os
import shutil
import subprocess
import sys
import sysconfig
import venv

import pytest
from helpers import REPO

SHIPPED = ["config/config.yaml", "config/paper.yaml", "config/smoke.yaml"]
OUTSIDE = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # nothing points back at the checkout
pytestmark = pytest.mark.xdist_group("wheel")  # one worker runs them all: one wheel built (conftest.py)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh venv holding only the wheel; its dependencies come from the test's environment (no network)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                    "--quiet", "-w", str(root / "dist")], check=True)
    [wheel] = (root / "dist").glob("parallel_experts-*.whl")
    fresh = root / "venv"
    venv.create(fresh, with_pip=False)
    site = fresh / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(site),
                    str(wheel)], check=True)
    # A plain path line: the dependencies are importable, but not the checkout's editable install.
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return fresh / "bin" / "python", root


def test_the_installed_package_is_the_wheel(installed):
    python, root = installed
    where = subprocess.run([python, "-c", "import parallel_experts; print(parallel_experts.__file__)"], cwd=root,
                           env=OUTSIDE, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(root / "venv")), where


@pytest.mark.parametrize("name", SHIPPED)
def test_check_config_runs_from_the_wheel_outside_the_checkout(installed, name):
    python, root = installed
    run = subprocess.run([python, "-m", "parallel_experts", "check-config", str(REPO / name)], cwd=root,
                         env=OUTSIDE, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith(f"{REPO / name}: valid")
