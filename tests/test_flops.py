"""FLOP counts of the domains' programs: the fit from twelve small counts (core.flops) against XLA's count of the
whole model, which the planner and the allocations report read."""

import jax
import jax.numpy as jnp
import pytest
from helpers import REPO

from parallel_experts.config import files
from parallel_experts.core.benchmarking import counted_flops, flops_of
from parallel_experts.core.budget import Allocation
from parallel_experts.lm import flops as lm_flops
from parallel_experts.lm import models
from parallel_experts.lm.settings import ModelConfig
from parallel_experts.results import grids
from parallel_experts.sokoban import flops as sokoban_flops
from parallel_experts.sokoban.agent import agent_step_flops
from parallel_experts.sokoban.settings import AgentConfig
from parallel_experts.study import Study


@pytest.mark.parametrize("agent", [AgentConfig(4, 52, 64), AgentConfig(3, 5, 40, expert="convglu", recurrent=False),
                                   AgentConfig(2, 3, 20, aggregation="routed_mean", encoder_channels=16)])


def test_a_fitted_sokoban_count_is_xlas_count_of_the_whole_agent(agent):
    assert sokoban_flops.forward(agent, 10, fit=True) == pytest.approx(agent_step_flops(agent, 10, 10), rel=1e-5)


@pytest.mark.parametrize("model, window", [
    (ModelConfig(16, 1, 768, 8, 4, recurrent=False), 128),
    (ModelConfig(3, 5, 480, 10, 5, vocab=4096, recurrent=True), 64),
    (ModelConfig(2, 3, 64, 4, 2, vocab=4096, recurrent=True, aggregation="routed_sqrt_sum", kv_cache="expert",
                 dtype="float32"), 32)])


def test_a_fitted_lm_count_is_xlas_count_of_the_whole_model(model, window):
    assert lm_flops.forward(model, window, fit=True) == pytest.approx(models.token_flops(model, window), rel=1e-5)


def test_the_allocations_report_counts_the_demo_agent_on_its_own_view_with_its_own_channels():
    """The demo trains on a 6×6 view with a 16-channel encoder. One more expert at one level adds a 3×3 conv from
    (16 + 2d) channels to 4d gates: 2·9·4 = 72 FLOPs per position and unit of the proxy d·(16 + 2d), at all 36
    positions (the patch matmul multiplies the zero padding too), plus the expert's gate norm and cell update."""
    demo = files.load([REPO / "config/config.yaml"])
    channels, view = demo["sokoban"]["encoder_channels"], demo["sokoban"]["training"]["view"]
    assert (channels, view) == (16, 6)
    counted = sokoban_flops.allocation_flops(Study.of(demo).sokoban.settings)
    d = 8
    one, two = counted(Allocation(1, 1, d)), counted(Allocation(1, 2, d))
    by_hand = 72 * view * view * d * (channels + 2 * d)
    assert 1.0 <= (two - one) / by_hand < 1.1
    assert two == agent_step_flops(AgentConfig(1, 2, d, encoder_channels=16), 6, 6)  # not the 10×10 default
    assert agent_step_flops(AgentConfig(1, 2, d, encoder_channels=16), 10, 10) > 2 * two
    sokoban = Study.of(demo).sokoban
    grid = grids.allocation_dataset(sokoban.budgets, sokoban.settings.proxy, counted,
                                    sokoban_flops.flops_per(sokoban.settings))
    assert grid.attrs["work_proxy"].startswith("L·E·d·(16 + 2d) per environment step")
    assert "on the 6×6 view" in grid["measured_flops"].attrs["long_name"]


def test_the_allocations_sokoban_flops_are_the_recurrent_agents_on_the_trained_view():
    smoke = files.load([REPO / "config/smoke.yaml"])
    a = Study.of(smoke).sokoban.budgets[0].anchor
    channels, view = smoke["sokoban"]["encoder_channels"], smoke["sokoban"]["training"].get("view", 10)
    assert sokoban_flops.allocation_flops(Study.of(smoke).sokoban.settings)(a) == agent_step_flops(
        AgentConfig(a.depth, a.experts, a.width, encoder_channels=channels), view, view)


def test_the_allocations_lm_flops_have_one_value_per_window_and_family():
    smoke = files.load([REPO / "config/smoke.yaml"])
    [anchor] = [b.anchor for b in Study.of(smoke).lm.budgets][:1]
    flops = lm_flops.allocation_flops(Study.of(smoke).lm.settings)(anchor)
    assert flops.shape == (len(smoke["lm"]["windows"]), 2) and (flops > 0).all()
    assert (flops[:, 1] > flops[:, 0]).all()  # the recurrent token also mixes [z; s] and attends to its cache


def test_a_count_lowers_for_the_cpu_and_a_missing_analysis_is_named():
    """counted_flops places its inputs on the CPU (on a GPU node, JAX 0.11.2's GPU lowering has no cost analysis,
    which made the planner's counts fail there): the count of a 64 × 64 matmul is 2 · 64³ whatever the inputs are."""
    a = jnp.ones((64, 64), jnp.float32)
    assert counted_flops(lambda x, y: x @ y, a, jax.ShapeDtypeStruct((64, 64), jnp.float32)) == 2 * 64 ** 3

    class NoAnalysis:
        def cost_analysis(self):
            return None

    with pytest.raises(RuntimeError, match="no cost analysis"):
        flops_of(NoAnalysis())
