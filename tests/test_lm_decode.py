"""Decoding from a pre-filled ring equals the model's forward pass over the same tokens (fp32, both families)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from parallel_experts.lm import decode, models
from parallel_experts.lm.models import RecurrentState
from parallel_experts.lm.settings import ModelConfig

VOCAB = 61


def model(recurrent, depth=2, n_experts=3, aggregation="sqrt_sum"):
    config = ModelConfig(depth, n_experts, 32, 4, 2, vocab=VOCAB, recurrent=recurrent, dtype="float32",
                         aggregation=aggregation)
    built = models.build(config, jax.random.key(1))
    # The output projections start at zero; random ones make every path of the model matter.
    leaves, treedef = jax.tree.flatten(built)
    keys = jax.random.split(jax.random.key(2), len(leaves))
    leaves = [0.3 * jax.random.normal(k, x.shape) if x.dtype == jnp.float32 and not jnp.any(x) else x
              for k, x in zip(keys, leaves)]
    return jax.tree.unflatten(treedef, leaves)


@eqx.filter_jit
def forward(net, tokens, capacity):
    """The model's own logits at every position of `tokens` with attention window (recurrent: cache) C."""
    if net.config.recurrent:
        shared, _ = net.segment(RecurrentState.zeros(net.config, capacity), tokens, capacity)
        return models.logits(net.head, shared)
    return net.chunk(tokens, jnp.arange(tokens.shape[0]), models.KVCache.empty(net.config, 0), capacity)[0]


@pytest.mark.parametrize("recurrent", [False, True])
@pytest.mark.parametrize("prompt_length, capacity", [(8, 8), (3, 8)])  # full ring (the benchmark's), partial
def test_greedy_decode_after_prefill_equals_the_forward_pass(recurrent, prompt_length, capacity):
    net, steps = model(recurrent), 12  # 12 steps wrap the ring of 8 slots
    prompts = jax.random.randint(jax.random.key(3), (2, prompt_length), 0, VOCAB)
    last, rings = eqx.filter_jit(decode.prefill_batch)(net, prompts, capacity)
    first = jnp.argmax(last, -1).astype(jnp.int32)
    _, _, decoded = eqx.filter_jit(decode.generate)(net, rings, first, steps)
    sequences = jnp.concatenate([prompts, first[:, None], decoded.T], 1)  # prompt, then every decoded token
    for stream in range(2):
        reference = forward(net, sequences[stream], capacity)
        np.testing.assert_allclose(last[stream], reference[prompt_length - 1], rtol=1e-5, atol=1e-5)
        # Token t + 1 is the argmax of the forward pass at position t, at every decoded position.
        expected = jnp.argmax(reference[prompt_length - 1:-1], -1)
        np.testing.assert_array_equal(sequences[stream, prompt_length:], expected)
    # The logits of one step at the end, beside the forward pass's last position.
    stream = jax.tree.map(lambda x, axis: x if axis is None else x[0], rings, decode.BATCHED,
                          is_leaf=lambda x: x is None)
    out, _ = eqx.filter_jit(decode.step)(net, stream, first[0])
    np.testing.assert_allclose(out, forward(net, sequences[0, :prompt_length + 1], capacity)[-1], rtol=1e-5,
                               atol=1e-5)


def test_the_decoded_logits_match_at_every_step_with_a_routed_rule():
    net, capacity = model(True, aggregation="routed_sqrt_sum"), 8
    tokens = jax.random.randint(jax.random.key(4), (12,), 0, VOCAB)
    _, ring = eqx.filter_jit(decode.prefill)(net, tokens[:capacity], capacity)
    step = eqx.filter_jit(decode.step)
    reference = forward(net, tokens, capacity)
    for position in range(capacity, 12):  # teacher-forced: each step reads the next token of `tokens`
        out, ring = step(net, ring, tokens[position])
        np.testing.assert_allclose(out, reference[position], rtol=1e-5, atol=1e-5)
    assert int(ring.position) == 12 and sorted(np.asarray(ring.slots).tolist()) == list(range(4, 12))


def test_argmax_takes_the_first_maximum_as_jnp_argmax_does():
    out = jnp.round(jax.random.normal(jax.random.key(5), (64, VOCAB)), 1)  # rounded: many rows hold ties
    out = out.at[3].set(0.0)  # a row that is all one value
    np.testing.assert_array_equal(decode.argmax(out), jnp.argmax(out, -1))
    assert decode.argmax(out)[3] == 0
