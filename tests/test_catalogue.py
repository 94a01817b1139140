"""The report catalogue: which pages a config defines, their targets, and that every notebook takes the
parameters the catalogue passes it."""

import ast
import copy
import re

import nbformat
import pytest
from helpers import REPO

from parallel_experts import study
from parallel_experts.config import files
from parallel_experts.targets import catalogue, items
from parallel_experts.study import Study


def load(name):
    return files.load([REPO / "config" / name])


def notebook_parameters(notebook: str) -> set[str]:
    """The names the `parameters` cell of a notebook assigns (what papermill may replace)."""
    source = nbformat.read(REPO / "workflow/notebooks" / f"{notebook}.ipynb", as_version=4)
    [cell] = [c for c in source.cells if "parameters" in c.metadata.get("tags", [])]
    return {target.id for node in ast.parse(cell.source).body if isinstance(node, ast.Assign)
            for target in node.targets}


def test_demo_reports_and_targets():
    reports = catalogue.reports(Study.of(load("config.yaml")))
    assert [r.name for r in reports] == ["claims", "plan", "power", "allocations", "sokoban_convlstm_small", "sokoban_depth", "sokoban_tables",
                                         "sokoban_table2", "sokoban_probe_recall", "sokoban_probe_depth",
                                         "sokoban_plans", "sokoban_aggregation", "sokoban_radius", "lm_small_W64",
                                         "lm_depth", "lm_ablations", "expert_count", "lm_latency",
                                         "lm_throughput"]
    assert catalogue.targets(reports) == {
        "claims": ["claims"], "plan": ["plan"], "power": ["power"], "allocations": ["allocations"], "fig2": ["sokoban_convlstm_small"], "fig3_left": ["sokoban_depth"],
        "tables_1_7": ["sokoban_tables"], "table2": ["sokoban_table2"], "fig4": ["sokoban_probe_recall"],
        "fig12": ["sokoban_probe_depth"], "fig13": ["sokoban_plans"], "fig10_left": ["sokoban_aggregation"],
        "fig11": ["sokoban_radius"], "fig5": ["lm_small_W64"], "fig3_right": ["lm_depth"], "fig6": ["expert_count"],
        "fig10_right": ["lm_ablations"], "table5": ["lm_latency"], "table6": ["lm_throughput"]}
    systems = {r.name: r for r in reports if r.target in ("table5", "table6")}
    assert systems["lm_latency"].inputs == {"latency": "results/lm/latency.nc"}
    assert systems["lm_throughput"].notebook == "lm_throughput"
    without = load("config.yaml")
    del without["lm"]["latency"], without["lm"]["throughput"]
    assert not {"table5", "table6"} & set(catalogue.targets(catalogue.reports(Study.of(without))))
    sweep = next(r for r in reports if r.name == "sokoban_convlstm_small")
    assert sweep.params == {"sweep_name": "convlstm", "budget": "small"} and sweep.notebook == "sokoban_sweep"
    with_convglu = load("config.yaml")
    with_convglu["sokoban"]["sweeps"]["convglu"] = {"expert": "convglu", "recurrent": [True], "budgets": ["small"]}
    convglu = next(r for r in catalogue.reports(Study.of(with_convglu)) if r.name == "sokoban_convglu_small")
    assert convglu.target == "fig19" and convglu.params == {"sweep_name": "convglu", "budget": "small"}


def test_paper_scale_has_every_figure_target():
    targets = catalogue.targets(catalogue.reports(Study.of(load("paper.yaml"))))
    assert targets["fig5"] == ["lm_small_W128"]
    assert targets["fig14_15"] == ["lm_small_W1024", "lm_medium_W128", "lm_medium_W1024"]
    assert {"fig2", "fig16", "fig17", "fig18", "fig19", "fig20", "fig3_left",
            "tables_1_7", "fig3_right", "allocations", "fig6", "table2", "fig10_left", "fig11",
            "fig10_right", "table5", "table6"} <= set(targets)


def test_app_k_is_the_convglu_expert_counts_and_its_small_and_medium_sweeps():
    """Fig. 18: the expert-count page of the ConvGLU sweep's runs alone; Figs. 19 and 20: its small and medium
    sweeps. The paper has no large ConvGLU sweep: one added by config has a page and no target."""
    paper = load("paper.yaml")
    reports = {r.name: r for r in catalogue.reports(Study.of(paper))}
    fig18 = reports["expert_count_convglu"]
    assert (fig18.target, fig18.notebook) == ("fig18", "expert_count")
    assert fig18.inputs == catalogue.SOKOBAN_SWEEP and fig18.params == {"sweep_name": "convglu"}
    assert (reports["sokoban_convglu_small"].target, reports["sokoban_convglu_medium"].target) == ("fig19", "fig20")
    assert "sokoban_convglu_large" not in reports and reports["expert_count"].target == "fig6"
    paper["sokoban"]["sweeps"]["convglu"]["budgets"].append("large")
    large = {r.name: r for r in catalogue.reports(Study.of(paper))}["sokoban_convglu_large"]
    assert large.target is None and large.paper == "Sokoban allocation sweep: convglu, large budget"
    runs = {run.sweep: run for run in Study.of(paper).sokoban.sweeps}
    assert catalogue.shows(fig18, runs["convglu"], {}) and not catalogue.shows(fig18, runs["convlstm"], {})


