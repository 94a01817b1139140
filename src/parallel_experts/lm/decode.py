"""Greedy decoding of both families from pre-filled caches, one token per stream and step (Table 5, App. H.1).

`prefill` runs a prompt through the model's own code (`Transformer.chunk`, `RecurrentTransformer.segment`)
and turns what it keeps into a ring of C slots: the Transformer's keys and values per layer and expert, the
recurrent model's merged keys and values per level (its cache M = C) and its shared state s. `step` decodes
one token: it writes the new entries at slot position mod C with one `dynamic_update_slice` per layer (no
concatenate-and-roll of the cache) and attends over the ring, so that a token sees itself and the C − 1
tokens before it, as the model does with window (or memory) C. `generate` is the benchmark's decode: a
`lax.scan` of greedy steps, logits → argmax fed back. Tests check that decoding equals the model's forward
pass over the same tokens.

A batch's streams decode in lockstep (`prefill_batch`: one prompt length), so they share their slots and
position (`BATCHED`) and a cache write stays one `dynamic_update_slice` of the batched cache; with a slot per
stream, vmap makes it a scatter.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import Array, lax

from parallel_experts.core import experts
from parallel_experts.lm import models
from parallel_experts.lm.models import (KVCache, RecurrentExpert, RecurrentState, RecurrentTransformer, Transformer,
                                        attend, logits, rms_norm, window_mask)


class Ring(eqx.Module):
    """What one stream carries between decode steps; slot i holds the token at a position ≡ i (mod C)."""

    keys: Array  # Transformer (L, E, C, K, hd); recurrent (L, C, K, hd), the experts' merged entries
    values: Array
    slots: Array  # (C,) int32: the position held by each slot, −1 where empty
    shared: Array  # recurrent: the state s (d,) carried to the next token; Transformer: (0,), unused
    position: Array  # () int32: the position of the next token


def _as_ring(chronological: Array, shift: Array, axis: int) -> Array:
    """Entries in chronological order → ring order: entry i moves to slot (i + shift) mod C."""
    return jnp.roll(chronological, shift, axis=axis)


def prefill(model: Transformer | RecurrentTransformer, prompt: Array, capacity: int) -> tuple[Array, Ring]:
    """Run `prompt` (P,) through the model: the logits of its last token and a ring of `capacity` slots."""
    length = prompt.shape[0]
    if isinstance(model, RecurrentTransformer):
        shared, state = model.segment(RecurrentState.zeros(model.config, capacity), prompt, capacity)
        filled = min(length, capacity)  # segment keeps them at the front, oldest first
        shift = length - filled
        slots = jnp.where(jnp.arange(capacity) < filled, shift + jnp.arange(capacity), -1)
        ring = Ring(_as_ring(state.keys, shift, 1), _as_ring(state.values, shift, 1), _as_ring(slots, shift, 0),
                    state.shared, jnp.int32(length))
        return logits(model.head, shared[-1]), ring
    out, cache = model.chunk(prompt, jnp.arange(length), KVCache.empty(model.config, capacity), capacity)
    # KVCache keeps the last C positions, oldest first, empty slots in front: entry i is position P − C + i.
    ring = Ring(_as_ring(cache.keys, length, 2), _as_ring(cache.values, length, 2),
                _as_ring(cache.positions, length, 0), jnp.zeros(0, model.embed.dtype), jnp.int32(length))
    return out[-1], ring


# How a batch of streams holds its rings: caches and state per stream, slots and position shared.
BATCHED = Ring(keys=0, values=0, slots=None, shared=0, position=None)


def prefill_batch(model: Transformer | RecurrentTransformer, prompts: Array, capacity: int) -> tuple[Array, Ring]:
    """`prefill` of every stream of `prompts` (B, P): the logits of each one's last token (B, V) and the batch's
    rings, laid out as `BATCHED`."""
    return jax.vmap(prefill, in_axes=(None, 0, None), out_axes=(0, BATCHED))(model, prompts, capacity)


def _write(cache: Array, layer: Array, slot: Array, entry: Array) -> Array:
    """`entry` ((E,) K, hd) into slot `slot` of layer `layer` of `cache` (L, (E,) C, K, hd), in place."""
    start = (layer, *[0] * (cache.ndim - 4), slot, 0, 0)
    return lax.dynamic_update_slice(cache, entry[None, ..., None, :, :].astype(cache.dtype), start)


def step(model: Transformer | RecurrentTransformer, ring: Ring, token: Array) -> tuple[Array, Ring]:
    """The logits (V,) of one token of one stream at `ring.position`, and the ring after it.

    Layers (levels) stay a `lax.scan` (unrolled, the Transformer L16 compiled 4x slower here and ran no faster)
    that carries every layer's cache and writes only the new entries. Passed through the scan as inputs and
    outputs instead, the caches were sliced, restacked and transposed whole at every step, and the
    Transformer L16 decoded 2x slower (measured at d = 32, C = 128, B = 4 and 16)."""
    capacity = ring.slots.shape[0]
    position = ring.position
    slot = position % capacity
    slots = ring.slots.at[slot].set(position)
    mask = window_mask(position[None], slots, slots >= 0, capacity)  # (1, C)
    z = model.embed[token]
    layers = jnp.arange(ring.keys.shape[0])
    if isinstance(model, RecurrentTransformer):
        rule = model.config.aggregation

        def level(carry, xs):
            s, keys, values = carry
            i, expert, router = xs
            u, q, k, v = experts.apply(expert, z, s, position, in_axes=None, call=RecurrentExpert.propose)
            keys, values = _write(keys, i, slot, models._merge(k)), _write(values, i, slot, models._merge(v))
            h = experts.apply(expert, u, q, keys[i], values[i], mask[0], in_axes=(0, 0, None, None, None),
                              call=RecurrentExpert.complete)
            alpha = router(jnp.concatenate([z, s])) if router is not None else None
            return (experts.aggregate(h, rule, alpha), keys, values), None

        (s, keys, values), _ = lax.scan(level, (ring.shared, ring.keys, ring.values),
                                        (layers, model.levels, model.routers))
        return logits(model.head, s), Ring(keys, values, slots, s, position + 1)

    def project(blk, x):
        q, k, v = blk.attention.project(rms_norm(x)[None], position[None])
        return q, k[0], v[0]

    def complete(blk, x, q, keys, values):
        x = x + blk.attention.output(attend(q, keys, values, mask))[0]
        return x + blk.mlp(rms_norm(x))

    def layer(carry, xs):
        x, keys, values = carry
        i, blocks = xs
        q, k, v = experts.apply(blocks, x, in_axes=None, call=project)
        keys, values = _write(keys, i, slot, k), _write(values, i, slot, v)
        h = experts.apply(blocks, x, q, keys[i], values[i], in_axes=(None, 0, 0, 0), call=complete)
        return (experts.aggregate(h, model.config.aggregation), keys, values), None

    (x, keys, values), _ = lax.scan(layer, (z, ring.keys, ring.values), (layers, model.blocks))
    return logits(model.head, x), Ring(keys, values, slots, ring.shared, position + 1)


def argmax(out: Array) -> Array:
    """`jnp.argmax` over the last axis (the first maximum wins) as a max and a min: XLA:CPU runs argmax's
    variadic reduce over a 4,096-id vocabulary slower than the model's whole L1 E16 level (measured)."""
    ids = jnp.arange(out.shape[-1], dtype=jnp.int32)
    return jnp.min(jnp.where(out == out.max(-1, keepdims=True), ids, out.shape[-1]), -1)


def greedy_step(model, rings: Ring, tokens: Array) -> tuple[Ring, Array]:
    """One decode step of every stream of a batch (`BATCHED`): the rings after it and the argmax tokens (B,)."""
    out, rings = jax.vmap(step, in_axes=(None, BATCHED, 0), out_axes=(0, BATCHED))(model, rings, tokens)
    return rings, argmax(out)


def generate(model, rings: Ring, tokens: Array, steps: int) -> tuple[Ring, Array, Array]:
    """`steps` greedy decode steps of every stream from `tokens` (B,): (rings, the last tokens, every token
    decoded (steps, B))."""
    def one(carry, _):
        rings, tokens = greedy_step(model, *carry)
        return (rings, tokens), tokens

    (rings, tokens), decoded = lax.scan(one, (rings, tokens), None, length=steps)
    return rings, tokens, decoded
