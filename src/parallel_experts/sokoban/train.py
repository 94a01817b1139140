"""A2C with GAE for the Sokoban agents (the authors' PRE_RL/drc/trainer.py), PureJaxRL style.

One update = a 20-step rollout of 32 environments generated inside the differentiated loss (gradients flow
through the recurrent state across the rollout: truncated BPTT of length 20), GAE, the A2C loss, a clipped
Adam step. `log_interval` updates run as one compiled `lax.scan` (the last num_updates % log_interval as one
more), several seeds run together under vmap (or in groups of `seeds_at_once`, one group after another), the carry
is donated to the call, and the level table is an argument of it. With `remat`, the backward pass reruns each
rollout step's forward pass instead of keeping its activations (memory only).
The host only keeps the episode log (a FIFO of the last 400 returns per seed, logged every 200 updates),
checkpoints and the progress bar.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import xarray as xr
from tqdm import tqdm

from parallel_experts.config.errors import ConfigError
from parallel_experts.core import walltime
from parallel_experts.core.definitions import named
from parallel_experts.core.checkpoint import (NonFiniteLossError, checkpoint_update, load_checkpoint, load_weights,
                                              save_checkpoint, save_weights)
from parallel_experts.core.programs import split
from parallel_experts.core.training_job import training_job
from parallel_experts.results import paths, store
from parallel_experts.sokoban import env as sokoban_env
from parallel_experts.sokoban import experiment, jobs
from parallel_experts.sokoban.agent import Agent, reset_where
from parallel_experts.sokoban.levels import LevelSet
from parallel_experts.sokoban.settings import AgentConfig, TrainConfig


# The arguments of the compiled updates whose buffers become the outputs': the carry (not the level table, which
# every call reads). The caller keeps only the carry the call returns; the rehearsal compiles the same donation.
DONATED = (1,)


class Carry(NamedTuple):
    """What one update hands to the next, for one seed."""

    params: Any
    opt_state: Any
    env_state: Any
    obs: jax.Array  # (B, H, W, 2) uint8
    done: jax.Array  # (B,) did the previous transition end the episode
    hidden: Any  # agent state, leading axis B
    episode_return: jax.Array  # (B,) running return of the current episode
    episode_length: jax.Array  # (B,)
    key: jax.Array


def gae(rewards, values, dones, last_value, gamma: float, lam: float):
    """Generalised advantage estimates and returns, backwards over time; arrays are (T, B)."""

    def step(carry, transition):
        advantage, next_value = carry
        reward, value, done = transition
        delta = reward + gamma * next_value * (1 - done) - value
        advantage = delta + gamma * lam * (1 - done) * advantage
        return (advantage, value), advantage

    _, advantages = jax.lax.scan(step, (jnp.zeros_like(last_value), last_value), (rewards, values, dones),
                                 reverse=True)
    return advantages, advantages + values


def seed_keys(seed) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(rollout key, agent key, environment key) of a training seed; the agent key draws its initial weights."""
    return tuple(jax.random.split(jax.random.PRNGKey(seed), 3))


def initial_agent(config: AgentConfig, seed: int) -> Agent:
    """The agent of training seed `seed` before its first update: the probes' untrained control."""
    return Agent(config, seed_keys(seed)[1])


def learning_rate(train_config: TrainConfig) -> optax.Schedule:
    """Adam's learning rate by update: from `learning_rate` linearly to 0 at the last update (the authors'
    anneal_lr)."""
    return optax.linear_schedule(train_config.learning_rate, 0.0, train_config.num_updates)


