"""Training either language-model family on token shards with one loop (the authors' LM/nanogpt/train.py and
LM/recnanogpt/train.py).

One optimiser update reads `batch_tokens` tokens: one window of T tokens from each of S = batch_tokens / T
streams of the shard sampler (`shards.stream_windows`). The S streams are split into G groups of `microbatch`
streams, for memory only: the update scans over the groups, sums their gradients in float32 and divides by
G, so the gradient is the mean over all S streams whatever the microbatch (the authors' recurrent trainer
does exactly this; their non-recurrent one accumulates consecutive windows instead, LM/nanogpt/train.py).

* Non-recurrent: every window is an independent sequence at positions 0..T−1.
* Recurrent: every stream carries its state (shared s and per-level caches) from window to window; the state
  entering a window is stop-gradient, so backprop is truncated at window boundaries (T = 64 in the paper).
  The state is zero at each shard's first window, whose first ⌈M/T⌉ windows only warm it up (no loss, no
  update); the loss adds `reg` × mean(|s|²/d) of the un-normalised final state (the authors' `pre_output_reg_cost`).

Data parallelism: with several devices, the streams of each group are sharded over a one-axis mesh and the
parameters replicated; XLA inserts the gradient all-reduce. The numbers do not depend on the device count.
Training shards are cycled when `train_tokens` exceeds them (the demo's small corpus; never at paper scale).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import xarray as xr
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from tqdm import tqdm

from parallel_experts.config.errors import ConfigError
from parallel_experts.core import walltime
from parallel_experts.core.definitions import named
from parallel_experts.core.checkpoint import (NonFiniteLossError, checkpoint_update, load_checkpoint, load_weights,
                                              save_checkpoint, save_weights)
from parallel_experts.core.training_job import training_job
from parallel_experts.lm import experiment, jobs, models, optim
from parallel_experts.lm.models import RecurrentState
from parallel_experts.lm.settings import ModelConfig, TrainConfig
from parallel_experts.lm.shards import DataError, load_tokens, model_shards, num_batches, stream_windows
from parallel_experts.results import paths, store


class Carry(NamedTuple):
    params: Any  # the model's arrays (eqx.partition)
    opt_state: Any
    states: RecurrentState | None  # recurrent only: leaves (G, microbatch, ...)


# The scans over microbatch groups carry every stream's state (leaves with a leading group axis) and read and
# write one group's in place: as the scan's input and output instead, XLA would hold a second copy of all of them
# (28 GB per device for the paper's recurrent L32 E1 d768 at W = 1,024).
def read(states, index):
    return jax.tree.map(lambda s: s[index], states)


def written(states, index, state):
    return jax.tree.map(lambda s, new: lax.dynamic_update_index_in_dim(s, new, index, 0), states, state)


def cross_entropy(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def window_hidden(model, state, inputs, config: TrainConfig):
    """One stream's window: what the head reads at each token (T, d), and the stream's state after the window."""
    if state is None:
        return model.hidden(inputs), None
    return model.segment(state, inputs, config.memory)


def batch_loss(model, hidden, labels, config: TrainConfig):
    """(loss, cross-entropy) of the windows of a group of streams, hidden (S, T, d): the mean over every token,
    plus, for the recurrent model, `reg` × mean(|s|²/d) of its un-normalised states (the authors'
    `pre_output_reg_cost`). Every window
    has T tokens, so this is the mean over streams of each window's loss.

    The head reads every token of the group at once: under vmap over streams, XLA:CPU transposes the (tokens, V)
    logit gradient for the head's weight gradient, which made the head 2.6× slower (the demo: 35 % of an update)."""
    ce = cross_entropy(models.logits(model.head, hidden.reshape(-1, hidden.shape[-1])), labels.reshape(-1))
    if not model.config.recurrent:
        return ce, ce
    s = hidden.astype(jnp.float32)
    return ce + config.reg * jnp.mean(s * s), ce


