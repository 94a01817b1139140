"""The language models' optimiser: groups, Muon matrix views, both schedules, cautious decay, dtypes and rounding."""

import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from parallel_experts.config.errors import PipelineError
from parallel_experts.lm.optim import (MATRIX, PER_HEAD, OptimConfig, OptimError, cautious_weight_decay,
                                       muon_dimensions, optimizer, param_labels, schedule)

L, E, D, H, K, V = 2, 3, 8, 2, 1, 16
HD = D // H


class Attention(eqx.Module):
    query: jax.Array
    key: jax.Array
    value: jax.Array
    out: jax.Array


class MLP(eqx.Module):
    up: jax.Array
    down: jax.Array


class Block(eqx.Module):
    attention: Attention
    mlp: MLP


class Level(eqx.Module):
    mix: jax.Array
    attention: Attention
    mlp: MLP


class LM(eqx.Module):
    """The field layout of lm.models, at toy size; `activation` is a non-array leaf."""

    embed: jax.Array
    blocks: eqx.Module
    head: jax.Array
    activation: Callable = jax.nn.relu


class RecurrentLM(eqx.Module):
    embed: jax.Array
    levels: Level
    head: jax.Array


def _shapes(recurrent=False):
    shapes = {"query": (L, E, D, H, HD), "key": (L, E, D, K, HD), "value": (L, E, D, K, HD),
              "out": (L, E, H, HD, D), "up": (L, E, D, 4 * D), "down": (L, E, 4 * D, D)}
    return shapes | {"mix": (L, E, 2 * D, D)} if recurrent else shapes


def toy_model(seed=0, recurrent=False, dtype=jnp.float32, zero=()):
    """A model with random N(0,1) weights (zeros for the fields named in `zero`)."""
    rng = np.random.default_rng(seed)  # numpy: eager jax.random costs a compilation per shape
    make = {name: jnp.asarray(np.zeros(shape) if name in zero else rng.standard_normal(shape), dtype)
            for name, shape in _shapes(recurrent).items()}
    attention = Attention(make["query"], make["key"], make["value"], make["out"])
    mlp = MLP(make["up"], make["down"])
    embed, head = jnp.asarray(rng.standard_normal((V, D)), dtype), jnp.asarray(rng.standard_normal((D, V)), dtype)
    if recurrent:
        return RecurrentLM(embed, Level(make["mix"], attention, mlp), head)
    return LM(embed, Block(attention, mlp), head)


def toy_grads(params, seed=1, scale=0.1):
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda x: jnp.asarray(scale * rng.standard_normal(x.shape), x.dtype), params)


def test_labels_name_the_three_groups_and_skip_non_arrays():
    labels = param_labels(toy_model())
    assert labels.embed == "embed" and labels.head == "head" and labels.activation is None
    assert set(jax.tree.leaves(labels.blocks)) == {"other"} and len(jax.tree.leaves(labels.blocks)) == 6
    recurrent = param_labels(toy_model(recurrent=True))
    assert recurrent.levels.mix == "other" and recurrent.embed == "embed" and recurrent.head == "head"
    tree = {"embed": jnp.ones((V, D)), "head": jnp.ones((D, V)), "blocks": {"up": jnp.ones((1, 1, 2, 3))}}
    assert param_labels(tree) == {"embed": "embed", "head": "head", "blocks": {"up": "other"}}


def test_muon_views_follow_the_field_names():
    dims = muon_dimensions(toy_model(recurrent=True))
    assert dims.embed is None and dims.head is None
    assert dims.levels.attention.query == dims.levels.attention.key == dims.levels.attention.value == PER_HEAD
    assert PER_HEAD.reduction_axis == -3 and PER_HEAD.output_axis == -1
    assert dims.levels.attention.out == dims.levels.mlp.up == dims.levels.mlp.down == dims.levels.mix == MATRIX
    assert MATRIX.reduction_axis == -2 and MATRIX.output_axis == -1


def test_an_unknown_matrix_raises_naming_its_path():
    params = {"embed": jnp.ones((V, D)), "head": jnp.ones((D, V)),
              "blocks": {"attention": {"gate": jnp.ones((L, E, D, H))}}}
    with pytest.raises(OptimError, match=r"\['blocks'\]\['attention'\]\['gate'\].*'gate'"):
        muon_dimensions(params)
    with pytest.raises(PipelineError, match="gate"):
        optimizer(params, OptimConfig(), 100)
    with pytest.raises(OptimError, match="embed"):
        optimizer({"head": jnp.ones((D, V))}, OptimConfig(), 100)


