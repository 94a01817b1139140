"""The Markdown every report shares: the scale banner, lists and check marks (reporting.markup), the allocation
report's headings (reporting.page)."""

import html

import pytest
from parallel_experts.reporting import markup, page


def test_scale_banner_and_lists_are_markdown():
    assert markup.scale_banner("demo", "Offline CPU demo.") == "**Scale: demo.** Offline CPU demo."
    assert markup.scale_banner("paper", "") == "**Scale: paper.** "
    assert markup.bullets(["one", "two"]) == "- one\n- two" and markup.bullets([]) == ""
    assert markup.check_mark(True) == "✓" and markup.check_mark(False) == ""


@pytest.mark.parametrize("hostile", ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>",
                                     "</p><iframe src=javascript:alert(1)>"])
def test_a_description_holding_html_is_shown_as_text_not_run(hostile):
    banner = markup.scale_banner("demo", f"Reduced {hostile} demo & more.")
    rendered = markup.markdown(banner)  # what a report makes of its Markdown output (render.safe_outputs)
    assert "<script" not in rendered and "<img" not in rendered and "<iframe" not in rendered
    assert html.unescape(rendered).count(hostile) == 1 and "&amp; more" in rendered  # shown, as the text it is


def test_allocations_heading_names_the_domain_and_the_grid():
    heading = page.allocations_heading("sokoban", "demo", 7, 1)
    assert heading == ("## Sokoban (ConvLSTM experts, per environment step)\n\n"
                       "### This configuration (demo): 7 allocations in 1 budgets")
    assert page.allocations_heading("lm", "paper", 60, 2).startswith(
        "## FineWeb language model (Transformer experts, per token)")
