"""Planning probes: labels of a hand-worked trajectory, probe data with every level exactly once, probes that
find a linear code and none in noise, the precision threshold over the first 20 steps and the levels every probed
agent solves (App. F), both against hand computations, EP's macro-F1, the bootstrap interval, and every agent's
scores collected by run and agent."""

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr
from helpers import REPO
from jumanji_referee import level

from parallel_experts.analysis import probes as probe_analysis
from parallel_experts.config import files
from parallel_experts.config.errors import PipelineError
from parallel_experts.results import store
from parallel_experts.sokoban import env as sokoban_env
from parallel_experts.sokoban import evaluate, generator, probe_scores, probes
from parallel_experts.sokoban.agent import Agent
from parallel_experts.sokoban.levels import pad_to
from parallel_experts.sokoban.settings import AgentConfig
from parallel_experts.study import Study

UP, RIGHT, DOWN, LEFT = 0, 1, 2, 3  # Jumanji's actions; label classes are action + 1


class Script(eqx.Module):
    """Plays a fixed list of moves (its state counts the steps); its "encoder" is the raw grid."""

    moves: jax.Array

    def initial_state(self, height, width):
        return ScriptState(jnp.zeros((height, width, 1)), jnp.zeros((), jnp.int32))

    def encoder(self, grid):
        return grid.astype(jnp.float32)

    def __call__(self, grid, state):
        move = self.moves[jnp.minimum(state.t, len(self.moves) - 1)]
        return 10.0 * jax.nn.one_hot(move, 4), jnp.zeros(()), ScriptState(state.s + 1, state.t + 1)


class ScriptState(eqx.Module):
    s: jax.Array
    t: jax.Array


def test_labels_of_a_hand_worked_trajectory():
    # Agent at (1,1), box at (2,2), target at (4,2). Moves: up (into the wall: ignored), right to (1,2), left back
    # to (1,1), right again, down (pushes the box to (3,2)), down (pushes it onto the target: solved, 6 steps).
    room = level("######", "#@   #", "# $  #", "#    #", "# .  #", "######")
    env = sokoban_env.make_env(room[None], time_limit=10)
    script = Script(jnp.array([UP, RIGHT, LEFT, RIGHT, DOWN, DOWN]))
    data = probes.collect(script, script, env, room[None], view=6)
    assert data["step"].values.tolist() == list(range(6)) and set(data["level"].values) == {0}

    def board(**squares):  # "r1c2=2" -> a 6×6 label board
        out = np.zeros((6, 6), np.int8)
        for name, value in squares.items():
            out[int(name[1]), int(name[3])] = value
        return out

    # C_A: the class (action + 1) of the move by which the agent next enters each square.
    onto = [board(r1c2=2, r1c1=4, r2c2=3, r3c2=3),  # t=0: right at t=1, left at t=2, down at 4 and 5
            board(r1c2=2, r1c1=4, r2c2=3, r3c2=3),
            board(r1c2=2, r1c1=4, r2c2=3, r3c2=3),  # t=2: (1,2) is next entered at t=3, (1,1) at t=2
            board(r1c2=2, r2c2=3, r3c2=3),  # t=3: (1,1) is never entered again
            board(r2c2=3, r3c2=3),
            board(r3c2=3)]
    # C_B: the direction a box is next pushed off each square: down off (2,2) at t=4, off (3,2) at t=5.
    pushed = [board(r2c2=3, r3c2=3)] * 5 + [board(r3c2=3)]
    np.testing.assert_array_equal(data["agent_onto"].values, np.stack(onto))
    np.testing.assert_array_equal(data["box_pushed"].values, np.stack(pushed))
    np.testing.assert_array_equal(data["action"].values, [UP, RIGHT, LEFT, RIGHT, DOWN, DOWN])


@pytest.mark.parametrize("recurrent", [True, False])
def test_probe_data_has_every_level_exactly_once_with_all_its_steps(recurrent):
    levels = pad_to(generator.generate_levels(7, room_size=6, num_boxes=2, seed=3))
    env = sokoban_env.make_env(levels, time_limit=12)
    config = AgentConfig(2, 2, 4, encoder_channels=8, recurrent=recurrent)
    agent, control = Agent(config, jax.random.PRNGKey(0)), Agent(config, jax.random.PRNGKey(1))
    data = probes.collect(agent, control, env, levels, view=6, chunk=3)
    played = evaluate.PLAY(agent, env, levels, greedy=jnp.array(True), key=jax.random.PRNGKey(0), view=6)
    lengths = np.bincount(data["level"].values, minlength=7)
    np.testing.assert_array_equal(lengths, np.asarray(played["episode_length"]))  # as long as evaluation plays
    for i in range(7):
        assert data["step"].values[data["level"].values == i].tolist() == list(range(lengths[i]))
    assert data["state"].shape == (lengths.sum(), 6, 6, 4) and data["encoder"].shape[-1] == 8
    assert not np.array_equal(data["state"].values, data["control"].values)  # different weights, same inputs