class Trainer:
    """The compiled pieces of one run: `update` (one optimiser step) and `advance` (warm-up, no update). `seed` is
    the key of the initial parameters (a run's seed, lm.experiment.Run; the authors' FineWeb runs are single-seed),
    the only randomness of training: the token order is the sampler's, the same for every seed."""

    def __init__(self, model_config: ModelConfig, config: TrainConfig, mesh: Mesh | None = None, seed: int = 0):
        self.model_config, self.config, self.mesh = model_config, config, mesh
        if mesh is not None and config.microbatch % mesh.size:
            raise ConfigError(f"lm.training: {config.microbatch} streams per microbatch do not split over "
                              f"{mesh.size} devices; make microbatch_tokens / sequence a multiple of {mesh.size}")
        model = models.build(model_config, jax.random.key(seed))
        self.params, self.static = eqx.partition(model, eqx.is_array)
        optimizer = replace(optim.OptimConfig.for_family(model_config.recurrent), schedule=config.schedule)
        self.optimizer = optim.optimizer(self.params, optimizer, config.updates)
        self.learning_rate = optim.schedule(optimizer, config.updates)  # the matrix group's, by update count
        self.update = eqx.filter_jit(self._update, donate="all")
        self.advance = eqx.filter_jit(self._advance, donate="all")

    def init(self) -> Carry:
        states = None
        if self.model_config.recurrent:
            one = RecurrentState.zeros(self.model_config, self.config.memory)
            states = jax.tree.map(lambda x: jnp.zeros((self.config.groups, self.config.microbatch, *x.shape),
                                                      x.dtype), one)
        params = jax.tree.map(jnp.copy, self.params)  # `update` donates its carry
        return Carry(params, self.optimizer.init(params), self.shard(states))

    def shard(self, tree):
        """Put arrays with leading (G, streams) axes on the mesh, streams split across devices."""
        if self.mesh is None or tree is None:
            return tree
        sharding = NamedSharding(self.mesh, PartitionSpec(None, "data"))
        return jax.tree.map(lambda x: jax.device_put(x, sharding), tree)

    def _group(self, params, state, inputs, labels, reset):
        model = eqx.combine(params, self.static)
        if state is not None:
            state = jax.vmap(RecurrentState.reset_where)(state, reset)
        hidden, state = eqx.filter_vmap(lambda st, x: window_hidden(model, st, x, self.config))(state, inputs)
        loss, ce = batch_loss(model, hidden, labels, self.config)
        return loss, (ce, state)

    def _gradient(self, params, states, inputs, labels, reset):
        """(gradient, states after the window, loss and cross-entropy of each group): the gradient is the mean over
        the G groups of each group's gradient (in the parameters' dtype), summed in float32."""
        def group(scanned, xs):
            grad_sum, states = scanned
            index, *batch = xs
            state = read(states, index)
            (loss, (ce, state)), grads = jax.value_and_grad(self._group, has_aux=True)(params, state, *batch)
            grad_sum = jax.tree.map(lambda total, g: total + g.astype(jnp.float32), grad_sum, grads)
            return (grad_sum, written(states, index, lax.stop_gradient(state))), (loss, ce)

        zeros = jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32), params)
        groups = jnp.arange(self.config.groups)
        (grad_sum, states), (loss, ce) = lax.scan(group, (zeros, states), (groups, inputs, labels, reset))
        return jax.tree.map(lambda g: g / self.config.groups, grad_sum), states, loss, ce

    def _update(self, carry: Carry, inputs, labels, reset):
        grad_mean, states, loss, ce = self._gradient(carry.params, carry.states, inputs, labels, reset)
        grads = jax.tree.map(lambda g, p: g.astype(p.dtype), grad_mean, carry.params)
        updates, opt_state = self.optimizer.update(grads, carry.opt_state, carry.params)
        params = optax.apply_updates(carry.params, updates)
        # One flag for the host to check: the loss of this update and every parameter after it are finite.
        finite = jnp.stack([jnp.isfinite(loss.mean())] + [jnp.isfinite(p).all() for p in jax.tree.leaves(params)])
        return Carry(params, opt_state, states), {"loss": loss.mean(), "ce_loss": ce.mean(), "finite": finite.all()}

    def _advance(self, carry: Carry, inputs, reset):
        model = eqx.combine(carry.params, self.static)

        def group(states, xs):
            index, tokens, flags = xs
            state = jax.vmap(RecurrentState.reset_where)(read(states, index), flags)
            state = eqx.filter_vmap(lambda st, t: model.segment(st, t, self.config.memory)[1])(state, tokens)
            return written(states, index, state), None

        groups = jnp.arange(self.config.groups)
        states, _ = lax.scan(group, carry.states, (groups, inputs, reset))
        return carry._replace(states=states)

    def batches(self, shards: Sequence[np.ndarray], position: Sequence[int]) -> Iterator:
        """((epoch, shard, batch), inputs, labels, reset) from `position` on, shaped (G, microbatch, T)."""
        config = self.config
        for index, tokens in enumerate(shards):
            if num_batches(len(tokens), config.streams, config.sequence) <= config.warmup:
                raise DataError(f"training shard {index}: {len(tokens)} tokens give no training window for "
                                     f"{config.streams} streams of {config.sequence} tokens after "
                                     f"{config.warmup} warm-up windows")
        epoch, shard, batch = position
        groups = (config.groups, config.microbatch)
        while True:
            for k, (inputs, labels, reset) in enumerate(
                    stream_windows(shards[shard], config.streams, config.sequence, start=batch), start=batch):
                shaped = [self.shard(x.reshape(*groups, *x.shape[1:])) for x in (inputs, labels, reset)]
                yield (epoch, shard, k), *shaped
            batch, shard = 0, shard + 1
            if shard == len(shards):
                epoch, shard = epoch + 1, 0


