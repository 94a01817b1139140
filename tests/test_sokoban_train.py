"""A2C training: GAE by hand, learning, resume after a kill reproduces the uninterrupted run, NaNs stop loudly."""

import json
import os
import signal
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import xarray as xr
from helpers import SOKOBAN_TAGS, assert_tensorboard_matches, run_killed_and_resumed

from parallel_experts.config import files
from parallel_experts.config.errors import ConfigError
from parallel_experts.core import walltime
from parallel_experts.core.run_folder import attempts
from parallel_experts.core.walltime import Deadline
from parallel_experts.sokoban.generator import generated_set
from parallel_experts.sokoban.programs import dummy_levels
from parallel_experts.sokoban.settings import AgentConfig, TrainConfig
from parallel_experts.sokoban.train import (LOSS_TERMS, NonFiniteLossError, Trainer, checkpoint_update, gae,
                                            initial_agent, train)
from parallel_experts.study import Study

TINY = TrainConfig(env_steps=8 * 5 * 6, num_envs=8, num_steps=5, log_interval=2, checkpoint_every=1,
                   time_limit=20)
ODD = TrainConfig(**{**TINY.__dict__, "env_steps": 8 * 5 * 7 + 39})  # 7 updates: 3 log points and 1 more update


def tiny_trainer(config):
    levels = generated_set(30, room_size=5, num_boxes=1, seed=3).levels
    return Trainer(AgentConfig(depth=1, experts=2, width=4), config, levels)


# The tests of each expensive module fixture run on one worker (conftest.py), which builds it, and compiles its
# trainer's updates, once.
TRAINERS = pytest.mark.xdist_group("sokoban_train_trainers")
FOUR_SEEDS = pytest.mark.xdist_group("sokoban_train_four_seeds")


@pytest.fixture(scope="module")
def trainer():
    return tiny_trainer(TINY)


@pytest.fixture(scope="module")
def odd_trainer():
    return tiny_trainer(ODD)


def leaves(carry):
    return [np.asarray(x) for x in jax.tree.leaves(carry)]


@TRAINERS
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


@TRAINERS
def test_every_update_is_trained_when_log_interval_does_not_divide_them(odd_trainer, tmp_path):
    carry, log = train(odd_trainer, [0, 1], tmp_path)
    assert ODD.num_updates == 7 and checkpoint_update(tmp_path) == 7
    counts = [np.asarray(count) for _, count in optax.tree_utils.tree_get_all_with_path(carry.opt_state, "count")]
    assert counts and all(count.tolist() == [7, 7] for count in counts)  # one Adam step per update, per seed
    schedule = optax.linear_schedule(ODD.learning_rate, 0.0, ODD.num_updates)
    assert schedule(6) > 0 and schedule(7) == 0  # the last update used the last non-zero rate
    # Log points where the authors log (every log_interval updates), none for the last partial stretch.
    assert [p["update"] for p in log.curve] == [2, 4, 6]


@TRAINERS
@pytest.mark.parametrize("stop_after", [1, 3])  # 3: killed after the last log point, before the final update
def test_resume_reproduces_the_uninterrupted_run_of_a_partial_last_stretch(odd_trainer, tmp_path, stop_after):
    whole, whole_log = train(odd_trainer, [0, 1], tmp_path / "whole")
    train(odd_trainer, [0, 1], tmp_path / "split", stop_after=stop_after)
    assert checkpoint_update(tmp_path / "split") == 2 * stop_after
    resumed, resumed_log = train(odd_trainer, [0, 1], tmp_path / "split")
    for a, b in zip(leaves(whole), leaves(resumed)):
        np.testing.assert_array_equal(a, b)
    assert json.dumps(resumed_log.state()) == json.dumps(whole_log.state())  # the FIFOs too


@TRAINERS
def test_the_level_table_is_an_argument_of_the_compiled_updates_not_a_constant(trainer):
    # 100× the levels would add ~600 kB of constant to the program text if the table were embedded in it.
    many = Trainer(trainer.agent_config, TINY, np.tile(np.asarray(trainer.levels), (100, 1, 1, 1)))
    sizes = [len(t.run_updates.lower(t.levels, t.init([0])).as_text()) for t in (trainer, many)]
    assert abs(sizes[1] - sizes[0]) < 100, sizes


