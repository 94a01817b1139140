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


def test_neighbouring_tick_labels_that_touch_run_together():
    """The LM grid's depth ticks 13 and 16 read as "1316" on the allocations page (issue 43)."""
    fig, ax = plt.subplots(figsize=(3.4, 3))
    depths = [1, 2, 4, 7, 8, 13, 16, 32]
    ax.scatter(depths, [1] * len(depths))
    plots.log_axis(ax, base=2)
    ax.set_xticks(depths, [str(d) for d in depths])
    ax.set(xlabel="depth L", ylabel="work")
    found = defects(fig)
    assert "tick labels run together: '7' and '8'" in found, found
    ax.set_xticks([1, 2, 4, 8, 16, 32], ["1", "2", "4", "8", "16", "32"])
    assert defects(fig) == []


def test_a_legend_entry_for_a_family_with_no_data_or_a_style_not_drawn():
    """The expert-count figure keyed "non-recurrent" (open squares, dotted) with only recurrent families drawn, and
    "best per depth" was drawn dashed and keyed solid (issue 43)."""
    fig, ax = sound()
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(handles=[*handles, plt.Line2D([], [], marker="s", ls=":", color="0.3", label="absent family")])
    assert defects(fig) == ["legend entry keys a marker no plot draws ('s'): 'absent family'",
                            "legend entry keys a line style no plot draws (':'): 'absent family'"], defects(fig)
    ax.scatter([1, 2], [1, 2], marker="s", color="0.3")  # a scatter's square backs the marker, not the dotted line
    assert defects(fig) == ["legend entry keys a line style no plot draws (':'): 'absent family'"]


def test_bands_and_error_bars_need_a_name_and_a_keyed_error_bar_needs_a_length():
    fig, ax = sound()
    ax.fill_between([1, 2, 3], [1, 0, 1], [3, 2, 2], alpha=0.2)
    assert defects(fig) == ["a shaded band that no legend entry names: 'a sound figure'"]
    handles, _ = ax.get_legend_handles_labels()
    ax.legend(handles=[*handles, plt.Rectangle((0, 0), 1, 1, alpha=0.2, label="± 1 s.e. over seeds")])
    assert defects(fig) == []

    fig, ax = sound()
    ax.errorbar([1, 2, 3], [2, 2, 2], yerr=[0.1, 0.2, 0.1], fmt="none")
    assert defects(fig) == ["error bars that no legend entry or axis label (±) names: 'a sound figure'"]
    ax.set_ylabel("return (mean ± 1 s.e.)")
    assert defects(fig) == []

    fig, ax = sound()  # one seed: no standard error, yet the legend shows the error-bar glyph
    ax.errorbar([1, 2], [1, 2], yerr=[0, 0], marker="o", label="ours")
    ax.legend()
    assert defects(fig) == ["error bars keyed in a legend where none is drawn (no bar has a length)"]


def test_a_panel_of_flat_lines_needs_words():
    """All-zero probe recalls lay flat on the axis with no word in the plot (issue 43)."""
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot([0, 1, 2], [0, 0, 0], label="final state")
    ax.plot([0, 1, 2], [0, 0, 0], ls="--", label="control")
    ax.axhline(1, color="0.5")  # a reference line is not data
    ax.set(xlabel="step", ylabel="recall", title="C_A")
    ax.legend()
    assert defects(fig) == ["every line flat at 0 and no word in the panel: 'C_A'"]
    ax.text(1, 0.5, "recall 0 at every step: no probe reads a plan", ha="center")
    assert defects(fig) == []


def test_a_legend_over_the_data_is_found():
    """The aggregation ablation's legend sat on a rule's point."""
    fig, ax = sound()
    ax.scatter([2.9], [2.9], color="C0")  # a point of the family keyed "recurrent"
    ax.legend(loc="upper right", fontsize=9)
    assert defects(fig) == ["a legend over the data it keys: 'a sound figure'"]
    ax.legend(loc="lower left", fontsize=9)
    assert defects(fig) == []


def test_marks_in_a_colour_no_key_shows():
    """The ablations keyed their default black as "ours" and drew the other settings grey, keyed by nothing."""
    fig, ax = sound()
    ax.scatter([1, 2], [2.5, 2.5], color=["k", "0.6"], label="ours")
    ax.legend(fontsize=9, loc="lower left")
    assert defects(fig) == ["marks in a colour no legend entry shows: 'a sound figure'"]
    ax.scatter([3], [2.5], color="0.6", label="ours, the other settings")
    ax.legend(fontsize=9, loc="lower left")
    assert defects(fig) == []