class Trainer:
    """Builds the compiled update for one (agent, training) configuration and runs it for several seeds."""

    def __init__(self, agent_config: AgentConfig, train_config: TrainConfig, levels: np.ndarray):
        self.agent_config, self.config = agent_config, train_config
        sokoban_env.check_view(levels, train_config.view)
        # The level table (900k levels, 180 MB at paper scale) is an argument of every compiled call, not a
        # constant embedded in the program: `run_updates(trainer.levels, carry)`.
        self.levels = jnp.asarray(levels, jnp.uint8)
        self.env = sokoban_env.make_env(self.levels, reward=train_config.reward, time_limit=train_config.time_limit)
        # The agent's structure only: built abstractly, nothing initialised (`init` draws each seed's weights).
        _, self.static = split(eqx.filter_eval_shape(Agent, agent_config, jax.random.PRNGKey(0)))
        self.optimizer = optax.chain(optax.clip_by_global_norm(train_config.max_grad_norm),
                                     optax.adam(learning_rate(train_config), eps=train_config.adam_eps))
        # `log_interval` updates per call; the last num_updates % log_interval updates (if any) in one call of
        # their own, so that every update of the schedule is trained (jit compiles lazily: only if called).
        self.run_updates = self._compiled(train_config.log_interval)
        self.run_last = self._compiled(train_config.num_updates % train_config.log_interval)

    def _compiled(self, length: int):
        """`length` updates of every seed: (levels, carry) -> (carry, metrics), jitted, vmapped over seeds."""
        return jax.jit(self._updates(length), donate_argnums=DONATED)

    def _updates(self, length: int):
        """`length` updates of every seed, not jitted: (levels, carry) -> (carry, metrics). All seeds at once under
        vmap, or, with `seeds_at_once` fewer than the seeds, groups of that many in turn (`lax.map`), so that the
        backward pass holds one group's activations."""
        together = jax.vmap(lambda levels, carry: self._run_updates(levels, carry, length), in_axes=(None, 0))
        group = self.config.seeds_at_once

        def in_groups(levels, carry: Carry):
            seeds = jax.tree.leaves(carry)[0].shape[0]
            if group is None or group >= seeds:
                return together(levels, carry)
            if seeds % group:
                raise ConfigError(f"{seeds} seeds do not split into groups of seeds_at_once = {group}")
            grouped = jax.tree.map(lambda x: x.reshape(seeds // group, group, *x.shape[1:]), carry)
            found = jax.lax.map(lambda c: together(levels, c), grouped)
            return jax.tree.map(lambda x: x.reshape(seeds, *x.shape[2:]), found)

        return in_groups

    def envs(self, levels) -> sokoban_env.VmapAutoResetWrapper:
        """The batched environments, drawing a level of `levels` (the compiled call's argument) at every reset."""
        return sokoban_env.batched(sokoban_env.with_levels(self.env, levels))

    def init(self, seeds: Sequence[int]) -> Carry:
        """Initial carries of all seeds, stacked along a leading seed axis (seed k uses PRNGKey(k))."""
        return jax.vmap(self._init)(jnp.asarray(seeds, jnp.uint32))

    def _init(self, seed) -> Carry:
        key, agent_key, env_key = seed_keys(seed)
        params, _ = eqx.partition(Agent(self.agent_config, agent_key), eqx.is_array)
        agent = eqx.combine(params, self.static)
        env_state, timestep = self.envs(self.levels).reset(jax.random.split(env_key, self.config.num_envs))
        grid = timestep.observation.grid
        single = agent.initial_state(self.config.view, self.config.view)
        hidden = jax.tree.map(lambda x: jnp.broadcast_to(x, (self.config.num_envs, *x.shape)), single)
        zeros = jnp.zeros(self.config.num_envs)
        return Carry(params, self.optimizer.init(params), env_state, grid, zeros.astype(bool), hidden, zeros,
                     zeros.astype(jnp.int32), key)

    def _loss(self, params, carry: Carry, envs):
        agent = eqx.combine(params, self.static)
        config = self.config

        def policy(obs, hidden):
            return jax.vmap(agent)(sokoban_env.view(obs, config.view), hidden)

        # Backprop through the rollout keeps every step's activations for every seed trained at once: 20 GB per
        # seed of L8 E17 d16 by XLA's plan. Rematerialised, a step keeps only its inputs (the observation and the
        # agent's state: 2.6 GB per seed in all) and the backward pass reruns the agent's forward pass (XLA's
        # count of an update: 4.05 forward passes per step instead of 3.05).
        step_policy = jax.checkpoint(policy) if config.remat else policy

        key, rollout_key = jax.random.split(carry.key)
        # No gradient flows through the environment, yet differentiating through Jumanji's auto-reset (a
        # lax.cond under vmap, which JAX turns into a select over operands broadcast to every environment)
        # keeps one copy of the level table per environment alive (5.7 GB, +50% time per update with 900k
        # levels); under jax.checkpoint the gradient keeps only the step's inputs.
        env_step = jax.checkpoint(envs.step)

        def step(state, key):
            env_state, obs, done, hidden, episode_return, episode_length = state
            hidden = reset_where(done, hidden)
            logits, value, hidden = step_policy(obs, hidden)
            action = jax.random.categorical(key, logits)
            env_state, timestep = env_step(env_state, action)
            done = timestep.last()
            episode_return = episode_return + timestep.reward
            episode_length = episode_length + 1
            out = dict(logits=logits, value=value, action=action, reward=timestep.reward, done=done,
                       finished_return=jnp.where(done, episode_return, jnp.nan),
                       finished_length=jnp.where(done, episode_length, 0),
                       solved=done & timestep.extras["solved"])
            episode_return = jnp.where(done, 0.0, episode_return)
            episode_length = jnp.where(done, 0, episode_length)
            return (env_state, timestep.observation.grid, done, hidden, episode_return, episode_length), out

        start = (carry.env_state, carry.obs, carry.done, carry.hidden, carry.episode_return, carry.episode_length)
        end, rollout = jax.lax.scan(step, start, jax.random.split(rollout_key, config.num_steps))
        env_state, obs, done, hidden, episode_return, episode_length = end
        _, last_value, _ = policy(obs, reset_where(done, hidden))

        dones = rollout["done"].astype(jnp.float32)
        advantages, returns = gae(rollout["reward"], rollout["value"], dones, last_value, config.gamma,
                                  config.gae_lambda)
        advantages, returns = jax.lax.stop_gradient((advantages, returns))
        log_probs = jax.nn.log_softmax(rollout["logits"])
        chosen = jnp.take_along_axis(log_probs, rollout["action"][..., None], axis=-1)[..., 0]
        policy_loss = -(advantages * chosen).mean()
        entropy = -(jnp.exp(log_probs) * log_probs).sum(-1).mean()
        value_loss = (0.5 * (rollout["value"] - returns) ** 2).mean()
        logit_l2 = (rollout["logits"] ** 2).sum(-1).mean()
        loss = (policy_loss - config.entropy_coef * entropy + config.value_coef * value_loss
                + config.logit_l2_coef * logit_l2)
        # The state entering the next rollout carries no gradient into this one.
        next_carry = carry._replace(env_state=env_state, obs=obs, done=done, hidden=jax.lax.stop_gradient(hidden),
                                    episode_return=episode_return, episode_length=episode_length, key=key)
        metrics = dict(loss=loss, policy_loss=policy_loss, entropy=entropy, value_loss=value_loss,
                       finished_return=rollout["finished_return"], finished_length=rollout["finished_length"],
                       solved=rollout["solved"])
        return loss, (next_carry, metrics)

    def _update(self, levels, carry: Carry):
        """One A2C update of one seed."""
        grads, (carry, metrics) = jax.grad(self._loss, has_aux=True)(carry.params, carry, self.envs(levels))
        updates, opt_state = self.optimizer.update(grads, carry.opt_state, carry.params)
        params = optax.apply_updates(carry.params, updates)
        return carry._replace(params=params, opt_state=opt_state), metrics

    def _run_updates(self, levels, carry: Carry, length: int):
        """`length` updates of one seed (vmapped over seeds and jitted by `_compiled`)."""
        return jax.lax.scan(lambda carry, _: self._update(levels, carry), carry, None, length=length)


# The terms of the A2C loss that each log point keeps, from the last update before it.
LOSS_TERMS = {"loss": "A2C loss of the last update before the log point",
              "policy_loss": "policy-gradient term of that loss (minus the advantage-weighted log-probability)",
              "value_loss": "value term of that loss (half the squared error to the GAE returns)",
              "entropy": "policy entropy of that update's rollout (nats)"}


@dataclass
class EpisodeLog:
    """Host-side bookkeeping of the paper's learning curves (the authors' PRE_RL/drc/trainer.py), one FIFO per seed."""

    window: int
    seeds: int
    recent: list[deque] = field(default_factory=list)
    curve: list[dict] = field(default_factory=list)  # one entry per log point

    def __post_init__(self):
        # One FIFO per seed; restored ones (lists of (return, length, solved)) get their bound back.
        self.recent = [deque(map(tuple, r), maxlen=self.window) for r in self.recent or [[]] * self.seeds]

    def extend(self, metrics: dict) -> None:
        """Push the episodes that ended during a call of the compiled updates into each seed's FIFO."""
        returns = np.asarray(metrics["finished_return"])  # (seeds, K, T, B), NaN where no episode ended
        lengths = np.asarray(metrics["finished_length"])
        solved = np.asarray(metrics["solved"])
        for seed, fifo in enumerate(self.recent):
            ended = ~np.isnan(returns[seed])
            # Episodes in the order they ended: update, then step, then environment.
            fifo.extend(zip(returns[seed][ended].tolist(), lengths[seed][ended].tolist(),
                            solved[seed][ended].tolist()))

    def add(self, update: int, metrics: dict) -> dict:
        """`extend`, then a log point: the means over each seed's FIFO."""
        self.extend(metrics)
        point = {"update": update, "episodic_return": [], "episodic_length": [], "solve_fraction": [],
                 **{name: np.asarray(metrics[name])[:, -1].tolist() for name in LOSS_TERMS}}
        for fifo in self.recent:
            window = np.array(fifo, dtype=float).reshape(-1, 3)
            means = window.mean(0) if len(window) else np.full(3, np.nan)
            point["episodic_return"].append(float(means[0]))
            point["episodic_length"].append(float(means[1]))
            point["solve_fraction"].append(float(means[2]))
        self.curve.append(point)
        return point

    def final_five(self) -> list[float]:
        """Score per seed: mean of the final five logged episodic returns (the authors' protocol)."""
        last = np.array([p["episodic_return"] for p in self.curve[-5:]])
        with np.errstate(all="ignore"):  # NaN only where no episode has ended yet (very short runs)
            return np.nanmean(last, axis=0).tolist() if np.isfinite(last).any() else [np.nan] * self.seeds

    def state(self) -> dict:
        """JSON-ready; `EpisodeLog(**state)` restores it."""
        return {"window": self.window, "seeds": self.seeds, "recent": [list(r) for r in self.recent],
                "curve": self.curve}


def train(
    trainer: Trainer,
    seeds: Sequence[int],
    run_dir: str | Path,
    on_log: Callable[[dict], None] | None = None,
    stop_after: int | None = None,
    deadline: walltime.Deadline | None = None,
) -> tuple[Carry, EpisodeLog]:
    """Train all `seeds` to `num_updates`, resuming from `run_dir`'s checkpoint if there is one.

    `stop_after` (log points) ends the call early, as a kill would after a checkpoint; tests use it. At a log point
    where `deadline` says stop, the call checkpoints and raises `walltime.StoppedEarly`.
    """
    run_dir = Path(run_dir)
    config = trainer.config
    total = config.num_updates
    # Log points every log_interval updates, none at the end of a last partial stretch: the authors log when
    # update % 200 == 0, so of the paper's 78,125 updates the last log point is 78,000 and the final five
    # average 77,200 ... 78,000. The last 125 updates are trained (the learning rate reaches 0) and
    # their episodes enter the FIFO, as in the authors' final summary, but make no point of the curve.
    logged = total // config.log_interval * config.log_interval
    carry = trainer.init(seeds)
    log = EpisodeLog(config.episode_window, len(seeds))
    update = 0
    restored = load_checkpoint(run_dir, carry, {"update": int, "log": dict})
    if restored:
        carry, host = restored
        update = host["update"]
        log = EpisodeLog(**host["log"])
    walltime.begin(run_dir, update, deadline)
    points = 0
    with tqdm(total=total, initial=update, unit="update", desc=run_dir.name, mininterval=5) as bar:
        while update < total:
            last = update >= logged
            run, length = (trainer.run_last, total - logged) if last else (trainer.run_updates, config.log_interval)
            next_carry, metrics = run(trainer.levels, carry)
            losses = np.asarray(metrics["loss"])
            if not np.isfinite(losses).all():
                seed = int(np.argwhere(~np.isfinite(losses))[0][0])
                raise NonFiniteLossError(
                    f"{run_dir}: non-finite loss between updates {update} and {update + length} "
                    f"(seed {seeds[seed]}); the last good checkpoint ({checkpoint_update(run_dir)}) is kept")
            carry, update = next_carry, update + length
            bar.update(length)
            if last:
                log.extend(metrics)
            else:
                point = log.add(update, metrics)
                bar.set_postfix(episodic_return=f"{np.nanmean(point['episodic_return']):.2f}")
                if on_log:
                    on_log(point)
                points += 1
            stop = stop_after is not None and points >= stop_after
            why = deadline and update < total and not last and deadline.should_stop()
            if points % config.checkpoint_every == 0 or update >= total or stop or why:
                save_checkpoint(run_dir, carry, {"update": update, "log": log.state()})
            if why:
                raise walltime.stopped(run_dir, update, why, deadline)
            if stop:
                break
    return carry, log


def save_outputs(run, carry: Carry, log: EpisodeLog, run_dir: str | Path) -> None:
    """The finished run: learning curves and final-five scores (netCDF) and the trained agents of all seeds."""
    save_weights(Path(run_dir) / paths.WEIGHTS["sokoban"], carry.params)
    store.write_netcdf(curve_dataset(run, log), Path(run_dir) / paths.CURVE)


def curve_dataset(run, log: EpisodeLog):
    """One run's learning curves (every seed, every log point) and final-five scores, as saved in curve.nc."""
    curve = log.curve
    per_point = {name: (("seed", "update"), np.array([p[name] for p in curve]).T, {"long_name": long})
                 for name, long in (("episodic_return", "mean return of the last completed episodes"),
                                    ("episodic_length", "mean length of the last completed episodes"),
                                    ("solve_fraction", "fraction of the last completed episodes solved"),
                                    *LOSS_TERMS.items())}
    return xr.Dataset(
        per_point | {"final_five": ("seed", log.final_five(),
                                    {"long_name": "mean of the final five logged episodic returns (authors' score)"})},
        coords={"seed": list(run.seeds), "update": [p["update"] for p in curve]},
        attrs={"run": run.id, "run_config": json.dumps(run.to_dict()), "episode_window": log.window,
               "env_steps_per_update": run.train.num_envs * run.train.num_steps},
    )


def load_agents(run, run_dir: str | Path) -> Agent:
    """The trained agents of all seeds of `run`, stacked along a leading seed axis."""
    params, static = eqx.partition(Agent(run.agent, jax.random.PRNGKey(0)), eqx.is_array)
    like = jax.tree.map(lambda x: jnp.broadcast_to(x, (len(run.seeds), *x.shape)), params)
    return eqx.combine(load_weights(Path(run_dir) / paths.WEIGHTS["sokoban"], like, f"the agents of {run.id}"),
                       static)


def load_agent(run, run_dir: str | Path, seed: int) -> Agent:
    """The trained agent of one training seed of `run`."""
    if seed not in run.seeds:
        raise ConfigError(f"seed {seed}: {run.id} was trained with seeds {list(run.seeds)}")
    return one_seed(load_agents(run, run_dir), run.seeds.index(seed))


def one_seed(agents: Agent, index: int) -> Agent:
    """Seed `index` of agents stacked along a leading seed axis."""
    return jax.tree.map(lambda x: x[index] if eqx.is_array(x) else x, agents)


def job(options: jobs.Train, runs: experiment.Families) -> int:
    """`sokoban-train`: train the run `options.run` of the study's `runs` (all its seeds), resumable."""
    run = named(runs.by_id, options.run, options.config)
    with training_job(options.run_dir, run.to_dict(), options.time_limit) as frame:
        trainer = Trainer(run.agent, run.train, LevelSet.load(options.levels).levels)
        steps = len(run.seeds) * run.train.num_envs * run.train.num_steps  # per update, all seeds
        carry, log = frame.train(partial(train, trainer, run.seeds, options.run_dir), "env_steps", steps, run.seeds)
        save_outputs(run, carry, log, options.run_dir)
    print(f"{options.run_dir}: final-five return per seed {[round(x, 3) for x in log.final_five()]}")
    return 0
