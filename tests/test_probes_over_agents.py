"""Fig. 4's claim tested over probed agents (analysis.findings.plans_earlier): each agent's early recall on the
scored levels is its score, the deeper run's agents against the shallower run's, against the rule's own null; and
the config that says which agents are probed (sokoban.probes.seeds)."""

import copy

import numpy as np
import pytest
from scipy import stats
from helpers import REPO, STEPS, probe_recall, snakemake

from parallel_experts.analysis import calibration, depth_rules, findings, verdicts
from parallel_experts.analysis import probes as probe_analysis
from parallel_experts.analysis.depth_rules import Arms
from parallel_experts.analysis.findings import CONTRADICTED, INCONCLUSIVE, SUPPORTED, UNTESTED
from parallel_experts.config import files
from parallel_experts.config.errors import ConfigError
from parallel_experts.study import Study
from parallel_experts.lm import flops as lm_flops
from parallel_experts.planning import costs
from parallel_experts.results import paths
from parallel_experts.sokoban import flops as sokoban_flops

COUNTERS = costs.Counters(sokoban_flops, lm_flops)

AGENT_OFFSETS = np.array([[-0.02], [0.0], [0.02]])  # three agents per run, a little apart
# Three agents whose recall differs more early than late: each has its own early-minus-late recall.
WIGGLE = np.where(np.arange(STEPS) < 3, 1.0, -1.0) * np.array([[-0.03], [0.01], [0.02]])
CAUGHT_UP = np.minimum(0.3 + 0.1 * np.arange(STEPS), 0.6)  # 0.3, 0.4, 0.5 over steps 0-2; 0.6 from step 3 on
LEADING = np.full(STEPS, 0.6)


def plans(deep, shallow, **kwargs):
    return findings.plans_earlier(probe_recall(deep, shallow, **kwargs), "deep", "shallow")


def test_deeper_agents_that_lead_at_first_and_are_caught_up_support_the_claim():
    found = plans(LEADING + AGENT_OFFSETS, CAUGHT_UP + AGENT_OFFSETS)
    assert found.verdict == SUPPORTED, found
    assert [name for name, _ in found.parts] == ["leads at first", "catches up"]
    assert all(part.verdict == SUPPORTED for _, part in found.parts)
    assert [part.rule for _, part in found.parts] == [verdicts.AGENTS, verdicts.AGENTS_MARGIN]
    assert "3 agents per run" in found.measured and "fewer than" not in found.measured
    assert "L = 4 [0.580, 0.600, 0.620], L = 2 [0.380, 0.400, 0.420]" in found.measured  # each agent's steps 0-2
    assert found.no_effect is not None and found.no_effect <= verdicts.ALPHA + 0.01


def test_agents_that_lead_but_are_not_caught_up_contradict_the_second_part():
    found = plans(LEADING + WIGGLE, np.full(STEPS, 0.3) + WIGGLE)
    assert found.verdict == CONTRADICTED and found.decided_by == ("catches up",)
    verdicts_by_part = {name: part.verdict for name, part in found.parts}
    assert verdicts_by_part == {"leads at first": SUPPORTED, "catches up": CONTRADICTED}  # 0.3 below, not within 0.05


def test_a_gap_that_narrows_but_stays_is_not_caught_up():
    """App. F's L = 1 against L = 8: the gap narrows (0.3 at first, 0.15 late) but does not close. "Catches up" is
    the paper's "both maintain similar recall": the late gap within the margin (0.05), not a narrowing (which the
    rule before said "supported" here)."""
    narrowed = np.where(np.arange(STEPS) < 3, 0.3, 0.45)
    found = plans(LEADING + AGENT_OFFSETS, narrowed + AGENT_OFFSETS)
    caught_up = dict(found.parts)["catches up"]
    assert caught_up.verdict == CONTRADICTED and caught_up.rule == verdicts.AGENTS_MARGIN
    assert caught_up.test.startswith("recall over steps 5-10: L = 2 more than 0.05 below L = 4 over agents")


def test_caught_up_within_a_wider_margin():
    """The margin is the config's (claims.margins.recall): a late gap of 0.1 is caught up within 0.2."""
    late_gap = np.where(np.arange(STEPS) < 3, 0.3, 0.5)
    found = findings.plans_earlier(probe_recall(LEADING + AGENT_OFFSETS, late_gap + AGENT_OFFSETS), "deep", "shallow",
                                   margin=0.2)
    assert dict(found.parts)["catches up"].verdict == SUPPORTED and found.verdict == SUPPORTED


def test_shallower_agents_that_lead_at_first_contradict_the_claim():
    found = plans(np.full(STEPS, 0.3) + AGENT_OFFSETS, LEADING + AGENT_OFFSETS)
    assert found.verdict == CONTRADICTED and found.decided_by == ("leads at first",)


def test_identical_agents_at_both_depths_are_inconclusive():
    """Neither leads at first; late, the shallower agents are within the margin of the deeper ones (caught up)."""
    found = plans(CAUGHT_UP + WIGGLE, CAUGHT_UP + WIGGLE)
    assert found.verdict == INCONCLUSIVE
    assert {name: part.verdict for name, part in found.parts} == {"leads at first": INCONCLUSIVE,
                                                                   "catches up": SUPPORTED}


def test_one_agent_per_depth_stays_untested_and_says_so():
    found = plans(LEADING, CAUGHT_UP)
    assert found.verdict == UNTESTED and "one agent per run" in found.measured
    assert "one agent per depth: agents are not resampled" in found.test


