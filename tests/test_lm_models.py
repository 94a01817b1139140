"""The language models against independent references written from paper App. A.2 and A.3 (the authors'
LM/nanogpt/model_moe.py and LM/recnanogpt/model_shared_kv.py).

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

from parallel_experts.config.errors import ConfigError
from parallel_experts.core import experts
from parallel_experts.lm import models, systems
from parallel_experts.lm.models import RecurrentState, RecurrentTransformer, Transformer
from parallel_experts.lm.settings import KV_CACHES, ModelConfig
from parallel_experts.lm.train import Trainer

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
    """Paper App. A.2 written out: layers and experts in Python loops, banded causal attention per layer."""
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


@pytest.mark.parametrize("query_block", [1, 4])
def test_queries_in_blocks_give_the_reference_outputs_and_gradients(query_block, monkeypatch):
    """Beyond QUERY_BLOCK queries, `attend` scans over blocks of them (here 12 tokens in 12 blocks of 1, or 3 of
    4), each rematerialised in the backward pass."""
    monkeypatch.setattr(models, "QUERY_BLOCK", query_block)
    model = randomise(Transformer(config(2, 3), jax.random.key(1)), jax.random.key(2))
    ids = tokens(12)
    ours = eqx.filter_jit(eqx.filter_value_and_grad(lambda m: jnp.sin(m(ids)).sum()))(model)
    theirs = eqx.filter_value_and_grad(lambda m: jnp.sin(reference_transformer(m, ids)).sum())(model)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * float(jnp.abs(b).max()))


def test_the_fused_attention_gives_the_reference_outputs_and_gradients():
    """`attention="xla"`: `jax.nn.dot_product_attention` (causal, no mask array) in place of our query blocks, the
    GPU check's stand-in on a CPU for cuDNN's kernel; the same model to float32 rounding, the cached chunks too."""
    blocked, fused = (randomise(Transformer(config(2, 3, attention=way), jax.random.key(1)), jax.random.key(2))
                      for way in ("blocked", "xla"))
    ids = tokens(12)
    ours = eqx.filter_jit(eqx.filter_value_and_grad(lambda m: jnp.sin(m(ids)).sum()))(fused)
    theirs = eqx.filter_value_and_grad(lambda m: jnp.sin(reference_transformer(m, ids)).sum())(blocked)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * float(jnp.abs(b).max()))
    cache = models.KVCache.empty(fused.config, 4)
    for model in (blocked, fused):  # a chunk after a cache attends with `attend` whatever the setting
        np.testing.assert_allclose(chunk_jit(model, ids[:6], jnp.arange(6), cache, 4)[0],
                                   reference_transformer(blocked, ids[:6], 4), atol=2e-4)


def test_cudnns_attention_gets_what_its_kernel_takes_in_a_training_update(monkeypatch):
    """cuDNN's kernel cannot run here: the training update, traced with it, hands it bfloat16 queries, keys and values
    of one sequence of each expert and stream, (T, heads, head dim), with a head dim it takes (a multiple of 8)."""
    seen = []
    monkeypatch.setattr(models, "attend_window", lambda q, k, v, window, way: seen.append((q, k, v, window, way)) or q)
    model = ModelConfig(2, 2, 192, 2, 1, vocab=128, dtype="bfloat16", attention="cudnn")
    job = Trainer(model, systems.train_config(model, 32, 128))
    tokens = jnp.zeros((job.config.groups, job.config.microbatch, 32), jnp.int32)
    jax.eval_shape(job._update, job.init(), tokens, tokens, jnp.zeros(tokens.shape[:2], bool))
    (q, k, v, window, way), *_ = seen
    assert (q.shape, k.shape, v.shape, window, way) == ((32, 2, 96), (32, 1, 96), (32, 1, 96), 32, "cudnn")
    assert {x.dtype for x in (q, k, v)} == {jnp.dtype(jnp.bfloat16)} and q.shape[-1] % 8 == 0


@pytest.mark.parametrize("window", [3, 12])
def test_the_fused_attention_sees_the_window_attend_sees(window):
    q, k, v = (jax.random.normal(jax.random.key(i), (12, heads, 8)) for i, heads in enumerate((4, 2, 2)))
    positions = jnp.arange(12)
    mask = models.window_mask(positions, positions, jnp.ones(12, bool), window)
    np.testing.assert_allclose(models.attend_window(q, k, v, window, "xla"), models.attend(q, k, v, mask), atol=1e-5)
    np.testing.assert_allclose(models.attend_window(q, k, v, window, "xla"), reference_attention(q, k, v, mask),
                               atol=1e-5)


def test_the_backward_pass_of_query_blocks_plans_a_fraction_of_the_scores(monkeypatch):
    """1,024 queries over 1,024 keys, 4 heads: 16 MiB of float32 scores. Unblocked, the gradient's plan holds them
    at least once (XLA:CPU's memory analysis: 48.5 MiB); in blocks of 256, a third of that (16.3 MiB)."""
    q, kv = jnp.zeros((1024, 4, 16)), jnp.zeros((1024, 2, 16))
    mask = models.window_mask(jnp.arange(1024), jnp.arange(1024), jnp.ones(1024, bool), 1024)
    planned = {}
    for block in (1024, 256):
        monkeypatch.setattr(models, "QUERY_BLOCK", block)
        grad = jax.grad(lambda q, k, v: models.attend(q, k, v, mask).sum(), argnums=(0, 1, 2))
        planned[block] = jax.jit(grad).lower(q, kv, kv).compile().memory_analysis().temp_size_in_bytes
    assert planned[1024] >= 4 * 1024 * 1024 * 4 and planned[256] < planned[1024] / 2


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
    """Paper App. A.3 token by token: per level a list of every key/value ever written, one merged list for the level
    or, with kv_cache="expert", one list per expert; each expert attends to the last M entries of its list.
    Returns the shared states (T, d) and the lists, history[level][list] = (keys, values)."""
    depth, n_experts = model.config.depth, model.config.experts
    per_expert = model.config.kv_cache == "expert"
    s = jnp.zeros(model.config.width)
    history = [[([], []) for _ in range(n_experts if per_expert else 1)] for _ in range(depth)]
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
                if per_expert:
                    history[level][i][0].append(k[0])
                    history[level][i][1].append(v[0])
            if not per_expert:
                history[level][0][0].append(sum(p[3] for p in proposals) / math.sqrt(n_experts))
                history[level][0][1].append(sum(p[4] for p in proposals) / math.sqrt(n_experts))
            outputs = []
            for i, (e, u, q, _, _) in enumerate(proposals):
                keys, values = history[level][i if per_expert else 0]
                window_k, window_v = jnp.stack(keys[-memory:]), jnp.stack(values[-memory:])
                mask = jnp.ones((1, window_k.shape[0]), bool)
                u = u + jnp.einsum("thk,hkd->td", reference_attention(q, window_k, window_v, mask), e.attention.out)[0]
                outputs.append(models.rms_norm(u + jnp.square(jax.nn.relu(models.rms_norm(u) @ e.mlp.up)) @ e.mlp.down))
            alpha = None
            if model.routers is not None:
                alpha = jax.tree.map(lambda w: w[level], model.routers)(jnp.concatenate([z, s]))
            s = experts.aggregate(jnp.stack(outputs), rule, alpha)
        states.append(s)
    return jnp.stack(states), history


def reference_cache(history, memory, which):
    """The rolling caches the lists imply: (L, M, K, hd), or (L, M, E, K, hd) per expert; oldest first, zero-padded."""
    def last(entries):
        kept = jnp.stack(entries[-memory:])
        return jnp.concatenate([kept, jnp.zeros((memory - kept.shape[0], *kept.shape[1:]))])

    per_level = [jnp.stack([last(lists[which]) for lists in level], 1) for level in history]
    cache = jnp.stack(per_level)
    return cache[:, :, 0] if len(history[0]) == 1 else cache


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
    expected, history = reference_recurrent(model, ids, memory)
    np.testing.assert_allclose(shared, expected, atol=2e-4)
    np.testing.assert_allclose(state.keys, reference_cache(history, memory, 0), atol=2e-4)
    np.testing.assert_allclose(state.values, reference_cache(history, memory, 1), atol=2e-4)
    assert int(state.position) == 20


@pytest.mark.parametrize("depth, n_experts, memory, length", [(1, 3, 4, 5), (2, 2, 6, 4), (2, 3, 5, 1), (1, 2, 16, 20)])
def test_per_expert_caches_match_token_by_token_reference(depth, n_experts, memory, length):
    """kv_cache="expert": each expert reads only its own proposals; outputs and the final caches, at segments
    shorter and longer than M; every cache wraps (20 tokens > M), the last inside one segment."""
    model = randomise(RecurrentTransformer(config(depth, n_experts, recurrent=True, kv_cache="expert"),
                                           jax.random.key(9)), jax.random.key(10))
    ids = tokens(20, seed=3)
    shared, state = run_segments(model, ids, memory, length)
    expected, history = reference_recurrent(model, ids, memory)
    np.testing.assert_allclose(shared, expected, atol=2e-4)
    assert state.keys.shape == (depth, memory, n_experts, 2, 8) and int(state.position) == 20
    np.testing.assert_allclose(state.keys, reference_cache(history, memory, 0), atol=2e-4)
    np.testing.assert_allclose(state.values, reference_cache(history, memory, 1), atol=2e-4)


def test_per_expert_caches_differ_from_the_shared_cache():
    """With E > 1 the two options compute different models from the same weights (the reference is not fooled
    by a per-expert path that merges anyway)."""
    ids = tokens(8, seed=3)
    out = {}
    for kv_cache in KV_CACHES:
        model = randomise(RecurrentTransformer(config(1, 3, recurrent=True, kv_cache=kv_cache), jax.random.key(9)),
                          jax.random.key(10))
        out[kv_cache] = run_segments(model, ids, 4, 4)[0]
    assert not np.allclose(out["level"], out["expert"], atol=1e-3)


def test_one_expert_gives_the_same_model_with_either_cache():
    ids = tokens(12, seed=7)
    runs = {}
    for kv_cache in KV_CACHES:
        model = randomise(RecurrentTransformer(config(2, 1, recurrent=True, kv_cache=kv_cache), jax.random.key(21)),
                          jax.random.key(22))
        runs[kv_cache] = run_segments(model, ids, 5, 4)
    (level, level_state), (expert, expert_state) = runs["level"], runs["expert"]
    np.testing.assert_array_equal(level, expert)
    np.testing.assert_array_equal(level_state.keys, expert_state.keys[:, :, 0])
    np.testing.assert_array_equal(level_state.values, expert_state.values[:, :, 0])


def test_one_token_segments_equal_long_segments():
    model = randomise(RecurrentTransformer(config(2, 2, recurrent=True), jax.random.key(11)), jax.random.key(12))
    ids = tokens(16, seed=4)
    long, long_state = run_segments(model, ids, 6, 8)
    short, short_state = run_segments(model, ids, 6, 1)
    np.testing.assert_allclose(long, short, atol=1e-5)
    np.testing.assert_allclose(long_state.keys, short_state.keys, atol=1e-5)


@pytest.mark.parametrize("depth, n_experts, overrides, message", [
    (1, 1, {"q_heads": 3}, "heads must divide the width"),
    (1, 1, {"aggregation": "max"}, "expected one of"),
    (1, 1, {"aggregation": "routed_mean"}, "the non-recurrent Transformer has no router"),
    (1, 2, {"recurrent": True, "kv_cache": "head"}, "kv_cache 'head': expected one of"),
    (1, 2, {"kv_cache": "expert"}, "kv_cache 'expert': the non-recurrent Transformer"),
    (1, 2, {"attention": "flash"}, "attention 'flash': expected one of"),
    (1, 2, {"recurrent": True, "attention": "xla"}, "attention 'xla': the recurrent model attends with one query"),
    (1, 2, {"attention": "cudnn"}, "attention 'cudnn' with dtype 'float32'"),
])
def test_bad_model_configs_are_config_errors(depth, n_experts, overrides, message):
    with pytest.raises(ConfigError, match=message):
        config(depth, n_experts, **overrides)


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
    np.testing.assert_allclose(shared, reference_recurrent(model, ids, 4, rule)[0], atol=2e-4)


def stepwise_segment(model, state, tokens, memory):
    """The segment path as it was before the ring and the checkpointed blocks (kept verbatim as the reference
    for gradients): the cache ‖ a local buffer of T entries, every token step checkpointed, which saves the
    buffer at every step."""
    length, rule = tokens.shape[0], model.config.aggregation
    start, filled = state.position, jnp.minimum(state.position, memory)
    cached_keys, cached_values = jax.lax.stop_gradient(state.keys), jax.lax.stop_gradient(state.values)
    slots, steps = jnp.arange(memory), jnp.arange(length)
    key_positions = jnp.concatenate([start - filled + slots, start + steps])
    local = jnp.zeros((model.config.depth, length, *state.keys.shape[2:]), state.keys.dtype)

    @jax.checkpoint
    def token(carry, j):
        s, local_keys, local_values = carry
        z, position = model.embed[tokens[j]], start + j
        mask = models.window_mask(position[None], key_positions, jnp.concatenate([slots < filled, steps <= j]),
                                  memory)[0]

        def level(s, xs):
            expert, router, cache_k, cache_v, local_k, local_v = xs
            u, q, k, v = experts.apply(expert, z, s, position, in_axes=None, call=models.RecurrentExpert.propose)
            local_k, local_v = local_k.at[j].set(models._merge(k)), local_v.at[j].set(models._merge(v))
            keys, values = jnp.concatenate([cache_k, local_k]), jnp.concatenate([cache_v, local_v])
            h = experts.apply(expert, u, q, keys, values, mask, in_axes=(0, 0, None, None, None),
                              call=models.RecurrentExpert.complete)
            alpha = router(jnp.concatenate([z, s])) if router is not None else None
            return experts.aggregate(h, rule, alpha), (local_k, local_v)

        xs = (model.levels, model.routers, cached_keys, cached_values, local_keys, local_values)
        s, (local_keys, local_values) = jax.lax.scan(level, s, xs)
        return (s, local_keys, local_values), s

    (_, local_keys, local_values), shared = jax.lax.scan(token, (state.shared, local, local), steps)
    end = start + length
    new_filled = jnp.minimum(end, memory)
    source = end - new_filled + slots
    index = jnp.where(source >= start, memory + source - start, source - (start - filled))
    index = jnp.clip(index, 0, memory + length - 1)
    keep = (slots < new_filled)[None, :, None, None]

    def roll(cache, buffer):
        return jnp.where(keep, jnp.concatenate([cache, buffer], axis=1)[:, index], 0).astype(cache.dtype)

    return shared, RecurrentState(shared[-1], roll(state.keys, local_keys), roll(state.values, local_values), end)


@pytest.mark.parametrize("depth, n_experts, memory, length", [(1, 3, 4, 9), (2, 2, 6, 4), (3, 1, 5, 16), (2, 3, 8, 7)])
def test_ring_segments_have_the_stepwise_gradients(depth, n_experts, memory, length):
    """Gradients of a training-like loss (the shared states and the new caches, three streams, one reset) with
    respect to every parameter and the entering s: equal to the stepwise path's, T > M and T < M, T prime."""
    model = randomise(RecurrentTransformer(config(depth, n_experts, recurrent=True), jax.random.key(23)),
                      jax.random.key(24))
    warm = [run_segments(model, tokens(length, seed=k), memory, length)[1] for k in range(3)]
    states = jax.vmap(RecurrentState.reset_where)(jax.tree.map(lambda *x: jnp.stack(x), *warm),
                                                  jnp.array([False, True, False]))
    ids = jnp.stack([tokens(length, seed=10 + k) for k in range(3)])
    weights = jax.random.normal(jax.random.key(25), (length, 32))

    def loss(model, states, run):
        shared, new = jax.vmap(lambda st, x: run(model, st, x, memory))(states, ids)
        return jnp.sum(jnp.tanh(shared) * weights) + jnp.sum(jnp.sin(new.keys)) + jnp.sum(jnp.cos(new.values))

    grad = eqx.filter_jit(eqx.filter_grad(loss))
    ours = grad(model, states, lambda m, st, x, mem: m.segment(st, x, mem))
    theirs = grad(model, states, stepwise_segment)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):  # float32, keys summed in ring order
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * float(jnp.abs(b).max()))
    assert float(jnp.abs(ours.levels.mix).sum()) > 0 and float(jnp.abs(ours.embed).sum()) > 0


