"""The Parallel Experts core: aggregation rules and routers by hand, stacks of independent experts."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from parallel_experts.core import experts as px
from parallel_experts.core.aggregation import full_radius
from parallel_experts.sokoban.agent import ConvLSTM

KEY = jax.random.PRNGKey(0)


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


H3 = np.arange(3 * 2 * 2, dtype=np.float32).reshape(3, 2, 2) - 5  # E=3 experts, outputs (2, 2)

def test_unrouted_aggregations_by_hand():
    total = H3[0] + H3[1] + H3[2]
    close(px.aggregate(jnp.asarray(H3)), total / math.sqrt(3))  # sqrt_sum is the default
    close(px.aggregate(jnp.asarray(H3), "sqrt_sum"), total / 1.7320508)
    close(px.aggregate(jnp.asarray(H3), "mean"), total / 3)
    close(px.aggregate(jnp.asarray(H3[:1]), "sqrt_sum"), H3[0])  # E=1: the expert itself

def test_routed_aggregations_by_hand():
    alpha = np.array([0.5, 0.25, 1.0], np.float32)
    weighted = 0.5 * H3[0] + 0.25 * H3[1] + 1.0 * H3[2]
    close(px.aggregate(jnp.asarray(H3), "routed_mean", jnp.asarray(alpha)), weighted / (1e-6 + 1.75))
    close(px.aggregate(jnp.asarray(H3), "routed_sqrt_sum", jnp.asarray(alpha)),
          weighted / math.sqrt(1e-6 + 0.25 + 0.0625 + 1.0))
    # all-zero routing: ε keeps the result finite (0)
    assert np.all(np.asarray(px.aggregate(jnp.asarray(H3), "routed_mean", jnp.zeros(3))) == 0)
    # equal α: routed mean is the mean, routed sqrt-sum is the sqrt-sum
    close(px.aggregate(jnp.asarray(H3), "routed_mean", jnp.full(3, 0.3)), H3.mean(0), 1e-4)
    close(px.aggregate(jnp.asarray(H3), "routed_sqrt_sum", jnp.full(3, 0.3)), H3.sum(0) / math.sqrt(3), 1e-4)

def test_routed_aggregation_per_position():
    alpha = np.random.default_rng(0).uniform(size=(3, 2, 1)).astype(np.float32)  # one α per expert and row
    expected = (alpha * H3).sum(0) / (1e-6 + alpha.sum(0))
    close(px.aggregate(jnp.asarray(H3), "routed_mean", jnp.asarray(alpha)), expected)

def test_aggregation_rejects_mismatched_routing():
    with pytest.raises(ValueError, match="needs routing"):
        px.aggregate(jnp.asarray(H3), "routed_mean")
    with pytest.raises(ValueError, match="takes no routing"):
        px.aggregate(jnp.asarray(H3), "mean", jnp.ones(3))
    with pytest.raises(ValueError, match="expected one of"):
        px.aggregate(jnp.asarray(H3), "max")

def test_router_by_hand():
    router = px.Router(5, 4, 3, KEY)
    x = np.arange(5, dtype=np.float32) / 5
    query, key_projection, embeddings = (np.asarray(a, np.float64) for a in
                                         (router.query, router.key_projection, router.embeddings))
    logits = (embeddings @ key_projection) @ (x @ query) / 2.0
    close(router(jnp.asarray(x)), 1 / (1 + np.exp(-logits)))
    soft = px.Router(5, 4, 3, KEY, softmax=True)(jnp.asarray(x))
    close(soft, np.exp(logits) / np.exp(logits).sum())

def test_stack_has_independent_experts_and_select_slices_them():
    stack = px.stack(lambda k: ConvLSTM(6, 4, k), KEY, 3)
    assert px.count(stack) == 3 and stack.conv.kernel.shape == (3, 3, 3, 6, 16)
    one = px.select(stack, 1)
    assert isinstance(one, ConvLSTM) and one.conv.kernel.shape == (3, 3, 6, 16)
    kernels = np.asarray(stack.conv.kernel).reshape(3, -1)
    assert not np.allclose(kernels[0], kernels[1]) and not np.allclose(kernels[1], kernels[2])


# ---------------------------------------------------------------------------------------------- communication radius

def test_ring_neighbourhood_by_hand():
    third = 1 / math.sqrt(3)
    ring = px.ring_neighbourhood(5, 1)
    close(ring[0], [third, third, 0, 0, third])  # expert 0 reads h_4, h_0, h_1
    close(ring[2], [0, third, third, third, 0])
    close(ring[4], [third, 0, 0, third, third])
    close(px.ring_neighbourhood(4, 1)[0], [third, third, 0, third])  # E=4: the two neighbours and itself
    close(px.ring_neighbourhood(5, 0), np.eye(5))  # radius 0: each expert reads only itself
    h = np.random.default_rng(0).normal(size=(5, 2, 3)).astype(np.float32)
    states = px.neighbourhood_states(jnp.asarray(h), ring)
    close(states[0], (h[4] + h[0] + h[1]) / math.sqrt(3))
    close(states[3], (h[2] + h[3] + h[4]) / math.sqrt(3))


@pytest.mark.parametrize("experts", [1, 2, 3, 4, 7])
def test_full_radius_reaches_every_expert_and_is_the_sqrt_sum(experts):
    r = full_radius(experts)
    assert r == experts // 2
    close(px.ring_neighbourhood(experts, r), np.full((experts, experts), 1 / math.sqrt(experts)))
    if experts > 1:  # one less leaves someone out
        assert (px.ring_neighbourhood(experts, r - 1) == 0).any()
    h = jnp.asarray(np.random.default_rng(1).normal(size=(experts, 3)), jnp.float32)
    for state in px.neighbourhood_states(h, px.ring_neighbourhood(experts, r)):
        close(state, px.aggregate(h), 1e-6)
