"""A plan's tables: the sums per target, written and read back as the report reads them, and the reality check
in words."""

import pandas as pd
from helpers import REPO

from parallel_experts.config import files
from parallel_experts.config.settings import PlanAssumptions
from parallel_experts.planning import costs
from parallel_experts.planning import tables as plan
from parallel_experts.study import Study


def jobs():
    """Two targets sharing one job: fig_a runs a (shown) and b (built, not shown), fig_b runs b (shown)."""
    rows = [("fig_a", "train", "run=a", True, 7200.0, 2), ("fig_a", "train", "run=b", False, 3600.0, 2),
            ("fig_b", "train", "run=b", True, 3600.0, 2)]
    table = pd.DataFrame(rows, columns=["target", "rule", "wildcards", "shown", "seconds", "devices"])
    table = table.assign(group="train recurrent", flops=1.0, flops_per_s=1.0, source="assumed: x",
                         measured_seconds=float("nan"), device_hours=table["seconds"] * table["devices"] / 3600)
    table.attrs["targets"] = ["allocations", "fig_a", "fig_b"]
    return table


def test_each_target_sums_its_jobs_and_the_total_counts_a_shared_job_once():
    sums = plan.per_target(jobs())
    assert sums.loc["fig_a"].tolist() == [2, 6.0, 1, 4.0]  # a: 2 h × 2 GPUs, b: 1 h × 2 GPUs, only a shown
    assert sums.loc["fig_b"].tolist() == [1, 2.0, 1, 2.0]
    assert sums.loc["allocations"].tolist() == [0, 0, 0, 0]  # a target without timed jobs keeps its row
    assert sums.loc[plan.TOTAL].tolist() == [2, 6.0, 2, 6.0]  # b once


def test_a_written_plan_reads_back_with_its_scale_and_unit(tmp_path):
    config = Study.of(files.load([REPO / "config/config.yaml"]))  # the demo: no GPU
    check = pd.DataFrame({"rule": ["train"], "wildcards": ["run=a"], "measured_seconds": [100.0],
                          "held_out_seconds": [150.0], "assumed_seconds": [30.0]})
    plan.write(config, jobs(), check, pd.DataFrame(columns=["run", "flops"]), tmp_path)
    header, tables = plan.read(tmp_path)
    assert header == {"scale": "demo", "unit": "CPU-hours"}
    pd.testing.assert_frame_equal(tables["targets"], plan.per_target(jobs()), check_names=False, check_dtype=False)
    assert tables["jobs"]["wildcards"].tolist() == ["run=a", "run=b", "run=b"]
    assert tables["check"].equals(check)


def test_the_reality_check_says_how_far_each_prediction_lands():
    check = pd.DataFrame({"rule": ["train"] * 3, "wildcards": ["a", "b", "c"], "measured_seconds": [60.0, 60, 60],
                          "held_out_seconds": [30.0, 90, float("nan")], "assumed_seconds": [240.0, 60, 60]})
    held_out, assumed = plan.check_summary(check)
    # held out: 2 jobs, 2 min predicted for 2 min measured, 0.5 is not within a factor of 2 (strictly), 1.5 is
    assert held_out.endswith("2.0 min predicted for 2 jobs that took 2.0 min (×1.00); per job, the prediction is "
                             "within a factor of 2 of the measured time for 1 of 2")
    assert "6.0 min predicted for 3 jobs that took 3.0 min (×2.00)" in assumed and assumed.endswith("2 of 3")
    assert plan.check_summary(check.iloc[:0]) == []
    by_rule = plan.check_by_rule(check.assign(rule=["train", "train", "table"]))
    assert by_rule.loc["train", "held_out_s"] == 120 and pd.isna(by_rule.loc["table", "held_out_s"])  # not 0


def test_the_plan_page_loads_no_jumanji():
    # Jumanji switches an IPython kernel's matplotlib backend on import, which fails under papermill; the plan
    # page and the claims page import these.
    import subprocess
    import sys

    check = ("import sys, parallel_experts.planning.tables, parallel_experts.targets.catalogue, parallel_experts.reporting.claims; "
             "assert 'jumanji' not in sys.modules")
    assert subprocess.run([sys.executable, "-c", check]).returncode == 0


def test_a_job_longer_than_its_time_limit_needs_attempts_of_90_percent_of_it():
    hours = pd.Series([0.5, 0.9, 0.91, 2.7, 2.71]) * 3600
    assert costs.attempts_needed(hours, pd.Series([3600.0] * 5)).tolist() == [1, 1, 2, 3, 4]


def test_jobs_over_their_time_limit_are_flagged_with_the_resubmissions_they_need():
    table = jobs().assign(rule=["sokoban_train", "sokoban_evaluate", "sokoban_evaluate"], runtime_s=3600.0,
                          resubmissions=[1, 0, 0])
    table = table.assign(seconds=[2.7 * 3600, 3600.0, 3600.0])  # 3 attempts with 1 resubmission; 2 without resume
    table = table.assign(attempts=costs.attempts_needed(table["seconds"], table["runtime_s"]))
    table = table.assign(finishes=table["attempts"] <= 1 + table["resubmissions"])
    over = plan.over_time_limit(table).set_index("rule")
    assert over.loc["sokoban_train", ["jobs", "attempts", "unfinished"]].tolist() == [1, 3, 1]
    assert over.loc["sokoban_evaluate", ["jobs", "attempts", "unfinished"]].tolist() == [1, 2, 1]  # b counted once
    train, evaluate = sorted(plan.time_limit_lines(table), reverse=True)
    assert "set resources.train.resubmissions >= 2" in train and "raise their runtime" in evaluate


def test_the_paper_run_times_imply_an_efficiency_range():
    """App. G.1 by hand: the median small run (1 seed) in 2-4 h on 1-2 GPUs of 100 TFLOP/s; the largest in 24 h. The
    large job is rematerialised (4 passes for the authors' 3), which the authors' program does not pay."""
    table = pd.DataFrame({"rule": "sokoban_train", "wildcards": ["a", "b", "c"], "budget": ["small", "small", "large"],
                          "seeds": [9, 9, 3], "flops": [9 * 7.2e16, 9 * 1.44e17, 3 * 8.64e18 * 4 / 3],
                          "remat": [False, False, True], "source": "assumed: x"})
    assumed = PlanAssumptions.of({"plan": {"train": {"device": "a GPU", "peak_tflops": 100.0, "efficiency": 0.5}}})
    found = costs.paper_efficiency(assumed, table).set_index("run")
    small, largest = found.loc["small budget, median run"], found.loc["the largest run"]
    assert small["flops"] == 1.08e17 and largest["flops"] == 8.64e18
    assert round(small["lowest"], 6) == 1.08e17 / (4 * 3600 * 1e14 * 2) and round(small["highest"], 4) == 0.15
    assert round(largest["lowest"], 4) == 0.5 and round(largest["highest"], 4) == 1.0