@pytest.mark.parametrize("length, block", [(1, 1), (7, 1), (16, 4), (64, 8), (128, 8), (2048, 32), (1000, 25)])
def test_checkpoint_blocks_divide_the_segment_near_its_square_root(length, block):
    assert models.checkpoint_block(length) == block


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


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])  # bfloat16: no weight conversions counted
@pytest.mark.parametrize("recurrent", [False, True])
def test_measured_flops_per_token_match_a_hand_count(recurrent, dtype):
    """One more layer adds its matmuls (2 FLOPs per multiply-add) and the attention over the W-token window:
    q, k, v, o: d·(H + 2K)·hd + H·hd·d; MLP 8d²; recurrent W_in 2d²; attention 2·W·H·hd (scores and values).
    The rest (norms, RoPE, softmax) is at most 15% of a second expert; a second recurrent level also fills and
    reorders its M-slot ring (about 30% more in XLA's count of the compiled one-token step)."""
    d, window = 64, 128
    base = dict(width=d, q_heads=4, kv_heads=2, vocab=VOCAB, recurrent=recurrent, dtype=dtype)
    one, two = (models.token_flops(ModelConfig(depth, 1, **base), window) for depth in (1, 2))
    matmuls = d * (4 + 2 * 2) * 16 + 4 * 16 * d + 8 * d * d + (2 * d * d if recurrent else 0)
    attention = 2 * window * 4 * 16
    hand = 2 * (matmuls + attention)
    assert hand <= two - one <= (1.35 if recurrent else 1.15) * hand
    wide = models.token_flops(ModelConfig(1, 2, **base), window)
    assert hand <= wide - one <= 1.15 * hand  # a second expert costs its matmuls and attention
