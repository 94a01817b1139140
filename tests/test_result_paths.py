"""results/paths.py is the only code that knows where results live: no other module, rule, script or notebook of
src/ and workflow/ writes a path under results/ of its own (prose in docstrings and comments may name one)."""

import io
import json
import re
import tokenize

from helpers import REPO

PATHS = REPO / "src/parallel_experts/results/paths.py"
# A string literal that is a path under results/ (or results itself): its text, after any prefix and quotes.
RESULTS_PATH = re.compile(r"""^[rRbBuUfF]*("{3}|'{3}|"|')results(/|\1)""")


def python_literals(source: str) -> list[str]:
    """The string literals of Python (or Snakemake) source that are paths under results/."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [token.string for token in tokens if token.type == tokenize.STRING and RESULTS_PATH.match(token.string)]


def code_files():
    yield from (path for path in (REPO / "src").rglob("*.py") if path != PATHS)
    yield from (REPO / "workflow").rglob("*.py")
    yield from (REPO / "workflow").rglob("*.smk")
    yield REPO / "Snakefile"


def notebook_code(path) -> str:
    """A notebook's code cells, its `parameters` cell included: papermill passes every path (targets.catalogue, from
    results/paths.py), so the defaults there are empty."""
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")


def test_only_results_paths_writes_a_results_path():
    found = {}
    for path in code_files():
        found[path] = python_literals(path.read_text())
    for path in (REPO / "workflow/notebooks").glob("*.ipynb"):
        found[path] = python_literals(notebook_code(path))
    for path in (REPO / "workflow").rglob("*.sh"):
        found[path] = [line for line in path.read_text().splitlines()
                       if "results/" in line and not line.lstrip().startswith("#")]
    found = {str(path.relative_to(REPO)): literals for path, literals in found.items() if literals}
    assert not found, f"paths under results/ outside results/paths.py: {found}"


def test_the_check_sees_a_results_path():
    assert python_literals('x = "results/lm/sweep.nc"\nlog = f"results/logs/{name}.log"\n') == [
        '"results/lm/sweep.nc"', 'f"results/logs/{name}.log"']
    assert python_literals('ROOT = "results"\n') == ['"results"']
    assert python_literals('"""Where results/config.json lives."""\nx = "the results/ folder"  # results/x\n') == []