@pytest.fixture(scope="module")
def linear_code():
    """Representations whose labels are a known linear function of each square's vector, and pure noise."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3000, 5, 5, 6)).astype(np.float32)
    code = rng.normal(size=(6, 5)) * 3
    labels = np.argmax(x @ code, axis=-1).astype(np.int8)
    noise = rng.integers(0, 5, size=labels.shape).astype(np.int8)

    def split(part, y):
        return xr.Dataset({"state": (("sample", "row", "col", "width"), x[part]),
                           "agent_onto": (("sample", "row", "col"), y[part]),
                           "box_pushed": (("sample", "row", "col"), noise[part]),
                           "grid": (("sample", "row", "col", "layer"), np.zeros(x[part].shape[:3] + (2,), np.uint8))},
                          coords={"level": ("sample", np.arange(len(x))[part] // 10),
                                  "step": ("sample", np.arange(len(x))[part] % 10)},
                          attrs={"levels": 100, "time_limit": 10})

    return split(slice(0, 2000), labels), split(slice(2000, 2500), labels), split(slice(2500, 3000), labels)


def test_a_probe_recovers_a_linear_code_and_finds_nothing_in_noise(linear_code):
    train, calibration, test = linear_code
    test = test.assign_coords(level=test["level"] - 250)  # test levels 0..49
    test.attrs["levels"] = 50
    # A larger learning rate than EP's 1e-3 only to keep the test short: 4 epochs instead of many.
    config = probe_scores.ProbeConfig(seeds=2, epochs=4, learning_rate=3e-2)
    result = probe_scores.score(train, calibration, test, np.arange(50), config)
    code, noise = result.sel(representation="state", target="agent_onto"), result.sel(representation="state",
                                                                                       target="box_pushed")
    assert code["recall"].sel(estimate="value").min() > 0.85
    assert code["calibration_precision"].min() >= 0.93
    assert code["macro_f1"] > 0.9
    # Noise: 5 equally likely classes, so macro-F1 near 1/5 and no square reaches 93 % precision.
    assert 0.12 < noise["macro_f1"] < 0.28
    assert noise["recall"].sel(estimate="value").max() < 0.05
    assert result.sizes["probe_seed"] == 2 and result["episodes"].values.tolist() == [50] * 10


def test_probe_seeds_are_fitted_together_and_differ():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(64, 4, 4, 3)), rng.integers(0, 5, size=(64, 4, 4))
    weights, losses = probes.fit(x, y, seeds=3, kernel=3, epochs=2)
    assert weights.shape == (3, 3 * 3 * 3, 5) and losses.shape == (3, 2)
    assert not np.allclose(weights[0], weights[1])
    again, _ = probes.fit(x, y, seeds=3, kernel=3, epochs=2)
    np.testing.assert_array_equal(weights, again)  # seeded


def test_threshold_is_the_smallest_value_reaching_the_precision():
    confidence = np.array([0.9, 0.8, 0.8, 0.7, 0.6, 0.5])
    correct = np.array([1, 1, 0, 1, 1, 0], bool)
    # Precision with τ at each realisable value: 0.9 → 1/1, 0.8 → 2/3 (the tie goes in together), 0.7 → 3/4,
    # 0.6 → 4/5, 0.5 → 4/6.
    assert probe_scores.threshold(confidence, correct, 0.75) == 0.6
    assert probe_scores.threshold(confidence, correct, 0.81) == 0.9
    assert probe_scores.threshold(confidence, correct, 0.93) == 0.9
    assert probe_scores.threshold(confidence, correct, 1.01) == float("inf")


def test_the_threshold_reaches_the_precision_over_the_first_20_steps_only():
    # One probe seed, a 3×3 room whose one interior square is scored: each sample is one prediction. By step:
    # steps 0-13 correct at p = 0.9, step 14 wrong at 0.8, step 19 correct at 0.7, steps 15-16 wrong at 0.6, and
    # step 20 wrong at 0.95. Over steps < 20 the precision at τ = 0.9, 0.8, 0.7, 0.6 is 14/14, 14/15 = 0.933,
    # 15/16 = 0.9375, 15/18 = 0.833: τ = 0.7, the smallest reaching 0.93, at precision 0.9375. Pooled with step 20
    # it would be 0.9 (14/15 = 0.933; 14/16 at 0.8).
    confidence = np.array([0.9] * 14 + [0.8, 0.7, 0.6, 0.6, 0.95])
    step = np.array(list(range(14)) + [14, 19, 15, 16, 20])
    correct = np.array([True] * 14 + [False, True, False, False, False])
    truth = np.zeros((len(step), 3, 3), np.int8)
    truth[:, 1, 1] = 1  # every label "up"; a correct prediction says up, a wrong one right
    direction = np.where(correct, 1, 2).astype(np.int8)[None, :, None, None] * np.ones((1, 1, 3, 3), np.int8)
    prediction = (direction, confidence[None, :, None, None] * np.ones((1, 1, 3, 3)), direction)
    mask = probes.interior(3, 3)
    config = probe_scores.ProbeConfig()
    assert config.calibration_steps == 20 and config.precision == 0.93  # the paper's (App. F)
    thresholds, reached = probe_scores.calibrate(prediction, truth, step, mask, config)
    assert thresholds.tolist() == [0.7] and reached.tolist() == [15 / 16]
    every_step = probe_scores.ProbeConfig(calibration_steps=21)
    assert probe_scores.calibrate(prediction, truth, step, mask, every_step)[0].tolist() == [0.9]


def evaluation(run: str, greedy: dict[int, list[int]]) -> xr.Dataset:
    """A run's test evaluation as evaluate.evaluate_run writes it: `greedy` {seed: solved per level}; sampled play
    solves every level (so that reading the wrong mode shows)."""
    seeds = sorted(greedy)
    solved = np.stack([np.array([greedy[seed] for seed in seeds], bool), np.ones((len(seeds), 6), bool)])
    return xr.Dataset({"solved": (("mode", "seed", "level"), solved)},
                      coords={"mode": ["greedy", "sampled"], "seed": seeds, "level": np.arange(6)}, attrs={"run": run})


def test_the_scored_levels_are_those_every_probed_agent_solves_greedily():
    evaluations = [evaluation("a", {0: [0, 0, 0, 0, 0, 0], 1: [1, 1, 0, 1, 1, 0], 2: [1, 1, 1, 1, 1, 0]}),
                   evaluation("b", {0: [1, 0, 0, 1, 1, 1]}),
                   evaluation("c", {2: [1, 1, 1, 1, 0, 1]})]
    seeds = {"a": [1, 2], "b": [0], "c": [2]}  # a probed at seeds 1 and 2, not 0
    # By hand: a's agents 1 ∩ 2 = levels 0, 1, 3, 4; ∩ b = 0, 3, 4; ∩ c = 0, 3.
    assert probe_scores.solved_by_all(evaluations, seeds, 6).tolist() == [0, 3]
    assert probe_scores.solved_by_all(evaluations, seeds | {"a": [0, 1]}, 6).tolist() == []  # a's agent 0 solves none
    nobody = evaluation("d", {0: [0] * 6})
    assert probe_scores.solved_by_all([*evaluations, nobody], seeds | {"d": [0]}, 6).tolist() == []
    with pytest.raises(PipelineError, match=r"test evaluation of a: 6 levels, but the probe data plays 7"):
        probe_scores.solved_by_all(evaluations, seeds, 7)
    with pytest.raises(PipelineError, match=r"test evaluation of b: probed seeds \[0, 2\] not all among its seeds \[0\]"):
        probe_scores.solved_by_all(evaluations, seeds | {"b": [0, 2]}, 6)


def test_scores_count_only_the_scored_levels_and_none_is_nan(linear_code):
    train, calibration, test = linear_code
    test = test.assign_coords(level=test["level"] - 250)  # test levels 0..49, 10 steps each
    test.attrs["levels"] = 50
    config = probe_scores.ProbeConfig(seeds=1, epochs=1, learning_rate=3e-2, bootstrap=50)
    chosen = [3, 17, 40]
    found = probe_scores.score(train, calibration, test, chosen, config)
    # The same levels as a test set of their own (renumbered 0..2): the same probes, so the same scores and intervals.
    alone = test.isel(sample=np.isin(test["level"].values, chosen))
    alone = alone.assign_coords(level=("sample", np.searchsorted(chosen, alone["level"].values)))
    alone.attrs["levels"] = 3
    expected = probe_scores.score(train, calibration, alone, np.arange(3), config)
    for name in ("recall", "precision", "macro_f1", "threshold"):
        np.testing.assert_array_equal(found[name].values, expected[name].values)
    assert found["episodes"].values.tolist() == [3] * 10 and found.attrs["scored_levels"] == 3
    assert np.flatnonzero(found["scored"].values).tolist() == chosen
    none = probe_scores.score(train, calibration, test, [], config)
    assert none.attrs["scored_levels"] == 0 and not none["scored"].any() and not none["episodes"].any()
    assert np.isnan(none["recall"]).all() and np.isnan(none["macro_f1"]).all()
    np.testing.assert_array_equal(none["threshold"].values, found["threshold"].values)  # calibrated all the same
    assert none.sizes["picture_step"] == 3  # Fig. 13's picture does not depend on the scored levels


def test_macro_f1_follows_sklearn():
    # Class 0: F1 1; class 1: TP 1, FP 1 → 2/3; class 2: TP 1, FN 1 → 2/3; classes 3, 4 absent: 1 (zero_division).
    assert probe_scores.macro_f1(np.array([0, 1, 1, 2]), np.array([0, 1, 2, 2])) == pytest.approx((3 + 4 / 3) / 5)


def test_per_step_sums_samples_into_level_and_step_cells():
    counts = probe_scores.per_step(np.array([1.0, 2.0, 3.0]), level=np.array([0, 1, 0]), step=np.array([0, 0, 1]),
                                   levels=2, steps=2)
    np.testing.assert_array_equal(counts, [[1, 3], [2, 0]])


def test_bootstrap_interval_covers_the_true_value_at_about_the_nominal_rate():
    rng = np.random.default_rng(0)
    true_recall, covered, repeats = 0.6, 0, 300
    for _ in range(repeats):
        labelled = rng.integers(5, 20, size=(1, 100, 1))  # 100 levels, one step, one probe seed
        p = rng.beta(6, 4, size=labelled.shape)  # levels differ; their mean recall is 0.6
        hits = rng.binomial(labelled, p)
        estimate, low, high = probe_scores.bootstrap_ratio(hits, labelled, draws=400, seed=int(rng.integers(1 << 30)))
        covered += bool(low[0] <= true_recall <= high[0])
    assert 0.90 <= covered / repeats <= 0.99


def test_every_probed_agents_scores_are_collected_by_run_and_agent(linear_code, tmp_path):
    """Two runs, two probed agents each (seeds 3 and 5), scored on the same levels: one dataset by run and agent, each
    agent with its seed; the pages' view is one curve per run, the mean over its agents."""
    train, calibration, test = linear_code
    test = test.assign_coords(level=test["level"] - 250)
    config = probe_scores.ProbeConfig(seeds=1, epochs=1, learning_rate=3e-2, bootstrap=20)
    cfg = files.load([REPO / "config/smoke.yaml"])
    runs = Study.of(cfg).sokoban.probed
    paths = []
    for run in runs:
        for seed in (3, 5):
            attrs = {"levels": 50, "seed": seed, "run": run.id, "run_config": json.dumps(run.to_dict())}
            scores = probe_scores.score(train, calibration, test.assign_attrs(attrs), [0, 1, 2], config)
            paths.append(tmp_path / f"{len(paths)}.nc")
            store.write_netcdf(scores, paths[-1])
    found = probe_scores.collect([str(path) for path in paths])
    assert found["run"].values.tolist() == [run.id for run in runs] and found.sizes["agent"] == 2
    assert found["agent_seed"].values.tolist() == [[3, 5], [3, 5]]
    assert found["recall"].dims[:2] == ("run", "agent") and found.attrs["scored_levels"] == 3
    view = probe_analysis.over_agents(found)
    assert "agent" not in view["recall"].dims and view["scored"].values.sum() == 3
    np.testing.assert_allclose(view["macro_f1"].values, found["macro_f1"].mean("agent").values)
    with pytest.raises(PipelineError, match="different numbers of probed agents"):
        probe_scores.collect([str(path) for path in paths[:3]])
