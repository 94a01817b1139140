"""The language models against independent references written from SPEC D.1 and E.3.

The references loop over layers, experts and tokens in Python and use `jax.nn.dot_product_attention` (its
own GQA grouping and masking), so they share only the weights and `rms_norm`/`rope`/`logits` with the
models; those three are checked against hand computations first.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from parallel_experts import experts
from parallel_experts.errors import ConfigError
from parallel_experts.lm import models
from parallel_experts.lm.models import ModelConfig, RecurrentState, RecurrentTransformer, Transformer

jax.config.update("jax_enable_x64", False)
VOCAB = 97


def config(depth, n_experts, recurrent=False, **overrides):
    fields = dict(width=32, q_heads=4, kv_heads=2, vocab=VOCAB, recurrent=recurrent, dtype="float32")
    return ModelConfig(depth, n_experts, **(fields | overrides))


def randomise(model, key):
    """Replace the zero-initialised output projections, so that every path of the model matters."""
    leaves, treedef = jax.tree.flatten(model)
    keys = jax.random.split(key, len(leaves))
    leaves = [
        0.3 * jax.random.normal(k, x.shape, x.dtype) if eqx_array(x) and not jnp.any(x) else x
        for k, x in zip(keys, leaves)
    ]
    return jax.tree.unflatten(treedef, leaves)


def eqx_array(x):
    return isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jnp.floating)


def tokens(length, seed=0):
    return jax.random.randint(jax.random.key(seed), (length,), 0, VOCAB)


# --------------------------------------------------------------------------------------------------
# Layers against hand computations


def test_rms_norm_and_rope_by_hand():
    x = jnp.array([[3.0, 4.0]])
    np.testing.assert_allclose(models.rms_norm(x), x / math.sqrt(12.5 + 1e-5), rtol=1e-6)
    # hd = 4: frequencies 1 and 1/100; position 2 rotates the pairs (x0, x2) and (x1, x3).
    v = jnp.array([[[1.0, 2.0, 3.0, 4.0]]])
    out = models.rope(v, jnp.array([2]))[0, 0]
    c0, s0, c1, s1 = math.cos(2), math.sin(2), math.cos(0.02), math.sin(0.02)
    expected = [1 * c0 - 3 * s0, 2 * c1 - 4 * s1, 3 * c0 + 1 * s0, 4 * c1 + 2 * s1]
    np.testing.assert_allclose(out, expected, rtol=1e-5)


def test_logits_are_soft_capped_at_15():
    head = jnp.array([[1.0, 5.0, -50.0]] * 4)  # N(ones) = ones, so the raw logits are 4, 20, -200
    out = models.logits(head, jnp.ones((2, 4)))
    np.testing.assert_allclose(out[0], 15 * np.tanh(np.array([4, 20, -200]) / 15), rtol=1e-5)
    assert float(jnp.abs(out).max()) <= 15.0


# --------------------------------------------------------------------------------------------------
# The non-recurrent Transformer


def reference_attention(q, k, v, mask):
    """(T, H, hd) queries over (S, K, hd) keys with jax.nn.dot_product_attention's own GQA."""
    return jax.nn.dot_product_attention(q[None], k[None], v[None], mask=mask[None, None])[0]


def reference_transformer(model, ids, window=None):
    """SPEC D.1 written out: layers and experts in Python loops, banded causal attention per layer."""
    length = ids.shape[0]
    positions = jnp.arange(length)
    band = (positions[None] <= positions[:, None]) & (positions[None] > positions[:, None] - (window or length))
    x = model.embed[ids]
    depth, n_experts = model.config.depth, model.config.experts
    for layer in range(depth):
        outputs = []
        for i in range(n_experts):
            block = jax.tree.map(lambda w: w[layer, i], model.blocks)
            a = models.rms_norm(x)
            q = models.rope(models.rms_norm(jnp.einsum("td,dhk->thk", a, block.attention.query)), positions)
            k = models.rope(models.rms_norm(jnp.einsum("td,dhk->thk", a, block.attention.key)), positions)
            v = jnp.einsum("td,dhk->thk", a, block.attention.value)
            h = x + jnp.einsum("thk,hkd->td", reference_attention(q, k, v, band), block.attention.out)
            h = h + jnp.square(jax.nn.relu(models.rms_norm(h) @ block.mlp.up)) @ block.mlp.down
            outputs.append(h)
        x = sum(outputs) / math.sqrt(n_experts)
    return models.logits(model.head, x)


@pytest.mark.parametrize("depth, n_experts", [(3, 1), (2, 3)])
def test_transformer_matches_reference(depth, n_experts):
    model = randomise(Transformer(config(depth, n_experts), jax.random.key(1)), jax.random.key(2))
    ids = tokens(12)
    np.testing.assert_allclose(eqx.filter_jit(model)(ids), reference_transformer(model, ids), atol=2e-4)


