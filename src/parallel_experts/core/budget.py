"""Per-step compute budgets W ≈ L·E·C(d) and the allocations (depth L, experts E, width d) that spend them.

Each domain has a work proxy that counts the dominant multiply-adds of one external step (an environment
step for Sokoban, a token for the LM), with constants dropped. A budget is anchored at one allocation;
every other allocation of the budget must spend about the same work (within the budget's tolerance).
Measured FLOPs of the real step functions (XLA cost analysis, `benchmarking.flops_of`) complement the proxy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

import numpy as np

from parallel_experts.config.errors import ConfigError, key_path
from parallel_experts.core.definitions import FAMILIES, family_id

DOMAINS = ("sokoban", "lm")


@dataclass(frozen=True, order=True)
class Allocation:
    depth: int  # L: sequential levels within one step
    experts: int  # E: parallel experts per level
    width: int  # d: channels (Sokoban) or model width (LM) of each expert
    q_heads: int = 0  # LM only
    kv_heads: int = 0  # LM only

    def as_list(self) -> list[int]:
        tail = [self.q_heads, self.kv_heads] if self.q_heads else []
        return [self.depth, self.experts, self.width, *tail]

    def label(self) -> str:
        return f"L{self.depth} E{self.experts} d{self.width}"


class Allocated(Protocol):
    """What has an allocation: an `Allocation`, an agent or a model config."""

    @property
    def depth(self) -> int: ...

    @property
    def experts(self) -> int: ...

    @property
    def width(self) -> int: ...


def allocation_id(a: Allocated) -> str:
    """`L2-E4-d64`: the allocation of an `Allocation`, agent or model config, as run ids and folders name it."""
    return f"L{a.depth}-E{a.experts}-d{a.width}"


def sokoban_work(a: Allocation, encoder_channels: int = 32) -> float:
    """ConvLSTM expert: a 3×3 conv from z, s and h (C + 2d channels) to 4d gates; per-cell constants dropped."""
    return float(a.depth * a.experts * a.width * (encoder_channels + 2 * a.width))


def lm_block_cost(width: int, q_heads: int, kv_heads: int, window: int) -> float:
    """Per-token cost of one Transformer block (the authors' LM/nanogpt/train.py): projections and MLP
    ∝ (10 + 2K/H)·d², attention ∝ 2·T·d."""
    return (10 + 2 * kv_heads / q_heads) * width**2 + 2 * window * width


def lm_work(a: Allocation, window: int) -> float:
    return a.depth * a.experts * lm_block_cost(a.width, a.q_heads, a.kv_heads, window)


@dataclass(frozen=True)
class Proxy:
    """A domain's work proxy with what it reads besides the allocation: Sokoban's encoder channels (`sokoban_work`),
    the LM's attention windows (`lm_work`, one value per window), and the LM's head width, which gives an
    allocation [L, E, d] its heads."""

    domain: str
    encoder_channels: int = 0
    windows: tuple[int, ...] = ()
    head_dim: int = 0

    def work(self, a: Allocation) -> np.ndarray:
        """Work proxy of `a`: one value for Sokoban, one per attention window for the LM."""
        if self.domain == "sokoban":
            return np.array([sokoban_work(a, self.encoder_channels)])
        return np.array([lm_work(a, window) for window in self.windows])


@dataclass(frozen=True)
class Enumerated:
    """`<domain>.budgets.<name>.enumerate`: every (depth, width) pair, with the expert count nearest the anchor's
    work."""

    depths: tuple[int, ...]
    widths: tuple[int, ...]


@dataclass(frozen=True)
class BudgetSpec:
    """`<domain>.budgets.<name>` as the config gives it: an anchor, a tolerance, and its allocations listed or
    enumerated (`budgets` turns it into a `Budget`); the seeds of its runs where the budget gives them."""

    anchor: tuple[int, ...]
    tolerance: float
    allocations: tuple[tuple[int, ...], ...] | None = None
    enumerate: Enumerated | None = None
    family_allocations: Mapping[str, tuple[tuple[int, ...], ...]] = field(default_factory=dict)
    seeds: tuple[int, ...] | None = None
    seeds_at_once: int | None = None

    @classmethod
    def of(cls, spec: Mapping) -> BudgetSpec:
        """The spec of a schema-valid `<domain>.budgets.<name>` block."""
        def allocations(items: Sequence) -> tuple[tuple[int, ...], ...]:
            return tuple(tuple(item) for item in items)

        listed = spec.get("allocations")
        enumerated = spec.get("enumerate")
        seeds = spec.get("seeds")
        return cls(tuple(spec["anchor"]), spec["tolerance"], None if listed is None else allocations(listed),
                   None if enumerated is None else Enumerated(tuple(enumerated["depths"]), tuple(enumerated["widths"])),
                   MappingProxyType({family: allocations(items)
                                     for family, items in spec.get("family_allocations", {}).items()}),
                   None if seeds is None else tuple(seeds), spec.get("seeds_at_once"))


@dataclass(frozen=True)
class Budget:
    domain: str
    name: str
    anchor: Allocation
    tolerance: float
    allocations: tuple[Allocation, ...]  # both families train these
    # Allocations only one family trains (recurrent -> allocations), where the paper's grids differ by family.
    family_only: Mapping[bool, tuple[Allocation, ...]] = field(default_factory=dict)

    def allocations_of(self, recurrent: bool) -> tuple[Allocation, ...]:
        """The allocations the family trains: the budget's, then those only it trains."""
        return self.allocations + self.family_only.get(recurrent, ())


def budgets(specs: Mapping[str, BudgetSpec], proxy: Proxy) -> list[Budget]:
    """Every budget of a domain (`specs`: its `budgets` block, in the config's order), its allocations enumerated or
    validated against the domain's work `proxy`."""
    return [_budget(name, spec, proxy, f"{proxy.domain}.budgets.{name}") for name, spec in specs.items()]


def _budget(name: str, spec: BudgetSpec, proxy: Proxy, where: str) -> Budget:
    domain = proxy.domain
    anchor = _parse(spec.anchor, proxy, f"{where}.anchor")
    tolerance = spec.tolerance
    anchor_work = proxy.work(anchor)

    def ratio(a: Allocation) -> np.ndarray:
        return proxy.work(a) / anchor_work

    def listed(items: Sequence[Sequence[int]], at: str, taken: Sequence[Allocation] = ()) -> tuple[Allocation, ...]:
        """The allocations `items` of config key `at`, each within tolerance, none twice nor among `taken`."""
        found: list[Allocation] = []
        for index, item in enumerate(items):
            here = f"{at}[{index}] = {list(item)}"
            a = _parse(item, proxy, here)
            if np.abs(ratio(a) - 1).max() > tolerance + 1e-12:
                shown = "/".join(f"{r:.3g}" for r in ratio(a))
                raise ConfigError(
                    f"{here}: work {shown}× the anchor {list(spec.anchor)}, "
                    f"outside tolerance {tolerance} (raise {where}.tolerance or change the allocation)"
                )
            if a in found:
                raise ConfigError(f"{here}: listed twice")
            if a in taken:
                raise ConfigError(f"{here}: already in {where}.allocations, which both families train")
            found.append(a)
        return tuple(found)

    if spec.enumerate is not None:
        allocations = tuple(enumerate_allocations(
            lambda L, E, d: _parse([L, E, d], proxy, f"{where}.enumerate"),
            ratio, spec.enumerate.depths, spec.enumerate.widths, tolerance,
        ))
        if not allocations:
            raise ConfigError(f"{where}.enumerate: no allocation within tolerance {tolerance} of the anchor")
    else:
        allocations = listed(spec.allocations or (), f"{where}.allocations")
    if domain != "sokoban" and spec.seeds_at_once is not None:
        raise ConfigError(f"{where}.seeds_at_once: Sokoban only (an LM run trains one seed)")
    family_only = {}
    for family, items in spec.family_allocations.items():
        at = f"{where}.family_allocations.{family}"
        if domain != "sokoban":
            raise ConfigError(f"{at}: Sokoban only (an LM budget trains both families at every allocation)")
        family_only[next(r for r in FAMILIES if family_id(r) == family)] = listed(items, at, allocations)
    return Budget(domain, name, anchor, tolerance, allocations, family_only)


def enumerate_allocations(
    make: Callable[[int, int, int], Allocation],
    ratio: Callable[[Allocation], np.ndarray],
    depths: Sequence[int],
    widths: Sequence[int],
    tolerance: float,
) -> list[Allocation]:
    """For each (depth, width), the expert count whose work best matches the anchor; kept within tolerance."""
    found = []
    for depth in depths:
        for width in widths:
            per_expert = ratio(make(depth, 1, width)).mean()
            experts = max(1, math.floor(1 / per_expert + 0.5))  # halves round up, as the authors' grids do
            a = make(depth, experts, width)
            if np.abs(ratio(a) - 1).max() <= tolerance + 1e-12:
                found.append(a)
    return found


def _parse(item: Sequence[int], proxy: Proxy, where: str) -> Allocation:
    if proxy.domain == "sokoban":
        if len(item) != 3:
            raise ConfigError(f"{where}: expected [depth, experts, width], got {list(item)}")
        return Allocation(*item)
    if len(item) == 5:
        depth, experts, width, q_heads, kv_heads = item
    elif len(item) == 3:
        depth, experts, width = item
        head_dim = proxy.head_dim
        q_heads, rest = divmod(width, head_dim)
        if rest or q_heads % 2:
            raise ConfigError(
                f"{where}: width {width} does not split into an even number of heads of "
                f"{key_path([proxy.domain, 'head_dim'])} = {head_dim}; give [L, E, d, q_heads, kv_heads]"
            )
        kv_heads = q_heads // 2
    else:
        raise ConfigError(f"{where}: expected [L, E, d] or [L, E, d, q_heads, kv_heads], got {list(item)}")
    if width % q_heads or q_heads % kv_heads or (width // q_heads) % 2:
        raise ConfigError(
            f"{where}: need width divisible by q_heads, q_heads by kv_heads and an even head width "
            f"(RoPE), got d={width}, H={q_heads}, K={kv_heads}"
        )
    return Allocation(depth, experts, width, q_heads, kv_heads)

