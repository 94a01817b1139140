"""The plot shared by both domains: one panel per budget, every allocation drawn at its work ratio.

The domain plots are checked beside the analysis that feeds them (test_sokoban_analysis, test_lm_analysis)."""

import numpy as np
from helpers import REPO

from parallel_experts.config import files
from parallel_experts.reporting import plots
from parallel_experts.results import grids
from parallel_experts.study import Study


def test_work_ratios_draws_every_allocation_of_every_budget_at_its_ratio():
    sokoban = Study.of(files.load([REPO / "config/paper.yaml"])).sokoban
    table = grids.allocation_table(grids.allocation_dataset(sokoban.budgets, sokoban.settings.proxy))
    tolerance = {name: 0.3 for name in table["budget"].unique()}
    fig = plots.work_ratios(table, "test", tolerance)
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == [f"{name} budget" for name in dict.fromkeys(table["budget"])]
    for ax, name in zip(axes, dict.fromkeys(table["budget"])):
        drawn = np.concatenate([c.get_offsets() for c in ax.collections if len(c.get_offsets())])
        rows = table[table["budget"] == name]
        assert len(drawn) == len(rows)
        np.testing.assert_allclose(sorted(drawn[:, 1]), sorted(rows["work ratio"]))
