"""The paper's two language models on one set of layers (paper App. A.2–A.3; the authors' LM/nanogpt/model_moe.py
and LM/recnanogpt/model_shared_kv.py).

* `Transformer` — the non-recurrent parallel-expert Transformer: L layers of E pre-norm blocks (GQA with
  RoPE and QK-norm, squared-ReLU MLP); each block's output includes its own residual copy and the E outputs
  are merged by sqrt-sum. E = 1 is a standard Transformer. Training reads independent windows; the sliding-
  window evaluation feeds chunks with a cache of the previous `window` tokens' keys and values.
* `RecurrentTransformer` — the recurrent Transformer: at every token, L depth levels of E experts each read
  the token embedding z and the incoming shared state s; their key/value proposals are merged into ONE
  entry per level of a rolling cache of the last M tokens (or, with `kv_cache="expert"`, each expert keeps
  its own proposals in its own cache: the ablation of paper App. A.3), their outputs (RMS-normalised) into
  the next s; the last s is both the output and the state carried to the next token.

Both are written per sequence (one stream) and vmapped over batches by the callers. Experts are a stacked
module (leading (L, E) axes): `lax.scan` over depth, `experts.apply` (a vmap) over experts. Parameters
and matmuls use the model's `dtype` (the authors train in bfloat16); norms, softmax and logits use float32.

The recurrent `segment` path computes what the authors' `segment_local_kv_cache` (LM/recnanogpt/) computes: the cache
entering a segment is read-only and stop-gradient, the segment's own entries are differentiated through, and
each token attends to the valid entries inside its window of M positions. Here the window is a ring of M
slots (theirs attends to M cached + T local slots, half of them masked at T = M) and the token scan is
checkpointed in blocks of about √T tokens, so that training memory grows with L·M·√T per stream, not L·M·T.
A segment of one token is one token step of App. A.3, so decoding and the token-by-token reference use the same code.
"""

from __future__ import annotations

import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import Array, lax

from parallel_experts.core import experts
from parallel_experts.core.aggregation import is_routed
from parallel_experts.core.benchmarking import counted_flops
from parallel_experts.lm.settings import ModelConfig

NORM_EPS = 1e-5
ROPE_BASE = 1e4
SOFTCAP = 15.0
MASKED = -1e30  # a finite "minus infinity" keeps fully padded rows free of NaN
QUERY_BLOCK = 256  # queries whose scores `attend` holds at once


# --------------------------------------------------------------------------------------------------
# Layers


def rms_norm(x: Array) -> Array:
    """Parameter-free RMSNorm over the last axis, computed in float32."""
    x32 = x.astype(jnp.float32)
    return (x32 * lax.rsqrt(jnp.mean(x32 * x32, -1, keepdims=True) + NORM_EPS)).astype(x.dtype)


def rope(x: Array, positions: Array) -> Array:
    """Rotary embedding, half-split convention: x (T, heads, hd) at absolute positions (T,)."""
    half = x.shape[-1] // 2
    frequencies = ROPE_BASE ** (-jnp.arange(half, dtype=jnp.float32) / half)
    angle = positions.astype(jnp.float32)[:, None, None] * frequencies  # (T, 1, hd/2)
    cos, sin = jnp.cos(angle), jnp.sin(angle)
    x1, x2 = jnp.split(x.astype(jnp.float32), 2, axis=-1)
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).astype(x.dtype)


def attend(q: Array, keys: Array, values: Array, mask: Array) -> Array:
    """Softmax attention with grouped queries: q (T, H, hd), keys/values (S, K, hd), mask (T, S).

    Query head m reads KV head ⌊m / (H/K)⌋, as `jax.nn.dot_product_attention` groups them. With more than
    QUERY_BLOCK queries, they go in blocks (the largest divisor of T up to it), each recomputed in the backward
    pass, as a fused attention kernel does: the T × S scores of every expert and stream are never held at once,
    nor kept for the backward pass. The same result up to float32 rounding; the same FLOPs forward.
    """
    length = q.shape[0]
    block = largest_divisor(length, QUERY_BLOCK)
    if block == length:
        return _attend(q, keys, values, mask)

    def one(carry, xs):
        return carry, _attend_again(xs[0], keys, values, xs[1])

    _, out = lax.scan(one, None, (q.reshape(-1, block, *q.shape[1:]), mask.reshape(-1, block, mask.shape[1])))
    return out.reshape(q.shape)


