"""The Sokoban agent and the Parallel Experts pieces against hand computations and reference loops
(paper App. A.1; the authors' RL/drc/)."""

import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from parallel_experts.config.errors import ConfigError
from parallel_experts.core import experts as px
from parallel_experts.core.budget import Allocation, sokoban_work
from parallel_experts.sokoban.agent import (Agent, ConvGLU, ConvLSTM, Core, Encoder, Head, State, agent_step_flops,
                                            parameter_count, reset_where)
from parallel_experts.sokoban.settings import AgentConfig

KEY = jax.random.PRNGKey(0)

# Eager JAX compiles every primitive (random draws included) once per shape, which dominates a CPU test run.
# So inputs come from NumPy, semantics tests use random parameters poured into an abstract module (the real
# initialisation has its own tests), and every step is jitted once per configuration.


def randomised(abstract, seed=0):
    """An abstract module (eqx.filter_eval_shape) with random parameters: matrices ~ N(0, 1/fan_in) over the
    last-but-one axes, vectors (biases, norm scales) ~ U(0.5, 1.5) so that none is trivially 0 or 1."""
    rng = np.random.default_rng(seed)

    def fill(x):
        if not isinstance(x, jax.ShapeDtypeStruct):
            return x
        if len(x.shape) == 1:
            return jnp.asarray(rng.uniform(0.5, 1.5, x.shape), x.dtype)
        fan_in = math.prod(x.shape[-4:-1])
        return jnp.asarray(rng.normal(0, 1 / math.sqrt(fan_in), x.shape), x.dtype)

    return jax.tree.map(fill, abstract)


@functools.cache
def make_agent(config: AgentConfig) -> Agent:
    return randomised(eqx.filter_eval_shape(Agent, config, KEY))


@functools.cache
def initialised_agent() -> Agent:
    """The one agent built by the real initialisation (its own tests check it)."""
    return Agent(AgentConfig(depth=2, experts=3, width=16), KEY)


@eqx.filter_jit
def step(agent, grid, state):
    return agent(grid, state)


def normal(shape, seed=1):
    return jnp.asarray(np.random.default_rng(seed).normal(size=shape), jnp.float32)


def random_grid(seed=1, height=10, width=10):
    return jnp.asarray(np.random.default_rng(seed).integers(0, 5, (height, width, 2)), jnp.uint8)


def random_state(agent_or_core, seed=7, height=10, width=10):
    zeros = agent_or_core.initial_state(height, width)
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda x: jnp.asarray(rng.normal(size=x.shape), x.dtype), zeros)


def close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


# ---------------------------------------------------------------------------------------------- aggregation


# ---------------------------------------------------------------------------------------------- expert stacks


@pytest.mark.parametrize("cell", [ConvLSTM, ConvGLU])
def test_experts_together_equal_a_loop_over_experts(cell):
    experts, width, shared_channels = 4, 5, 7
    make = lambda k: cell(shared_channels + (width if cell is ConvLSTM else 0), width, k)  # noqa: E731
    stack = randomised(eqx.filter_eval_shape(px.stack, make, KEY, experts))
    shared = normal((6, 6, shared_channels), 1)
    if cell is ConvLSTM:
        own = normal((experts, 6, 6, width), 2)
        c = normal((experts, 6, 6, width), 3)
        h_all, c_all = px.apply(stack, shared, own, c, in_axes=(None, 0, 0),
                                call=lambda e, x, h, c: e(jnp.concatenate([x, h], -1), c))
        for i in range(experts):
            h_i, c_i = px.select(stack, i)(jnp.concatenate([shared, own[i]], -1), c[i])
            close(h_all[i], h_i)
            close(c_all[i], c_i)
    else:
        y_all = px.apply(stack, shared, in_axes=None)
        for i in range(experts):
            close(y_all[i], px.select(stack, i)(shared))


# ---------------------------------------------------------------------------------------------- cells vs numpy


