"""Every distinct compiled program of a config's Sokoban jobs, at the config's exact shapes, for the rehearsal.

A training job runs `Trainer.run_updates` (log_interval A2C updates of every seed under vmap, the level table an
argument) and, where num_updates % log_interval > 0, `Trainer.run_last`; an evaluation job plays the test levels
in chunks (`evaluate.PLAY`) and once with the uniform policy (the chance level); a probe-data job plays its split
recording what the probes read, and replays the observations through the untrained control
(`probes.CONTROL_STATES`); a probe-fit job fits every representation's probes (`probes._fit`) and reads them in
chunks (`probes._predict`). Programs depend on the agent's architecture and the shapes, not on the run's name,
budget or seeds' values, so runs that share them share one key.

The probe fit's sample count is the number of steps the training split's episodes last, known only once they are
played; the rehearsal uses its bound, every episode to the time limit.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from parallel_experts.core.budget import allocation_id
from parallel_experts.core.programs import Program, collect, parameter_count, split
from parallel_experts.sokoban import env as sokoban_env
from parallel_experts.sokoban import evaluate, experiment, probes
from parallel_experts.sokoban.agent import Agent
from parallel_experts.sokoban.levels import FIXED, WALL
from parallel_experts.sokoban.settings import REPRESENTATIONS, AgentConfig, ProbeConfig
from parallel_experts.sokoban.train import DONATED, Trainer

GRID = (10, 10, 2)  # Jumanji's grid, every level padded to it (env._check_levels)


def agent_key(agent: AgentConfig) -> str:
    """What defines an agent's program: its allocation and every setting that is not AgentConfig's default."""
    defaults = AgentConfig(1, 1, 1)
    rest = [f"{f.name}={getattr(agent, f.name)}" for f in dataclasses.fields(agent)
            if f.name not in ("depth", "experts", "width", "recurrent")
            and getattr(agent, f.name) != getattr(defaults, f.name)]
    return "-".join([agent.expert, "recurrent" if agent.recurrent else "nonrecurrent", allocation_id(agent), *rest])


def programs(sokoban: experiment.Families) -> list[Program]:
    """The distinct programs of every Sokoban job of a config's DAG (`sokoban`: its Sokoban runs), each with the jobs
    that run it."""
    return collect(_programs(sokoban))


def _programs(sokoban: experiment.Families) -> Iterator[tuple[Program, tuple[str, str]]]:
    levels = {name: experiment.level_count(source) for name, source in sokoban.settings.levels.items()}
    for run in sokoban.by_id.values():
        job = f"run={run.id}"
        for length in {run.train.log_interval, run.train.num_updates % run.train.log_interval} - {0}:
            yield train_update(run.agent, run.train, len(run.seeds), levels["train"], length), ("sokoban_train", job)
        for chunk in chunks(levels["test"]):
            yield play(run.agent, run.train, chunk, record=False), ("sokoban_evaluate", job)
        yield chance(run.train, levels["test"]), ("sokoban_evaluate", job)
    probes = sokoban.settings.probes
    if probes is None:
        return
    fit = probes.fit
    for run in sokoban.probed:
        for seed in sokoban.probe_seeds[run.id]:  # every probed agent's jobs run the same programs
            agent_job = f"run={run.id}, seed={seed}"
            for split_name, played in sokoban.probe_levels.items():
                data_job = ("sokoban_probe_data", f"{agent_job}, split={split_name}")
                for chunk in chunks(played):
                    yield play(run.agent, run.train, chunk, record=True), data_job
                    yield control(run.agent, run.train, chunk), data_job
            samples = probes.episodes * run.train.time_limit  # the bound: none ends early
            for channels in sorted({_channels(run.agent, r) for r in REPRESENTATIONS}):
                yield probe_fit(fit, samples, channels, run.train.view), ("sokoban_probe_fit", agent_job)
                yield probe_predict(fit, channels, run.train.view), ("sokoban_probe_fit", agent_job)


def chunks(count: int, chunk: int = evaluate.CHUNK) -> list[int]:
    """The chunk sizes `evaluate.evaluate` and `probes.collect` play `count` levels in (their `chunk` default)."""
    return sorted({min(chunk, count - start) for start in range(0, count, chunk)})


def _channels(agent: AgentConfig, representation: str) -> int:
    return agent.encoder_channels if representation == "encoder" else agent.width


def dummy_levels(count: int = 1) -> np.ndarray:
    """A table of levels that are all wall, which any view accepts (env.check_view): a job's programs depend on
    its table's shape, not on the levels in it."""
    levels = np.zeros((count, *GRID), np.uint8)
    levels[..., FIXED] = WALL
    return levels


