"""The language-model training loop: resume, gradient grouping, data parallelism, warm-up, divergence."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from functools import partial
from itertools import islice

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import xarray as xr
from helpers import (LM_TAGS, REPO, VOCAB, assert_tensorboard_matches, model_config, run_killed_and_resumed, shards,
                     train_config)

from parallel_experts.config import files
from parallel_experts.config.errors import ConfigError
from parallel_experts.core import walltime
from parallel_experts.core.checkpoint import NonFiniteLossError, checkpoint_update
from parallel_experts.core.walltime import Deadline
from parallel_experts.lm import models
from parallel_experts.lm.corpus import write_shards
from parallel_experts.lm.settings import TrainConfig
from parallel_experts.lm.shards import DataError, num_batches
from parallel_experts.lm.train import Trainer, train
from parallel_experts.study import Study


def params_close(a, b, atol=0.0):
    for x, y in zip(jax.tree.leaves(eqx.filter(a, eqx.is_array)), jax.tree.leaves(eqx.filter(b, eqx.is_array))):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=atol, rtol=0)


@pytest.mark.parametrize("recurrent", [False, True])
def test_resume_gives_the_same_run(tmp_path, recurrent):
    """Stopped after a checkpoint (as a kill would leave it) and resumed = trained in one go, bit for bit."""
    tokens = shards()
    whole, whole_curve = train(Trainer(model_config(recurrent), train_config(recurrent)), tokens, tmp_path / "a")
    train(Trainer(model_config(recurrent), train_config(recurrent)), tokens, tmp_path / "b", stop_after=4)
    assert checkpoint_update(tmp_path / "b") == 4
    resumed, resumed_curve = train(Trainer(model_config(recurrent), train_config(recurrent)), tokens, tmp_path / "b")
    assert resumed_curve == whole_curve and len(whole_curve) == 6
    params_close(resumed.params, whole.params)
    if recurrent:
        params_close(resumed.states, whole.states)
    assert whole_curve[-1]["ce_loss"] < whole_curve[0]["ce_loss"] - 0.3  # it learns the +1 rule



def test_a_seed_keys_the_initial_parameters_and_seed_0_is_key_0():
    """A run's seed (lm.budgets.<name>.seeds) is its initial parameters' key, which `init` starts training from:
    seed 0 from key 0 as every run did before seeds, seed 1 from other parameters (of every array)."""
    config = train_config(True)
    zero, one = Trainer(model_config(True), config, seed=0), Trainer(model_config(True), config, seed=1)
    params_close(zero.params, eqx.filter(models.build(model_config(True), jax.random.key(0)), eqx.is_array))
    params_close(Trainer(model_config(True), config).init().params, zero.params)  # the default is seed 0
    random = [(a, b) for a, b in zip(jax.tree.leaves(zero.init().params), jax.tree.leaves(one.init().params))
              if np.asarray(a).std() > 0]  # not the norms' constant ones
    assert random and not any(np.array_equal(a, b) for a, b in random)


def test_a_deadline_stops_at_log_points_and_the_resubmitted_run_is_the_uninterrupted_one(tmp_path):
    """12 updates, a log point every 2: with no time left each attempt trains one log interval (not a checkpoint
    interval: the stop checkpoints), and the curve and weights end as if never stopped."""
    tokens, trainer = shards(), Trainer(model_config(True), train_config(True))
    whole, whole_curve = train(trainer, tokens, tmp_path / "a")
    for stopped_at in range(2, 12, 2):
        with pytest.raises(walltime.StoppedEarly, match=f"stopped at update {stopped_at} "):
            train(trainer, tokens, tmp_path / "b", deadline=Deadline(seconds=0))
    resumed, resumed_curve = train(trainer, tokens, tmp_path / "b", deadline=Deadline(seconds=0))
    assert resumed_curve == whole_curve
    params_close(resumed.params, whole.params)
    params_close(resumed.states, whole.states)

def test_recurrent_warmup_windows_are_skipped(tmp_path):
    """Shards of 2,400 tokens in 32 streams of 75: ⌊(75 − 9)/8⌋ + 1 = 9 windows per shard, the first ⌈16/8⌉ = 2
    warm up the state, so 7 updates per shard; the 12th update is the 5th window of the second shard's training
    windows, i.e. window 6, and the run resumes at window 7."""
    config = train_config(True, checkpoint_every=12, log_every=12)
    assert num_batches(2400, config.streams, config.sequence) == 9 and config.warmup == 2
    train(Trainer(model_config(True), config), shards(), tmp_path)
    host = json.loads((tmp_path / "checkpoint-000000012.json").read_text())
    assert host["position"] == [0, 1, 7]


def test_training_in_smaller_microbatches_gives_the_same_run(tmp_path):
    one = Trainer(model_config(False), train_config(False, microbatch=16, train_tokens=256 * 2))
    two = Trainer(model_config(False), train_config(False, microbatch=4, train_tokens=256 * 2))
    a, curve_a = train(one, shards(), tmp_path / "a")
    b, curve_b = train(two, shards(), tmp_path / "b")
    np.testing.assert_allclose(curve_a[-1]["loss"], curve_b[-1]["loss"], rtol=1e-5)
    params_close(a.params, b.params, atol=2e-5)


# bfloat16 keeps 8 significant bits: rounding a value of magnitude m errs by at most 2^-8 m (half a unit in the
# last place). A group's gradient leaves `_group` rounded to bfloat16 once per element, and the float32 sum over
# groups adds nothing comparable, so one microbatch of all streams (one rounding of the mean) and G microbatches
# (the float32 mean of G roundings) each err by at most 2^-8 × the largest group gradient m of that parameter: 2
# such units between them. The backward pass rounds its bfloat16 intermediates too, and XLA may order a group's
# sums over tokens differently for 4 streams than for 32: 2 units more. (Measured: at most 0.6 units.) A dropped or
# doubled group, or a wrong divisor, moves the mean by up to m / G = 32 units at G = 8 (13 in this test's data).
BFLOAT16_UNITS = 4


@pytest.mark.parametrize("recurrent, dtype", [(False, "float32"), (True, "float32"), (True, "bfloat16")])
def test_the_gradient_is_the_mean_over_all_streams_whatever_the_microbatch(recurrent, dtype):
    """`lm.training.microbatch_cache_gb` changes only the recurrent runs' microbatch: the update's gradient of 32
    streams in one microbatch equals that of 8 microbatches of 4 streams (each carrying its own state from the
    previous window), to float32 rounding of the gradient's scale in float32 and within bfloat16 rounding of one
    group's gradient in bfloat16; so do the loss and the states the window leaves."""
    config = train_config(recurrent, batch_tokens=8 * 32 if recurrent else 16 * 32)
    whole = Trainer(replace(model_config(recurrent), dtype=dtype), replace(config, microbatch=32))
    split = Trainer(replace(model_config(recurrent), dtype=dtype), replace(config, microbatch=4))
    # Any parameters do; the zero-initialised output projections would leave most gradients zero.
    keys = iter(jax.random.split(jax.random.key(1), len(jax.tree.leaves(whole.params))))
    params = jax.tree.map(lambda p: p + (0.1 * jax.random.normal(next(keys), p.shape)).astype(p.dtype), whole.params)
    regroup = partial(jax.tree.map, lambda x: x.reshape(8, 4, *x.shape[2:]))
    copies = lambda tree, g: jax.tree.map(lambda x: jnp.broadcast_to(x[g], x.shape), tree)  # noqa: E731
    states = whole.init().states
    gradient = {trainer: eqx.filter_jit(trainer._gradient) for trainer in (whole, split)}
    for _, *batch in islice(whole.batches(shards(), [0, 0, 0]), 2):  # the second window carries a state
        grads, after, loss, _ = gradient[whole](params, states, *batch)
        grads_in_groups, after_in_groups, loss_in_groups, _ = gradient[split](params, regroup(states),
                                                                              *regroup(batch))
        np.testing.assert_allclose(loss_in_groups.mean(), loss.mean(), rtol=1e-5 if dtype == "float32" else 2**-7)
        if recurrent:
            # XLA may block a state's matmuls differently for 4 streams than for 32: float32 rounding, as the gradient
            # (measured: at most 1.7e-6 apart on one machine, bit-equal on others)
            for a, b in zip(jax.tree.leaves(regroup(after)), jax.tree.leaves(after_in_groups)):
                a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
                np.testing.assert_allclose(b, a, rtol=0, atol=1e-5 * np.abs(a).max())
        if dtype == "float32":
            for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(grads_in_groups)):
                np.testing.assert_allclose(b, a, rtol=0, atol=1e-5 * np.abs(a).max())
        else:  # each group's own gradient: the mean of 8 copies of it (exact: 8 equal bfloat16 values in float32)
            groups = [gradient[split](params, *copies(regroup((states, *batch)), g))[0] for g in range(8)]
            for a, b, *each in zip(*map(jax.tree.leaves, (grads, grads_in_groups, *groups))):
                largest = max(float(np.abs(e).max()) for e in each)
                np.testing.assert_allclose(b, a, rtol=0, atol=BFLOAT16_UNITS * 2**-8 * largest)
        states = after