def np_conv_same(x, kernel, bias):
    """3×3 SAME cross-correlation (what Flax and lax.conv compute), x (H, W, Ci), kernel (3, 3, Ci, Co)."""
    height, width, _ = x.shape
    padded = np.pad(x, ((1, 1), (1, 1), (0, 0)))
    out = np.zeros((height, width, kernel.shape[-1]))
    for dy in range(3):
        for dx in range(3):
            out += padded[dy:dy + height, dx:dx + width] @ kernel[dy, dx]
    return out + bias


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_convlstm_step_against_numpy():
    width, channels = 3, 5
    cell = randomised(eqx.filter_eval_shape(ConvLSTM, channels, width, KEY))
    scale = np.asarray(cell.gate_norm.scale)
    u = np.asarray(normal((4, 4, channels), 1), np.float64)
    c = np.asarray(normal((4, 4, width), 2), np.float64)

    gates = np_conv_same(u, np.asarray(cell.conv.kernel, np.float64), np.asarray(cell.conv.bias, np.float64))
    gates = gates / np.sqrt((gates ** 2).mean(-1, keepdims=True) + 1e-5) * scale  # RMSNorm over all 4d gates
    i, f, o, g = (gates[..., n * width:(n + 1) * width] for n in range(4))
    c_new = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    h_new = sigmoid(o) * np.tanh(c_new)

    h, c_out = cell(jnp.asarray(u, jnp.float32), jnp.asarray(c, jnp.float32))
    close(h, h_new, 1e-5)
    close(c_out, c_new, 1e-5)


def test_convglu_against_numpy():
    width, channels = 3, 5
    cell = randomised(eqx.filter_eval_shape(ConvGLU, channels, width, KEY))
    cell = eqx.tree_at(lambda m: m.norm.scale, cell, jnp.array([0.5, 1.0, 2.0]))
    u = np.asarray(normal((4, 4, channels)), np.float64)
    g = np_conv_same(u, np.asarray(cell.conv.kernel, np.float64), np.asarray(cell.conv.bias, np.float64))
    y = g[..., :width] * sigmoid(g[..., width:])
    y = y / np.sqrt((y ** 2).mean() + 1e-5) * np.array([0.5, 1.0, 2.0])  # RMSNorm over (H, W, C) jointly
    close(cell(jnp.asarray(u, jnp.float32)), y, 1e-5)


def test_encoder_by_hand():
    encoder = randomised(eqx.filter_eval_shape(Encoder, 32, KEY))
    grid = np.asarray(random_grid())
    tables = np.asarray(encoder.tables, np.float64)
    raw = np.concatenate([tables[0][grid[..., 0]], tables[1][grid[..., 1]]], -1)
    close(encoder(jnp.asarray(grid)), raw / np.sqrt((raw ** 2).mean() + 1e-5), 1e-5)
    assert encoder.tables.shape == (2, 5, 16)


def test_head_by_hand():
    width, hidden = 6, 8
    head = randomised(eqx.filter_eval_shape(Head, width, hidden, 4, KEY))
    x = np.asarray(normal((5, 5, width)), np.float64)
    flat = x.reshape(25, width)
    logits = flat @ np.asarray(head.attention.kernel)[:, 0] + np.asarray(head.attention.bias)[0]
    weights = np.exp(logits - logits.max())
    weights /= weights.sum()
    features = np.concatenate([weights @ flat, flat.mean(0)])
    glu = features @ np.asarray(head.glu.kernel) + np.asarray(head.glu.bias)
    u = glu[:hidden] * sigmoid(glu[hidden:])
    policy, value = head(jnp.asarray(x, jnp.float32))
    close(policy, u @ np.asarray(head.policy.kernel) + np.asarray(head.policy.bias), 1e-5)
    close(value, (u @ np.asarray(head.value.kernel))[0] + np.asarray(head.value.bias)[0], 1e-5)
    assert head.glu.kernel.shape == (2 * width, 2 * hidden)


