"""Solve rate on a level set: every level played exactly once, greedily and with sampled actions.

Each level gets its own environment; all start together and run to the time limit, and what happens after
an episode ends is ignored (no auto-reset), so no level is skipped or counted twice.
"""

from __future__ import annotations


import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from parallel_experts.core.definitions import named
from parallel_experts.results import store
from parallel_experts.sokoban import env as sokoban_env
from parallel_experts.sokoban import experiment, jobs, train
from parallel_experts.sokoban.levels import LevelSet

MODES = ("greedy", "sampled")


def _play_levels(agent, env: sokoban_env.Sokoban, levels: np.ndarray, greedy: bool, key: jax.Array,
                 view: int, record: bool = False) -> dict:
    """One episode per level: per-level done, solved, return and length, in level order.

    With `record`, also what every step saw and did, stacked on a leading time axis (T, levels, ...): the
    observation `grid` and the next one, the `action`, whether the episode was still `active`, the encoder
    output `z` and the final aggregated state `s` after the observation (what the probes read)."""
    reset_key, action_key = jax.random.split(key)
    states, obs = sokoban_env.level_states(env, levels, reset_key)
    single = agent.initial_state(view, view)
    hidden = jax.tree.map(lambda x: jnp.broadcast_to(x, (len(levels), *x.shape)), single)
    zeros = jnp.zeros(len(levels))

    def step(carry, key):
        states, obs, hidden, done, episode_return, length, solved = carry
        grid = sokoban_env.view(obs, view)
        logits, _, hidden = jax.vmap(agent)(grid, hidden)
        action = jnp.where(greedy, jnp.argmax(logits, -1), jax.random.categorical(key, logits))
        states, timestep = jax.vmap(env.step)(states, action)
        active = ~done
        episode_return = episode_return + jnp.where(active, timestep.reward, 0.0)
        length = length + active
        solved = solved | (active & timestep.extras["solved"])
        done = done | timestep.last()
        seen = dict(grid=grid, next_grid=sokoban_env.view(timestep.observation.grid, view), action=action,
                    active=active, z=jax.vmap(agent.encoder)(grid), s=hidden.s) if record else None
        return (states, timestep.observation.grid, hidden, done, episode_return, length, solved), seen

    start = (states, obs, hidden, zeros.astype(bool), zeros, zeros.astype(jnp.int32), zeros.astype(bool))
    end, trajectory = jax.lax.scan(step, start, jax.random.split(action_key, env.time_limit))
    _, _, _, done, episode_return, length, solved = end
    played = {"done": done, "solved": solved, "episode_return": episode_return, "episode_length": length}
    return played | {"trajectory": trajectory} if record else played


PLAY = eqx.filter_jit(_play_levels)  # the agent's arrays and `greedy` are traced; env, view and record are static
CHUNK = 250  # levels played together (memory only): evaluation's and the probe data's


def evaluate(agent, env: sokoban_env.Sokoban, levels: np.ndarray, seed: int = 0, chunk: int = CHUNK,
             view: int = 10) -> xr.Dataset:
    """Greedy and sampled play of every level, in chunks of `chunk` levels (memory only); the agent sees the
    top-left view×view cells (see env.view)."""
    sokoban_env.check_view(levels, view)
    per_mode = {}
    for m, mode in enumerate(MODES):
        parts = []
        starts = range(0, len(levels), chunk)
        for c, start in enumerate(starts):
            key = jax.random.fold_in(jax.random.PRNGKey(seed), m * len(starts) + c)
            part = jax.device_get(PLAY(agent, env, levels[start:start + chunk], greedy=jnp.array(mode == "greedy"),
                                       key=key, view=view))
            assert part.pop("done").all(), "every episode ends by the time limit"
            parts.append(part)
        per_mode[mode] = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    data = {
        name: (("mode", "level"), np.stack([per_mode[mode][name] for mode in MODES]), attrs)
        for name, attrs in {
            "solved": {"long_name": "level solved within the time limit"},
            "episode_return": {"long_name": "episode return"},
            "episode_length": {"long_name": "environment steps until the episode ended", "units": "steps"},
        }.items()
    }
    return xr.Dataset(data, coords={"mode": list(MODES), "level": np.arange(len(levels))},
                      attrs={"time_limit": env.time_limit, "seed": seed})


class UniformPolicy(eqx.Module):
    """The chance level: every action equally likely in every state (sampled play), no state."""

    def initial_state(self, height, width):
        return jnp.zeros(())

    def __call__(self, grid, hidden):
        return jnp.zeros(4), jnp.zeros(()), hidden


def chance_solve_rate(env: sokoban_env.Sokoban, levels: np.ndarray, seed: int = 0, view: int = 10) -> float:
    """The fraction of `levels` a uniformly random policy solves within the time limit (each played once)."""
    return float(evaluate(UniformPolicy(), env, levels, seed=seed, view=view).sel(mode="sampled")["solved"].mean())


def evaluate_run(run, agents, test) -> xr.Dataset:
    """Every seed's agent of a run on every level of `test` (a LevelSet), with the levels' provenance."""
    env = sokoban_env.make_env(test.levels, reward=run.train.reward, time_limit=run.train.time_limit)
    per_seed = []
    for i, seed in enumerate(run.seeds):
        per_seed.append(evaluate(train.one_seed(agents, i), env, test.levels, seed=seed, view=run.train.view))
    result = xr.concat(per_seed, dim=xr.DataArray(list(run.seeds), dims="seed", name="seed"))
    files = np.array(test.files)[test.file]
    chance = chance_solve_rate(env, test.levels, seed=run.seeds[0], view=run.train.view)
    return result.assign_coords(level_file=("level", files), level_index=("level", test.index)).assign_attrs(
        run=run.id, levels=test.source, random_solve_rate=chance, **push_attrs(test))


def push_attrs(test) -> dict:
    """What a level set's push counts say (none where it has none): the mean pushes of a push-optimal solution
    and how many levels were solved for it."""
    if test.pushes is None or not len(test.pushes):
        return {}
    return {"mean_optimal_pushes": float(np.mean(test.pushes)), "optimal_pushes_levels": len(test.pushes)}


def job(options: jobs.Evaluate, runs: experiment.Families) -> int:
    """`sokoban-evaluate`: the solve rate of the trained run `options.run` on a level set, as netCDF."""
    run = named(runs.by_id, options.run, options.config)
    result = evaluate_run(run, train.load_agents(run, options.run_dir), LevelSet.load(options.levels))
    store.write_netcdf(result, options.out)
    print(f"{options.out}: greedy solve rate per seed {result['solved'].sel(mode='greedy').mean('level').values}")
    return 0
