"""The streaming validation loss against an independent computation: each scored token's logits from a plain
forward pass over its own window, and the scored-token count of the authors' LM/recnanogpt/train.py by hand."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from parallel_experts.lm import evaluate
from parallel_experts.lm.models import RecurrentTransformer, Transformer
from parallel_experts.lm.settings import ModelConfig
from parallel_experts.lm.shards import DataError

VOCAB = 97


def model_of(recurrent: bool, depth: int = 2, n_experts: int = 2):
    config = ModelConfig(depth, n_experts, 32, 4, 2, vocab=VOCAB, recurrent=recurrent, dtype="float32")
    return (RecurrentTransformer if recurrent else Transformer)(config, jax.random.key(3))


def tokens(count: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VOCAB, count).astype(np.uint16)


def test_transformer_loss_is_the_mean_over_scored_tokens_of_their_own_windows():
    # Two streams of ℓ = 193 tokens: 3 chunks of 64, the first (⌈16/64⌉ = 1) unscored. RoPE makes attention
    # depend on relative positions only, so a token's logits are those of a plain forward pass over the window
    # of W tokens that ends at it.
    model, window, streams, chunk = model_of(False), 16, 2, 64
    ids = tokens(2 * 193)
    loss, scored = evaluate.validation_loss(model, ids, window, streams)
    length = len(ids) // streams
    contexts, targets = [], []
    for j in range(streams):
        stream = ids[j * length:(j + 1) * length].astype(np.int32)
        for p in range(chunk, 3 * chunk):  # inputs of the scored chunks 1 and 2
            contexts.append(stream[p - window + 1:p + 1])
            targets.append(stream[p + 1])
    last = jax.vmap(lambda c: model(c)[-1])(jnp.asarray(np.stack(contexts)))
    expected = optax.softmax_cross_entropy_with_integer_labels(last, jnp.asarray(targets)).mean()
    assert scored == len(targets) == (math.floor((length - 1) / chunk) - math.ceil(window / chunk)) * streams * chunk
    np.testing.assert_allclose(loss, float(expected), rtol=1e-5)


@pytest.mark.parametrize("recurrent", [False, True])
def test_uniform_logits_give_log_vocabulary_and_lanes_change_nothing(recurrent):
    model = model_of(recurrent)
    ids = tokens(4 * 200, seed=1)
    flat = eqx.tree_at(lambda m: m.head, model, jnp.zeros_like(model.head))  # logits 0: a uniform prediction
    loss, scored = evaluate.validation_loss(flat, ids, 64, streams=4)
    assert scored == (math.floor(199 / 64) - 1) * 4 * 64
    np.testing.assert_allclose(loss, math.log(VOCAB), rtol=1e-6)
    whole, _ = evaluate.validation_loss(model, ids, 64, streams=4)
    blocks, _ = evaluate.validation_loss(model, ids, 64, streams=4, lanes=2)
    np.testing.assert_allclose(blocks, whole, rtol=1e-6)


def test_bad_evaluation_settings_name_the_problem():
    model = model_of(False, depth=1, n_experts=1)
    with pytest.raises(DataError, match="streams 4 must be a multiple of lanes 3"):
        evaluate.validation_loss(model, tokens(1000), 64, streams=4, lanes=3)
    with pytest.raises(DataError, match="gives no scored chunk"):
        evaluate.validation_loss(model, tokens(200), 64, streams=2)  # ℓ = 100: one chunk, the warm-up
