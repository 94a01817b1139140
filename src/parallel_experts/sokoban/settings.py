"""What defines a Sokoban run besides its seeds: the agent's architecture and the training settings, each a frozen
dataclass that checks itself. No JAX here, so that the workflow, the planner and the reports can build and read
runs without loading it; `agent` and `train` build and train what these describe.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from parallel_experts.config.errors import ConfigError
from parallel_experts.config.settings import read_only
from parallel_experts.core import budget
from parallel_experts.core.aggregation import AGGREGATIONS, full_radius
from parallel_experts.core.precision import DEFAULT as JAX_DEFAULT_PRECISION
from parallel_experts.core.precision import check as check_precision
from parallel_experts.results import paper

EXPERT_TYPES = ("convlstm", "convglu")
CHAININGS = ("paper", "pre_rl")


@dataclass(frozen=True)
class AgentConfig:
    depth: int  # L
    experts: int  # E
    width: int  # d
    expert: str = "convlstm"
    recurrent: bool = True
    chaining: str = "paper"
    aggregation: str = "sqrt_sum"
    radius: int | None = None  # communication radius on the ring of experts; None (or ≥ ⌊E/2⌋): full
    encoder_channels: int = 32
    head_hidden: int = 256
    num_actions: int = 4

    def __post_init__(self) -> None:
        for name in ("depth", "experts", "width", "encoder_channels", "head_hidden", "num_actions"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ConfigError(f"agent.{name}: expected a positive integer, got {value!r}")
            object.__setattr__(self, name, int(value))  # NumPy integers from tables become plain ints (hashing, JSON)
        if not isinstance(self.recurrent, (bool, np.bool_)):
            raise ConfigError(f"agent.recurrent: expected true or false, got {self.recurrent!r}")
        object.__setattr__(self, "recurrent", bool(self.recurrent))
        for name, allowed in (("expert", EXPERT_TYPES), ("chaining", CHAININGS), ("aggregation", AGGREGATIONS)):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"agent.{name}: expected one of {allowed}, got {getattr(self, name)!r}")
        if self.encoder_channels % 2:
            raise ConfigError(f"agent.encoder_channels: must be even (two tables of C/2), got {self.encoder_channels}")
        if self.chaining == "pre_rl" and (self.expert != "convlstm" or not self.recurrent):
            # PRE_RL/ has neither ConvGLU nor a non-recurrent mode; the combination would silently drop depth.
            raise ConfigError("agent.chaining: 'pre_rl' exists only for recurrent ConvLSTM experts")
        self._check_radius()

    def _check_radius(self) -> None:
        r = self.radius
        if r is None:
            return
        if isinstance(r, bool) or not isinstance(r, numbers.Integral) or r < 0:
            raise ConfigError(f"agent.radius: expected a non-negative integer or null (full), got {r!r}")
        if r >= full_radius(self.experts):  # reaches every expert: the standard agent, one config for both
            object.__setattr__(self, "radius", None)
            return
        object.__setattr__(self, "radius", int(r))
        if (self.expert, self.chaining, self.aggregation) != ("convlstm", "paper", "sqrt_sum"):
            # Our choice of radius is defined for ConvLSTM experts chained level by level with the sqrt-sum only.
            raise ConfigError(f"agent.radius: a radius below ⌊E/2⌋ = {full_radius(self.experts)} needs convlstm "
                              f"experts, chaining 'paper' and aggregation 'sqrt_sum', got {self.expert}, "
                              f"{self.chaining!r}, {self.aggregation!r}")


@dataclass(frozen=True)
class TrainConfig:
    """Everything that defines a training run except the agent's architecture; defaults are the paper's."""

    env_steps: int = 50_000_000
    num_envs: int = 32
    num_steps: int = 20
    learning_rate: float = 4e-4
    gamma: float = 0.97
    gae_lambda: float = 0.97
    entropy_coef: float = 0.01
    value_coef: float = 1.0
    logit_l2_coef: float = 1e-4
    max_grad_norm: float = 1.0
    adam_eps: float = 1e-6
    reward: str = "clipped"
    time_limit: int = 120
    view: int = 10  # the agent sees the top-left view×view cells (demo scale: the room without padding walls)
    log_interval: int = 200  # updates per log point and per compiled call
    episode_window: int = 400  # completed episodes averaged at each log point
    checkpoint_every: int = 10  # log points between checkpoints
    # Memory only (the gradients agree to float32 rounding, not bit for bit, so both define the run): `remat`
    # recomputes each rollout step's forward pass in the backward pass, which then keeps only the step's inputs;
    # `seeds_at_once` trains the seeds in groups of that many, one group after another (None: all together).
    remat: bool = False
    seeds_at_once: int | None = None
    # How float32 matmuls and convolutions compute on the device, in this run's every job (core/precision.py; the CLI
    # sets it): on a GPU it changes the numbers, so it defines the run; on the CPU it changes nothing.
    matmul_precision: str = JAX_DEFAULT_PRECISION

    def __post_init__(self) -> None:
        if not isinstance(self.remat, (bool, np.bool_)):
            raise ConfigError(f"sokoban.training.remat: expected true or false, got {self.remat!r}")
        check_precision(self.matmul_precision, "sokoban.training.matmul_precision")
        group = self.seeds_at_once
        if group is not None and (isinstance(group, bool) or not isinstance(group, numbers.Integral) or group < 1):
            raise ConfigError(f"seeds_at_once: expected a positive integer or null (all seeds), got {group!r}")
        updates = self.num_updates
        if updates < self.log_interval:
            raise ConfigError(
                f"sokoban.env_steps {self.env_steps} is {updates} update{'s' * (updates != 1)} of "
                f"sokoban.training.num_envs × num_steps = {self.num_envs} × {self.num_steps} env steps, fewer than "
                f"sokoban.training.log_interval {self.log_interval}: not one log point would be written; give "
                f"env_steps >= {self.log_interval * self.num_envs * self.num_steps} or a smaller log_interval")

    @property
    def num_updates(self) -> int:
        return self.env_steps // (self.num_envs * self.num_steps)


# The planning probes (Bush et al.'s, as the paper's Fig. 4 and App. H use them): what they predict, from what.
CLASSES = ("none", "up", "right", "down", "left")  # class c > 0 is Jumanji action c - 1
TARGETS = ("agent_onto", "box_pushed")  # C_A, C_B
REPRESENTATIONS = ("state", "encoder", "control")


@dataclass(frozen=True)
class ProbeConfig:
    """How probes are trained and scored; the defaults are EP's probes and the paper's threshold (App. F): 93 %
    precision over the predictions of the first 20 steps."""

    kernel: int = 1  # 1×1 convolution; 3 for EP's 3×3 variant
    seeds: int = 5
    epochs: int = 10
    batch: int = 16
    learning_rate: float = 1e-3
    weight_decay: float = 1e-3
    precision: float = paper.PROBES["precision"].value
    calibration_steps: int = paper.PROBES["calibration_steps"].value  # the threshold reads the steps t < this
    bootstrap: int = 1000  # resamples of the scored test levels
    interval: float = 0.95


# ------------------------------------------------------------------------------------------------ the config's section
# `sokoban` (and the top-level `seeds`, which are Sokoban's) as typed values, read once from a schema-valid config
# (`SokobanSettings.of`). Each class is one block of the schema and its fields are the block's keys
# (tests/test_settings.py compares them); what a block leaves out is None, or the default of the class that reads it.
# The level sources stay read-only mappings: a tagged union (a Boxoban split or generated levels) that the workflow
# hands to the levels job verbatim, as JSON.


def _seeds(given: Sequence[int] | None) -> tuple[int, ...] | None:
    return None if given is None else tuple(given)


@dataclass(frozen=True)
class Sweep:
    """`sokoban.sweeps.<name>`: the expert, the families trained, at which budgets, with which seeds (one list, or by
    family a list or a list per budget; None: the budget's), and the agent settings it gives (None: AgentConfig's)."""

    expert: str
    recurrent: tuple[bool, ...]
    budgets: tuple[str, ...]
    seeds: tuple[int, ...] | Mapping[str, tuple[int, ...] | Mapping[str, tuple[int, ...]]] | None = None
    chaining: str | None = None
    aggregation: str | None = None

    @classmethod
    def of(cls, spec: Mapping) -> Sweep:
        given = spec.get("seeds")
        seeds = _seeds(given) if not isinstance(given, Mapping) else MappingProxyType({
            family: MappingProxyType({name: tuple(s) for name, s in listed.items()})
            if isinstance(listed, Mapping) else tuple(listed) for family, listed in given.items()})
        return cls(spec["expert"], tuple(spec["recurrent"]), tuple(spec["budgets"]), seeds, spec.get("chaining"),
                   spec.get("aggregation"))


@dataclass(frozen=True)
class ExpertCount:
    """`sokoban.expert_count`: every depth × width × expert count of one expert, for the families listed."""

    expert: str
    recurrent: tuple[bool, ...]
    depths: tuple[int, ...]
    widths: tuple[int, ...]
    experts: tuple[int, ...]
    chaining: str | None = None
    aggregation: str | None = None

    @classmethod
    def of(cls, spec: Mapping) -> ExpertCount:
        return cls(spec["expert"], tuple(spec["recurrent"]), tuple(spec["depths"]), tuple(spec["widths"]),
                   tuple(spec["experts"]), spec.get("chaining"), spec.get("aggregation"))


def agent_options(sweep: Sweep | ExpertCount) -> dict[str, Any]:
    """The agent settings a sweep gives, as AgentConfig's keywords (what it leaves out takes AgentConfig's)."""
    return {key: value for key, value in (("chaining", sweep.chaining), ("aggregation", sweep.aggregation))
            if value is not None}


@dataclass(frozen=True)
class Ablation:
    """`sokoban.ablations.<setting>`: one allocation [L, E, d] of one budget, trained once per value of the setting,
    with these seeds (None: the budget's)."""

    budget: str
    allocation: tuple[int, ...]
    values: tuple
    seeds: tuple[int, ...] | None = None

    @classmethod
    def of(cls, spec: Mapping) -> Ablation:
        return cls(spec["budget"], tuple(spec["allocation"]), tuple(spec["values"]), _seeds(spec.get("seeds")))


@dataclass(frozen=True)
class Picture:
    """`sokoban.probes.picture`: Fig. 13's probed run, test level and first steps."""

    run: str
    level: int = 0
    steps: int = 3


@dataclass(frozen=True)
class Probes:
    """`sokoban.probes`: the probed runs, the levels each split plays, Fig. 4's pair and Fig. 13's picture, the
    probed seeds (None: each run's first) and the probes' fit."""

    runs: tuple[str, ...]
    episodes: int
    calibration: int
    compare: tuple[str, ...] = ()
    seeds: tuple[int, ...] | None = None
    picture: Picture | None = None
    fit: ProbeConfig = ProbeConfig()

    @classmethod
    def of(cls, spec: Mapping) -> Probes:
        picture = spec.get("picture")
        return cls(tuple(spec["runs"]), spec["episodes"], spec["calibration"], tuple(spec.get("compare", ())),
                   _seeds(spec.get("seeds")), None if picture is None else Picture(**picture),
                   ProbeConfig(**spec.get("fit", {})))


@dataclass(frozen=True)
class SokobanSettings:
    """`sokoban`, with the top-level `seeds` (every Sokoban budget's, unless it gives its own)."""

    env_steps: int
    encoder_channels: int
    levels: Mapping[str, Mapping]  # `train`, `test` and, for the probes, `valid`: level sources
    budgets: Mapping[str, budget.BudgetSpec]
    seeds: tuple[int, ...]
    # where a Boxoban split is read (`root`, `download`, `cache`)
    boxoban: Mapping = field(default_factory=lambda: MappingProxyType({}))
    # the TrainConfig keys the config gives (`train`: the settings they make)
    training: Mapping = field(default_factory=lambda: MappingProxyType({}))
    sweeps: Mapping[str, Sweep] = field(default_factory=lambda: MappingProxyType({}))
    expert_count: ExpertCount | None = None
    ablations: Mapping[str, Ablation] = field(default_factory=lambda: MappingProxyType({}))
    probes: Probes | None = None

    @classmethod
    def of(cls, config: Mapping) -> SokobanSettings:
        """The Sokoban settings of a schema-valid config."""
        section = config["sokoban"]
        expert_count = section.get("expert_count")
        probes = section.get("probes")
        return cls(section["env_steps"], section["encoder_channels"], read_only(section["levels"]),
                   MappingProxyType({name: budget.BudgetSpec.of(spec) for name, spec in section["budgets"].items()}),
                   tuple(config["seeds"]), read_only(section.get("boxoban", {})),
                   read_only(section.get("training", {})),
                   MappingProxyType({name: Sweep.of(spec) for name, spec in section.get("sweeps", {}).items()}),
                   None if expert_count is None else ExpertCount.of(expert_count),
                   MappingProxyType({name: Ablation.of(spec) for name, spec in section.get("ablations", {}).items()}),
                   None if probes is None else Probes.of(probes))

    @property
    def train(self) -> TrainConfig:
        """The training settings of every Sokoban run (a budget may train its seeds in groups: seeds_at_once)."""
        return TrainConfig(env_steps=self.env_steps, **self.training)

    @property
    def proxy(self) -> budget.Proxy:
        return budget.Proxy("sokoban", encoder_channels=self.encoder_channels)