@TRAINERS
def test_the_initial_agent_of_a_seed_is_the_one_training_starts_from(trainer):
    import equinox as eqx

    started = trainer.init([3]).params
    untrained = eqx.filter(initial_agent(trainer.agent_config, 3), eqx.is_array)
    for ours, theirs in zip(jax.tree.leaves(untrained), jax.tree.leaves(started), strict=True):
        np.testing.assert_array_equal(ours, theirs[0])


def test_fewer_updates_than_one_log_interval_is_a_config_error():
    with pytest.raises(ConfigError, match=r"sokoban\.env_steps 120 is 3 updates of sokoban\.training\.num_envs × "
                                          r"num_steps = 8 × 5 env steps, fewer than sokoban\.training\.log_interval 4"):
        TrainConfig(**{**TINY.__dict__, "env_steps": 120, "log_interval": 4})


@TRAINERS
def test_non_finite_loss_stops_with_the_last_good_checkpoint_kept(trainer, tmp_path):
    train(trainer, [0], tmp_path / "run", stop_after=1)
    exploding = Trainer(trainer.agent_config, TrainConfig(**{**TINY.__dict__, "learning_rate": 1e30}),
                        generated_set(30, room_size=5, num_boxes=1, seed=3).levels)
    with pytest.raises(NonFiniteLossError, match=r"non-finite loss between updates \d+ and \d+ \(seed 0\)"):
        train(exploding, [0], tmp_path / "run")
    assert checkpoint_update(tmp_path / "run") == 2  # untouched by the failed stretch


def smoke_config(repo):
    config = files.load([repo / "config/smoke.yaml"])
    config["sokoban"]["env_steps"] = 8 * 5 * 2 * 4  # 4 log points
    config["sokoban"]["training"]["checkpoint_every"] = 1
    return config


def cli(*args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "parallel_experts", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kwargs)


@pytest.mark.pipeline
def test_cli_training_survives_a_kill(repo, tmp_path):
    config = smoke_config(repo)
    run = Study.of(config).sokoban.sweeps[0]
    levels = tmp_path / "train.npz"
    source = json.dumps(config["sokoban"]["levels"]["train"])
    assert cli("sokoban-levels", "--source", source, "--out", str(levels)).wait() == 0

    (tmp_path / "config.json").write_text(json.dumps(config))

    train = ["sokoban-train", "--config", str(tmp_path / "config.json"), "--run", run.id, "--levels", str(levels)]
    run_killed_and_resumed(train, tmp_path / "whole", tmp_path / "killed", "curve.nc")
    with xr.open_dataset(tmp_path / "whole/curve.nc") as a, xr.open_dataset(tmp_path / "killed/curve.nc") as b:
        xr.testing.assert_identical(a, b)
        assert a.sizes == {"seed": 1, "update": 4}
        for folder in (tmp_path / "whole", tmp_path / "killed"):  # killed: its points survived the SIGKILL
            assert_tensorboard_matches(folder / f"seed{run.seeds[0]}", a, SOKOBAN_TAGS, seed=run.seeds[0])


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


@TRAINERS
def test_a_deadline_stops_at_log_points_and_the_resubmitted_run_is_the_uninterrupted_one(trainer, tmp_path):
    whole, whole_log = train(trainer, [0, 1], tmp_path / "whole")
    for stopped_at in (2, 4):  # no time left: every attempt trains one log interval, checkpoints and stops
        with pytest.raises(walltime.StoppedEarly, match=f"stopped at update {stopped_at}") as stop:
            train(trainer, [0, 1], tmp_path / "split", deadline=Deadline(seconds=0))
        assert stop.value.exit_status == walltime.RESUBMIT and checkpoint_update(tmp_path / "split") == stopped_at
    assert [(entry["event"], entry["update"]) for entry in attempts(tmp_path / "split")] == [
        ("start", 0), ("stop", 2), ("start", 2), ("stop", 4)]
    resumed, resumed_log = train(trainer, [0, 1], tmp_path / "split", deadline=Deadline(seconds=0))  # the last
    for a, b in zip(leaves(whole), leaves(resumed)):
        np.testing.assert_array_equal(a, b)
    assert json.dumps(resumed_log.curve) == json.dumps(whole_log.curve)


@TRAINERS
def test_a_signal_stops_training_at_the_next_log_point(trainer, tmp_path):
    with Deadline().listening() as deadline, pytest.raises(walltime.StoppedEarly, match="SIGTERM received"):
        train(trainer, [0], tmp_path, on_log=lambda point: os.kill(os.getpid(), signal.SIGTERM), deadline=deadline)
    assert checkpoint_update(tmp_path) == 2