@pytest.mark.parametrize("recurrent", [False, True])
def test_the_loss_of_a_group_is_the_mean_of_each_windows_own_loss(recurrent):
    """The head reads a group's tokens all at once (batch_loss); the loss is still the mean over streams of each
    window's cross-entropy (plus reg × mean |s|²/d of its states, recurrent), computed here stream by stream."""
    config = train_config(recurrent, reg=0.5)  # a large penalty, so that a wrong weighting shows
    trainer = Trainer(model_config(recurrent), config)
    model = eqx.combine(trainer.params, trainer.static)
    rng = np.random.default_rng(1)
    inputs, labels = (jnp.asarray(rng.integers(0, VOCAB, (5, config.sequence)), jnp.int32) for _ in range(2))
    state = (jax.vmap(lambda _: models.RecurrentState.zeros(model.config, config.memory))(jnp.arange(5))
             if recurrent else None)
    grouped, _ = trainer._group(trainer.params, state, inputs, labels, jnp.zeros(5, bool))
    own = []
    for stream in range(5):
        if recurrent:
            one = jax.tree.map(lambda x: x[stream], state)
            hidden = model.segment(one, inputs[stream], config.memory)[0]
            penalty = config.reg * np.mean(np.asarray(hidden) ** 2)
        else:
            hidden, penalty = model.hidden(inputs[stream]), 0.0
        logits = models.logits(model.head, hidden)
        own.append(float(optax.softmax_cross_entropy_with_integer_labels(logits, labels[stream]).mean()) + penalty)
    np.testing.assert_allclose(float(grouped), np.mean(own), rtol=1e-5)