# ---------------------------------------------------------------------------------------------- initialisation


def test_initialisation_follows_flax_defaults():
    agent = initialised_agent()
    for level in agent.core.levels:
        kernel = np.asarray(level.conv.kernel)  # (E, 3, 3, 64, 64), fan_in 9·64
        std = 1 / math.sqrt(9 * 64)
        assert abs(kernel.std() / std - 1) < 0.05
        assert np.abs(kernel).max() <= 2 * std / 0.87962566 + 1e-6  # truncated at two (pre-correction) stds
        assert np.all(np.asarray(level.conv.bias) == 0) and np.all(np.asarray(level.gate_norm.scale) == 1)
    # independent keys for every expert and level
    flat = np.concatenate([np.asarray(level.conv.kernel).reshape(3, -1) for level in agent.core.levels], 0)
    assert np.abs(np.corrcoef(flat) - np.eye(6)).max() < 0.05
    limit = math.sqrt(6 / (16 + 1))  # Xavier uniform on the d→1 attention conv
    assert np.abs(np.asarray(agent.head.attention.kernel)).max() <= limit and agent.head.attention.bias == 0
    wide = np.asarray(Head(2048, 8, 4, KEY).attention.kernel)  # enough samples to tell it from LeCun (std 1/√d)
    assert abs(wide.std() / math.sqrt(2 / (2048 + 1)) - 1) < 0.05 and np.abs(wide).max() <= math.sqrt(6 / 2049)
    assert np.all(np.asarray(agent.core.out_norm.scale) == 1)
    glu = np.asarray(agent.head.glu.kernel)
    assert abs(glu.std() * math.sqrt(32) - 1) < 0.05 and np.all(np.asarray(agent.head.glu.bias) == 0)
    tables = np.concatenate([np.asarray(Encoder(32, k).tables).ravel() for k in jax.random.split(KEY, 50)])
    assert abs(tables.std() - math.sqrt(1 / math.sqrt(32) / 16)) < 0.005  # ≈ 0.105 (RL/drc/encoders.py)


# ---------------------------------------------------------------------------------------------- core semantics


@eqx.filter_jit
def reference_core(core: Core, z, state):
    """Algorithm 1 (paper App. A.1) with its non-recurrent and ConvGLU variants (the authors'
    RL/drc/recurrent_moe.py), literally: Python loops over levels AND experts, sliced parameters."""
    cfg = core.config
    experts = cfg.experts
    if not cfg.recurrent:
        state = jax.tree.map(jnp.zeros_like, state)

    def merge(index, shared, outputs):
        stacked = jnp.stack(outputs)
        if not core.routers:
            return stacked.sum(0) / math.sqrt(experts)
        alpha = core.routers[index](shared.mean((0, 1)))
        return sum(a * h for a, h in zip(alpha, outputs)) / (1e-6 + alpha.sum())  # routed_mean

    s = state.s
    own = None if cfg.expert == "convglu" else [state.h[-1, i] for i in range(experts)]
    hs, cs = [], []
    for level in range(cfg.depth):
        cells = [px.select(core.levels[level], i) for i in range(experts)]
        first_plain = level == 0 and not cfg.recurrent
        shared = z if first_plain else jnp.concatenate([z, s], -1)
        if cfg.expert == "convglu":
            s = merge(level, shared, [cell(shared) for cell in cells])
            continue
        outputs = [cell(shared if first_plain else jnp.concatenate([shared, own[i]], -1), state.c[level, i])
                   for i, cell in enumerate(cells)]
        own = [h for h, _ in outputs]
        hs.append(jnp.stack(own))
        cs.append(jnp.stack([c for _, c in outputs]))
        if cfg.chaining == "paper":
            s = merge(level, shared, own)
    if cfg.chaining == "pre_rl":
        s = merge(0, shared, own)
    return core.out_norm(s), s, hs, cs