def train_update(agent: AgentConfig, train, seeds: int, levels: int, length: int) -> Program:
    """`length` A2C updates of `seeds` seeds on a table of `levels` levels: `Trainer.run_updates` or `run_last`."""
    def build():
        trainer = Trainer(agent, train, dummy_levels())
        carry = jax.eval_shape(trainer.init, list(range(seeds)))
        table = jax.ShapeDtypeStruct((levels, *GRID), jnp.uint8)
        return trainer._updates(length), (table, carry), parameter_count(carry.params) // seeds

    key = (f"sokoban_train/{agent_key(agent)}/seeds{seeds}/envs{train.num_envs}x{train.num_steps}/"
           f"view{train.view}/levels{levels}/updates{length}" + ("/remat" if train.remat else "")
           + (f"/seeds_at_once{train.seeds_at_once}" if train.seeds_at_once else ""))
    return Program(key, "sokoban_train", build, donate=DONATED)


def _abstract_agent(agent: AgentConfig):
    return split(eqx.filter_eval_shape(Agent, agent, jax.random.PRNGKey(0)))


def play(agent: AgentConfig, train, chunk: int, record: bool) -> Program:
    """One chunk of levels played to the time limit (`evaluate.PLAY`), recording the probes' data or not."""
    def build():
        params, static = _abstract_agent(agent)
        env = sokoban_env.make_env(dummy_levels(), reward=train.reward, time_limit=train.time_limit)

        def played(params, levels, greedy, key):
            return evaluate._play_levels(eqx.combine(params, static), env, levels, greedy, key, train.view, record)

        args = (params, jax.ShapeDtypeStruct((chunk, *GRID), jnp.uint8), jax.ShapeDtypeStruct((), jnp.bool_),
                jax.eval_shape(lambda: jax.random.PRNGKey(0)))
        return played, args, parameter_count(params)

    rule = "sokoban_probe_data" if record else "sokoban_evaluate"
    return Program(f"{rule}/play/{agent_key(agent)}/levels{chunk}/T{train.time_limit}/view{train.view}", rule, build)


def chance(train, levels: int) -> Program:
    """The uniform policy on every test level (`evaluate.chance_solve_rate`), per chunk size."""
    def build():
        env = sokoban_env.make_env(dummy_levels(), reward=train.reward, time_limit=train.time_limit)

        def played(levels, key):
            return evaluate._play_levels(evaluate.UniformPolicy(), env, levels, False, key, train.view)

        return played, (jax.ShapeDtypeStruct((min(levels, evaluate.CHUNK), *GRID), jnp.uint8),
                        jax.eval_shape(lambda: jax.random.PRNGKey(0))), 0

    return Program(f"sokoban_evaluate/chance/levels{min(levels, evaluate.CHUNK)}/T{train.time_limit}/view{train.view}",
                   "sokoban_evaluate", build)


def control(agent: AgentConfig, train, chunk: int) -> Program:
    """The untrained control reading a chunk's recorded observations (`probes.CONTROL_STATES`)."""
    def build():
        params, static = _abstract_agent(agent)

        def states(params, grid):
            return probes._control_states(eqx.combine(params, static), grid)

        grid = jax.ShapeDtypeStruct((train.time_limit, chunk, train.view, train.view, GRID[2]), jnp.uint8)
        return states, (params, grid), parameter_count(params)

    return Program(f"sokoban_probe_data/control/{agent_key(agent)}/levels{chunk}/T{train.time_limit}/"
                   f"view{train.view}", "sokoban_probe_data", build)


def probe_fit(fit: ProbeConfig, samples: int, channels: int, view: int) -> Program:
    """`fit.seeds` probes of one representation with `channels` channels on `samples` samples (`probes._fit`)."""
    def build():
        fitted = functools.partial(probes._fit, kernel=fit.kernel, epochs=fit.epochs, batch=fit.batch,
                                   learning_rate=fit.learning_rate, weight_decay=fit.weight_decay)
        args = (jax.eval_shape(lambda: jax.random.split(jax.random.PRNGKey(0), fit.seeds)),
                jax.ShapeDtypeStruct((samples, view, view, channels), jnp.float32),
                jax.ShapeDtypeStruct((samples, view, view), jnp.int8),
                jax.ShapeDtypeStruct((view, view), jnp.float32))
        return fitted, args, fit.seeds * fit.kernel**2 * channels * 5

    return Program(f"sokoban_probe_fit/fit/{fit.seeds}x{fit.kernel}x{fit.kernel}/samples{samples}/"
                   f"channels{channels}/view{view}/epochs{fit.epochs}/batch{fit.batch}", "sokoban_probe_fit", build)


def probe_predict(fit: ProbeConfig, channels: int, view: int) -> Program:
    """The fitted probes reading one chunk of samples (`probes._predict`)."""
    def build():
        features = fit.kernel**2 * channels
        args = (jax.ShapeDtypeStruct((fit.seeds, features, 5), jnp.float32),
                jax.ShapeDtypeStruct((probes.PREDICT_CHUNK, view, view, channels), jnp.float32))
        return functools.partial(probes._predict, kernel=fit.kernel), args, fit.seeds * features * 5

    return Program(f"sokoban_probe_fit/predict/{fit.seeds}x{fit.kernel}x{fit.kernel}/channels{channels}/view{view}",
                   "sokoban_probe_fit", build)
