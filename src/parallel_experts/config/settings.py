"""The study-wide parts of a validated config as typed, immutable values: the scheduler's resources, the planner's
and the power analysis's stated assumptions, the claims' margins.

Each class is one block of the schema, named in its docstring; its fields are that block's keys, and each default
is the one config/README.md states (tests/test_settings.py compares the three key by key). `of` reads the block from
a config the schema has validated, so it checks nothing again. The domains' settings are their runs'
(`sokoban.experiment`, `lm.experiment`), and `parallel_experts.study.Study` holds all of them, built once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

# The families of rules that a config gives resources and a plan assumption (planning.resources.FAMILY says which
# rule is in which); `default` serves every rule whose family the config does not name.
FAMILIES = ("default", "train", "lm_train", "bench")


def read_only(block: Mapping) -> Mapping:
    """A read-only copy of a config block of mappings, lists and scalars, at every depth (its lists as tuples): what
    a typed setting keeps of a block that stays a mapping (a tagged union, a block another module fills in)."""
    return MappingProxyType({key: read_only(value) if isinstance(value, Mapping)
                             else tuple(value) if isinstance(value, list) else value for key, value in block.items()})


# ------------------------------------------------------------------------------------------------ resources


@dataclass(frozen=True)
class Resource:
    """What one job of a family of rules asks the scheduler for (`resources.<family>`)."""

    cpus: int
    mem_mb: int
    runtime: int  # minutes
    gpus: int
    resubmissions: int = 0  # times a failed job is submitted again (the resumable rules only)

    @property
    def devices(self) -> int:
        """The GPUs of a job, or its CPUs where it has no GPU: what its device-hours count."""
        return self.gpus or self.cpus

    @classmethod
    def of(cls, spec: Mapping) -> Resource:
        return cls(**spec)


@dataclass(frozen=True)
class Resources:
    """`resources`: each named family's, and the default for every other."""

    default: Resource
    families: Mapping[str, Resource]  # the families the config names, `default` included

    def of_family(self, name: str) -> Resource:
        return self.families.get(name, self.default)

    @property
    def any_gpu(self) -> bool:
        return any(spec.gpus for spec in self.families.values())

    @classmethod
    def of(cls, config: Mapping) -> Resources:
        families = {name: Resource.of(spec) for name, spec in config["resources"].items()}
        return cls(families["default"], read_only(families))


# ------------------------------------------------------------------------------------------------ plan


@dataclass(frozen=True)
class Serial:
    """`plan.<family>.serial`: the latency of the level-steps an LM update runs in turn (planning/lm_time.py)."""

    step_ms: float
    per_sequence_us: float


@dataclass(frozen=True)
class AssumedDevice:
    """`plan.<family>`: the device a family's jobs are priced on, its peak, and the fraction of it they reach (one
    number, or one per model family: `recurrent`, `non-recurrent`, `default`)."""

    device: str
    peak_tflops: float
    efficiency: float | Mapping[str, float]
    memory_gb: float | None = None
    serial: Serial | None = None

    @classmethod
    def of(cls, spec: Mapping) -> AssumedDevice:
        efficiency = spec["efficiency"]
        serial = spec.get("serial")
        return cls(spec["device"], spec["peak_tflops"],
                   read_only(efficiency) if isinstance(efficiency, Mapping) else efficiency, spec.get("memory_gb"),
                   Serial(**serial) if serial is not None else None)


@dataclass(frozen=True)
class PlanAssumptions:
    """`plan`: the assumption of each family the config names (none: the planner can price only timed jobs)."""

    families: Mapping[str, AssumedDevice] = field(default_factory=lambda: read_only({}))

    def where(self, family: str) -> str | None:
        """The key a job of resources family `family` is priced by: its own, else `default`; None where neither."""
        return family if family in self.families else "default" if "default" in self.families else None

    @classmethod
    def of(cls, config: Mapping) -> PlanAssumptions:
        return cls(read_only({name: AssumedDevice.of(spec) for name, spec in config.get("plan", {}).items()}))


# ------------------------------------------------------------------------------------------------ power


@dataclass(frozen=True)
class FamilyAssumption:
    """`power.<domain>.<family>`: a family's scores over depth where the authors published no per-seed scores."""

    best_depth: int | Literal["deepest"]
    depth_gain: float
    sd: float
    reason: str
    below_recurrent: float | None = None  # the non-recurrent family's: its best below the recurrent best


@dataclass(frozen=True)
class AblationAssumption:
    """`power.sokoban.ablations.<setting>`: the default value's lead over every other value, at one seed spread."""

    lead: float
    sd: float
    reason: str


@dataclass(frozen=True)
class DomainPower:
    """`power.<domain>`: each family's assumption, and (Sokoban) each ablation's, where the config gives them."""

    recurrent: FamilyAssumption | None = None
    nonrecurrent: FamilyAssumption | None = None
    ablations: Mapping[str, AblationAssumption] = field(default_factory=lambda: read_only({}))

    def family(self, recurrent: bool) -> FamilyAssumption | None:
        return self.recurrent if recurrent else self.nonrecurrent

    @classmethod
    def of(cls, spec: Mapping) -> DomainPower:
        def family(name: str) -> FamilyAssumption | None:
            return FamilyAssumption(**spec[name]) if name in spec else None

        return cls(family("recurrent"), family("nonrecurrent"),
                   read_only({name: AblationAssumption(**value) for name, value in spec.get("ablations", {}).items()}))


@dataclass(frozen=True)
class PowerAssumptions:
    """`power`: the simulated studies per design and each domain's assumptions."""

    draws: int = 10_000  # per design: a Monte Carlo standard error of at most 0.004 at a power of 0.8
    sokoban: DomainPower = DomainPower()
    lm: DomainPower = DomainPower()

    @classmethod
    def of(cls, config: Mapping) -> PowerAssumptions:
        power = config.get("power", {})
        return cls(power.get("draws", cls.draws), DomainPower.of(power.get("sokoban", {})),
                   DomainPower.of(power.get("lm", {})))


# ------------------------------------------------------------------------------------------------ claims


@dataclass(frozen=True)
class Margins:
    """`claims.margins`: the non-inferiority margins of the claims "comparable", "competitive" and "catches up";
    the schema's entries give each default's reason."""

    sokoban: float = 0.2  # final-five return: about one seed's SD of the authors' returns (Table 7)
    lm: float = 0.02  # nats: the paper's cost of one KV cache per level (App. A.3; results.paper.KV_SHARING_COST)
    recall: float = 0.05  # probe recall: assumed, a smallest difference of interest

    @classmethod
    def of(cls, config: Mapping) -> Margins:
        return cls(**config.get("claims", {}).get("margins", {}))