@pytest.mark.parametrize("config", [
    AgentConfig(2, 3, 8),
    AgentConfig(2, 3, 8, chaining="pre_rl"),
    AgentConfig(2, 3, 8, recurrent=False),
    AgentConfig(2, 3, 8, aggregation="routed_mean"),
    AgentConfig(2, 3, 8, chaining="pre_rl", aggregation="routed_mean"),
    AgentConfig(2, 3, 8, expert="convglu"),
    AgentConfig(2, 3, 8, expert="convglu", recurrent=False),
], ids=lambda c: f"{c.expert}-{c.chaining}-{'rec' if c.recurrent else 'nonrec'}-{c.aggregation}")
def test_core_matches_the_spec_pseudocode(config):
    core = make_agent(config).core
    z = normal((10, 10, 32))
    state = random_state(core)
    out, new = eqx.filter_jit(Core.__call__)(core, z, state)
    ref_out, ref_s, ref_h, ref_c = reference_core(core, z, state)
    close(out, ref_out, 1e-4)
    close(new.s, ref_s, 1e-4)
    if config.expert == "convlstm":
        close(new.h, jnp.stack(ref_h), 1e-4)
        close(new.c, jnp.stack(ref_c), 1e-4)
    else:
        assert new.h is None and new.c is None


@pytest.mark.parametrize("expert", ["convlstm", "convglu"])
def test_non_recurrent_ignores_the_incoming_state_and_reads_only_z_at_level_0(expert):
    d = 8
    agent = make_agent(AgentConfig(2, 3, d, expert=expert, recurrent=False))
    recurrent = make_agent(AgentConfig(2, 3, d, expert=expert))
    grid = random_grid()
    zero = step(agent, grid, agent.initial_state())
    noisy = step(agent, grid, random_state(agent))
    close(zero[0], noisy[0], 0)
    close(zero[1], noisy[1], 0)
    gates = 4 * d if expert == "convlstm" else 2 * d
    own = d if expert == "convlstm" else 0
    assert agent.core.levels[0].conv.kernel.shape == (3, 3, 3, 32, gates)
    assert agent.core.levels[1].conv.kernel.shape == (3, 3, 3, 32 + d + own, gates)
    assert recurrent.core.levels[0].conv.kernel.shape == (3, 3, 3, 32 + d + own, gates)
    # and no gradient reaches the incoming state
    grad = jax.grad(lambda s: step(agent, grid, s)[1])(random_state(agent))
    assert all(np.all(np.asarray(g) == 0) for g in jax.tree.leaves(grad))


@pytest.mark.parametrize("expert", ["convlstm", "convglu"])
def test_recurrent_output_depends_on_the_incoming_state(expert):
    agent = make_agent(AgentConfig(2, 3, 8, expert=expert))
    grid = random_grid()
    zero_logits, _, after = step(agent, grid, agent.initial_state())
    noisy_logits, _, _ = step(agent, grid, random_state(agent))
    assert np.abs(np.asarray(zero_logits - noisy_logits)).max() > 1e-4
    assert all(np.abs(np.asarray(x)).max() > 1e-3 for x in jax.tree.leaves(after))  # the step wrote a state
    grad = jax.grad(lambda s: step(agent, grid, s)[1])(agent.initial_state())
    assert np.abs(np.asarray(grad.s)).max() > 0
    if expert == "convlstm":  # only the last level's h and every c are read at the next step
        assert np.abs(np.asarray(grad.h[-1])).max() > 0 and np.all(np.asarray(grad.h[:-1]) == 0)
        assert np.abs(np.asarray(grad.c)).max() > 0


