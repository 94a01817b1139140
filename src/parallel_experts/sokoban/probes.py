"""Planning probes (paper §5.1 and App. F): does an agent's state say where it will move?

Following Bush et al. (EP, tuphs28/emergent-planning), every square of the room interior gets a label at each
step t, in five classes: 0 none, then Jumanji's actions 1 up, 2 right, 3 down, 4 left:
    agent_onto (C_A)  the direction of the move by which the agent next ENTERS the square: the first k ≥ t with
                      pos_{k+1} = square ≠ pos_k gives a_k (moves into a wall or a stuck box are ignored);
    box_pushed (C_B)  the direction in which a box is next pushed OFF the square: the first such push at k ≥ t.
Three representations are probed, all read after the observation o_t of greedy play:
    state    s_t, the trained agent's final aggregated state, before the head's RMSNorm (H, W, d);
    encoder  z_t, its encoder output (EP's observation baseline);
    control  s_t of the same seed's agent before training, reading the same observations (our control choice:
             same shape, same inputs, no learning).
A probe is a k×k convolution (1×1 by default) from the representation to 5 logits, no bias, trained with EP's
optimiser (AdamW 1e-3, weight decay 1e-3, batch 16, 10 epochs), 5 probe seeds in ONE compiled function under
vmap. Settings and scoring live in `sokoban/probe_scores.py`.
"""

from __future__ import annotations

import json
import math
from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import xarray as xr

from parallel_experts.config.errors import PipelineError
from parallel_experts.core.definitions import named
from parallel_experts.results import store
from parallel_experts.sokoban import env as sokoban_env
from parallel_experts.sokoban import evaluate, experiment, jobs, train
from parallel_experts.sokoban.agent import patches
from parallel_experts.sokoban.levels import AGENT, BOX, VARIABLE, LevelSet
from parallel_experts.sokoban.settings import CLASSES, TARGETS

# ---------------------------------------------------------------------------------------------- labels


def labels(grid: np.ndarray, next_grid: np.ndarray, action: np.ndarray, active: np.ndarray) -> dict[str, np.ndarray]:
    """C_A and C_B of every square at every step of a batch of episodes, each (T, N, H, W) int8.

    Arrays are stacked on a leading time axis as `evaluate.PLAY(..., record=True)` returns them: the grid
    before and after each step (T, N, H, W, 2), the action (T, N) and whether the episode was still running
    (T, N). Computed backwards in time: the label at t is the label at t+1, overwritten on the one square the
    agent entered at step t (and, for C_B, only if a box stood there and was pushed off it)."""
    steps, episodes, height, width = grid.shape[:4]
    cells = height * width
    position = np.argmax(grid[..., VARIABLE].reshape(steps, episodes, cells) == AGENT, axis=-1)
    entered = np.argmax(next_grid[..., VARIABLE].reshape(steps, episodes, cells) == AGENT, axis=-1)
    box = grid[..., VARIABLE].reshape(steps, episodes, cells) == BOX
    onto, pushed = np.zeros((episodes, cells), np.int8), np.zeros((episodes, cells), np.int8)
    found = {target: np.empty((steps, episodes, cells), np.int8) for target in TARGETS}
    every = np.arange(episodes)
    for t in reversed(range(steps)):
        moved = active[t] & (entered[t] != position[t])
        onto[every[moved], entered[t][moved]] = action[t][moved] + 1
        push = moved & box[t, every, entered[t]]  # the agent walked onto a box's square: the box moved on
        pushed[every[push], entered[t][push]] = action[t][push] + 1
        found["agent_onto"][t], found["box_pushed"][t] = onto, pushed
    return {target: found[target].reshape(steps, episodes, height, width) for target in TARGETS}


def interior(height: int, width: int) -> np.ndarray:
    """The squares that are labelled and scored: all but the outer ring, which is wall in every level."""
    mask = np.zeros((height, width), bool)
    mask[1:-1, 1:-1] = True
    return mask


# ---------------------------------------------------------------------------------------------- data


def _control_states(control, grid):
    """s_t of `control` reading the observations `grid` (T, N, H, W, 2) from a zero state at t = 0."""
    single = control.initial_state(grid.shape[2], grid.shape[3])
    hidden = jax.tree.map(lambda x: jnp.broadcast_to(x, (grid.shape[1], *x.shape)), single)

    def step(hidden, grid_t):
        _, _, hidden = jax.vmap(control)(grid_t, hidden)
        return hidden, hidden.s

    return jax.lax.scan(step, hidden, grid)[1]