def train(trainer: Trainer, shards: Sequence[np.ndarray], run_dir: str | Path,
          on_log: Callable[[dict], None] | None = None, stop_after: int | None = None,
          deadline: walltime.Deadline | None = None) -> tuple[Carry, list[dict]]:
    """Train to `config.updates`, resuming from `run_dir`'s checkpoint if there is one.

    `shards` are the training shards' tokens (already mapped to the model's vocabulary). `stop_after`
    (updates, a multiple of `log_every`) ends the call early after a checkpoint, as a kill would; tests use it. At
    a log point where `deadline` says stop, the call checkpoints and raises `walltime.StoppedEarly`.
    """
    run_dir, config = Path(run_dir), trainer.config
    carry, host = trainer.init(), {"update": 0, "position": [0, 0, 0], "curve": []}
    restored = load_checkpoint(run_dir, carry, {"update": int, "position": list, "curve": list})
    if restored:
        carry, host = restored
        carry = carry._replace(states=trainer.shard(carry.states))
    update, curve, pending = host["update"], host["curve"], []
    walltime.begin(run_dir, update, deadline)
    why = None
    with tqdm(total=config.updates, initial=update, unit="update", desc=run_dir.name, mininterval=5) as bar:
        batches = trainer.batches(shards, host["position"])
        for done in range(1, config.updates - update + 1):
            position, inputs, labels, reset = next(batches)
            while position[2] < config.warmup:  # a shard's first windows warm up the recurrent state
                carry = trainer.advance(carry, inputs, reset)
                position, inputs, labels, reset = next(batches)
            carry, metrics = trainer.update(carry, inputs, labels, reset)
            finite = bool(metrics.pop("finite"))
            pending.append({name: float(value) for name, value in metrics.items()})
            update += 1
            bar.update()
            if not finite:
                raise NonFiniteLossError(f"{run_dir}: non-finite loss or parameters at update {update}; the last "
                                         f"good checkpoint ({checkpoint_update(run_dir)}) is kept")
            if update % config.log_every == 0 or update == config.updates:
                point = {"update": update, "tokens": update * config.batch_tokens,
                         **{name: float(np.mean([m[name] for m in pending])) for name in pending[0]},
                         "learning_rate": float(trainer.learning_rate(update - 1))}
                curve.append(point)
                pending = []
                bar.set_postfix(loss=f"{point['loss']:.3f}")
                if on_log:
                    on_log(point)
                # Only at log points, where a checkpoint holds everything the curve needs to resume.
                why = deadline and update < config.updates and deadline.should_stop()
            stop = stop_after is not None and done >= stop_after
            if update % config.checkpoint_every == 0 or update == config.updates or stop or why:
                host = {"update": update, "position": [*position[:2], position[2] + 1], "curve": curve}
                save_checkpoint(run_dir, carry, host)
            if why:
                raise walltime.stopped(run_dir, update, why, deadline)
            if stop:
                break
    return carry, curve


def device_mesh(devices: int | None = None) -> Mesh | None:
    """A one-axis ("data") mesh over the first `devices` devices (all by default); None for one device."""
    available = jax.devices()
    count = len(available) if devices is None else devices
    if count > len(available):
        raise ConfigError(f"{count} devices requested, {len(available)} available")
    return None if count == 1 else Mesh(np.array(available[:count]), ("data",))


def save_outputs(run, carry: Carry, curve: list[dict], run_dir: str | Path) -> None:
    """The finished run: its learning curve (netCDF) and the trained model's parameters."""
    run_dir = Path(run_dir)
    save_weights(run_dir / paths.WEIGHTS["lm"], carry.params)
    ds = xr.Dataset(
        {"train_loss": ("update", [p["loss"] for p in curve],
                        {"long_name": "training loss (cross-entropy, plus the state penalty if recurrent)",
                         "units": "nats/token"}),
         "train_ce_loss": ("update", [p["ce_loss"] for p in curve],
                           {"long_name": "training cross-entropy", "units": "nats/token"}),
         "learning_rate": ("update", [p["learning_rate"] for p in curve],
                           {"long_name": "learning rate of the matrix (Muon) group at the last update before the "
                                         "log point; embedding and head are constant"})},
        coords={"update": [p["update"] for p in curve], "tokens": ("update", [p["tokens"] for p in curve])},
        attrs={"run": run.id, "run_config": json.dumps(run.to_dict())})
    store.write_netcdf(ds, run_dir / paths.CURVE)


def load_model(model_config: ModelConfig, run_dir: str | Path):
    """The trained model of a run folder."""
    params, static = eqx.partition(models.build(model_config, jax.random.key(0)), eqx.is_array)
    return eqx.combine(load_weights(Path(run_dir) / paths.WEIGHTS["lm"], params, "the model"), static)


def job(options: jobs.Train, runs: experiment.Families) -> int:
    """`lm-train`: train the run `options.run` of the study's `runs`, resumable."""
    run = named(runs.by_id, options.run, options.config)
    with training_job(options.run_dir, run.to_dict(), options.time_limit) as frame:
        vocabulary, _, training = model_shards(options.tokens, run.model.vocab)
        trainer = Trainer(run.model, run.train, device_mesh(), seed=run.seed)
        tokens = [load_tokens(path, vocabulary) for path in training]
        carry, curve = frame.train(partial(train, trainer, tokens, options.run_dir), "tokens", run.train.batch_tokens)
        save_outputs(run, carry, curve, options.run_dir)
    print(f"{options.run_dir}: final training loss {curve[-1]['loss']:.4f} after {curve[-1]['tokens']} tokens")
    return 0