def test_chainings_agree_for_one_level_and_differ_for_two():
    grid = random_grid()
    for experts in (1, 3):
        paper = make_agent(AgentConfig(1, experts, 8))
        pre_rl = make_agent(AgentConfig(1, experts, 8, chaining="pre_rl"))
        state = random_state(paper)
        for a, b in zip(jax.tree.leaves(step(paper, grid, state)), jax.tree.leaves(step(pre_rl, grid, state))):
            close(a, b, 0)
    paper = make_agent(AgentConfig(2, 3, 8))
    pre_rl = make_agent(AgentConfig(2, 3, 8, chaining="pre_rl"))
    state = random_state(paper)
    assert np.abs(np.asarray(step(paper, grid, state)[0] - step(pre_rl, grid, state)[0])).max() > 1e-4


def test_reset_where_zeroes_exactly_the_done_environments():
    agent = make_agent(AgentConfig(2, 3, 8))
    batch = jax.tree.map(lambda *x: jnp.stack(x), *[random_state(agent, seed) for seed in range(4)])
    done = jnp.array([True, False, True, False])
    reset = reset_where(done, batch)
    for before, after in zip(jax.tree.leaves(batch), jax.tree.leaves(reset)):
        assert np.all(np.asarray(after[0]) == 0) and np.all(np.asarray(after[2]) == 0)
        close(after[1], before[1], 0)
        close(after[3], before[3], 0)
    # the same under the caller's vmap, with one scalar done per environment
    mapped = jax.vmap(reset_where)(done, batch)
    for a, b in zip(jax.tree.leaves(mapped), jax.tree.leaves(reset)):
        close(a, b, 0)


def test_invalid_configs_fail_fast():
    with pytest.raises(ConfigError, match="agent.chaining"):
        AgentConfig(2, 2, 8, expert="convglu", chaining="pre_rl")
    with pytest.raises(ConfigError, match="agent.chaining"):
        AgentConfig(2, 2, 8, recurrent=False, chaining="pre_rl")
    with pytest.raises(ConfigError, match="agent.expert"):
        AgentConfig(2, 2, 8, expert="lstm")
    with pytest.raises(ConfigError, match="agent.aggregation"):
        AgentConfig(2, 2, 8, aggregation="sum")
    with pytest.raises(ConfigError, match="agent.depth"):
        AgentConfig(0, 2, 8)


# ---------------------------------------------------------------------------------------------- sizes, compute


def convlstm_level_parameters(in_channels, d):
    return (9 * in_channels + 1) * 4 * d + 4 * d  # conv kernel and bias, gate RMSNorm scale


def head_parameters(d):
    return (d + 1) + (2 * d + 1) * 512 + 257 * 4 + 257


@pytest.mark.parametrize("depth, experts, d", [(1, 1, 16), (2, 3, 8), (4, 2, 8)])
def test_parameter_counts_match_the_formula(depth, experts, d):
    def abstract(**options):  # shapes only: counting needs no initialisation
        return eqx.filter_eval_shape(Agent, AgentConfig(depth, experts, d, **options), KEY)

    agent = abstract()
    per_level = convlstm_level_parameters(32 + 2 * d, d)
    assert parameter_count(agent.core) == depth * experts * per_level + d  # + cell_out RMSNorm scale
    assert parameter_count(agent) == 160 + depth * experts * per_level + d + head_parameters(d)
    # conv kernel weights = 9 · 4 · the budget proxy L·E·d·(32+2d)
    kernels = sum(math.prod(level.conv.kernel.shape) for level in agent.core.levels)
    assert kernels == 36 * sokoban_work(Allocation(depth, experts, d))

    nonrec = abstract(recurrent=False)
    assert parameter_count(nonrec.core) == (
        experts * convlstm_level_parameters(32, d) + (depth - 1) * experts * per_level + d)
    glu = abstract(expert="convglu")
    assert parameter_count(glu.core) == depth * experts * ((9 * (32 + d) + 1) * 2 * d + d) + d
    routed = abstract(aggregation="routed_sqrt_sum")
    assert parameter_count(routed.core) - parameter_count(agent.core) == depth * ((32 + d) * d + d * d + experts * d)