@TRAINERS
def test_an_attempt_killed_before_its_first_checkpoint_stops_the_next_one(trainer, tmp_path):
    def killed(point):
        raise KeyboardInterrupt  # as SLURM's SIGKILL would end it, before the checkpoint of this log point

    with pytest.raises(KeyboardInterrupt):
        train(trainer, [0], tmp_path, on_log=killed, deadline=Deadline(seconds=60))
    with pytest.raises(walltime.NoProgress, match="also started from update 0"):  # no more time than that one
        train(trainer, [0], tmp_path, deadline=Deadline(seconds=60))
    train(trainer, [0], tmp_path, stop_after=1, deadline=Deadline(seconds=600))  # more time: a fair new try
    assert checkpoint_update(tmp_path) == 2
    assert [(entry["event"], entry["update"]) for entry in attempts(tmp_path)] == [("start", 0), ("start", 0)]


def memory_trainer(config, agent=AgentConfig(depth=2, experts=3, width=4)):
    return Trainer(agent, config, generated_set(30, room_size=5, num_boxes=1, seed=3).levels)


@TRAINERS
def test_the_compiled_updates_take_over_the_carry_they_are_given(trainer):
    """The carry is donated: its buffers become the returned carry's, so a job holds one carry, not two."""
    carry = trainer.init([0, 1])
    old = jax.tree.leaves(carry)
    trainer.run_updates(trainer.levels, carry)
    assert all(leaf.is_deleted() for leaf in old)


def test_rematerialised_gradients_equal_the_stored_ones_to_float32_rounding():
    """`remat` reruns each rollout step's forward pass in the backward pass: the same gradients up to rounding, as
    XLA fuses the rerun differently (not bit for bit: measured up to 1e-6 of the gradient's norm), for each expert
    kind, with and without recurrence."""
    remat = TrainConfig(**{**TINY.__dict__, "remat": True})
    for agent in (AgentConfig(2, 3, 4), AgentConfig(2, 2, 4, recurrent=False), AgentConfig(2, 2, 4, expert="convglu")):
        plain = memory_trainer(TINY, agent)
        carry, _ = plain.run_updates(plain.levels, plain.init([0]))  # two updates: a state that is not zero
        one = jax.tree.map(lambda x: x[0], carry)
        found = []
        for trainer in (plain, memory_trainer(remat, agent)):
            grad = jax.jit(lambda params, c, levels, t=trainer: jax.grad(t._loss, has_aux=True)(
                params, c, t.envs(levels)))
            found.append(grad(one.params, one, plain.levels))
        (ours, (_, ours_metrics)), (theirs, (_, theirs_metrics)) = found[1], found[0]
        a, b = (np.concatenate([np.ravel(x) for x in jax.tree.leaves(g)]) for g in (ours, theirs))
        assert np.linalg.norm(a - b) <= 1e-5 * np.linalg.norm(b) and np.abs(a - b).max() <= 1e-5 * np.abs(b).max()
        np.testing.assert_allclose(ours_metrics["loss"], theirs_metrics["loss"], rtol=1e-6)


def test_a_rematerialised_rollout_step_keeps_only_its_inputs():
    """XLA's plan grows per rollout step and environment by about the step's inputs (the agent's state s, h, c and
    the observation) and the outputs the loss reads, a hand count; without `remat`, by every activation (18-23×)."""
    agent = AgentConfig(depth=2, experts=3, width=8)

    def temp_bytes(steps, remat):
        config = TrainConfig(env_steps=4 * steps * 2, num_envs=4, num_steps=steps, log_interval=1, remat=remat)
        trainer = Trainer(agent, config, dummy_levels())
        table = jax.ShapeDtypeStruct((10, 10, 10, 2), jnp.uint8)
        lowered = trainer.run_updates.lower(table, jax.eval_shape(trainer.init, [0]))
        return lowered.compile().memory_analysis().temp_size_in_bytes

    cells, floats = 10 * 10, 4
    state = cells * agent.width * (1 + 2 * agent.depth * agent.experts) * floats  # s, and h and c of every expert
    step = state + cells * 2 + (agent.num_actions + 5) * 4 + 2  # + the uint8 grid, logits, value, action, ...
    grown = {remat: (temp_bytes(4, remat) - temp_bytes(2, remat)) / 2 / 4 for remat in (False, True)}
    assert step <= grown[True] <= 1.5 * step and grown[False] > 10 * step, (grown, step)