def test_non_finite_loss_stops_and_keeps_the_last_checkpoint(tmp_path):
    train(Trainer(model_config(True), train_config(True, train_tokens=256 * 4)), shards(), tmp_path)
    diverging = train_config(True, reg=float("inf"))  # the same run, resumed with an infinite penalty
    with pytest.raises(NonFiniteLossError, match="non-finite loss or parameters at update 5"):
        train(Trainer(model_config(True), diverging), shards(), tmp_path)
    assert checkpoint_update(tmp_path) == 4


def test_bad_batch_settings_name_the_config_key():
    with pytest.raises(ConfigError, match="lm.training: batch_tokens 256 must split"):
        TrainConfig(sequence=16, batch_tokens=256, microbatch=5)
    with pytest.raises(ConfigError, match="checkpoint_every 3 must be a multiple of log_every 2"):
        TrainConfig(sequence=16, batch_tokens=256, microbatch=16, log_every=2, checkpoint_every=3)


def test_too_short_shards_fail_before_training(tmp_path):
    with pytest.raises(DataError, match="training shard 0: 300 tokens give no training window"):
        train(Trainer(model_config(True), train_config(True)), [np.zeros(300, np.uint16)], tmp_path)


DATA_PARALLEL = """
import json, sys
import numpy as np, jax
sys.path.insert(0, {tests!r})
from helpers import model_config, shards, train_config
from parallel_experts.lm.train import Trainer, device_mesh, train
devices = int(sys.argv[1])
assert len(jax.devices()) == 2
trainer = Trainer(model_config(True), train_config(True, train_tokens=256 * 3), device_mesh(devices))
carry, curve = train(trainer, shards(), sys.argv[2])
print(json.dumps({{"losses": [p["loss"] for p in curve], "embed": float(np.abs(np.asarray(carry.params.embed)).sum()),
                   "sharded": len(carry.states.shared.sharding.device_set)}}))
"""


