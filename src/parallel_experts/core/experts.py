"""Parallel Experts, domain-independent: stacks of E experts evaluated together, and the rules that merge them.

An expert stack is ONE module whose array leaves carry a leading expert axis (E, ...). `stack` builds it from a
module constructor with E independent keys; `apply` evaluates every expert at once with `eqx.filter_vmap`
(XLA turns per-expert convolutions into one grouped convolution), never a Python loop over experts.

Aggregation rules (paper App. D; the authors' PRE/recnanogpt/) merge the E outputs h_i into the shared state:
    sqrt_sum         Σ h_i / √E                    the paper's default everywhere
    mean             Σ h_i / E
    routed_mean      Σ α_i h_i / (ε + Σ α_i)
    routed_sqrt_sum  Σ α_i h_i / √(ε + Σ α_i²)      ε = 1e-6 (the authors' PRE/recnanogpt/model.py)
with routing coefficients α_i ≥ 0 from a `Router`. (The authors' residual groups are not implemented: G_r = 1 in
every documented run.)

Communication radius (paper §5.3, App. E; the text does not define it, so the ring is our choice): the E
experts sit on a ring, N_r(i) = the experts within ring distance r of i, and expert i reads its own state
s_i = |N_r(i)|^{-1/2} Σ_{j∈N_r(i)} h_j, one (E, E) matrix applied to the stack. r ≥ ⌊E/2⌋ reaches every expert:
that is the sqrt-sum, and callers treat it as "full" (no radius).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from parallel_experts.core.aggregation import AGGREGATIONS, is_routed

ROUTING_EPS = 1e-6  # keeps the routed denominators away from 0 when every α vanishes (the authors' value)


def aggregate(h: Array, rule: str = "sqrt_sum", alpha: Array | None = None, eps: float = ROUTING_EPS) -> Array:
    """Merge expert outputs `h` (E, ...) over the leading expert axis.

    `alpha` (routed rules only) holds one coefficient per expert, shape (E,), or any shape that broadcasts
    against `h` after its trailing axes are padded, e.g. (E, H, W, 1) for per-position routing.
    """
    experts = h.shape[0]
    if rule not in AGGREGATIONS:
        raise ValueError(f"aggregation rule {rule!r}: expected one of {AGGREGATIONS}")
    if is_routed(rule) != (alpha is not None):
        raise ValueError(f"aggregation rule {rule!r} {'needs' if is_routed(rule) else 'takes no'} routing coefficients")
    if rule == "sqrt_sum":
        return h.sum(0) / jnp.sqrt(jnp.asarray(experts, h.dtype))  # divided in the array dtype, as the authors do
    if rule == "mean":
        return h.sum(0) / experts
    alpha = alpha.reshape(alpha.shape + (1,) * (h.ndim - alpha.ndim)).astype(h.dtype)
    weighted = (alpha * h).sum(0)
    if rule == "routed_mean":
        return weighted / (eps + alpha.sum(0))
    return weighted / jnp.sqrt(eps + jnp.square(alpha).sum(0))


def ring_neighbourhood(experts: int, radius: int) -> np.ndarray:
    """(E, E) matrix M with M[i, j] = |N_r(i)|^{-1/2} where the ring distance of i and j is at most `radius`,
    else 0: row i gives expert i's weights on every expert's output."""
    index = np.arange(experts)
    gap = np.abs(index[:, None] - index[None, :])
    within = np.minimum(gap, experts - gap) <= radius
    return within / np.sqrt(within.sum(axis=1, keepdims=True))


def neighbourhood_states(h: Array, neighbourhood: Array) -> Array:
    """Each expert's own state from the stack `h` (E, ...): s_i = Σ_j M[i, j] h_j, shape (E, ...)."""
    return jnp.einsum("ij,j...->i...", jnp.asarray(neighbourhood, h.dtype), h)


class Router(eqx.Module):
    """Soft routing coefficients from a query vector (the authors' FineWeb router, PRE/recnanogpt/model.py).

    r = x W_c,  κ_e = ε_e W_e,  λ_e = r·κ_e / √width,  α = σ(λ) (or softmax over experts).
    The caller chooses what x is: the LM routes each token by concat(z, s^{ℓ-1}); the Sokoban agent routes each
    environment by the spatial mean of its level input (one α per expert and observation, see sokoban/agent.py).
    """

    query: Array  # W_c (in_features, width)
    key_projection: Array  # W_e (width, width)
    embeddings: Array  # ε_e (experts, width), one learned embedding per expert
    softmax: bool = eqx.field(static=True)

    def __init__(self, in_features: int, width: int, experts: int, key: Array, softmax: bool = False):
        kq, kk, ke = jax.random.split(key, 3)
        self.query = _scaled_normal(kq, in_features, width)
        self.key_projection = _scaled_normal(kk, width, width)
        self.embeddings = jax.random.normal(ke, (experts, width)) / math.sqrt(width)  # N(0, 1/d)
        self.softmax = softmax

    def __call__(self, x: Array) -> Array:
        width = self.query.shape[1]
        x = x.astype(jnp.float32)  # routing logits in fp32, as the authors' router
        logits = (self.embeddings @ self.key_projection) @ (x @ self.query) / math.sqrt(width)
        return jax.nn.softmax(logits) if self.softmax else jax.nn.sigmoid(logits)


def _scaled_normal(key: Array, fan_in: int, fan_out: int) -> Array:
    # The authors' router init: std 1/√fan_in, shrunk by √(fan_out/fan_in) when the layer narrows.
    std = min(1.0, math.sqrt(fan_out / fan_in)) / math.sqrt(fan_in)
    return std * jax.random.normal(key, (fan_in, fan_out))


def stack(make: Callable[[Array], eqx.Module], key: Array, experts: int) -> eqx.Module:
    """E independently initialised experts `make(key_i)` as one module with a leading expert axis."""
    return eqx.filter_vmap(make)(jax.random.split(key, experts))


def apply(stacked: eqx.Module, *args, in_axes: int | None | tuple = 0,
          call: Callable = lambda expert, *args: expert(*args)):
    """Evaluate every expert of `stacked` together: `call(expert_i, *args_i)` vmapped over the expert axis.

    `in_axes` per argument: 0 where the argument carries its own leading expert axis (each expert reads its
    own slice), None where every expert reads the same value. Outputs carry a leading expert axis.
    """
    if not isinstance(in_axes, tuple):
        in_axes = (in_axes,) * len(args)
    return eqx.filter_vmap(call, in_axes=(eqx.if_array(0), *in_axes))(stacked, *args)


def count(stacked: eqx.Module) -> int:
    """Number of experts in a stack."""
    return jax.tree.leaves(eqx.filter(stacked, eqx.is_array))[0].shape[0]


def select(stacked: eqx.Module, index: int) -> eqx.Module:
    """Expert `index` of a stack as a plain module (for tests, probes and reference loops)."""
    return jax.tree.map(lambda leaf: leaf[index] if eqx.is_array(leaf) else leaf, stacked)