def test_two_agents_per_depth_are_tested_and_labelled_as_few():
    found = plans(LEADING + AGENT_OFFSETS[:2], CAUGHT_UP + AGENT_OFFSETS[:2])
    assert found.verdict in (SUPPORTED, INCONCLUSIVE, UNTESTED) and found.parts
    assert "2 agents per run (fewer than 3: a test over agents with little power)" in found.measured


def test_every_agent_must_read_more_from_its_state_than_from_its_controls():
    found = plans(LEADING + AGENT_OFFSETS, CAUGHT_UP + AGENT_OFFSETS, control=0.7)
    assert found.verdict == INCONCLUSIVE and "than from the controls" in found.measured and not found.parts


def test_the_verdicts_p_is_the_rules_own_p_on_the_agents_scores():
    """Draw by draw: the claims page's p for "leads at first" is calibration's p of the same rule on each agent's mean
    recall over steps 0-2, computed here from the curves by hand."""
    rng = np.random.default_rng(3)
    deep = LEADING - 0.1 + rng.normal(0, 0.05, (3, 1))
    shallow = CAUGHT_UP + rng.normal(0, 0.05, (3, 1))
    found = dict(plans(deep, shallow).parts)["leads at first"]
    early = np.stack([deep[:, :3].mean(1), shallow[:, :3].mean(1)])
    rule = depth_rules.AgainstRival.of(np.array([True, False]))
    expected = calibration.test(rule, {True: Arms.of_scores(early, [4, 2])})
    assert found.evidence is not None and found.evidence.rule == rule
    assert found.evidence.p == pytest.approx(float(expected.p))
    assert found.test.startswith("recall over steps 0-2: L = 4 > L = 2 over agents")
    # "catches up": the shallower agents' recall over steps 5-10, the margin added, against the deeper agents'
    found = dict(plans(deep, shallow).parts)["catches up"]
    late = np.stack([shallow[:, 5:11].mean(1), deep[:, 5:11].mean(1)])  # steps 5-10
    rule = depth_rules.AgainstRival.of(np.array([True, False]), verdicts.RECALL_COMPARABLE)
    expected = calibration.test(rule, {True: Arms.of_scores(late, [2, 4])})
    assert found.evidence is not None and found.evidence.rule == rule
    assert found.evidence.p == pytest.approx(float(expected.p))
    t = stats.ttest_ind(late[0] + verdicts.RECALL_COMPARABLE, late[1], equal_var=False).statistic
    assert float(expected.strength) == pytest.approx(abs(t))  # Welch's t with the margin added, by scipy


def test_the_pages_show_the_mean_over_agents_with_their_range_as_the_band():
    view = probe_analysis.over_agents(probe_recall(LEADING + AGENT_OFFSETS, CAUGHT_UP + AGENT_OFFSETS))
    state = view["recall"].sel(run="deep", representation="state", target="agent_onto", step=0)
    assert state.values.tolist() == pytest.approx([0.6, 0.58, 0.62])  # value, low, high: mean and the agents' range
    assert "agent" not in view.dims and view.attrs["probed_agents"] == 3
    one = probe_analysis.over_agents(probe_recall(LEADING, CAUGHT_UP, width=0.05))
    assert one["recall"].sel(run="deep", representation="state", target="agent_onto",
                             step=0).values.tolist() == pytest.approx([0.6, 0.55, 0.65])  # its interval over levels
    assert probe_analysis.compare_verdict(view, "deep", "shallow")[-2].endswith(
        "(a reading of the mean curves; the claims page tests it over the 3 agents per run)")


def probed_config(seeds):
    config = copy.deepcopy(files.load([REPO / "config" / "config.yaml"]))
    config["sokoban"]["probes"]["seeds"] = seeds
    return config


def test_each_probed_seed_must_be_a_seed_every_probed_run_trains():
    config = probed_config([0, 1])
    assert [Study.of(config).sokoban.probe_seeds[run.id] for run in Study.of(config).sokoban.probed] == [(0, 1)] * 4
    with pytest.raises(ConfigError, match=r"sokoban\.probes\.seeds\[1\]: 7 is not a seed of convlstm/recurrent/small"):
        Study.of(probed_config([0, 7])).sokoban.probed


def test_the_planner_prices_one_probe_job_per_agent_as_the_dag_runs_them(tmp_path):
    """The demo probes two agents per run: the planner's probe jobs (rule and wildcards) are the dry run's."""
    dry = snakemake("-n", "--configfile", "config/config.yaml", "--directory", str(tmp_path), paths.SOKOBAN_PROBES)
    assert dry.returncode == 0, dry.stderr
    planned = set()
    for block in dry.stdout.split("\nrule ")[1:]:
        rule, _, rest = block.partition(":")
        wildcards = [line.split("wildcards: ", 1)[1] for line in rest.splitlines() if "wildcards: " in line]
        if rule.startswith("sokoban_probe_"):
            planned.add((rule, wildcards[0]))
    config = files.load([REPO / "config" / "config.yaml"])
    jobs = costs.jobs_by_result(Study.of(config), COUNTERS, [paths.SOKOBAN_PROBES])[paths.SOKOBAN_PROBES]
    priced = {(job.rule, job.wildcards) for job in jobs if job.rule.startswith("sokoban_probe_")}
    assert len(priced) == 4 * 2 * (3 + 1) and priced == planned  # 4 runs x 2 agents x (3 splits of data + 1 fit)