def test_data_parallel_on_two_host_devices_matches_one_device(tmp_path):
    """The streams split over two CPU devices give the same losses and parameters as one device."""
    script = tmp_path / "dp.py"
    script.write_text(DATA_PARALLEL.format(tests=os.path.dirname(__file__)))
    env = os.environ | {"XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2",
                        "JAX_PLATFORMS": "cpu"}
    out = {}
    for devices in (1, 2):
        run = subprocess.run([sys.executable, str(script), str(devices), str(tmp_path / f"run{devices}")],
                             capture_output=True, text=True, env=env, check=False)
        assert run.returncode == 0, run.stderr[-2000:]
        out[devices] = json.loads(run.stdout.strip().splitlines()[-1])
    assert out[1]["sharded"] == 1 and out[2]["sharded"] == 2
    np.testing.assert_allclose(out[2]["losses"], out[1]["losses"], rtol=1e-5)
    np.testing.assert_allclose(out[2]["embed"], out[1]["embed"], rtol=1e-5)


@pytest.mark.pipeline
def test_cli_training_survives_a_kill(tmp_path):
    """`lm-train` killed with SIGKILL after its first checkpoint and run again writes the same outputs."""
    folder = tmp_path / "tokens"
    write_shards(shards(count=3), folder, 2400)
    config = files.load([REPO / "config/smoke.yaml"])
    config["lm"] |= {"vocabulary": VOCAB, "windows": [16], "train_tokens": 256 * 12, "budgets": {
        "small": {"anchor": [1, 2, 16], "tolerance": 0.01, "allocations": [[1, 2, 16]]}}}
    config["lm"]["training"] = {"batch_tokens": 256, "microbatch_tokens": 128, "segment": 8, "log_every": 2,
                                "checkpoint_every": 2}
    (tmp_path / "config.json").write_text(json.dumps(config))
    run = Study.of(config).lm.by_id["recurrent/small/W16/L1-E2-d16"]
    assert run.model == model_config(True) and run.train == train_config(True, checkpoint_every=2)

    train = ["lm-train", "--config", str(tmp_path / "config.json"), "--run", run.id, "--tokens", str(folder)]
    run_killed_and_resumed(train, tmp_path / "whole", tmp_path / "killed", "model.eqx")
    with xr.open_dataset(tmp_path / "whole/curve.nc") as a, xr.open_dataset(tmp_path / "killed/curve.nc") as b:
        xr.testing.assert_identical(a, b)
        for folder in (tmp_path / "whole", tmp_path / "killed"):  # killed: its points survived the SIGKILL
            assert_tensorboard_matches(folder, a, LM_TAGS)
        assert a.sizes == {"update": 6}
    assert (tmp_path / "whole/model.eqx").read_bytes() == (tmp_path / "killed/model.eqx").read_bytes()