def trained(trainer, seeds, folder):
    """(the final carry, the learning curve) of `seeds` trained by `trainer` in a folder of `folder`. A trainer keeps
    nothing of a run but its compiled updates, so one trainer trains every run of its config (each new one would
    trace and load its programs again)."""
    config = trainer.config
    carry, log = train(trainer, seeds, folder / f"{config.seeds_at_once}-{'-'.join(map(str, seeds))}")
    return carry, log.curve


@pytest.fixture(scope="module")
def four_seeds(tmp_path_factory):
    """Seeds 0-3 trained all at once (key None) and in groups of 1 and 2 (`seeds_at_once`), rematerialised as
    config/paper.yaml trains them."""
    folder = tmp_path_factory.mktemp("four_seeds")
    return {g: trained(memory_trainer(TrainConfig(**{**TINY.__dict__, "remat": True, "seeds_at_once": g})),
                       [0, 1, 2, 3], folder) for g in (None, 1, 2)}


# Adam moves a weight by about the learning rate per update, whatever its gradient's size, so the float32 rounding of
# a gradient that cancels to nearly nothing (the head's attention bias: a softmax ignores a shift, so its gradient is
# rounding alone) can move a weight by a visible fraction of one step. Measured: at most 0.2 % of a step after the 6
# updates. A seed trained on another seed's key or levels, or not at all, moves its weights by whole steps.
ADAM_STEPS = 0.01


@FOUR_SEEDS
def test_seeds_in_groups_train_as_all_seeds_at_once(four_seeds):
    """`seeds_at_once` is memory only: seeds trained in groups of 1 or 2 take the actions of the same seeds trained
    all at once (every integer of the carry, environments, episode counters and keys, bit for bit, and so the same
    episodes), and their losses and weights agree up to float32 rounding (a vmap over fewer seeds lets XLA order
    its sums differently, so not bit for bit)."""
    together, together_curve = four_seeds[None]
    for g in (1, 2):
        carry, curve = four_seeds[g]
        for a, b in zip(leaves(together), leaves(carry)):
            if a.dtype.kind in "biu":
                np.testing.assert_array_equal(b, a)
        for a, b in zip(leaves(together.params), leaves(carry.params)):
            np.testing.assert_allclose(b, a, rtol=0, atol=ADAM_STEPS * TINY.learning_rate)
        for point, ours in zip(together_curve, curve, strict=True):
            for name in ("episodic_return", "episodic_length", "solve_fraction"):
                np.testing.assert_array_equal(ours[name], point[name])
            for name in LOSS_TERMS:
                np.testing.assert_allclose(ours[name], point[name], rtol=1e-5, atol=1e-6)


@FOUR_SEEDS
def test_seeds_in_groups_train_as_the_groups_would_alone(four_seeds, tmp_path):
    """`seeds_at_once` = g trains g seeds at a time: each group's numbers are those of a run of its seeds alone (a
    vmap over g seeds), bit for bit, and a resumed run is the uninterrupted one."""
    alone = memory_trainer(TrainConfig(**{**TINY.__dict__, "remat": True}))
    for g in (1, 2):
        carry, curve = four_seeds[g]
        parts = [trained(alone, list(range(first, first + g)), tmp_path) for first in range(0, 4, g)]
        for index, leaf in enumerate(leaves(carry)):
            np.testing.assert_array_equal(leaf, np.concatenate([leaves(part[0])[index] for part in parts]))
        assert json.dumps([p["loss"] for p in curve]) == json.dumps(
            [sum((part[1][k]["loss"] for part in parts), []) for k in range(len(curve))])
    in_groups = memory_trainer(TrainConfig(**{**TINY.__dict__, "remat": True, "seeds_at_once": 1}))
    train(in_groups, [0, 1], tmp_path / "split", stop_after=1)
    resumed, resumed_log = train(in_groups, [0, 1], tmp_path / "split")
    whole, whole_log = train(in_groups, [0, 1], tmp_path / "whole")
    for a, b in zip(leaves(whole), leaves(resumed)):
        np.testing.assert_array_equal(a, b)
    assert json.dumps(resumed_log.state()) == json.dumps(whole_log.state())