CONTROL_STATES = eqx.filter_jit(_control_states)


def collect(agent, control, env: sokoban_env.Sokoban, levels: np.ndarray, view: int, seed: int = 0,
            chunk: int = evaluate.CHUNK) -> xr.Dataset:
    """Greedy episodes of `agent`, one per level in order, as probe data: one sample per (episode, step) while
    the episode runs, with the three representations and both labels of every square.

    The episode ends at the env's time limit; the state starts at zero. `chunk` levels play together (memory)."""
    sokoban_env.check_view(levels, view)
    parts = []
    for c, start in enumerate(range(0, len(levels), chunk)):
        played = evaluate.PLAY(agent, env, levels[start:start + chunk], greedy=jnp.array(True),
                               key=jax.random.fold_in(jax.random.PRNGKey(seed), c), view=view, record=True)
        seen = jax.device_get(played["trajectory"])
        seen["control"] = np.asarray(CONTROL_STATES(control, seen["grid"]))
        seen |= labels(seen["grid"], seen.pop("next_grid"), seen["action"], seen["active"])
        step, episode = np.nonzero(seen.pop("active"))
        order = np.lexsort((step, episode))  # episode-major: all of level 0's steps, then level 1's, ...
        step, episode = step[order], episode[order]
        parts.append({name: value[step, episode] for name, value in seen.items()}
                     | {"step": step, "level": episode + start})
    data = {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
    square = ("sample", "row", "col")
    classes = ", ".join(CLASSES)
    return xr.Dataset(
        {
            "state": (square + ("width",), data["s"], {"long_name": "final aggregated state s_t (pre-RMSNorm)"}),
            "encoder": (square + ("channel",), data["z"], {"long_name": "encoder output z_t"}),
            "control": (square + ("width",), data["control"], {"long_name": "s_t of the seed's untrained agent"}),
            "agent_onto": (square, data["agent_onto"], {"long_name": "C_A: move the agent next enters by",
                                                        "classes": classes}),
            "box_pushed": (square, data["box_pushed"], {"long_name": "C_B: push a box next leaves by",
                                                        "classes": classes}),
            "grid": (square + ("layer",), data["grid"], {"long_name": "observation, Jumanji's codes"}),
            "action": ("sample", data["action"].astype(np.int8), {"long_name": "greedy action, Jumanji's order"}),
        },
        coords={"level": ("sample", data["level"].astype(np.int32)),
                "step": ("sample", data["step"].astype(np.int32))},
        attrs={"seed": seed, "time_limit": env.time_limit, "levels": len(levels)},
    )


def run_data(run, run_dir, level_set: LevelSet, seed: int, count: int | None = None) -> xr.Dataset:
    """Probe data of one trained run (sokoban.experiment.Run): the agent of training seed `seed` on the first
    `count` levels of `level_set` (all by default), its untrained self as the control."""
    levels = level_set.levels[:count]
    env = sokoban_env.make_env(levels, reward=run.train.reward, time_limit=run.train.time_limit)
    agent = train.load_agent(run, run_dir, seed)
    data = collect(agent, train.initial_agent(run.agent, seed), env, levels, view=run.train.view, seed=seed)
    return data.assign_attrs(run=run.id, run_config=json.dumps(run.to_dict(), sort_keys=True),
                             level_source=level_set.source)


# ---------------------------------------------------------------------------------------------- probes


def _features(x: jax.Array, kernel: int) -> jax.Array:
    """(n, H, W, C) → (n, H, W, k·k·C): what a k×k convolution reads at each square (zero-padded)."""
    return x if kernel == 1 else jax.vmap(lambda one: patches(one, kernel, kernel))(x)


def _loss(weights, x, y, mask, kernel):
    logits = _features(x, kernel) @ weights
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, y.astype(jnp.int32))
    return jnp.sum(losses * mask) / (x.shape[0] * mask.sum())  # the mean over the batch's interior squares