def test_one_expert_is_a_standard_transformer():
    """E = 1: the sqrt-sum of one output is the output itself, so x ← x + attn, x ← x + MLP per layer."""
    model = randomise(Transformer(config(2, 1), jax.random.key(3)), jax.random.key(4))
    ids = tokens(9, seed=1)
    x = model.embed[ids]
    for layer in range(2):
        block = jax.tree.map(lambda w: w[layer, 0], model.blocks)
        x, _ = block(x, jnp.arange(9), jnp.zeros((0, 2, 8)), jnp.zeros((0, 2, 8)), jnp.zeros(0, jnp.int32), 9)
    np.testing.assert_allclose(model(ids), models.logits(model.head, x), atol=1e-5)


def test_causality():
    model = randomise(Transformer(config(2, 2), jax.random.key(5)), jax.random.key(6))
    ids = tokens(10)
    changed = ids.at[7].set((ids[7] + 1) % VOCAB)
    a, b = model(ids), model(changed)
    np.testing.assert_allclose(a[:7], b[:7], atol=1e-6)
    assert not np.allclose(a[7:], b[7:], atol=1e-3)


chunk_jit = eqx.filter_jit(Transformer.chunk)


@pytest.mark.parametrize("window, chunk", [(4, 3), (6, 6), (8, 2)])
def test_sliding_window_chunks_match_banded_attention(window, chunk):
    """Chunks with a cache of the last W tokens = every layer attending to itself and the W − 1 before it."""
    model = randomise(Transformer(config(2, 2), jax.random.key(7)), jax.random.key(8))
    ids = tokens(24, seed=2)
    cache, outputs = models.KVCache.empty(model.config, window), []
    for start in range(0, 24, chunk):
        out, cache = chunk_jit(model, ids[start : start + chunk], jnp.arange(start, start + chunk), cache, window)
        outputs.append(out)
    np.testing.assert_allclose(jnp.concatenate(outputs), reference_transformer(model, ids, window), atol=2e-4)
    np.testing.assert_array_equal(cache.positions, np.arange(24 - window, 24))


# --------------------------------------------------------------------------------------------------
# The recurrent Transformer


def reference_recurrent(model, ids, memory, rule="sqrt_sum"):
    """SPEC E.3 token by token: per level a list of every merged key/value ever written; attend to the last M."""
    depth, n_experts = model.config.depth, model.config.experts
    s = jnp.zeros(model.config.width)
    history = [([], []) for _ in range(depth)]
    states = []
    for t, token in enumerate(ids):
        z = model.embed[token]
        for level in range(depth):
            proposals = []
            for i in range(n_experts):
                e = jax.tree.map(lambda w: w[level, i], model.levels)
                u = jnp.concatenate([z, s]) @ e.mix
                a = models.rms_norm(u)[None]
                q = models.rope(models.rms_norm(jnp.einsum("td,dhk->thk", a, e.attention.query)), jnp.array([t]))
                k = models.rope(models.rms_norm(jnp.einsum("td,dhk->thk", a, e.attention.key)), jnp.array([t]))
                v = jnp.einsum("td,dhk->thk", a, e.attention.value)
                proposals.append((e, u, q, k[0], v[0]))
            keys, values = history[level]
            keys.append(sum(p[3] for p in proposals) / math.sqrt(n_experts))
            values.append(sum(p[4] for p in proposals) / math.sqrt(n_experts))
            window_k, window_v = jnp.stack(keys[-memory:]), jnp.stack(values[-memory:])
            outputs = []
            for e, u, q, _, _ in proposals:
                mask = jnp.ones((1, window_k.shape[0]), bool)
                u = u + jnp.einsum("thk,hkd->td", reference_attention(q, window_k, window_v, mask), e.attention.out)[0]
                outputs.append(models.rms_norm(u + jnp.square(jax.nn.relu(models.rms_norm(u) @ e.mlp.up)) @ e.mlp.down))
            alpha = None
            if model.routers is not None:
                alpha = jax.tree.map(lambda w: w[level], model.routers)(jnp.concatenate([z, s]))
            s = experts.aggregate(jnp.stack(outputs), rule, alpha)
        states.append(s)
    return jnp.stack(states)


@eqx.filter_jit
def segment(model, state, ids, memory):
    return model.segment(state, ids, memory)


def run_segments(model, ids, memory, length):
    state, outputs = RecurrentState.zeros(model.config, memory), []
    for start in range(0, ids.shape[0], length):
        shared, state = segment(model, state, ids[start : start + length], memory)
        outputs.append(shared)
    return jnp.concatenate(outputs), state


@pytest.mark.parametrize("depth, n_experts, memory, length", [(1, 3, 4, 5), (2, 2, 6, 4), (3, 1, 5, 1), (2, 3, 16, 8)])
def test_segments_match_token_by_token_reference(depth, n_experts, memory, length):
    """Across segment boundaries, cache fill and roll-over (M smaller and larger than the segment)."""
    model = randomise(RecurrentTransformer(config(depth, n_experts, recurrent=True), jax.random.key(9)),
                      jax.random.key(10))
    ids = tokens(20, seed=3)
    shared, state = run_segments(model, ids, memory, length)
    np.testing.assert_allclose(shared, reference_recurrent(model, ids, memory), atol=2e-4)
    assert int(state.position) == 20


