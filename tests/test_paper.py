"""The numbers quoted from the paper and from other systems (results.paper, results.others) against independent
copies of them: the authors' shipped tables and the paper's own text."""

import pytest
from helpers import REPO

from parallel_experts.results import others, paper

PAPER_TEXT = REPO.parent / "shared/paper/paper.md"


def test_the_ablations_runs_are_allocations_of_the_authors_grids_with_the_values_quoted_for_them():
    sokoban = paper.allocations("sokoban")
    means = (paper.reference("sokoban_reference_returns")
             .groupby(["budget", "depth_L", "experts_E", "width_d"])["final5_mean_return"].mean())
    quoted = {"aggregation": 13.738, "radius": 13.866}  # the full-access values the ablation pages quote
    for setting, (budget, (depth, experts, width)) in paper.SOKOBAN_ABLATION_RUNS.items():
        grid = sokoban[sokoban["budget"] == budget]
        assert ((grid["depth"] == depth) & (grid["experts"] == experts) & (grid["width"] == width)).any()
        assert means[(budget, depth, experts, width)] == pytest.approx(quoted[setting], abs=5e-4)
    lm = paper.allocations("lm")
    for budget, window, (depth, experts, width) in paper.FINEWEB_ABLATION_RUNS.values():
        assert window in paper.FINEWEB_RUN["windows"]
        grid = lm[lm["budget"] == budget]
        assert ((grid["depth"] == depth) & (grid["experts"] == experts) & (grid["width"] == width)).any()


def test_the_fineweb_run_is_the_papers_token_budget():
    run = paper.FINEWEB_RUN
    assert run["train_tokens"] == 1_310_720_000  # "approximately 1.31B" tokens: 10,000 updates of 131,072
    assert run["train_tokens"] // run["batch_tokens"] == 10_000
    assert run["vocabulary"] % 128 == 0 and 0 <= run["vocabulary"] - 50257 < 128  # GPT-2's ids padded to 128


@pytest.mark.skipif(not PAPER_TEXT.exists(), reason="the paper's text is not beside the checkout")
def test_the_numbers_quoted_from_the_text_are_in_the_text():
    text = PAPER_TEXT.read_text()
    assert "approximately $3.51$ with only two depth levels ($L=2$)" in text
    assert paper.FINEWEB_ABLATION_VALUES["aggregation"] == 3.51
    assert "sharing the KV cache increases validation loss by approximately 0.02" in text
    assert paper.KV_SHARING_COST == 0.02
    assert "calibrated to approximately $93\\%$ precision" in text and paper.PROBES["precision"].value == 0.93
    assert "two large budget recurrent models with $L=2$ and $L=4$" in text
    assert paper.PROBES["compare"].value == ("large", (2, 4))
    assert "non-recurrent training sequence lengths of $256$ and $2048$ tokens" in text
    per_window = paper.FINEWEB_TRAINING["sequence_per_window"].value
    assert [per_window * window for window in paper.FINEWEB_RUN["windows"]] == [256, 2048]
    assert "Four-H100" in text and paper.FINEWEB_TRAINING["gpus"].value == 4


def quoted_values():
    return [(name, value) for name, value in vars(paper).items() if isinstance(value, paper.Quoted)] + [
        (f"{name}.{key}", value) for name, table in vars(paper).items() if isinstance(table, dict)
        for key, value in table.items() if isinstance(value, paper.Quoted)]


def test_every_quoted_number_cites_a_section_or_the_authors_file():
    found = quoted_values()
    assert len(found) > 30  # the Sokoban and FineWeb training, agent, levels, probes, optimiser
    for name, (_, source) in found:
        assert any(mark in source for mark in ("§", "App.", "SPEC", "Table", "Fig.")), (name, source)
        assert "SPEC" not in source or "[" in source or "§" in source or "App." in source, (name, source)


def test_a_reference_cell_is_found_by_its_row_or_refused():
    assert paper.value("table5_latency", "ms_per_token", recurrent=True, depth=1, experts=16, context=128) == 0.108
    transformer = {"recurrent": False, "depth": 16, "experts": 1, "context": 128}
    assert paper.value("table6_throughput", "tokens_per_s", **transformer) == 1_025_300
    with pytest.raises(KeyError, match="2 rows"):
        paper.value("table5_latency", "ms_per_token", recurrent=True, depth=1, experts=16)


def test_other_systems_rows_name_their_source_and_are_fractions():
    for row in others.SOKOBAN_SOLVE_RATES:
        assert 0 <= row.solve_rate <= 1 and row.source
        assert row.spread is None or 0 <= row.spread < 1
    looped = [row for row in others.SOKOBAN_SOLVE_RATES if row.agent.startswith("LoopedActor")]
    assert [row.env_steps for row in looped] == [100_000_000] * 3 and all(row.protocol for row in looped)
