"""Work proxies and allocation grids against the authors' published numbers and hand computations."""

import pytest

from parallel_experts.config.errors import ConfigError
from parallel_experts.config.files import load
from parallel_experts.core import budget
from parallel_experts.core.budget import Allocation
from parallel_experts.results import paper


def budgets_of(config: dict, domain: str) -> list[budget.Budget]:
    """The budgets of `domain` in a config that may hold only that domain's keys the budgets read."""
    section = config[domain]
    proxy = budget.Proxy(domain, section.get("encoder_channels", 0), tuple(section.get("windows", ())),
                         section.get("head_dim", 0))
    return budget.budgets({name: budget.BudgetSpec.of(spec) for name, spec in section["budgets"].items()}, proxy)


def test_sokoban_proxy_reproduces_every_published_work_value():
    grid = paper.reference("sokoban_allocations")
    for row in grid.itertuples():
        assert budget.sokoban_work(Allocation(row.depth_L, row.experts_E, row.width_d)) == row.work_proxy, row


def test_lm_block_cost_by_hand():
    # (10 + 2·4/8)·768² + 2·128·768 = 11·589824 + 196608
    assert budget.lm_block_cost(768, 8, 4, 128) == 6_684_672


@pytest.mark.parametrize(
    "allocation, published_ratio",
    [((1, 1, 2112, 22, 11), 0.47), ((1, 6, 1152, 12, 6), 0.84), ((2, 5, 960, 10, 5), 0.98),
     ((2, 1, 2496, 26, 13), 1.32), ((13, 1, 1152, 12, 6), 1.83), ((32, 1, 768, 8, 4), 2.00)],
)
def test_lm_proxy_without_attention_matches_spec_ratio_column(allocation, published_ratio):
    # Our ratio column for the authors' LM grid is L·E·d²/(16·768²): their proxy (LM/nanogpt/train.py) with the
    # attention term (window 0) dropped.
    small = 16 * budget.lm_block_cost(768, 8, 4, window=0)
    assert budget.lm_work(Allocation(*allocation), window=0) / small == pytest.approx(published_ratio, abs=0.005)


def test_enumeration_recovers_the_authors_small_sokoban_grid():
    config = {"sokoban": {"encoder_channels": 32, "budgets": {"small": {
        "anchor": [1, 1, 128], "tolerance": 0.12,
        "enumerate": {"depths": [1, 2, 3, 4, 8], "widths": [16, 32, 64, 128]}}}}}
    (small,) = budgets_of(config, "sokoban")
    published = paper.allocations("sokoban").query("budget == 'small'")
    expected = {Allocation(r.depth, r.experts, r.width) for r in published.itertuples()}
    # The authors also ran (L=8, E=2, d=32) at 1.33x the anchor, outside this tolerance.
    assert set(small.allocations) == expected - {Allocation(8, 2, 32)}


def test_shipped_paper_config_holds_the_authors_grids(repo):
    config = load([repo / "config/paper.yaml"])
    for domain in budget.DOMAINS:
        published = paper.allocations(domain)
        for b in budgets_of(config, domain):
            ours = {tuple(a.as_list()) for a in b.allocations}
            columns = ["depth", "experts", "width"] + (["q_heads", "kv_heads"] if domain == "lm" else [])
            theirs = {tuple(r) for r in published.query("budget == @b.name")[columns].values.tolist()}
            assert ours == theirs, (domain, b.name, ours ^ theirs)


def lm_config(allocations, tolerance=0.5):
    return {"lm": {"head_dim": 16, "windows": [32], "budgets": {"small": {
        "anchor": [4, 1, 64], "tolerance": tolerance, "allocations": allocations}}}}


def test_lm_heads_derive_from_head_dim():
    (small,) = budgets_of(lm_config([[2, 2, 64], [1, 4, 64]]), "lm")
    assert small.allocations[0] == Allocation(2, 2, 64, q_heads=4, kv_heads=2)


@pytest.mark.parametrize(
    "allocations, tolerance, message",
    [([[2, 2, 64], [2, 2, 64]], 0.5, r"lm\.budgets\.small\.allocations\[1\] = \[2, 2, 64\]: listed twice"),
     ([[1, 1, 64]], 0.5, r"allocations\[0\] = \[1, 1, 64\]: work 0\.25× the anchor \[4, 1, 64\], outside tolerance"),
     ([[4, 1, 48]], 0.9, r"allocations\[0\] = \[4, 1, 48\]: width 48 does not split into an even number of heads"),
     ([[4, 1, 64, 3, 1]], 0.5, r"need width divisible by q_heads")],
)
def test_invalid_allocations_name_their_position(allocations, tolerance, message):
    with pytest.raises(ConfigError, match=message):
        budgets_of(lm_config(allocations, tolerance), "lm")



def sokoban_config(family_allocations, tolerance=0.05):
    return {"sokoban": {"encoder_channels": 32, "budgets": {"large": {
        "anchor": [1, 1, 1024], "tolerance": tolerance, "allocations": [[1, 1, 1024], [8, 2, 256]],
        "family_allocations": family_allocations}}}}


def test_allocations_only_one_family_trains_follow_the_budgets_own():
    # L·E·d·(32 + 2d): 16·1·256·544 = 2,228,224 and 16·13·64·160 = 2,129,920; the anchor's 1024·2080 = 2,129,920
    (large,) = budgets_of(sokoban_config({"nonrecurrent": [[16, 1, 256], [16, 13, 64]]}), "sokoban")
    deep = (Allocation(16, 1, 256), Allocation(16, 13, 64))
    assert large.family_only == {False: deep}
    assert large.allocations_of(False) == large.allocations + deep and large.allocations_of(True) == large.allocations
    assert budget.sokoban_work(deep[1]) == budget.sokoban_work(large.anchor) == 2_129_920


@pytest.mark.parametrize("family_allocations, message", [
    ({"nonrecurrent": [[16, 4, 128]]}, r"sokoban\.budgets\.large\.family_allocations\.nonrecurrent\[0\] = \[16, 4, "
                                        r"128\]: work 1\.11× the anchor \[1, 1, 1024\], outside tolerance 0\.05"),
    ({"recurrent": [[8, 2, 256]]}, r"family_allocations\.recurrent\[0\] = \[8, 2, 256\]: already in "
                                   r"sokoban\.budgets\.large\.allocations, which both families train"),
    ({"nonrecurrent": [[16, 1, 256], [16, 1, 256]]}, r"nonrecurrent\[1\] = \[16, 1, 256\]: listed twice"),
])
def test_invalid_family_allocations_name_their_position(family_allocations, message):
    with pytest.raises(ConfigError, match=message):
        budgets_of(sokoban_config(family_allocations), "sokoban")


def test_an_lm_budget_refuses_family_allocations():
    config = lm_config([[2, 2, 64]])
    config["lm"]["budgets"]["small"]["family_allocations"] = {"nonrecurrent": [[1, 4, 64]]}
    with pytest.raises(ConfigError, match=r"lm\.budgets\.small\.family_allocations\.nonrecurrent: Sokoban only"):
        budgets_of(config, "lm")