def test_flops_grow_with_the_work_proxy():
    flops = {a: agent_step_flops(AgentConfig(*a))
             for a in [(1, 1, 16), (1, 2, 16), (1, 4, 16), (2, 2, 16), (1, 1, 32), (1, 2, 32)]}
    # One expert at one level adds a 3×3 conv (32+2d) → 4d: 2·9·4 = 72 FLOPs per position and unit of the
    # proxy d·(32+2d), at all 100 positions of a 10×10 map (the patch matmul multiplies the zero padding too).
    per_expert_level = lambda d: 72 * 100 * sokoban_work(Allocation(1, 1, d))  # noqa: E731
    for d in (16, 32):
        increment = flops[(1, 2, d)] - flops[(1, 1, d)]  # = the core FLOPs of E=1: doubling E doubles them
        assert 1.0 <= increment / per_expert_level(d) < 1.1
    one_expert = flops[(1, 2, 16)] - flops[(1, 1, 16)]
    assert (flops[(1, 4, 16)] - flops[(1, 2, 16)]) / one_expert == pytest.approx(2, rel=0.02)  # E 2 → 4
    assert (flops[(2, 2, 16)] - flops[(1, 2, 16)]) / one_expert == pytest.approx(2, rel=0.05)  # L 1 → 2 at E=2


def test_small_budget_allocations_spend_the_flops_the_proxy_says():
    anchor = agent_step_flops(AgentConfig(1, 1, 128))
    for allocation in [(2, 2, 64), (1, 12, 32)]:
        proxy = sokoban_work(Allocation(*allocation)) / sokoban_work(Allocation(1, 1, 128))
        assert agent_step_flops(AgentConfig(*allocation)) / anchor == pytest.approx(proxy, rel=0.03)


# ---------------------------------------------------------------------------------------------- interfaces


def test_shapes_dtypes_jit_and_vmap_over_environments():
    agent = initialised_agent()
    grids = jnp.stack([random_grid(seed) for seed in range(3)])
    states = jax.tree.map(lambda x: jnp.broadcast_to(x, (3, *x.shape)), agent.initial_state())
    logits, values, new = eqx.filter_jit(eqx.filter_vmap(agent))(grids, states)
    assert logits.shape == (3, 4) and values.shape == (3,)
    assert logits.dtype == values.dtype == jnp.float32
    assert new.s.shape == (3, 10, 10, 16) and new.h.shape == new.c.shape == (3, 2, 3, 10, 10, 16)
    for i in range(3):  # the batch is three independent environments
        l_i, v_i, s_i = step(agent, grids[i], agent.initial_state())
        close(logits[i], l_i, 1e-5)
        close(values[i], v_i, 1e-5)
        close(new.s[i], s_i.s, 1e-5)
    # jit of the unbatched step agrees with eager, on a non-square map too
    grid = random_grid(1, 7, 9)
    state = random_state(agent, 4, 7, 9)
    for a, b in zip(jax.tree.leaves(eqx.filter_jit(agent)(grid, state)), jax.tree.leaves(agent(grid, state))):
        close(a, b, 1e-5)


# ---------------------------------------------------------------------------------------------- communication radius


@eqx.filter_jit
def reference_radius_core(core: Core, z, state, neighbours):
    """Our ring radius (the paper does not define one), literally: expert i at level ℓ reads |N(i)|^{-1/2}
    Σ_{j∈N(i)} h_j of level ℓ-1 (level 0: of
    the previous step's last level), `neighbours[i]` listed by hand; the head reads the full sqrt-sum."""
    cfg = core.config
    own = [state.h[-1, i] for i in range(cfg.experts)]
    hs = []
    for level in range(cfg.depth):
        outputs = []
        for i in range(cfg.experts):
            s_i = sum(own[j] for j in neighbours[i]) / math.sqrt(len(neighbours[i]))
            cell = px.select(core.levels[level], i)
            outputs.append(cell(jnp.concatenate([z, s_i, own[i]], -1), state.c[level, i]))
        own = [h for h, _ in outputs]
        hs.append(jnp.stack(own))
    s = sum(own) / math.sqrt(cfg.experts)
    return core.out_norm(s), s, jnp.stack(hs)