def test_fig18_needs_a_convglu_family_with_two_expert_counts():
    demo = load("config.yaml")
    demo["sokoban"]["sweeps"]["convglu"] = {"expert": "convglu", "recurrent": [True], "budgets": ["small"]}
    # the small grid alone holds no (L, d) family
    assert "fig18" not in catalogue.targets(catalogue.reports(Study.of(demo)))
    small = demo["sokoban"]["budgets"]["small"]
    small["tolerance"], small["family_allocations"] = 0.5, {"recurrent": [[1, 2, 8]]}  # half the work of L1 E4 d8
    study.check(demo)
    assert catalogue.targets(catalogue.reports(Study.of(demo)))["fig18"] == ["expert_count_convglu"]


def test_only_the_first_sweep_of_an_expert_and_budget_is_the_figure():
    demo = load("config.yaml")
    second = copy.deepcopy(demo)
    sweeps = second["sokoban"]["sweeps"]
    sweeps["convlstm_mean"] = sweeps["convlstm"] | {"aggregation": "mean"}
    study.check(second)
    reports = {r.name: r for r in catalogue.reports(Study.of(second))}
    assert reports["sokoban_convlstm_small"].target == "fig2"
    assert reports["sokoban_convlstm_mean_small"].target is None
    assert reports["sokoban_convlstm_mean_small"].paper == "Fig. 2 Sokoban allocation sweep: convlstm_mean, small budget"


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml", "smoke.yaml"])
def test_every_notebook_exists_and_takes_the_parameters_it_is_given(name):
    for report in catalogue.reports(Study.of(load(name))):
        expected = set(report.inputs) | set(report.params) | {"config_path", "scale", "description"}
        assert expected <= notebook_parameters(report.notebook), report.name


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml", "smoke.yaml"])
def test_sweep_reports_are_exactly_the_settings_that_have_runs(name):

    cfg = load(name)
    reports = catalogue.reports(Study.of(cfg))
    lm_pages = {(r.params["budget"], r.params["window"]) for r in reports if r.notebook == "lm_sweep"}
    assert lm_pages == {(run.budget, run.window) for run in Study.of(cfg).lm.sweeps}
    sokoban_pages = {(r.params["sweep_name"], r.params["budget"]) for r in reports if r.notebook == "sokoban_sweep"}
    assert sokoban_pages == {(run.sweep, run.budget) for run in Study.of(cfg).sokoban.sweeps}


def test_probe_reports_exist_exactly_where_the_config_probes():
    smoke = load("smoke.yaml")
    reports = {r.name: r for r in catalogue.reports(Study.of(smoke))}
    probes = smoke["sokoban"]["probes"]
    assert reports["sokoban_probe_recall"].target == "fig4"
    assert reports["sokoban_probe_recall"].params == {"compare": ",".join(probes["compare"])}
    assert reports["sokoban_probe_depth"].target == "fig12"
    assert reports["sokoban_plans"].params == {"run": probes["picture"]["run"]}
    fewer = copy.deepcopy(smoke)
    del fewer["sokoban"]["probes"]["compare"], fewer["sokoban"]["probes"]["picture"]
    probed = [r.name for r in catalogue.reports(Study.of(fewer)) if r.inputs == catalogue.SOKOBAN_PROBES]
    assert probed == ["sokoban_probe_depth"]
    del fewer["sokoban"]["probes"]
    assert not [r for r in catalogue.reports(Study.of(fewer)) if r.inputs == catalogue.SOKOBAN_PROBES]


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml", "smoke.yaml"])
def test_the_index_lists_every_paper_item_and_every_report_once(name):
    cfg = load(name)
    index = catalogue.index_items(Study.of(cfg))
    assert [item.target for item, _ in index[:len(items.ITEMS)]] == [i.target for i in items.ITEMS]
    listed = [report.name for _, found in index for report in found]
    assert sorted(listed) == sorted(r.name for r in catalogue.reports(Study.of(cfg)))  # no report lost, none twice
    missing = {item.target for item, found in index if not found}
    if name == "paper.yaml":
        assert missing == set()  # the paper config has every figure and table
    if name == "config.yaml":
        assert missing == {"fig14_15", "fig16", "fig17", "fig18", "fig19", "fig20"}


def readme_targets() -> set[str]:
    """The named targets of the README's table "What the pipeline reproduces" (its second column), with
    `a_{x,y}` spelled out."""
    text = (REPO / "README.md").read_text()
    table = text[text.index("## What the pipeline reproduces"):].split("\n\n")[1]
    found = set()
    for row in table.splitlines()[2:]:
        for name in re.findall(r"`([^`]+)`", row.split("|")[2]):
            braces = re.fullmatch(r"(\w*)\{([\w,]+)\}(\w*)", name)
            found |= {f"{braces[1]}{part}{braces[3]}" for part in braces[2].split(",")} if braces else {name}
    return found


def test_the_readme_lists_every_paper_item_of_the_catalogue_and_every_notebook_has_a_caption():
    assert {item.target for item in items.ITEMS} <= readme_targets()
    notebooks = {path.stem for path in (REPO / "workflow/notebooks").glob("*.ipynb")}
    assert notebooks == set(items.CAPTIONS)
    for config in ("config.yaml", "paper.yaml", "smoke.yaml"):
        assert all(report.caption for report in catalogue.reports(Study.of(files.load([REPO / "config" / config]))))
