"""TensorBoard curves beside a training run: the event files, read back by an independent reader, show curve.nc's
numbers at its updates, once each, also when a kill between two checkpoints made the resumed run train some
updates again; the job's throughput and compile time are there at every log point."""

import math

import numpy as np
import pytest
import xarray as xr
from helpers import (LM_TAGS, SOKOBAN_TAGS, assert_tensorboard_matches, model_config, shards, tensorboard_scalars,
                     train_config)

from parallel_experts.core.checkpoint import checkpoint_update
from parallel_experts.core.tensorboard import TrainingCurves
from parallel_experts.lm import experiment as lm_experiment
from parallel_experts.lm import train as lm_train
from parallel_experts.sokoban import experiment as sokoban_experiment
from parallel_experts.sokoban import train as sokoban_train
from parallel_experts.sokoban.generator import generated_set
from parallel_experts.sokoban.settings import AgentConfig, TrainConfig

SEEDS = (0, 3)
# 8 updates: log points at updates 2, 4, 6, 8, checkpoints at 4 and 8.
SOKOBAN = TrainConfig(env_steps=8 * 5 * 8, num_envs=8, num_steps=5, log_interval=2, checkpoint_every=2, time_limit=20)


class Killed(Exception):
    """Stands for a kill: raised after a log point was written, before the trainer could checkpoint it."""


def killed_after(curves: TrainingCurves, update: int):
    def on_log(point):
        curves.log(point)
        if point["update"] == update:
            raise Killed

    return on_log


def speed(folder, work: str, updates: list[int]) -> None:
    """The job's throughput and compile seconds: at every log point once, finite; throughput positive, compile
    seconds not negative (0 in a process that has every program compiled already, as a resumed call here)."""
    shown = tensorboard_scalars(folder)
    for tag, least in ((f"speed/{work}_per_second", 1e-9), ("speed/compile_seconds", 0.0)):
        assert [step for step, _ in shown[tag]] == updates, tag
        assert all(math.isfinite(v) and v >= least for _, v in shown[tag]), (tag, shown[tag])


def test_sokoban_curves_match_curve_nc_once_per_update_after_a_kill_between_checkpoints(tmp_path):
    levels = generated_set(30, room_size=5, num_boxes=1, seed=3).levels
    agent = AgentConfig(depth=1, experts=2, width=4)
    trainer = sokoban_train.Trainer(agent, SOKOBAN, levels)
    run = sokoban_experiment.Run("sweep", "small", agent, SOKOBAN, SEEDS)
    steps = len(SEEDS) * SOKOBAN.num_envs * SOKOBAN.num_steps

    with pytest.raises(Killed), TrainingCurves(tmp_path, "env_steps", steps, SEEDS) as curves:
        sokoban_train.train(trainer, SEEDS, tmp_path, on_log=killed_after(curves, 6))
    assert checkpoint_update(tmp_path) == 4
    assert [s for s, _ in tensorboard_scalars(tmp_path / "seed3")["train/loss"]] == [2, 4, 6]  # 6 is trained again

    with TrainingCurves(tmp_path, "env_steps", steps, SEEDS) as curves:
        carry, log = sokoban_train.train(trainer, SEEDS, tmp_path, on_log=curves.log)
    sokoban_train.save_outputs(run, carry, log, tmp_path)

    with xr.open_dataset(tmp_path / "curve.nc") as curve:
        assert curve["update"].values.tolist() == [2, 4, 6, 8]
        assert np.isfinite(curve["episodic_return"].values[:, -1]).all()  # episodes ended: real values compared
        for seed in SEEDS:
            assert_tensorboard_matches(tmp_path / f"seed{seed}", curve, SOKOBAN_TAGS, seed=seed)
    assert not any(tag.startswith("train/") for tag in tensorboard_scalars(tmp_path))  # the job's file: speed only
    speed(tmp_path, "env_steps", [2, 4, 6, 8])


def test_lm_curves_match_curve_nc_once_per_update_after_a_kill_between_checkpoints(tmp_path):
    # 12 updates: log points every 2, checkpoints every 4.
    config, model = train_config(True), model_config(True)
    run = lm_experiment.Run("small", 16, model, config)
    tokens = shards()

    with pytest.raises(Killed), TrainingCurves(tmp_path, "tokens", config.batch_tokens) as curves:
        lm_train.train(lm_train.Trainer(model, config), tokens, tmp_path, on_log=killed_after(curves, 6))
    assert checkpoint_update(tmp_path) == 4

    with TrainingCurves(tmp_path, "tokens", config.batch_tokens) as curves:
        carry, curve = lm_train.train(lm_train.Trainer(model, config), tokens, tmp_path, on_log=curves.log)
    lm_train.save_outputs(run, carry, curve, tmp_path)

    with xr.open_dataset(tmp_path / "curve.nc") as curve:
        assert curve["update"].values.tolist() == list(range(2, 13, 2))
        assert_tensorboard_matches(tmp_path, curve, LM_TAGS)
        # The learning rate by hand: 12 updates have no warm-up (1 % rounds to 0), then a cosine from the recurrent
        # family's 0.02 to 2e-4 over the 12 updates; the update at log point u used step u − 1 of it.
        steps = curve["update"].values - 1
        np.testing.assert_allclose(curve["learning_rate"], 2e-4 + (0.02 - 2e-4) * (1 + np.cos(np.pi * steps / 12)) / 2,
                                   rtol=1e-5)
    speed(tmp_path, "tokens", list(range(2, 13, 2)))