def _attend(q: Array, keys: Array, values: Array, mask: Array) -> Array:
    length, heads, hd = q.shape
    grouped = q.reshape(length, keys.shape[1], heads // keys.shape[1], hd)
    scores = jnp.einsum("tkgh,skh->kgts", grouped, keys, preferred_element_type=jnp.float32) / math.sqrt(hd)
    weights = jax.nn.softmax(jnp.where(mask, scores, MASKED), axis=-1).astype(values.dtype)
    return jnp.einsum("kgts,skh->tkgh", weights, values).reshape(length, heads, hd)


_attend_again = jax.checkpoint(_attend)  # keeps only its inputs; the backward pass runs it again


def attend_window(q: Array, keys: Array, values: Array, window: int, implementation: Literal["xla", "cudnn"]) -> Array:
    """`attend` of an independent window's queries over its own keys, each seeing itself and the `window` − 1 before,
    by `jax.nn.dot_product_attention` (`implementation`: "xla", or "cudnn", its fused flash-attention kernel)."""
    local = None if window >= q.shape[0] else (window - 1, 0)
    return jax.nn.dot_product_attention(q, keys, values, is_causal=True, local_window_size=local,
                                        implementation=implementation)


def window_mask(query_positions: Array, key_positions: Array, key_valid: Array, window: int) -> Array:
    """Query at position p sees the valid keys at positions p − window < k ≤ p (itself and window − 1 before)."""
    q, k = query_positions[:, None], key_positions[None, :]
    return key_valid[None, :] & (k <= q) & (k > q - window)


def _uniform(key, shape, fan_in, dtype):
    bound = math.sqrt(3 / fan_in)  # U(±√3/√d): unit-variance inputs give unit-variance outputs
    return jax.random.uniform(key, shape, jnp.float32, -bound, bound).astype(dtype)


class Attention(eqx.Module):
    query: Array  # (d, H, hd)
    key: Array  # (d, K, hd)
    value: Array  # (d, K, hd)
    out: Array  # (H, hd, d), zero at init

    def __init__(self, config: ModelConfig, key: Array):
        d, hd, dtype = config.width, config.head_dim, config.dtype
        kq, kk, kv = jax.random.split(key, 3)
        self.query = _uniform(kq, (d, config.q_heads, hd), d, dtype)
        self.key = _uniform(kk, (d, config.kv_heads, hd), d, dtype)
        self.value = _uniform(kv, (d, config.kv_heads, hd), d, dtype)
        self.out = jnp.zeros((config.q_heads, hd, d), dtype)

    def project(self, a: Array, positions: Array) -> tuple[Array, Array, Array]:
        """Queries, keys, values of normalised inputs a (T, d): QK-norm per head, then RoPE; v as is."""
        q = rope(rms_norm(jnp.einsum("td,dhk->thk", a, self.query)), positions)
        k = rope(rms_norm(jnp.einsum("td,dhk->thk", a, self.key)), positions)
        return q, k, jnp.einsum("td,dhk->thk", a, self.value)

    def output(self, o: Array) -> Array:
        return jnp.einsum("thk,hkd->td", o, self.out)


class MLP(eqx.Module):
    up: Array  # (d, 4d)
    down: Array  # (4d, d), zero at init

    def __init__(self, config: ModelConfig, key: Array):
        d = config.width
        self.up = _uniform(key, (d, 4 * d), d, config.dtype)
        self.down = jnp.zeros((4 * d, d), config.dtype)

    def __call__(self, x: Array) -> Array:
        return jnp.square(jax.nn.relu(x @ self.up)) @ self.down


def logits(head: Array, x: Array) -> Array:
    """Soft-capped logits 15·tanh(N(x) W_lm / 15), in float32."""
    raw = jnp.matmul(rms_norm(x), head, preferred_element_type=jnp.float32)
    return SOFTCAP * jnp.tanh(raw / SOFTCAP)


def _embedding(config: ModelConfig, key: Array) -> tuple[Array, Array]:
    ke, kh = jax.random.split(key)
    embed = jax.random.normal(ke, (config.vocab, config.width)).astype(config.dtype)
    head = (1e-3 * jax.random.normal(kh, (config.width, config.vocab))).astype(config.dtype)
    return embed, head


def _stacked(make, config: ModelConfig, key: Array):
    """(L, E) independently initialised copies of `make(key)`: depth outside, experts inside."""
    return eqx.filter_vmap(lambda k: experts.stack(make, k, config.experts))(jax.random.split(key, config.depth))


# --------------------------------------------------------------------------------------------------
# The non-recurrent parallel-expert Transformer


class Block(eqx.Module):
    """One expert of one layer: x + attention, then + MLP (pre-norm, parameter-free norms)."""

    attention: Attention
    mlp: MLP

    def __init__(self, config: ModelConfig, key: Array):
        ka, km = jax.random.split(key)
        self.attention, self.mlp = Attention(config, ka), MLP(config, km)

    def __call__(self, x, positions, past_keys, past_values, past_positions, window, implementation="blocked"):
        """`implementation` (ModelConfig.attention) serves a window without a past (training, Table 6); a chunk after
        a cache (the sliding-window evaluation) always attends with `attend`."""
        q, k, v = self.attention.project(rms_norm(x), positions)
        if implementation != ModelConfig.attention and past_keys.shape[0] == 0:
            attended = attend_window(q, k, v, window, implementation)
        else:
            keys, values = jnp.concatenate([past_keys, k]), jnp.concatenate([past_values, v])
            key_positions = jnp.concatenate([past_positions, positions])
            attended = attend(q, keys, values, window_mask(positions, key_positions, key_positions >= 0, window))
        x = x + self.attention.output(attended)
        return x + self.mlp(rms_norm(x)), (k, v)


class KVCache(eqx.Module):
    """Keys and values of the last `window` tokens, per layer and expert; position −1 marks an empty slot."""

    keys: Array  # (L, E, W, K, hd)
    values: Array
    positions: Array  # (W,) int32

    @classmethod
    def empty(cls, config: ModelConfig, window: int) -> KVCache:
        shape = (config.depth, config.experts, window, config.kv_heads, config.head_dim)
        zeros = jnp.zeros(shape, config.dtype)
        return cls(zeros, zeros, jnp.full(window, -1, jnp.int32))


class Transformer(eqx.Module):
    embed: Array  # (V, d)
    blocks: Block  # leaves (L, E, ...)
    head: Array  # (d, V)
    config: ModelConfig = eqx.field(static=True)

    def __init__(self, config: ModelConfig, key: Array):
        kb, ke = jax.random.split(key)
        self.blocks = _stacked(lambda k: Block(config, k), config, kb)
        self.embed, self.head = _embedding(config, ke)
        self.config = config

    def __call__(self, tokens: Array) -> Array:
        """Logits (T, V) of one independent window of tokens (T,), positions 0..T−1, causal."""
        return logits(self.head, self.hidden(tokens))

    def hidden(self, tokens: Array) -> Array:
        """The last layer's output (T, d) for one independent window of tokens (T,): what the head reads."""
        empty = KVCache.empty(self.config, 0)
        return self._layers(tokens, jnp.arange(tokens.shape[0]), empty, tokens.shape[0])[0]

    def chunk(self, tokens: Array, positions: Array, cache: KVCache, window: int,
              unroll: bool = False) -> tuple[Array, KVCache]:
        """Logits of a chunk of a stream after the tokens in `cache`; the cache keeps the last `window` tokens.

        `unroll` unrolls the loop over layers (XLA's cost analysis counts a loop body once)."""
        x, updated = self._layers(tokens, positions, cache, window, unroll)
        return logits(self.head, x), updated

    def _layers(self, tokens: Array, positions: Array, cache: KVCache, window: int,
                unroll: bool = False) -> tuple[Array, KVCache]:
        rule = self.config.aggregation

        def layer(x, xs):
            blocks, past_keys, past_values = xs
            h, kv = experts.apply(blocks, x, positions, past_keys, past_values, cache.positions, window,
                                  self.config.attention, in_axes=(None, None, 0, 0, None, None, None))
            return experts.aggregate(h, rule), kv

        x = self.embed[tokens]
        x, (keys, values) = lax.scan(layer, x, (self.blocks, cache.keys, cache.values), unroll=unroll)
        updated = KVCache(_newest(cache.keys, keys, 2), _newest(cache.values, values, 2),
                          _newest(cache.positions, positions, 0))
        return x, updated


def _newest(old: Array, new: Array, axis: int) -> Array:
    """The last `old.shape[axis]` entries of old ‖ new along `axis` (chronological order kept)."""
    size = old.shape[axis]
    both = jnp.concatenate([old, new], axis=axis)
    return lax.slice_in_dim(both, both.shape[axis] - size, both.shape[axis], axis=axis)


# --------------------------------------------------------------------------------------------------
# The recurrent Transformer with a rolling KV cache per depth level (shared by its experts) or per expert


class RecurrentExpert(eqx.Module):
    """One expert of one depth level: u = W_in [z; s], attention over the level's cache (or its own), MLP, RMSNorm."""

    mix: Array  # W_in (2d, d)
    attention: Attention
    mlp: MLP

    def __init__(self, config: ModelConfig, key: Array):
        d = config.width
        kx, ka, km = jax.random.split(key, 3)
        self.mix = (jax.random.normal(kx, (2 * d, d)) / (2 * math.sqrt(d))).astype(config.dtype)
        self.attention, self.mlp = Attention(config, ka), MLP(config, km)

    def propose(self, z: Array, s: Array, position: Array):
        """The expert's input u, its query and its key/value proposal for the token at `position`."""
        u = jnp.concatenate([z, s]) @ self.mix
        q, k, v = self.attention.project(rms_norm(u)[None], position[None])
        return u, q[0], k[0], v[0]

    def complete(self, u: Array, q: Array, keys: Array, values: Array, mask: Array) -> Array:
        """The expert's output h = N(u' + MLP(N(u'))), u' = u + attention of its query over the cache."""
        u = u + self.attention.output(attend(q[None], keys, values, mask[None]))[0]
        return rms_norm(u + self.mlp(rms_norm(u)))


class RecurrentState(eqx.Module):
    """What one stream carries from token to token; all zeros at a reset."""

    shared: Array  # s (d,): the last depth level's merged output
    keys: Array  # (L, M, K, hd) merged keys of the last M tokens per level, oldest first; (L, M, E, K, hd) per expert
    values: Array
    position: Array  # () int32: tokens since the reset; the caches hold min(position, M) of them

    @classmethod
    def zeros(cls, config: ModelConfig, memory: int) -> RecurrentState:
        cache = jnp.zeros(config.cache_shape(memory), config.dtype)
        return cls(jnp.zeros(config.width, config.dtype), cache, cache, jnp.zeros((), jnp.int32))

    def reset_where(self, reset: Array) -> RecurrentState:
        return jax.tree.map(lambda x: jnp.where(reset, jnp.zeros_like(x), x), self)


class RecurrentTransformer(eqx.Module):
    embed: Array  # (V, d)
    levels: RecurrentExpert  # leaves (L, E, ...)
    routers: experts.Router | None  # leaves (L, ...), routed aggregation rules only
    head: Array  # (d, V)
    config: ModelConfig = eqx.field(static=True)

    def __init__(self, config: ModelConfig, key: Array):
        kl, kr, ke = jax.random.split(key, 3)
        self.levels = _stacked(lambda k: RecurrentExpert(config, k), config, kl)
        self.routers = None
        if is_routed(config.aggregation):
            d, keys = config.width, jax.random.split(kr, config.depth)
            routers = eqx.filter_vmap(lambda k: experts.Router(2 * d, d, config.experts, k))(keys)
            self.routers = jax.tree.map(lambda x: x.astype(config.dtype) if eqx.is_array(x) else x, routers)
        self.embed, self.head = _embedding(config, ke)
        self.config = config

    def segment(self, state: RecurrentState, tokens: Array, memory: int,
                unroll: bool = False) -> tuple[Array, RecurrentState]:
        """Run T tokens (T,) of one stream from `state`: the shared states s_t (T, d) and the state after them.

        Each token attends, at every level, to the entries of itself and the previous M − 1 tokens (merged, or
        each expert's own with `kv_cache="expert"`), held in a ring of M slots (the token at position p in slot
        p mod M): the ring starts from the read-only (stop-gradient) cache, and the segment's own entries, which
        the backward pass differentiates through, overwrite the oldest. The token scan is checkpointed in blocks
        (see `checkpoint_block`), so that training memory grows as L·M·(T/b + b) per stream rather than L·M·T.
        `unroll` unrolls the loop over depth levels (XLA's cost analysis counts a loop body once).
        """
        length, rule = tokens.shape[0], self.config.aggregation
        own = 1 if self.config.kv_cache == "expert" else None  # the axis of a ring entry that holds each expert's
        start, filled = state.position, jnp.minimum(state.position, memory)
        oldest = start - filled  # the position of the cache's first entry
        slots = jnp.arange(memory)

        def held(position):
            """The position that each ring slot holds once the token at `position` is written."""
            return position - (position - slots) % memory

        entering = held(start - 1)  # invalid slots are zeroed: they stay so until written, and reach the new cache
        valid = (entering >= oldest).reshape(-1, *(1,) * (state.keys.ndim - 2))
        ring = [jnp.where(valid, lax.stop_gradient(cache)[:, jnp.clip(entering - oldest, 0)], 0).astype(cache.dtype)
                for cache in (state.keys, state.values)]

        def token(carry, j):
            s, ring_keys, ring_values = carry
            z, position = self.embed[tokens[j]], start + j
            mask, slot = held(position) >= oldest, position % memory

            def level(s, xs):
                expert, router, keys, values = xs
                u, q, k, v = experts.apply(expert, z, s, position, in_axes=None, call=RecurrentExpert.propose)
                if own is None:
                    k, v = _merge(k), _merge(v)
                keys, values = (lax.dynamic_update_index_in_dim(x, e, slot, 0) for x, e in ((keys, k), (values, v)))
                h = experts.apply(expert, u, q, keys, values, mask, in_axes=(0, 0, own, own, None),
                                  call=RecurrentExpert.complete)
                alpha = router(jnp.concatenate([z, s])) if router is not None else None
                return experts.aggregate(h, rule, alpha), (keys, values)

            s, (ring_keys, ring_values) = lax.scan(level, s, (self.levels, self.routers, ring_keys, ring_values),
                                                   unroll=unroll)
            return (s, ring_keys, ring_values), s

        @jax.checkpoint
        def block(carry, js):
            return lax.scan(token, carry, js)

        blocks = jnp.arange(length).reshape(-1, checkpoint_block(length))
        (_, ring_keys, ring_values), shared = lax.scan(block, (state.shared, *ring), blocks)
        shared = shared.reshape(length, -1)

        # The new cache, oldest first: slot i holds position end − min(end, M) + i, found in the ring at its p mod M.
        # Before the cache fills (end < M) the order is the identity and the slots from `end` on are still zero.
        end = start + length
        order = (end - jnp.minimum(end, memory) + slots) % memory
        return shared, RecurrentState(shared[-1], ring_keys[:, order], ring_values[:, order], end)


def checkpoint_block(length: int) -> int:
    """Tokens per checkpointed block of a T-token segment: the largest divisor of T up to √T.

    The backward pass keeps the ring (L·M entries) once per block, T/b copies, and re-runs one block at a time
    with every token step's activations saved (each about a ring's size), b copies: T/b + b is smallest at
    b = √T. Each token step runs forward twice, as with checkpointing every step."""
    return largest_divisor(length, math.isqrt(length))


def largest_divisor(n: int, at_most: int) -> int:
    return max(b for b in range(1, min(n, at_most) + 1) if n % b == 0)


def _merge(proposals: Array) -> Array:
    """One cache entry from the E experts' key (or value) proposals: Σ/√E, summed in float32."""
    total = proposals.astype(jnp.float32).sum(0) / math.sqrt(proposals.shape[0])
    return total.astype(proposals.dtype)


def build(config: ModelConfig, key: Array) -> Transformer | RecurrentTransformer:
    return (RecurrentTransformer if config.recurrent else Transformer)(config, key)


def token_flops(config: ModelConfig, window: int) -> float:
    """XLA-counted forward FLOPs of one token in the steady state: the attention window full of earlier tokens.

    Only shapes are needed (the model is built abstractly), so paper-sized allocations cost no memory. The
    lowered program is counted, not the compiled one: XLA:CPU's compiled count adds the bfloat16 weights'
    conversions to float32 (a 16-block width-768 Transformer: 2.35 GFLOP instead of 0.29), and lowering takes
    a tenth of the time."""
    model = eqx.filter_eval_shape(build, config, jax.random.key(0))
    params, static = eqx.partition(model, lambda x: isinstance(x, jax.ShapeDtypeStruct))
    token = jax.ShapeDtypeStruct((1,), jnp.int32)
    if config.recurrent:
        state = jax.eval_shape(lambda: RecurrentState.zeros(config, window))

        def step(params, state, token):
            model = eqx.combine(params, static)
            shared, state = model.segment(state, token, window, unroll=True)
            return logits(model.head, shared), state
    else:
        state = jax.eval_shape(lambda: KVCache.empty(config, window - 1))

        def step(params, state, token):
            return eqx.combine(params, static).chunk(token, jnp.array([window - 1]), state, window, unroll=True)
    return counted_flops(step, params, state, token)