def test_one_token_segments_equal_long_segments():
    model = randomise(RecurrentTransformer(config(2, 2, recurrent=True), jax.random.key(11)), jax.random.key(12))
    ids = tokens(16, seed=4)
    long, long_state = run_segments(model, ids, 6, 8)
    short, short_state = run_segments(model, ids, 6, 1)
    np.testing.assert_allclose(long, short, atol=1e-5)
    np.testing.assert_allclose(long_state.keys, short_state.keys, atol=1e-5)


def test_bad_model_configs_are_config_errors():
    with pytest.raises(ConfigError, match="heads must divide the width"):
        config(1, 1, q_heads=3)
    with pytest.raises(ConfigError, match="expected one of"):
        config(1, 1, aggregation="max")
    with pytest.raises(ConfigError, match="the non-recurrent Transformer has no router"):
        config(1, 1, aggregation="routed_mean")


@pytest.mark.parametrize("rule", ["mean", "routed_mean", "routed_sqrt_sum"])
def test_recurrent_aggregation_rules(rule):
    """The rule merges the expert outputs only; the reference merges keys and values by the sqrt-sum whatever the
    rule, and the routers are sharpened so that a routed merge of them would differ from it."""
    model = randomise(RecurrentTransformer(config(2, 3, recurrent=True, aggregation=rule), jax.random.key(13)),
                      jax.random.key(14))
    assert (model.routers is not None) == rule.startswith("routed")
    if model.routers is not None:
        model = eqx.tree_at(lambda m: m.routers.embeddings, model, replace_fn=lambda e: 30 * e)
        alpha = jax.tree.map(lambda w: w[0], model.routers)(jnp.concatenate([model.embed[0], jnp.zeros(32)]))
        assert float(alpha.max() - alpha.min()) > 0.5  # far from uniform: Σαk/√Σα² is not Σk/√E here
    ids = tokens(10, seed=5)
    shared, _ = run_segments(model, ids, 4, 5)
    np.testing.assert_allclose(shared, reference_recurrent(model, ids, 4, rule), atol=2e-4)


def test_every_level_reads_the_token_embedding():
    """Changing z at one token changes level 2's input directly, not only through s."""
    model = randomise(RecurrentTransformer(config(2, 1, recurrent=True), jax.random.key(15)), jax.random.key(16))
    state = RecurrentState.zeros(model.config, 4)
    grads = jax.grad(lambda m: m.segment(state, jnp.array([3]), 4)[0].sum())(model)
    assert float(jnp.abs(grads.levels.mix[1, 0, :32]).sum()) > 0  # the z half of level 2's W_in


def test_cache_entering_a_segment_gets_no_gradient():
    """Truncated backprop: the loss of a segment does not differentiate into the state's cache."""
    model = randomise(RecurrentTransformer(config(1, 2, recurrent=True), jax.random.key(17)), jax.random.key(18))
    _, state = run_segments(model, tokens(6), 4, 6)
    grad = eqx.filter_grad(lambda st: model.segment(st, tokens(3, seed=6), 4)[0].sum())(state)
    assert float(jnp.abs(grad.keys).sum()) == 0 and float(jnp.abs(grad.values).sum()) == 0
    assert float(jnp.abs(grad.shared).sum()) > 0  # s itself is the caller's to stop


def test_reset_clears_one_stream():
    model = RecurrentTransformer(config(1, 1, recurrent=True), jax.random.key(19))
    _, state = run_segments(model, tokens(5), 4, 5)
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), state)
    reset = jax.vmap(RecurrentState.reset_where)(batch, jnp.array([True, False]))
    assert int(reset.position[0]) == 0 and float(jnp.abs(reset.keys[0]).sum()) == 0
    assert int(reset.position[1]) == 5 and float(jnp.abs(reset.keys[1]).sum()) > 0


@pytest.mark.parametrize("recurrent", [False, True])
def test_measured_flops_per_token_match_a_hand_count(recurrent):
    """One more layer adds its matmuls (2 FLOPs per multiply-add) and the attention over the W-token window:
    q, k, v, o: d·(H + 2K)·hd + H·hd·d; MLP 8d²; recurrent W_in 2d²; attention 2·W·H·hd (scores and values).
    The rest (norms, RoPE, softmax, and for the recurrent model rolling the level's cache) is at most 15%."""
    d, window = 64, 128
    base = dict(width=d, q_heads=4, kv_heads=2, vocab=VOCAB, recurrent=recurrent, dtype="float32")
    one, two = (models.token_flops(ModelConfig(depth, 1, **base), window) for depth in (1, 2))
    matmuls = d * (4 + 2 * 2) * 16 + 4 * 16 * d + 8 * d * d + (2 * d * d if recurrent else 0)
    attention = 2 * (window + (1 if recurrent else 0)) * 4 * 16  # the recurrent window also holds the local entry
    assert 2 * (matmuls + attention) <= two - one <= 1.15 * 2 * (matmuls + attention)
    wide = models.token_flops(ModelConfig(1, 2, **base), window)
    assert 0.9 * (two - one) <= wide - one <= 1.1 * (two - one)  # a second expert costs about a second layer
