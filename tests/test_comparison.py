"""Whether a budget is the paper's, and which of the authors' allocations a config also runs."""

import pandas as pd

from parallel_experts.analysis import comparison
from parallel_experts.core import budget


def test_in_this_config_matches_budget_and_allocation():
    ours = pd.DataFrame({"budget": ["small", "small"], "depth": [1, 2], "experts": [4, 2], "width": [64, 64],
                         "q_heads": [4, 4]})
    paper = pd.DataFrame({"budget": ["small", "small", "medium"], "depth": [1, 2, 1], "experts": [4, 1, 4],
                          "width": [64, 64, 64], "q_heads": [8, 8, 8]})
    # the heads do not count: our config may split the same width into other heads
    assert comparison.in_this_config(paper, ours).tolist() == [True, False, False]


def test_budget_differences_check_the_window_only_where_the_domain_has_one():
    ours = budget.budgets({"small": budget.BudgetSpec((1, 1, 128), 0.1, ((1, 1, 128),))},
                          budget.Proxy("sokoban", encoder_channels=32))
    assert comparison.budget_differences(ours, "sokoban", "small") == []
    assert comparison.budget_differences(ours, "sokoban", "small", window=64) == []  # Sokoban has no window
    assert comparison.budget_differences(ours, "sokoban", "tiny") == ["the paper has no 'tiny' budget"]
    assert comparison.budget_differences(ours, "sokoban", "medium") == [
        "this config's medium budget is anchored at nothing, the paper's at L1 E1 d256"]
    assert comparison.anchor(ours, "small") == comparison.paper_anchor("sokoban", "small")