@partial(jax.jit, static_argnames=("kernel", "epochs", "batch", "learning_rate", "weight_decay"))
def _fit(keys, x, y, mask, kernel, epochs, batch, learning_rate, weight_decay):
    samples, fan_in = x.shape[0], kernel * kernel * x.shape[-1]
    steps = samples // batch  # the last partial batch of each epoch is dropped (at most batch - 1 samples)
    optimiser = optax.adamw(learning_rate, weight_decay=weight_decay)  # PyTorch's AdamW defaults otherwise

    def one_seed(key):
        init_key, order_key = jax.random.split(key)
        bound = 1 / math.sqrt(fan_in)  # PyTorch's Conv2d init, as EP's probes: U(-1/√fan_in, 1/√fan_in)
        weights = jax.random.uniform(init_key, (fan_in, len(CLASSES)), minval=-bound, maxval=bound)

        def epoch(carry, key):
            def step(carry, batch_index):
                weights, opt_state = carry
                loss, grads = jax.value_and_grad(_loss)(weights, x[batch_index], y[batch_index], mask, kernel)
                updates, opt_state = optimiser.update(grads, opt_state, weights)
                return (optax.apply_updates(weights, updates), opt_state), loss

            order = jax.random.permutation(key, samples)[:steps * batch].reshape(steps, batch)
            carry, losses = jax.lax.scan(step, carry, order)
            return carry, losses.mean()

        (weights, _), losses = jax.lax.scan(epoch, (weights, optimiser.init(weights)),
                                            jax.random.split(order_key, epochs))
        return weights, losses

    return jax.vmap(one_seed)(keys)


def fit(x: np.ndarray, y: np.ndarray, seeds: int = 5, kernel: int = 1, epochs: int = 10, batch: int = 16,
        learning_rate: float = 1e-3, weight_decay: float = 1e-3, key: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Probe weights (seeds, k·k·C, 5) fitted on representations x (n, H, W, C) and labels y (n, H, W), and each
    seed's mean training loss per epoch (seeds, epochs). Only interior squares enter the loss."""
    if len(x) < batch:
        raise PipelineError(f"probe training data: {len(x)} samples, fewer than one batch of {batch}; "
                            "give sokoban.probes.episodes more levels")
    mask = jnp.asarray(interior(*x.shape[1:3]), jnp.float32)
    keys = jax.random.split(jax.random.PRNGKey(key), seeds)
    weights, losses = _fit(keys, jnp.asarray(x, jnp.float32), jnp.asarray(y), mask, kernel, epochs, batch,
                           learning_rate, weight_decay)
    return np.asarray(weights), np.asarray(losses)


@partial(jax.jit, static_argnames=("kernel",))
def _predict(weights, x, kernel):
    p = jax.nn.softmax(jnp.einsum("nhwf,sfc->snhwc", _features(x, kernel), weights), axis=-1)
    direction = jnp.argmax(p[..., 1:], axis=-1)  # ĉ: the most probable of the four directions
    confidence = jnp.take_along_axis(p[..., 1:], direction[..., None], axis=-1)[..., 0]
    return (direction + 1).astype(jnp.int8), confidence, jnp.argmax(p, axis=-1).astype(jnp.int8)


PREDICT_CHUNK = 4096  # samples a probe reads at once (memory only)


def predict(weights: np.ndarray, x: np.ndarray, kernel: int = 1, chunk: int = PREDICT_CHUNK
            ) -> tuple[np.ndarray, ...]:
    """Each probe seed's reading of representations x (n, H, W, C), three arrays (seeds, n, H, W): the most
    probable direction ĉ (1-4), its probability p_ĉ, and the most probable of all five classes (for EP's F1)."""
    parts = [jax.device_get(_predict(jnp.asarray(weights), jnp.asarray(x[i:i + chunk], jnp.float32), kernel))
             for i in range(0, max(len(x), 1), chunk)]  # one (empty) part where x is empty: arrays of n = 0
    return tuple(np.concatenate(arrays, axis=1) for arrays in zip(*parts))


def job(options: jobs.ProbeData, runs: experiment.Families) -> int:
    """`sokoban-probe-data`: the probe data of one trained agent of the run `options.run`, as netCDF."""
    run = named(runs.by_id, options.run, options.config)
    data = run_data(run, options.run_dir, LevelSet.load(options.levels), options.seed, options.count)
    store.write_netcdf(data, options.out)
    print(f"{options.out}: {data.attrs['levels']} episodes, {data.sizes['sample']} steps")
    return 0