def test_radius_one_of_five_experts_reads_the_two_ring_neighbours():
    core = make_agent(AgentConfig(2, 5, 4, radius=1)).core
    neighbours = [(4, 0, 1), (0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 0)]
    z, state = normal((10, 10, 32)), random_state(core)
    out, new = eqx.filter_jit(Core.__call__)(core, z, state)
    ref_out, ref_s, ref_h = reference_radius_core(core, z, state, neighbours)
    close(new.h, ref_h, 1e-4)
    close(new.s, ref_s, 1e-4)  # the carried s (and the head's input) is the full sqrt-sum of the last level
    close(out, ref_out, 1e-4)


def test_radius_zero_reads_only_the_experts_own_previous_output():
    agent = make_agent(AgentConfig(2, 3, 8, radius=0))
    core = agent.core
    z, state = normal((10, 10, 32)), random_state(core)
    _, new = eqx.filter_jit(Core.__call__)(core, z, state)
    close(new.h, reference_radius_core(core, z, state, [(0,), (1,), (2,)])[2], 1e-4)
    # the other experts' carried states do not reach expert 0 at any level: its outputs stay bit for bit
    others = State(state.s * 3, state.h.at[:, 1:].multiply(-2.0), state.c.at[:, 1:].add(1.0))
    _, moved = eqx.filter_jit(Core.__call__)(core, z, others)
    np.testing.assert_array_equal(np.asarray(moved.h[:, 0]), np.asarray(new.h[:, 0]))
    np.testing.assert_array_equal(np.asarray(moved.c[:, 0]), np.asarray(new.c[:, 0]))
    assert np.abs(np.asarray(moved.h[:, 1] - new.h[:, 1])).max() > 1e-3


@pytest.mark.parametrize("experts, radius", [(3, 1), (4, 2), (7, 3), (7, 10), (1, 0)])
def test_full_radius_is_the_standard_agent_bit_for_bit(experts, radius):
    standard = AgentConfig(2, experts, 4, encoder_channels=8)
    full = AgentConfig(2, experts, 4, encoder_channels=8, radius=radius)
    assert full.radius is None and full == standard  # one configuration, hence one code path and one run id
    a, b = Agent(full, KEY), Agent(standard, KEY)  # the real initialisation: the same weights
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    state_a, state_b = a.initial_state(), b.initial_state()
    for seed in range(3):
        grid = random_grid(seed)
        *out_a, state_a = step(a, grid, state_a)
        *out_b, state_b = step(b, grid, state_b)
        for x, y in zip(jax.tree.leaves((out_a, state_a)), jax.tree.leaves((out_b, state_b)), strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_radius_is_defined_only_where_the_paper_chaining_and_sqrt_sum_are():
    assert AgentConfig(2, 5, 8, radius=1).radius == 1
    assert AgentConfig(2, 5, 8, radius=0, recurrent=False).radius == 0  # level 0 reads z only, as without one
    for options in ({"expert": "convglu"}, {"chaining": "pre_rl"}, {"aggregation": "mean"},
                    {"aggregation": "routed_sqrt_sum"}):
        with pytest.raises(ConfigError, match="agent.radius"):
            AgentConfig(2, 5, 8, radius=1, **options)
    assert AgentConfig(2, 5, 8, radius=2, expert="convglu").radius is None  # full: the standard ConvGLU agent
    for bad in (-1, 1.5, True, "full"):
        with pytest.raises(ConfigError, match="agent.radius"):
            AgentConfig(2, 5, 8, radius=bad)
