"""A2C training: GAE by hand, learning, resume after a kill reproduces the uninterrupted run, NaNs stop loudly."""

import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

from helpers import run_killed_and_resumed
from parallel_experts import config as configuration
from parallel_experts.sokoban import experiment
from parallel_experts.sokoban.agent import AgentConfig
from parallel_experts.sokoban.generator import generated_set
from parallel_experts.sokoban.train import NonFiniteLossError, Trainer, TrainConfig, checkpoint_update, gae, train

TINY = TrainConfig(env_steps=8 * 5 * 6, num_envs=8, num_steps=5, log_interval=2, checkpoint_every=1,
                   time_limit=20)


@pytest.fixture(scope="module")
def trainer():
    levels = generated_set(30, room_size=5, num_boxes=1, seed=3).levels
    return Trainer(AgentConfig(depth=1, experts=2, width=4), TINY, levels)


def leaves(carry):
    return [np.asarray(x) for x in jax.tree.leaves(carry)]


def test_resume_reproduces_the_uninterrupted_run(trainer, tmp_path):
    whole, whole_log = train(trainer, [0, 1], tmp_path / "whole")
    assert len(whole_log.curve) == 3 and checkpoint_update(tmp_path / "whole") == 6
    train(trainer, [0, 1], tmp_path / "split", stop_after=1)
    assert checkpoint_update(tmp_path / "split") == 2
    resumed, resumed_log = train(trainer, [0, 1], tmp_path / "split")
    for a, b in zip(leaves(whole), leaves(resumed)):
        np.testing.assert_array_equal(a, b)
    assert json.dumps(resumed_log.curve) == json.dumps(whole_log.curve)  # NaN where no episode ended yet
    # Seeds differ from each other (independent keys), yet each is reproducible.
    assert whole_log.curve[-1]["loss"][0] != whole_log.curve[-1]["loss"][1]


def test_non_finite_loss_stops_with_the_last_good_checkpoint_kept(trainer, tmp_path):
    train(trainer, [0], tmp_path / "run", stop_after=1)
    exploding = Trainer(trainer.agent_config, TrainConfig(**{**TINY.__dict__, "learning_rate": 1e30}),
                        generated_set(30, room_size=5, num_boxes=1, seed=3).levels)
    with pytest.raises(NonFiniteLossError, match=r"non-finite loss between updates \d+ and \d+ \(seed 0\)"):
        train(exploding, [0], tmp_path / "run")
    assert checkpoint_update(tmp_path / "run") == 2  # untouched by the failed stretch


def smoke_config(repo):
    config = configuration.load([repo / "config/smoke.yaml"])
    config["sokoban"]["env_steps"] = 8 * 5 * 2 * 4  # 4 log points
    config["sokoban"]["training"]["checkpoint_every"] = 1
    return config


def cli(*args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "parallel_experts", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kwargs)


@pytest.mark.pipeline
def test_cli_training_survives_a_kill(repo, tmp_path):
    config = smoke_config(repo)
    run = experiment.runs(config)[0]
    levels = tmp_path / "train.npz"
    source = json.dumps(config["sokoban"]["levels"]["train"])
    assert cli("sokoban-levels", "--source", source, "--out", str(levels)).wait() == 0

    def train_cli(run_dir):
        return cli("sokoban-train", "--run", json.dumps(run.to_dict()), "--levels", str(levels),
                   "--run-dir", str(run_dir))

    run_killed_and_resumed(train_cli, tmp_path / "whole", tmp_path / "killed", "curve.nc")
    with xr.open_dataset(tmp_path / "whole/curve.nc") as a, xr.open_dataset(tmp_path / "killed/curve.nc") as b:
        xr.testing.assert_identical(a, b)
        assert a.sizes == {"seed": 1, "update": 4}


def test_gae_by_hand():
    # One environment, three steps, the episode ends after step 1 (index 1).
    rewards = jnp.array([[1.0], [2.0], [3.0]])
    values = jnp.array([[0.5], [1.0], [1.5]])
    dones = jnp.array([[0.0], [1.0], [0.0]])
    last_value = jnp.array([2.0])
    gamma, lam = 0.9, 0.8
    # t=2: delta = 3 + 0.9*2 - 1.5 = 3.3; A2 = 3.3
    # t=1: done, delta = 2 - 1 = 1; A1 = 1 (nothing flows back across the episode end)
    # t=0: delta = 1 + 0.9*1.0 - 0.5 = 1.4; A0 = 1.4 + 0.9*0.8*1 = 2.12
    advantages, returns = gae(rewards, values, dones, last_value, gamma, lam)
    np.testing.assert_allclose(advantages[:, 0], [2.12, 1.0, 3.3], rtol=1e-6)
    np.testing.assert_allclose(returns[:, 0], [2.62, 2.0, 4.8], rtol=1e-6)
