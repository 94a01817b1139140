"""The report text both domains share, and which of the authors' allocations a config also runs."""

import html

import pandas as pd
import pytest
from nbconvert.filters.markdown_mistune import markdown2html_mistune

from parallel_experts.analysis import comparison


def test_scale_banner_and_lists_are_markdown():
    assert comparison.scale_banner("demo", "Offline CPU demo.") == "**Scale: demo.** Offline CPU demo."
    assert comparison.scale_banner("paper", "") == "**Scale: paper.** "
    assert comparison.bullets(["one", "two"]) == "- one\n- two" and comparison.bullets([]) == ""
    assert comparison.check_mark(True) == "✓" and comparison.check_mark(False) == ""


@pytest.mark.parametrize("hostile", ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>",
                                     "</p><iframe src=javascript:alert(1)>"])
def test_a_description_holding_html_is_shown_as_text_not_run(hostile):
    banner = comparison.scale_banner("demo", f"Reduced {hostile} demo & more.")
    page = markdown2html_mistune(banner)  # what nbconvert makes of the report's Markdown output
    assert "<script" not in page and "<img" not in page and "<iframe" not in page
    assert html.unescape(page).count(hostile) == 1 and "&amp; more" in page  # shown, as the text it is


def test_in_this_config_matches_budget_and_allocation():
    ours = pd.DataFrame({"budget": ["small", "small"], "depth": [1, 2], "experts": [4, 2], "width": [64, 64],
                         "q_heads": [4, 4]})
    paper = pd.DataFrame({"budget": ["small", "small", "medium"], "depth": [1, 2, 1], "experts": [4, 1, 4],
                          "width": [64, 64, 64], "q_heads": [8, 8, 8]})
    # the heads do not count: our config may split the same width into other heads
    assert comparison.in_this_config(paper, ours).tolist() == [True, False, False]


def test_allocations_heading_names_the_domain_and_the_grid():
    heading = comparison.allocations_heading("sokoban", "demo", 7, 1)
    assert heading == ("## Sokoban (ConvLSTM experts, per environment step)\n\n"
                       "### This configuration (demo): 7 allocations in 1 budgets")
    assert comparison.allocations_heading("lm", "paper", 60, 2).startswith(
        "## FineWeb language model (Transformer experts, per token)")


def test_budget_differences_check_the_window_only_where_the_domain_has_one():
    config = {"sokoban": {"encoder_channels": 32, "budgets": {
        "small": {"anchor": [1, 1, 128], "tolerance": 0.1, "allocations": [[1, 1, 128]]}}}}
    assert comparison.budget_differences(config, "sokoban", "small") == []
    assert comparison.budget_differences(config, "sokoban", "small", window=64) == []  # Sokoban has no window
    assert comparison.budget_differences(config, "sokoban", "tiny") == ["the paper has no 'tiny' budget"]
    assert comparison.budget_differences(config, "sokoban", "medium") == [
        "this config's medium budget is anchored at nothing, the paper's at L1 E1 d256"]
    assert comparison.anchor(config, "sokoban", "small") == comparison.paper_anchor("sokoban", "small")
