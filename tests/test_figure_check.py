"""The figure check (reporting.figure_check) finds each class of defect a reader trips over, on figures built to
have exactly one, and none on a sound figure."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from parallel_experts.reporting import plots  # noqa: E402
from parallel_experts.reporting.figure_check import defects  # noqa: E402


@pytest.fixture(autouse=True)
def pages_settings():
    """As on the pages (page.begin): no mathtext, so that a `$` from a config is text."""
    with plt.rc_context({"text.parse_math": False}):
        yield
    plt.close("all")


def sound():
    fig, ax = plt.subplots(figsize=(5, 3), layout="constrained")
    ax.plot([1, 2, 3], [3, 1, 2], label="recurrent")
    ax.plot([1, 2, 3], [2, 2, 1], ls="--", label="non-recurrent")
    ax.set(xlabel="depth L", ylabel="return", title="a sound figure")
    ax.legend(fontsize=9)
    return fig, ax


def test_a_sound_figure_has_no_defect():
    assert defects(sound()[0]) == []


def test_a_log_axis_with_matplotlibs_own_labels_shows_markup_and_ours_does_not():
    fig, ax = sound()
    ax.set_xscale("log")
    ax.set_xlim(0.5, 200)
    markup = [d for d in defects(fig) if d.startswith("markup shown as text: ")]
    assert "markup shown as text: '$\\\\mathdefault{10^{1}}$'" in markup, markup  # and the raw strings collide
    plots.log_axis(ax)
    assert defects(fig) == []


def test_a_title_drawn_over_another_is_text_on_text():
    fig, ax = sound()
    fig.text(0.5, 1.03, "a figure title", transform=ax.transAxes, ha="center", va="bottom")  # where the title is
    assert defects(fig) == ["text on text: 'a sound figure' and 'a figure title'"], defects(fig)


def test_tick_labels_that_run_together_are_text_on_text():
    fig, ax = sound()
    ax.set_xticks([100000, 120000, 140000, 160000])
    ax.set_xlim(100000, 160000)
    fig.set_size_inches(1.5, 3)
    assert any(d == "text on text: '100000' and '120000'" for d in defects(fig)), defects(fig)


def test_an_axis_without_a_label_is_found_and_a_shared_label_serves_its_panels():
    fig, ax = sound()
    ax.set_xlabel("")
    assert defects(fig) == ["x axis without a label: 'a sound figure'"]
    fig, axes = plt.subplots(1, 2, sharey=True, figsize=(8, 3), layout="constrained")
    for panel in axes:
        panel.plot([1, 2], [1, 2])
        panel.set_xlabel("depth L")
    axes[0].set_ylabel("return")
    assert defects(fig) == []


def test_legend_entries_without_a_mark_named_twice_or_too_small():
    fig, ax = sound()
    ax.plot([1, 2, 3], [1, 1, 1], label="recurrent")
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(handles=[*handles, plt.Line2D([], [], ls="", label="a note")], fontsize=6)
    found = defects(fig)
    assert "legend entry named twice: 'recurrent'" in found
    assert "legend entry with no visible mark: 'a note'" in found
    assert "legend text under 8 points (6.0): 'non-recurrent'" in found
