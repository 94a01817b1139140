"""Report rendering: papermill parameters reach the notebook, the HTML hides code and needs no network."""

import json

import nbformat
import pytest
from helpers import REPO

from parallel_experts.config import files
from parallel_experts.config.errors import PipelineError
from parallel_experts.reporting import render as reports
from parallel_experts.study import Study


def test_offline_removes_every_script_and_refuses_remote_images_but_not_links():
    page = ('<head><script src="https://cdn.example/require.js"></script><script type="module">x()</script>'
            '</head><body><img src="data:image/png;base64,AAAA"><a href="https://arxiv.org/abs/2609.12531">paper</a>'
            '</body>')
    cleaned = reports.offline(page)
    assert "cdn.example" not in cleaned and "<script" not in cleaned and "x()" not in cleaned
    assert '<a href="https://arxiv.org/abs/2609.12531">' in cleaned  # a link loads nothing
    for remote in ('<img src="https://example.org/plot.png">', '<link rel="stylesheet" href="http://x.org/a.css">'):
        with pytest.raises(PipelineError, match="remote resources"):
            reports.offline(remote)


def test_render_executes_with_parameters_and_hides_code(tmp_path):
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# A tiny report"),
        nbformat.v4.new_code_cell('answer = 0', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(
            "import matplotlib.pyplot as plt\n"
            "fig, ax = plt.subplots(); ax.plot([0, 1], [0, answer]); plt.show()\n"
            "print('the answer is', answer * 2)  # SECRET-CODE-MARKER"),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    source = tmp_path / "tiny.ipynb"
    nbformat.write(notebook, source)
    out = tmp_path / "out"
    reports.render(source, out / "allocations.html", out / "allocations.ipynb", out / "allocations.json",
                   parameters={"answer": 21}, provenance={"scale": "test", "config_files": ["c.yaml"],
                                                          "config_digest": "abc", "paper": "Fig. 0"})
    page = (out / "allocations.html").read_text()
    assert "the answer is 42" in page  # the parameter reached the kernel
    assert "SECRET-CODE-MARKER" not in page  # no code cells
    assert "data:image/png;base64," in page  # the figure is embedded
    meta = json.loads((out / "allocations.json").read_text())
    assert meta["title"] == "A tiny report" and meta["paper"] == "Fig. 0"

    # The index lists every paper item: the one rendered report, and each missing one with the reason.
    demo = files.load([REPO / "config" / "config.yaml"])
    reports.write_index([out / "allocations.json"], out / "index.html", Study.of(demo))
    index = (out / "index.html").read_text()
    assert 'href="allocations.html"' in index and "c.yaml" in index and meta["rendered"] in index
    assert "missing: reports/claims.html was not rendered" in index  # in the catalogue, not rendered
    assert "missing: it needs a ConvLSTM sweep at a budget named medium in the config" in index  # Fig. 16
    assert index.index("The paper&#x27;s claims") < index.index("Sec. 4, App. J") < index.index("Fig. 16")


def test_every_figure_a_page_shows_is_checked_and_its_defects_reach_the_sidecar_and_the_log(tmp_path, capsys):
    """page.begin watches the figures (reporting.figure_check): a log axis with matplotlib's own labels and no axis
    labels is found, the sound figure after it is not, and the page is written all the same."""
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Two figures"),
        nbformat.v4.new_code_cell(
            "import matplotlib.pyplot as plt\n"
            "from IPython.display import display\n"
            "from parallel_experts.reporting import page\n"
            "page.begin('test', 'a page')\n"
            "fig, ax = plt.subplots(); ax.plot([1, 100], [1, 2]); ax.set_xscale('log'); fig.suptitle('raw')\n"
            "display(fig)\n"
            "fig, ax = plt.subplots(); ax.plot([1, 2], [1, 2]); ax.set(xlabel='depth L', ylabel='return')\n"
            "display(fig); plt.close('all')"),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(notebook, tmp_path / "figures.ipynb")
    out = tmp_path / "out"
    reports.render(tmp_path / "figures.ipynb", out / "figures.html", out / "figures.executed.ipynb",
                   out / "figures.json", parameters={}, provenance={})
    found = json.loads((out / "figures.json").read_text())["figure_defects"]
    assert [(figure["figure"], figure["title"]) for figure in found] == [(1, "raw")]
    assert "markup shown as text: '$\\\\mathdefault{10^{0}}$'" in found[0]["defects"]
    assert {"x axis without a label: 'an axes'", "y axis without a label: 'an axes'"} <= set(found[0]["defects"])
    assert f"{out / 'figures.html'}: figure 1 'raw': markup shown as text" in capsys.readouterr().err
    assert (out / "figures.html").exists()
