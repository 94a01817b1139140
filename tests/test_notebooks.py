"""The report notebooks stay thin: a notebook loads, calls the library and shows (DESIGN, "Data flows one way"),
so that the logic it shows is in the library, where it is tested."""

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


def test_there_are_notebooks_to_check():
    assert len(NOTEBOOKS) > 10
