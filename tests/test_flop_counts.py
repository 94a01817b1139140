"""The FLOP counts kept beside the compile cache (core/flop_counts.py): a program is lowered once per machine, a
count is only ever read back for the program and code it was counted on, and damage costs a recount."""

import json

import pytest

from parallel_experts.core import compile_cache, flop_counts
from parallel_experts.lm import models
from parallel_experts.lm.settings import ModelConfig


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv(compile_cache.CACHE_DIR, str(tmp_path))
    monkeypatch.delenv(compile_cache.ENABLE, raising=False)
    return tmp_path / flop_counts.FOLDER


class Counter:
    def __init__(self, flops=123.0):
        self.calls, self.flops = 0, flops

    def __call__(self):
        self.calls += 1
        return self.flops


def test_a_program_is_counted_once_and_read_back_after(store):
    count = Counter()
    assert flop_counts.counted(("a", 1), count) == flop_counts.counted(("a", 1), count) == 123.0
    assert count.calls == 1 and len(list(store.iterdir())) == 1
    flop_counts.counted(("a", 2), count)  # another context is another program
    assert count.calls == 2


def test_a_change_to_the_code_or_jax_makes_every_count_stale(store, monkeypatch):
    count = Counter()
    flop_counts.counted(("a", 1), count)
    monkeypatch.setattr(flop_counts, "_source", lambda: "edited")
    flop_counts.counted(("a", 1), count)
    monkeypatch.setattr(flop_counts.jax, "__version__", "0.0.0")
    flop_counts.counted(("a", 1), count)
    assert count.calls == 3


@pytest.mark.parametrize("damage", ["", "{", '{"flops": "NaN"}', '{"flops": -1}', '{"flops": 0}', '{"other": 1}',
                                    '[]'])
def test_a_damaged_count_is_counted_again_and_replaced(store, damage):
    count = Counter()
    flop_counts.counted(("a", 1), count)
    (entry,) = store.iterdir()
    entry.write_text(damage)
    assert flop_counts.counted(("a", 1), count) == 123.0 and count.calls == 2
    assert json.loads(entry.read_text())["flops"] == 123.0


def test_without_a_compile_cache_nothing_is_kept(store, monkeypatch):
    count = Counter()
    monkeypatch.setenv(compile_cache.ENABLE, "false")  # compile_cache.off, as the benchmarks do
    flop_counts.counted(("a", 1), count)
    monkeypatch.delenv(compile_cache.CACHE_DIR)  # the config's `compile_cache: false`
    monkeypatch.delenv(compile_cache.ENABLE)
    flop_counts.counted(("a", 1), count)
    assert count.calls == 2 and not store.exists()


def test_a_store_that_cannot_be_written_costs_a_recount_not_the_count(store):
    store.write_text("a file where the folder should be")  # chmod would not stop root
    with pytest.warns(UserWarning, match="not kept"):
        assert flop_counts.counted(("a", 1), Counter()) == 123.0


def test_a_stored_lm_count_is_what_lowering_the_model_gives(store):
    model, window = ModelConfig(2, 2, 32, 2, 1, vocab=64, recurrent=True), 8
    lowered = models.token_flops(model, window)
    assert flop_counts.counted(("lm token", model, window), lambda: models.token_flops(model, window)) == lowered
    assert flop_counts.counted(("lm token", model, window), lambda: pytest.fail("counted again")) == lowered
