"""Every distinct compiled program of a config's language-model jobs, at the config's exact shapes, for the rehearsal.

A training job runs `Trainer.update` (one optimiser step over G microbatches, the streams split over the devices
of `resources.lm_train.gpus`, parameters replicated) and, for the recurrent model, `Trainer.advance` (the warm-up
windows); an evaluation job runs `evaluate._chunk_nll` on one device; Table 5's job pre-fills, decodes and steps
each row at each context and batch (`lm.latency`), Table 6's trains each row at each context (`lm.throughput`),
the streams split over the devices of `resources.bench.gpus`.
A program depends on the model and the shapes, so an ablation's run at the sweep's setting shares the sweep's.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator

import equinox as eqx
import jax
import jax.numpy as jnp

from parallel_experts.core.programs import Program, collect, parameter_count, sharded, split
from parallel_experts.lm import decode, evaluate, experiment, models, systems
from parallel_experts.lm.settings import ModelConfig, TrainConfig
from parallel_experts.lm.shards import CHUNK
from parallel_experts.lm.train import Trainer


def programs(lm: experiment.Families) -> list[Program]:
    """The distinct programs of every language-model job of a config's DAG (`lm`: its LM runs), each with the jobs
    that run it."""
    return collect(_programs(lm))


def _programs(lm: experiment.Families) -> Iterator[tuple[Program, tuple[str, str]]]:
    devices, tables, shape = lm.devices, lm.settings.tables, lm.settings.shape
    for run in lm.by_id.values():
        job = f"run={run.id}"
        yield train_update(run.model, run.train, devices), ("lm_train", job)
        if run.train.warmup:
            yield train_advance(run.model, run.train, devices), ("lm_train", job)
        yield evaluation(run.model, run.window, lm.settings.evaluation.lanes), ("lm_evaluate", job)
    if "latency" in tables:
        spec = systems.latency_settings(tables)
        for row in systems.selected(systems.LATENCY_ROWS, spec):
            model = systems.model_config(row, spec["width"], shape)
            for context in spec["contexts"]:
                for batch in spec["batches"]:
                    for program in decoding(model, context, batch, spec["steps"]):
                        yield program, ("lm_latency", "")
    if "throughput" in tables:
        spec = systems.throughput_settings(tables)
        for row in systems.selected(systems.THROUGHPUT_ROWS, spec):
            model = systems.model_config(row, spec["width"], shape)
            for context in spec["contexts"]:
                train = systems.train_config(model, context, spec["batch_tokens"])
                yield train_update(model, train, lm.bench_devices, "lm_throughput"), ("lm_throughput", "")
                if train.warmup:
                    yield train_advance(model, train, lm.bench_devices, "lm_throughput"), ("lm_throughput", "")


def model_key(model: ModelConfig) -> str:
    kind = "recurrent" if model.recurrent else "transformer"
    return (f"{kind}-L{model.depth}-E{model.experts}-d{model.width}-h{model.q_heads}x{model.kv_heads}-"
            f"V{model.vocab}-{model.dtype}-{model.aggregation}-kv_{model.kv_cache}"
            + ("" if model.attention == ModelConfig.attention else f"-attention_{model.attention}"))


def _train_key(kind: str, model: ModelConfig, train: TrainConfig, devices: int) -> str:
    return (f"{kind}/{model_key(model)}/T{train.sequence}-M{train.memory}/G{train.groups}x{train.microbatch}/"
            f"devices{devices}")


def _train_args(model: ModelConfig, train: TrainConfig, devices: int):
    """The trainer, its carry and one batch as shapes, split over `devices` as the job splits them."""
    mesh = None if devices == 1 else jax.sharding.Mesh(jax.devices()[:devices], ("data",))
    trainer = Trainer(model, train, mesh)
    carry = jax.eval_shape(trainer.init)
    if devices > 1:
        carry = carry._replace(params=jax.tree.map(lambda x: sharded(x, devices, None), carry.params),
                               opt_state=jax.tree.map(lambda x: sharded(x, devices, None), carry.opt_state),
                               states=jax.tree.map(lambda x: sharded(x, devices, 1), carry.states))
    groups = (train.groups, train.microbatch)
    tokens = jax.ShapeDtypeStruct((*groups, train.sequence), jnp.int32)
    reset = jax.ShapeDtypeStruct(groups, jnp.bool_)
    if devices > 1:
        tokens, reset = sharded(tokens, devices, 1), sharded(reset, devices, 1)
    return trainer, carry, tokens, reset


def train_update(model: ModelConfig, train: TrainConfig, devices: int, rule: str = "lm_train") -> Program:
    """One optimiser update (`Trainer.update`: every argument donated)."""
    def build():
        trainer, carry, tokens, reset = _train_args(model, train, devices)
        return trainer._update, (carry, tokens, tokens, reset), parameter_count(carry.params)

    # The training job's update donates every argument; Table 6's, its carry only (lm.throughput.measure).
    donate = (0, 1, 2, 3) if rule == "lm_train" else (0,)
    return Program(_train_key(f"{rule}/update", model, train, devices), rule, build, devices, donate=donate)


def train_advance(model: ModelConfig, train: TrainConfig, devices: int, rule: str = "lm_train") -> Program:
    """One warm-up window of the recurrent state (`Trainer.advance`: every argument donated)."""
    def build():
        trainer, carry, tokens, reset = _train_args(model, train, devices)
        return trainer._advance, (carry, tokens, reset), parameter_count(carry.params)

    return Program(_train_key(f"{rule}/advance", model, train, devices), rule, build, devices, donate=(0, 1, 2))


def _abstract_model(model: ModelConfig):
    return split(eqx.filter_eval_shape(models.build, model, jax.random.key(0)))


def evaluation(model: ModelConfig, window: int, lanes: int) -> Program:
    """One chunk of the streaming validation loss for a block of `lanes` streams (`evaluate._chunk_nll`)."""
    def build():
        params, static = _abstract_model(model)
        state = jax.eval_shape(lambda: evaluate._empty_state(eqx.combine(params, static), window, lanes))

        def chunk(params, state, inputs, labels, start):
            return evaluate._chunk_nll(eqx.combine(params, static), state, inputs, labels, start, window)

        tokens = jax.ShapeDtypeStruct((lanes, CHUNK), jnp.int32)
        return chunk, (params, state, tokens, tokens, jax.ShapeDtypeStruct((), jnp.int32)), parameter_count(params)

    return Program(f"lm_evaluate/{model_key(model)}/W{window}/lanes{lanes}", "lm_evaluate", build)


def decoding(model: ModelConfig, context: int, batch: int, steps: int) -> list[Program]:
    """Table 5's programs of one cell: the prompt's pre-fill, the `steps`-step decode scan and the single step
    (their rings donated, `lm.latency.prepare`)."""
    def build(which):
        params, static = _abstract_model(model)
        prompts = jax.ShapeDtypeStruct((batch, context), jnp.int32)

        def prefill(params, prompts):
            return decode.prefill_batch(eqx.combine(params, static), prompts, context)

        if which == "prefill":
            return prefill, (params, prompts), parameter_count(params)
        last, rings = jax.eval_shape(prefill, params, prompts)
        tokens = jax.ShapeDtypeStruct(last.shape[:1], jnp.int32)
        if which == "generate":
            return (lambda params, rings, tokens: decode.generate(eqx.combine(params, static), rings, tokens, steps),
                    (params, rings, tokens), parameter_count(params))
        return (lambda params, rings, tokens: decode.greedy_step(eqx.combine(params, static), rings, tokens),
                (params, rings, tokens), parameter_count(params))

    key = f"{model_key(model)}/C{context}/B{batch}"
    return [Program(f"lm_latency/prefill/{key}", "lm_latency", functools.partial(build, "prefill")),
            Program(f"lm_latency/generate{steps}/{key}", "lm_latency", functools.partial(build, "generate"),
                    donate=(1, 2)),
            Program(f"lm_latency/step/{key}", "lm_latency", functools.partial(build, "step"), donate=(1, 2))]
