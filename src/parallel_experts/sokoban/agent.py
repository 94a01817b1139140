"""The Sokoban Parallel Experts agent (paper App. A.1; the authors' RL/drc/): encoder → L levels of E
ConvLSTM/ConvGLU experts → head.

Every module is unbatched: it sees ONE environment, arrays channels-last (H, W, C) like Jumanji's observation
and Flax's convolutions. The training code vmaps `Agent.__call__` over environments.

One environment step with the paper's chaining (§4; the authors' `RL/drc/recurrent_moe.py`), for ConvLSTM experts:
    s, h = s_{t-1}, h_{t-1}[L-1]                         level 0 reads the previous step's last level
    for ℓ in 0..L-1:                                     (Python loop: level 0 may have another input width)
        h[ℓ,i], c[ℓ,i] = ConvLSTM_{ℓ,i}(concat(z, s, h[i]), c_{t-1}[ℓ,i])   all i at once (vmap)
        s = aggregate_i h[ℓ,i]                            sqrt-sum by default
    logits, value = Head(RMSNorm(s))
`chaining="pre_rl"` instead feeds s_{t-1} to every level and aggregates only the last one, as the authors'
`PRE_RL/drc/recurrent_moe.py` does.
`recurrent=False` (paper App. A.1) zeroes the incoming state and level 0 reads z only. ConvGLU experts (§5.1)
read concat(z, s) and carry only s.
`radius=r` (Fig. 11; our choice, as the paper does not define the radius) puts the experts on a ring: expert i
reads s_i = |N_r(i)|^{-1/2} Σ_{j∈N_r(i)} h_j
of the previous level (level 0: of the previous step's last level) instead of s; the head still reads the full
sqrt-sum. A radius ≥ ⌊E/2⌋ reaches every expert and is stored as None, so it IS the standard agent.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jax import Array

from parallel_experts.core import experts as px
from parallel_experts.core.aggregation import is_routed
from parallel_experts.core.benchmarking import counted_flops
from parallel_experts.sokoban.settings import AgentConfig

EPS = 1e-5  # every RMSNorm of the agent (Flax default)
VOCABULARY = 5  # Jumanji grid values 0..4 (empty, wall, target, agent, box)
# Flax defaults (the authors' code is Flax), which Equinox does not share.
lecun_normal = jax.nn.initializers.lecun_normal()  # truncated normal, variance 1/fan_in, fan_in = kh·kw·in
xavier_uniform = jax.nn.initializers.xavier_uniform()


# ---------------------------------------------------------------------------------------------- layers


def rms_normalise(x: Array, axis) -> Array:
    return x * jax.lax.rsqrt(jnp.mean(jnp.square(x), axis=axis, keepdims=True) + EPS)


class RMSNorm(eqx.Module):
    """x / √(mean(x²) + 1e-5) · γ over `axis`; γ one per channel, init 1."""

    scale: Array
    axis: tuple[int, ...] = eqx.field(static=True)

    def __init__(self, channels: int, axis: tuple[int, ...] = (-1,)):
        self.scale = jnp.ones(channels)
        self.axis = axis

    def __call__(self, x: Array) -> Array:
        return rms_normalise(x, self.axis) * self.scale


class Conv(eqx.Module):
    """SAME-padded, stride-1 convolution; kernel (kh, kw, in, out) as in Flax, LeCun truncated normal, bias 0."""

    kernel: Array
    bias: Array

    def __init__(self, in_channels: int, out_channels: int, key: Array, size: int = 3):
        self.kernel = lecun_normal(key, (size, size, in_channels, out_channels))
        self.bias = jnp.zeros(out_channels)

    def __call__(self, u: Array | tuple[Array, ...]) -> Array:
        """`u` is the input, or a tuple of inputs whose channels are read as if concatenated.

        Computed as matmuls over k×k patches rather than with lax.conv: under vmap over experts (stacked
        kernels) and environments, XLA:CPU lowers batched-kernel convolutions to grouped ones whose gradients
        run about 10× slower than the forward pass; batched matmuls have no such cliff. Passing the level's
        shared input and an expert's own hidden state separately keeps the shared patches unbatched over
        experts, so they are built and multiplied once per level, not once per expert."""
        parts = u if isinstance(u, tuple) else (u,)
        kh, kw, _, c_out = self.kernel.shape
        out, start = self.bias, 0
        for part in parts:
            channels = part.shape[-1]
            kernel = self.kernel[:, :, start:start + channels].reshape(kh * kw * channels, c_out)
            out = out + patches(part, kh, kw) @ kernel
            start += channels
        return out


def patches(x: Array, kh: int, kw: int) -> Array:
    """(H, W, C) → (H, W, kh·kw·C): each position's zero-padded kh×kw neighbourhood, in (kh, kw, C) order."""
    height, width, _ = x.shape
    padded = jnp.pad(x, ((kh // 2, kh // 2), (kw // 2, kw // 2), (0, 0)))
    return jnp.concatenate([padded[i:i + height, j:j + width] for i in range(kh) for j in range(kw)], axis=-1)


class Linear(eqx.Module):
    """Dense layer, kernel (in, out) as in Flax, LeCun truncated normal, bias 0."""

    kernel: Array
    bias: Array

    def __init__(self, in_features: int, out_features: int, key: Array):
        self.kernel = lecun_normal(key, (in_features, out_features))
        self.bias = jnp.zeros(out_features)

    def __call__(self, x: Array) -> Array:
        return x @ self.kernel + self.bias


# ---------------------------------------------------------------------------------------------- encoder


class Encoder(eqx.Module):
    """Two embedding tables (5, C/2) for the variable and fixed grid channels, concatenated, then RMS-normalised
    over the whole map (H, W, C jointly, no scale): one scalar per observation (the authors' RL/drc/encoders.py)."""

    tables: Array  # (2, 5, C/2): table 0 embeds channel 0 (empty/agent/box), table 1 channel 1 (empty/wall/target)

    def __init__(self, channels: int, key: Array):
        # Flax nn.Embed init: variance_scaling(1/√C, fan_in, normal, out_axis=0), std √(1/√C / (C/2)) ≈ 0.105
        init = jax.nn.initializers.variance_scaling(1 / math.sqrt(channels), "fan_in", "normal", out_axis=0)
        self.tables = jnp.stack([init(k, (VOCABULARY, channels // 2)) for k in jax.random.split(key)])

    def __call__(self, grid: Array) -> Array:
        """uint8 grid (H, W, 2) with values 0..4 → z (H, W, C). Values outside 0..4 are clipped by the gather
        (JAX indexing cannot raise under jit); the environment code owns that check."""
        grid = grid.astype(jnp.int32)
        z = jnp.concatenate([self.tables[0][grid[..., 0]], self.tables[1][grid[..., 1]]], axis=-1)
        return rms_normalise(z, axis=(0, 1, 2))


# ---------------------------------------------------------------------------------------------- experts


class ConvLSTM(eqx.Module):
    """One ConvLSTM expert of one level (paper App. A.1; the authors' RL/drc/recurrent_moe.py): gates =
    RMSNorm(conv3×3(u)) jointly over all 4d channels,
    split (i, f, o, g); no forget-gate bias offset."""

    conv: Conv
    gate_norm: RMSNorm

    def __init__(self, in_channels: int, width: int, key: Array):
        self.conv = Conv(in_channels, 4 * width, key)
        self.gate_norm = RMSNorm(4 * width)

    def __call__(self, u: Array | tuple[Array, ...], c: Array) -> tuple[Array, Array]:
        i, f, o, g = jnp.split(self.gate_norm(self.conv(u)), 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        return jax.nn.sigmoid(o) * jnp.tanh(c), c


class ConvGLU(eqx.Module):
    """One ConvGLU expert (the authors' RL/drc/recurrent_moe.py): conv3×3 to 2d channels, value ⊙ σ(gate),
    RMSNorm over (H, W, C) jointly
    with a per-channel scale."""

    conv: Conv
    norm: RMSNorm

    def __init__(self, in_channels: int, width: int, key: Array):
        self.conv = Conv(in_channels, 2 * width, key)
        self.norm = RMSNorm(width, axis=(0, 1, 2))

    def __call__(self, u: Array) -> Array:
        value, gate = jnp.split(self.conv(u), 2, axis=-1)
        return self.norm(value * jax.nn.sigmoid(gate))


# ---------------------------------------------------------------------------------------------- core


class State(eqx.Module):
    """Carried state of one environment (add a leading axis per batch dimension). All zeros at episode start."""

    s: Array  # (H, W, d): shared state after the last level
    h: Array | None = None  # (L, E, H, W, d): every ConvLSTM hidden; only h[L-1] is read at the next step
    c: Array | None = None  # (L, E, H, W, d): every ConvLSTM cell; level ℓ reads its own c[ℓ]


def _level_inputs(config: AgentConfig, level: int) -> tuple[int, int]:
    """(channels every expert of the level shares, channels of its own hidden) at `level`."""
    if level == 0 and not config.recurrent:
        return config.encoder_channels, 0  # paper App. A.1: the first level reads z only
    own = config.width if config.expert == "convlstm" else 0
    return config.encoder_channels + config.width, own


class Core(eqx.Module):
    """L levels of E stacked experts, aggregated into the shared state s, then cell_out = RMSNorm(s)."""

    levels: tuple  # level ℓ: ONE ConvLSTM/ConvGLU module whose arrays have a leading expert axis E
    routers: tuple  # routed rules: one Router per aggregation (L for "paper", 1 for "pre_rl"), else ()
    out_norm: RMSNorm
    config: AgentConfig = eqx.field(static=True)

    def __init__(self, config: AgentConfig, key: Array):
        cell = ConvLSTM if config.expert == "convlstm" else ConvGLU
        *level_keys, router_key = jax.random.split(key, config.depth + 1)
        levels = []
        for level, level_key in enumerate(level_keys):  # px.stack splits level_key into one key per expert
            in_channels = sum(_level_inputs(config, level))
            levels.append(px.stack(lambda k: cell(in_channels, config.width, k), level_key, config.experts))
        self.levels = tuple(levels)
        routed_levels = range(config.depth) if config.chaining == "paper" else [config.depth - 1]
        router_keys = jax.random.split(router_key, config.depth)
        self.routers = tuple(
            px.Router(_level_inputs(config, level)[0], config.width, config.experts, router_keys[level])
            for level in routed_levels
        ) if is_routed(config.aggregation) else ()
        self.out_norm = RMSNorm(config.width)
        self.config = config

    def initial_state(self, height: int, width: int) -> State:
        cfg = self.config
        s = jnp.zeros((height, width, cfg.width))
        if cfg.expert == "convglu":
            return State(s)
        per_expert = jnp.zeros((cfg.depth, cfg.experts, height, width, cfg.width))
        return State(s, per_expert, per_expert)

    def __call__(self, z: Array, state: State) -> tuple[Array, State]:
        cfg = self.config
        if not cfg.recurrent:
            state = jax.tree.map(jnp.zeros_like, state)  # paper App. A.1: nothing is carried across steps
        s = state.s
        if cfg.expert == "convglu":
            for level, experts in enumerate(self.levels):
                shared = self._shared(z, s, level)
                s = self._aggregate(level, shared, px.apply(experts, shared, in_axes=None))
            return self.out_norm(s), State(s)

        own = state.h[-1]  # each expert's own last-level hidden from the previous step
        local = self._local(own)  # radius only: each expert's own s_i, in place of the shared s
        hs, cs = [], []
        for level, experts in enumerate(self.levels):
            shared = self._shared(z, s, level)
            if not _level_inputs(cfg, level)[1]:
                h, c = px.apply(experts, shared, state.c[level], in_axes=(None, 0))
            elif local is None:
                h, c = px.apply(experts, shared, own, state.c[level], in_axes=(None, 0, 0),
                                call=lambda cell, x, h, c: cell((x, h), c))
            else:  # channels in the order of concat(z, s_i, h_i); z stays unbatched over experts
                h, c = px.apply(experts, z, local, own, state.c[level], in_axes=(None, 0, 0, 0),
                                call=lambda cell, z, s, h, c: cell((z, s, h), c))
            hs.append(h)
            cs.append(c)
            own = h
            if cfg.chaining == "paper":
                s = self._aggregate(level, shared, h)  # the head reads the full sqrt-sum of the last level
                local = self._local(h)
        if cfg.chaining == "pre_rl":
            s = self._aggregate(0, shared, own)  # every level read s_{t-1}; only the last one is merged
        return self.out_norm(s), State(s, jnp.stack(hs), jnp.stack(cs))

    def _shared(self, z: Array, s: Array, level: int) -> Array:
        """What every expert of the level reads: concat(z, s^{ℓ-1}), or z alone at a non-recurrent level 0."""
        return z if level == 0 and not self.config.recurrent else jnp.concatenate([z, s], axis=-1)

    def _local(self, h: Array) -> Array | None:
        """Under a communication radius, what each expert reads next: s_i over its ring neighbourhood N_r(i)."""
        if self.config.radius is None:
            return None
        return px.neighbourhood_states(h, px.ring_neighbourhood(self.config.experts, self.config.radius))

    def _aggregate(self, index: int, shared: Array, h: Array) -> Array:
        # Routing for Sokoban is unspecified (neither the paper nor the authors' code gives it). Our choice: one α per
        # expert and environment, from the spatial mean of the level's shared input concat(z, s^{ℓ-1}), with the
        # authors' FineWeb router (PRE/recnanogpt/model.py):
        # α_e = σ(r·κ_e/√d), r = W_c mean_{h,w}(concat(z, s)). Per-observation, like the LM's per-token routing.
        alpha = self.routers[index](shared.mean(axis=(0, 1))) if self.routers else None
        return px.aggregate(h, self.config.aggregation, alpha)


# ---------------------------------------------------------------------------------------------- head


class Head(eqx.Module):
    """Attention pooling + global average pooling → Dense GLU (2d → 2·256 → 256) → policy logits and value."""

    attention: Linear  # the 1×1 conv d → 1, stored as a (d, 1) dense kernel; Xavier uniform, bias 0
    glu: Linear
    policy: Linear
    value: Linear

    def __init__(self, width: int, hidden: int, actions: int, key: Array):
        ka, kg, kp, kv = jax.random.split(key, 4)
        self.attention = eqx.tree_at(lambda m: m.kernel, Linear(width, 1, ka), xavier_uniform(ka, (width, 1)))
        self.glu = Linear(2 * width, 2 * hidden, kg)
        self.policy = Linear(hidden, actions, kp)
        self.value = Linear(hidden, 1, kv)

    def __call__(self, x: Array) -> tuple[Array, Array]:
        x = x.reshape(-1, x.shape[-1])  # (positions, d)
        weights = jax.nn.softmax(self.attention(x)[:, 0])
        features = jnp.concatenate([weights @ x, x.mean(axis=0)])
        value, gate = jnp.split(self.glu(features), 2)
        u = value * jax.nn.sigmoid(gate)
        return self.policy(u), self.value(u)[0]


# ---------------------------------------------------------------------------------------------- agent


class Agent(eqx.Module):
    encoder: Encoder
    core: Core
    head: Head
    config: AgentConfig = eqx.field(static=True)

    def __init__(self, config: AgentConfig, key: Array):
        ke, kc, kh = jax.random.split(key, 3)  # independent keys per part, level and expert
        self.encoder = Encoder(config.encoder_channels, ke)
        self.core = Core(config, kc)
        self.head = Head(config.width, config.head_hidden, config.num_actions, kh)
        self.config = config

    def initial_state(self, height: int = 10, width: int = 10) -> State:
        return self.core.initial_state(height, width)

    def __call__(self, grid: Array, state: State) -> tuple[Array, Array, State]:
        """One environment step: uint8 grid (H, W, 2) and carried state → (logits (A,), value (), new state).

        The new state is returned for non-recurrent agents too (probes read it); they ignore it next step."""
        cell_out, state = self.core(self.encoder(grid), state)
        logits, value = self.head(cell_out)
        return logits, value, state


def reset_where(done: Array, state: State) -> State:
    """Zero the state of environments whose previous transition ended an episode (the authors' RL/drc/trainer.py).

    `done` has the state's leading batch shape: (B,) with a state batched on a leading axis, or a scalar
    under the caller's vmap over environments. Gradients do not flow into zeroed entries."""
    done = jnp.asarray(done, bool)

    def reset(x: Array) -> Array:
        return jnp.where(done.reshape(done.shape + (1,) * (x.ndim - done.ndim)), jnp.zeros_like(x), x)

    return jax.tree.map(reset, state)


def parameter_count(module: eqx.Module) -> int:
    """Number of parameters; also works on `eqx.filter_eval_shape(Agent, config, key)` (no arrays allocated)."""
    return sum(math.prod(x.shape) for x in jax.tree.leaves(module) if isinstance(x, (jax.Array, jax.ShapeDtypeStruct)))


def agent_step_flops(config: AgentConfig, height: int = 10, width: int = 10) -> float:
    """XLA-counted FLOPs of one jitted agent step vmapped over a batch of one environment.

    Only shapes are needed: the agent is built abstractly, so large allocations cost no memory or init time. The
    lowered program is counted (as `lm.models.token_flops` does): it is what the model computes on any device,
    and lowering takes a tenth of the time of compiling."""
    agent = eqx.filter_eval_shape(Agent, config, jax.random.PRNGKey(0))
    params, static = eqx.partition(agent, lambda x: isinstance(x, jax.ShapeDtypeStruct))
    grid = jax.ShapeDtypeStruct((1, height, width, 2), jnp.uint8)
    state = jax.tree.map(lambda x: jax.ShapeDtypeStruct((1, *x.shape), x.dtype),
                         jax.eval_shape(lambda: agent.initial_state(height, width)))

    def step(params, grid, state):
        return jax.vmap(eqx.combine(params, static))(grid, state)

    return counted_flops(step, params, grid, state)
