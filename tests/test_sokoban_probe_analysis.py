"""What the probe reports say: the Fig. 4 verdict on hand-made recall curves, and the Fig. 13 arrows."""

import numpy as np
import pytest
from helpers import STEPS
from helpers import probe_recall as probes_dataset

from parallel_experts.analysis import probes as probe_analysis
from parallel_experts.reporting import plots


def probe_recall(*args, **kwargs):
    """The pages' view (one curve per run) of a hand-made probes dataset."""
    return probe_analysis.over_agents(probes_dataset(*args, **kwargs))


def verdict(ds):
    return probe_analysis.compare_verdict(ds, "deep", "shallow")[-2]


def test_the_deeper_agent_leading_and_the_shallower_catching_up_is_the_papers_pattern():
    steps = np.arange(STEPS)
    deep = np.full(STEPS, 0.6)
    shallow = np.minimum(0.3 + 0.1 * steps, 0.6)  # 0.3, 0.4, 0.5 over steps 0-2; 0.6 from step 3 on
    assert verdict(probe_recall(deep, shallow)) == ("this run shows the paper's pattern: the deeper agent leads at first "
                                              "and the shallower one catches up")
    never = np.full(STEPS, 0.3)
    assert "its late lead stays at 0.05 of recall or more" in verdict(probe_recall(deep, never))
    narrowed = np.where(steps < 3, 0.3, 0.5)  # 0.3 behind at first, 0.1 late: narrowed, not caught up (App. F's L = 1)
    assert "its late lead stays at 0.05 of recall or more" in verdict(probe_recall(deep, narrowed))
    assert "does not show the paper's pattern" in verdict(probe_recall(shallow, deep))


def test_no_verdict_on_depth_when_the_state_does_not_beat_its_controls():
    line = verdict(probe_recall(np.full(STEPS, 0.6), np.full(STEPS, 0.3), control=0.7))
    assert line.startswith("this run cannot test the paper's pattern")


def test_the_pages_give_the_scored_levels_beside_the_papers_and_say_when_they_are_few_or_none():
    many = probe_analysis.level_set_note(probe_recall(np.zeros(STEPS), np.zeros(STEPS), scored_levels=45))
    assert many == ("Scored levels: the 45 of 100 test levels that each of the 2 probed runs solves in greedy play "
                    "(the paper: the 906 of 1,000 that all four of its probed policies solve, App. F).")
    agents = probe_recall(np.zeros((3, STEPS)), np.zeros((3, STEPS)), scored_levels=45)
    assert "that each of the 6 probed agents (2 runs × 3 seeds) solves in greedy play" in (
        probe_analysis.level_set_note(agents))
    few = probe_analysis.level_set_note(probe_recall(np.zeros(STEPS), np.zeros(STEPS), scored_levels=29))
    assert few.startswith("Scored levels: the 29 of 100") and "fewer than 30 levels: the intervals" in few
    assert "over 29 levels a 95 % interval of this bootstrap covers the truth about 94 % of the time" in few
    none = probe_recall(np.full(STEPS, 0.6), np.full(STEPS, 0.3), scored_levels=0)
    assert "No test level is solved by every probed agent, so there is nothing to score" in (
        probe_analysis.level_set_note(none))
    assert verdict(none) == ("this run cannot test the paper's pattern: no test level is solved by every probed "
                             "agent, so no probe was scored")


def test_recall_table_reads_the_curves_at_the_chosen_steps():
    ds = probe_recall(np.linspace(0, 1, STEPS), np.zeros(STEPS))
    table = probe_analysis.recall_table(ds, ["deep"], steps=(0, 5, 11, 40))
    assert list(table.columns) == ["run", "probe reads", "t=0", "t=5", "t=11"]  # step 40 is past the data
    assert table.loc[0, "run"] == "recurrent L4 E1 d8"
    assert table.loc[0, "t=11"] == pytest.approx(1.0) and table.loc[1, "t=5"] == pytest.approx(0.1)


def test_plan_arrows_point_in_the_probed_direction():
    picture = np.zeros((1, 5, 5, 2), np.uint8)
    plan = np.zeros((1, 5, 5), np.int8)
    plan[0, 1, 2], plan[0, 3, 1] = 1, 2  # up at row 1, col 2; right at row 3, col 1
    fig = plots.plan_pictures(picture, plan, [0], "test")
    arrows = [(a.xyann, a.xy) for a in fig.axes[0].texts]  # (tail, head) in (x = col, y = row) image coordinates
    assert len(arrows) == 2
    (tail_up, head_up), (tail_right, head_right) = sorted(arrows, key=lambda a: a[0][1])
    assert head_up[0] == tail_up[0] == 2 and head_up[1] < tail_up[1]  # rows grow downwards: up is smaller y
    assert head_right[1] == tail_right[1] == 3 and head_right[0] > tail_right[0]
