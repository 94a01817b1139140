"""The library's layers (README, "Layout"): the import contracts in pyproject.toml hold, they catch a forbidden
import, and the layers that only read results load no JAX when imported."""

import shutil
import subprocess
import sys
from pathlib import Path

from helpers import REPO

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """import-linter on the package under `root`/src, with `root`'s contracts."""
    return subprocess.run([str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"], cwd=root,
                          env={"PYTHONPATH": str(root / "src"), "PATH": str(LINT_IMPORTS.parent)},
                          capture_output=True, text=True, timeout=300)


def test_every_import_contract_is_kept():
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_forbidden_import_breaks_its_contract(tmp_path):
    """JAX reaching analysis through a domain module, and the results layer importing a domain: both refused."""
    shutil.copytree(REPO / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    comparison = tmp_path / "src/parallel_experts/analysis/comparison.py"
    comparison.write_text(comparison.read_text() + "\nfrom parallel_experts.sokoban import agent  # noqa\n")
    paths = tmp_path / "src/parallel_experts/results/paths.py"
    paths.write_text(paths.read_text() + "\nfrom parallel_experts.lm import experiment  # noqa\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "parallel_experts.analysis is not allowed to import jax" in result.stdout
    assert "parallel_experts.analysis.comparison -> parallel_experts.sokoban.agent" in result.stdout
    assert "parallel_experts.results is not allowed to import parallel_experts.lm" in result.stdout


def test_the_layers_that_read_results_load_no_jax():
    """What the report, index and plan jobs import when they start: the CLI, every analysis, target registry,
    reporting and planning module, and the study (the plan loads JAX only when it counts FLOPs, through the domains'
    `flops`)."""
    code = ("import importlib, pkgutil, sys\n"
            "import parallel_experts.cli, parallel_experts.study\n"
            "for layer in ('analysis', 'targets', 'reporting', 'planning', 'results', 'config'):\n"
            "    package = importlib.import_module(f'parallel_experts.{layer}')\n"
            "    for module in pkgutil.iter_modules(package.__path__, f'parallel_experts.{layer}.'):\n"
            "        importlib.import_module(module.name)\n"
            "heavy = sorted({name.split('.')[0] for name in sys.modules} & {'jax', 'jaxlib', 'equinox', 'optax', 'jumanji'})\n"
            "print(' '.join(heavy) or 'none')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "none"
