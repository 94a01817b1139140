"""The report notebooks stay thin: a notebook loads, calls the library and shows (DESIGN, "Data flows one way"),
so that the logic it shows is in the library, where it is tested."""

import ast
import builtins

import nbformat
import pytest
from helpers import REPO

MAX_CODE_LINES = 12  # per cell: past this, a cell computes something that belongs in the library
NOTEBOOKS = sorted((REPO / "workflow/notebooks").glob("*.ipynb"))


def code_lines(source: str) -> int:
    """The lines of a cell that are code: not blank, not only a comment."""
    return sum(1 for line in source.splitlines() if line.strip() and not line.strip().startswith("#"))


def test_code_lines_count_code_only():
    assert code_lines("# Parameters\nx = 1\n\n    # why\nfor y in z:  # a comment after code\n    f(y)\n") == 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_every_notebook_cell_has_at_most_twelve_code_lines(path):
    cells = nbformat.read(path, as_version=4).cells
    long = {index: code_lines(cell.source) for index, cell in enumerate(cells)
            if cell.cell_type == "code" and code_lines(cell.source) > MAX_CODE_LINES}
    assert not long, (f"{path.name}: cells (index: code lines) {long} exceed {MAX_CODE_LINES}; move their logic "
                      "into the library")


def undefined(source: str) -> set[str]:
    """The names `source` reads that it never binds (an assignment, an import, a loop, an argument) and that are no
    builtins: what a run would stop on with a NameError."""
    bound, read = set(dir(builtins)), set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return read - bound


def test_undefined_finds_a_name_never_bound():
    assert undefined("from a import b\nx = b(y)\n[z for z in x]\nf = lambda w: w + v") == {"y", "v"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_every_name_a_notebook_reads_is_bound_in_it(path):
    """Checked without running it (the smoke DAG runs every notebook, minutes later): a name a notebook uses but never
    binds, as a renamed variable leaves behind."""
    cells = nbformat.read(path, as_version=4).cells
    source = "\n".join(cell.source for cell in cells if cell.cell_type == "code")
    assert not undefined(source), f"{path.name}: reads {sorted(undefined(source))}, which it never binds"


def test_there_are_notebooks_to_check():
    assert len(NOTEBOOKS) > 10