def test_defaults_and_warmup_length():
    config = OptimConfig()
    assert (config.peak_lr, config.min_lr, config.cautious_decay, config.clip_norm) == (0.02, 6e-6, 0.01, 1.0)
    assert OptimConfig.for_family(recurrent=True).min_lr == 2e-4
    assert OptimConfig.for_family(recurrent=False) == config
    assert [config.warmup_steps(n) for n in (10_000, 50_000, 150, 50)] == [100, 300, 1, 0]


def test_authors_schedule_matches_hand_computed_values():
    lo, hi = 6e-6, 0.02
    lr = schedule(OptimConfig(), 10_000)  # warm-up 100 steps, cosine over 9,800, min_lr for the last 100
    expected = {0: lo, 50: (lo + hi) / 2, 100: hi, 5_000: (lo + hi) / 2, 9_900: lo, 9_950: lo, 10_000: lo,
                1_000: lo + (hi - lo) * 0.5 * (1 + math.cos(math.pi * 900 / 9_800))}
    for step, value in expected.items():
        np.testing.assert_allclose(float(lr(step)), value, rtol=1e-6, atol=2e-9, err_msg=f"step {step}")  # float32
    assert OptimConfig().schedule == "authors"


def test_schedule_to_the_last_update_matches_hand_computed_values():
    lo, hi = 6e-6, 0.02
    lr = schedule(OptimConfig(schedule="total"), 10_000)  # warm-up 100 steps, cosine over the other 9,900
    expected = {0: lo, 50: (lo + hi) / 2, 100: hi, 5_050: (lo + hi) / 2, 10_000: lo, 20_000: lo,
                9_900: lo + (hi - lo) * 0.5 * (1 + math.cos(math.pi * 9_800 / 9_900))}
    for step, value in expected.items():
        np.testing.assert_allclose(float(lr(step)), value, rtol=1e-6, atol=2e-9, err_msg=f"step {step}")
    assert float(lr(9_900)) > 1.5 * lo  # the cosine ends at total_steps, not at total − warm-up
    with pytest.raises(OptimError):
        schedule(OptimConfig(), 0)
    with pytest.raises(OptimError, match="expected one of authors, total"):
        OptimConfig(schedule="linear")


def test_cautious_decay_on_a_hand_computed_example():
    p = {"w": jnp.array([[1.0, -2.0], [0.5, -1.0]]), "bias": jnp.array([3.0, 3.0])}
    u = {"w": jnp.array([[-0.1, -0.1], [0.2, 0.3]]), "bias": jnp.array([-1.0, 1.0])}
    decay = cautious_weight_decay(0.1, lambda step: 0.5 * (step + 1))  # η_0 = 0.5, η_1 = 1.0
    state = decay.init(p)
    out, state = decay.update(u, state, p)
    # η·rate = 0.05. The authors decay where u·p ≥ 0 (u additive), entries (0,1) and (1,0); (0,0) and (1,1)
    # are left alone, and so is every rank-1 parameter.
    np.testing.assert_allclose(out["w"], [[-0.1, -0.1 - 0.05 * -2.0], [0.2 - 0.05 * 0.5, 0.3]], rtol=1e-6)
    np.testing.assert_array_equal(out["bias"], u["bias"])
    out, state = decay.update(u, state, p)  # second update: η_1 = 1.0
    np.testing.assert_allclose(out["w"], [[-0.1, -0.1 + 0.2], [0.2 - 0.05, 0.3]], rtol=1e-6)
    assert int(state.count) == 2
    with pytest.raises(ValueError):
        decay.update(u, state)


FIRST_STEP = pytest.mark.xdist_group("lm_optim_first_step")  # one worker runs its tests: compiled once


@pytest.fixture(scope="module")
def first_step():
    """Gradients and the first update of a float32 model whose queries and output projections are zero, so
    that the decay leaves them alone; the gradients' global norm is above 1, so the clip acts."""
    model = toy_model(zero=("query", "out"))
    params = eqx.filter(model, eqx.is_array)
    grads = toy_grads(params)
    assert float(optax.tree.norm(grads)) > 1.0
    opt = optimizer(model, OptimConfig(), 10_000)
    return grads, jax.jit(opt.update)(grads, opt.init(params), params)[0]


@FIRST_STEP
def test_muon_orthogonalises_each_head_and_expert_separately(first_step):
    grads, updates = first_step
    config = OptimConfig()
    single = optax.contrib.muon(float(schedule(config, 10_000)(0)), config.ns_coeffs, 5, 0.95, 1e-8, nesterov=True)

    @jax.jit
    @jax.vmap
    def reference(g):  # Muon's first update of one 2-D matrix on its own (scale-free: clipping is irrelevant)
        zeros = jnp.zeros_like(g)
        return single.update(g, single.init(zeros), zeros)[0]

    grads, updates = grads.blocks.attention, updates.blocks.attention
    per_head = lambda x: x.transpose(0, 1, 3, 2, 4).reshape(L * E * H, D, HD)  # (d_in, h_d) slices
    np.testing.assert_allclose(per_head(updates.query), reference(per_head(grads.query)), rtol=1e-4, atol=1e-10)
    np.testing.assert_allclose(updates.out.reshape(-1, HD, D), reference(grads.out.reshape(-1, HD, D)),
                               rtol=1e-4, atol=1e-10)
    # an orthogonalised (D, HD) slice, width factor sqrt(max(1, HD/D)) = 1: singular values ≈ min_lr
    singular = jnp.linalg.svd(updates.query[0, 0, :, 0, :], compute_uv=False)
    assert np.all((singular > 0.5 * 6e-6) & (singular < 1.5 * 6e-6))


@FIRST_STEP
def test_embed_and_head_take_a_width_scaled_adamw_step(first_step):
    grads, updates = first_step  # clipped gradients: Adam's first step is ±lr whatever the scale
    scale = math.sqrt(768 / D)
    np.testing.assert_allclose(updates.embed, -0.2 * scale * jnp.sign(grads.embed), rtol=1e-5)
    np.testing.assert_allclose(updates.head, -0.004 * scale * jnp.sign(grads.head), rtol=1e-5)


@pytest.mark.parametrize("recurrent", [False, True])
def test_bfloat16_parameters_stay_bfloat16_with_float32_moments_and_updates(recurrent):
    model = toy_model(recurrent=recurrent, dtype=jnp.bfloat16)
    params = eqx.filter(model, eqx.is_array)
    opt = optimizer(model, OptimConfig.for_family(recurrent), 1_000)
    state = opt.init(params)
    step = jax.jit(lambda p, s, g: opt.update(g, s, p))
    for seed in (1, 2):
        updates, state = step(params, state, toy_grads(params, seed=seed))
        params = optax.apply_updates(params, updates)
    assert {x.dtype for x in jax.tree.leaves(updates)} == {jnp.dtype(jnp.float32)}  # rounded only when applied
    assert {x.dtype for x in jax.tree.leaves(params)} == {jnp.dtype(jnp.bfloat16)}
    assert all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(params))
    moments = [x for x in jax.tree.leaves(state) if x.shape == (L, E, D, H, HD)]
    assert moments and all(x.dtype == jnp.float32 for x in moments)  # Muon's momentum of the queries
    assert any(x.shape == (V, D) and x.dtype == jnp.float32 for x in jax.tree.leaves(state))  # Adam's mu


def test_an_update_rounds_the_bfloat16_parameters_once():
    """p ← bf16(p + u) with u in float32, as the authors apply it; rounding u to bf16 first differs."""
    model = toy_model(recurrent=True, dtype=jnp.bfloat16)
    params = eqx.filter(model, eqx.is_array)
    opt = optimizer(model, OptimConfig.for_family(True), 1_000)
    updates, _ = jax.jit(opt.update)(toy_grads(params), opt.init(params), params)
    new = optax.apply_updates(params, updates)
    once = jax.tree.map(lambda p, u: (p.astype(jnp.float32) + u).astype(jnp.bfloat16), params, updates)
    twice = jax.tree.map(lambda p, u: p + u.astype(jnp.bfloat16), params, updates)
    for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(once)):
        np.testing.assert_array_equal(np.asarray(a, np.float32), np.asarray(b, np.float32))
    differ = sum(int(jnp.sum(a != b)) for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(twice)))
    assert differ > 0  # the two roundings are distinguishable on these parameters


@pytest.mark.parametrize("recurrent, aggregation", [(False, "sqrt_sum"), (True, "routed_mean")])
def test_real_models_get_their_groups_and_keep_bfloat16(recurrent, aggregation):
    from parallel_experts.lm.models import build
    from parallel_experts.lm.settings import ModelConfig

    model = build(ModelConfig(2, 2, 32, 4, 2, vocab=64, recurrent=recurrent, aggregation=aggregation),
                  jax.random.key(0))
    params = eqx.filter(model, eqx.is_array)
    labels = jax.tree.leaves(param_labels(params))
    assert labels.count("embed") == labels.count("head") == 1
    assert labels.count("gate") == (3 if recurrent else 0)  # the router's W_c, W_e and expert embeddings
    grads = jax.tree.map(lambda p: jnp.ones_like(p) * 1e-3, params)
    opt = optimizer(params, OptimConfig.for_family(recurrent), 100)
    updates, _ = jax.jit(opt.update)(grads, opt.init(params), params)
    new = optax.apply_updates(params, updates)
    assert all(leaf.dtype == jnp.bfloat16 for leaf in jax.tree.leaves(new))
    assert not bool(jnp.all(new.embed == params.embed)) and not bool(jnp.all(new.head == params.head))
