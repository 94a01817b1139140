"""Every rule of the claims page as a test that holds α at the design it decides on: its p-value against its own
null, and the chance of each verdict when nothing differs, both by simulation through the rule itself.

A rule (depth_rules) picks allocations from noisy means (the best at a depth, the best rival) and returns a direction
and a strength, the Welch t of what it picked. Picking the best of several makes that t larger than a t chosen in
advance (the winner's curse), so its p-value is not Student's: it is the share of simulated studies with no effect
(every allocation the same expected score) of the same design (seeds and depth of every allocation) in which the
rule points the same way at least as strongly. A max-statistic null (Westfall and Young) by parametric simulation:
the strengths are Welch t statistics, so with equal seed-to-seed SDs that null depends on neither the SD nor the
common mean, and one simulation serves every study of a design. A rule with a margin ("comparable") is tested at its
boundary, worse by exactly the margin, which is the same null once the margin is added back.

"No effect" is not one configuration where a rule picks on both sides. For "the best at L = 4 beats the best at
L = 2" the null is "the best at L = 4 is no better than the best at L = 2", and it is hardest to hold where every
L = 4 allocation ties with the best L = 2 one and the other L = 2 allocations are far below: the L = 4 side then
enjoys the winner's curse and the L = 2 side does not (0.22 "supported" at α = 0.05 with 9 seeds, where every
allocation equal gives 0.05). Each rule names these least favourable configurations for each direction
(`least_favourable`: arms sunk far below the rest), and a p-value is the largest over them and the all-equal one.

A rule that sets one family's pick against the other's (`depth_rules.compares_families`) has a null that depends on
one nuisance: the ratio of the two families' seed-to-seed SDs (the noisier family's best enjoys the larger winner's
curse). Its p-value is Berger and Boos's (1994): the largest of the nulls over a 1 − GAMMA confidence interval of the
ratio (the families' pooled variances, an F interval), plus GAMMA, which holds α whatever the ratio. The nulls are
simulated on a grid of ratios (RATIO_STEP) and the interval widened to the grid, which only makes p larger.

`no_effect` gives the chance of each verdict with no effect at given SDs (the observed ones on the claims page, the
assumed ones in the power analysis) through the same p-values: within α whether the SDs are equal or not.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

import numpy as np
from scipy import stats

from parallel_experts.analysis import verdicts
from parallel_experts.analysis.depth_rules import Arms, Rule, compares_families

NULL_DRAWS = 50_000  # simulated null studies per design: p-values to about ± 0.001 at 0.05
SEED = 2609  # the null's simulator seed: the same design gets the same p-values on every machine
# A design: per family (recurrent: True), the seeds and the depth of each of its allocations.
Design = tuple[tuple[bool, tuple[int, ...], tuple[int, ...]], ...]
# A configuration of no effect: per family, the arms sunk far below the others (never picked); the rest are equal.
Sunk = tuple[tuple[bool, tuple[bool, ...]], ...]
SUNK = -1e6  # a sunk arm's mean, in seed SDs
GAMMA = 0.001  # the chance the SD ratio's confidence interval misses it, added to a p that maximises over it
HELD_WITHIN = 3  # Monte Carlo standard errors above alpha that a simulated no-effect rate may be and hold it
RATIO_STEP = 2**0.5  # the grid of non-recurrent over recurrent SD ratios the nulls are simulated at
RATIO_STEPS = 8  # ... from RATIO_STEP**-8 to RATIO_STEP**8 (1/16 to 16): beyond, the other family is as good as
# exact (its SE under a sixteenth of the one's), and the null hardly moves


def pooled_sd(arms: Arms) -> np.ndarray:
    """A family's seed-to-seed SD pooled over its allocations (one allocation's own SD from two or three seeds is too
    noisy to say whether the SDs differ within a family), per study; NaN where no allocation has two seeds."""
    df = _df(arms)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt(np.nansum(arms.variance * df, -1) / df.sum())


def _df(arms: Arms) -> np.ndarray:
    return np.where(arms.seeds > 1, arms.seeds - 1, 0)


def ratio_steps(families: Mapping[bool, Arms]) -> tuple[np.ndarray, np.ndarray]:
    """Per study, the grid steps (ratio RATIO_STEP**k) that cover a 1 − GAMMA confidence interval of the
    non-recurrent over the recurrent seed-to-seed SD: the pooled variances' ratio over the F quantiles of their
    degrees of freedom, widened outwards to the grid and clipped to ± RATIO_STEPS; (0, 0) where a family has no
    variance (no test)."""
    recurrent, nonrecurrent = families[True], families[False]
    df = (_df(nonrecurrent).sum(), _df(recurrent).sum())
    shape = np.shape(recurrent.mean)[:-1]
    if not min(df):
        return np.zeros(shape, int), np.zeros(shape, int)
    in_steps = 2 * np.log(RATIO_STEP)  # a variance ratio's log over this is its SD ratio's in grid steps
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = np.log(pooled_sd(nonrecurrent) ** 2 / pooled_sd(recurrent) ** 2) / in_steps
    low = np.floor(observed - np.log(stats.f.ppf(1 - GAMMA / 2, *df)) / in_steps)
    high = np.ceil(observed - np.log(stats.f.ppf(GAMMA / 2, *df)) / in_steps)
    return tuple(np.clip(np.nan_to_num(k, nan=0.0), -RATIO_STEPS, RATIO_STEPS).astype(int) for k in (low, high))


def design(families: Mapping[bool, Arms]) -> Design:
    return tuple((family, tuple(int(n) for n in arms.seeds), tuple(int(d) for d in arms.depth))
                 for family, arms in families.items())


def at_boundary(rule: Rule) -> Rule:
    """The rule with its margin taken out: its null at the margin's boundary is the margin-free rule's with no
    effect."""
    return replace(rule, margin=0.0) if "margin" in {f.name for f in fields(rule)} else rule


def simulate(shape: Design, sd: Mapping[bool, np.ndarray] | None, draws: int, rng: np.random.Generator
             ) -> dict[bool, Arms]:
    """`draws` studies of the design with no effect: every allocation's seeds normal around 0, with SD `sd[family]`
    per allocation (1 where None). Drawn as what a rule reads of n normal seeds, their mean (normal, SD s/√n) and
    sample variance (s² χ²(n − 1)/(n − 1), independent of the mean), not seed by seed."""
    found = {}
    for family, seeds, depth in shape:
        scale = np.ones(len(seeds)) if sd is None else np.asarray(sd[family], float)
        n = np.array(seeds)
        mean = rng.normal(0.0, scale / np.sqrt(n), size=(draws, len(n)))
        variance = scale**2 * rng.chisquare(np.maximum(n - 1, 1), size=(draws, len(n))) / np.maximum(n - 1, 1)
        found[family] = Arms(mean, np.where(n > 1, variance, np.nan), n, np.array(depth))
    return found


def sink(families: Mapping[bool, Arms], sunk: Sunk) -> dict[bool, Arms]:
    """The same studies with the arms `sunk` marks moved far below the rest (never picked): one set of draws serves
    every configuration of no effect."""
    sunk = dict(sunk)
    return {family: replace(arms, mean=arms.mean + np.where(sunk[family], SUNK, 0.0)) if family in sunk else arms
            for family, arms in families.items()}


def configurations(rule: Rule, shape: Design, side: int) -> list[Sunk]:
    """The configurations of no effect a verdict in direction `side` is tested at: every arm equal, and the rule's
    least favourable ones for that direction."""
    return [(), *rule.least_favourable(shape, side)]


@functools.lru_cache(maxsize=4)  # a design's configurations are asked one after another; each is NULL_DRAWS × arms
def _null_studies(shape: Design) -> dict[bool, Arms]:
    return simulate(shape, None, NULL_DRAWS, np.random.default_rng(SEED))


def scaled(families: Mapping[bool, Arms], step: int) -> dict[bool, Arms]:
    """The same studies with the non-recurrent family's SD RATIO_STEP**step times the recurrent one's (the draws
    are shared, so that p moves smoothly along the grid)."""
    ratio = RATIO_STEP**step
    return {family: arms if family or not step else replace(arms, mean=arms.mean * ratio,
                                                            variance=arms.variance * ratio**2)
            for family, arms in families.items()}


@functools.lru_cache(maxsize=1024)
def _null(rule: Rule, shape: Design, sunk: Sunk = (), step: int = 0) -> dict[int, np.ndarray]:
    """The strengths in each direction of a margin-free rule over NULL_DRAWS studies of the design with no effect
    (the arms `sunk` far below the rest; the SD ratio at grid `step`), sorted."""
    direction, strength = rule(sink(scaled(_null_studies(shape), step), sunk))
    return {side: np.sort(strength[direction == side]) for side in (1, -1)}


def _p_at(rule: Rule, shape: Design, direction: np.ndarray, strength: np.ndarray, step: int) -> np.ndarray:
    """The share of null studies at SD ratio `step` pointing the same way at least as strongly ((count + 1) /
    (draws + 1), so never 0), the largest over the configurations of no effect for that direction."""
    count = np.zeros(direction.shape)
    for side in (1, -1):
        here = direction == side
        if not here.any():
            continue
        for sunk in configurations(rule, shape, side):
            values = _null(rule, shape, sunk, step)[side]
            count[here] = np.maximum(count[here], len(values) - np.searchsorted(values, strength[here], side="left"))
    return (count + 1) / (NULL_DRAWS + 1)


def p_value(rule: Rule, shape: Design, direction: np.ndarray, strength: np.ndarray,
            steps: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """The rule's p against its own null (`_p_at`); NaN where there is no direction or no test. A rule and its
    margin-free form share one null (`at_boundary`). Where the rule compares the families, `steps` (`ratio_steps`
    of the studies) bounds their SD ratio: p is the largest over those steps, plus GAMMA (Berger and Boos)."""
    rule = at_boundary(rule)
    direction, strength = np.asarray(direction), np.asarray(strength, float)
    if steps is None:
        p = _p_at(rule, shape, direction, strength, 0)
    else:
        low, high = (np.broadcast_to(bound, direction.shape) for bound in steps)
        p = np.zeros(direction.shape)
        for step in range(int(low.min()), int(high.max()) + 1):
            inside = (low <= step) & (step <= high)
            if inside.any():
                p[inside] = np.maximum(p[inside], _p_at(rule, shape, direction[inside], strength[inside], step))
        p = np.minimum(p + GAMMA, 1.0)
    untested = (direction == 0) | np.isnan(strength)
    return np.where(untested, np.nan, p)


@dataclass(frozen=True)
class Tested:
    direction: np.ndarray  # +1 the paper's, −1 the opposite, 0 neither
    strength: np.ndarray  # the Welch t of what the rule picked; NaN: no test
    p: np.ndarray  # against the rule's own null; NaN: no test

    def verdict(self, level: float = verdicts.ALPHA) -> np.ndarray:
        """+1 or −1 where the direction is significant at `level`, else 0."""
        return np.where(self.p < level, self.direction, 0)

    @property
    def untested(self) -> np.ndarray:
        """No test: a side of one seed, or nothing to compare."""
        return np.isnan(self.strength)


def test(rule: Rule, families: Mapping[bool, Arms]) -> Tested:
    """The rule on `families` (one study, or a leading axis of draws), with p-values against its own null."""
    direction, strength = rule(families)
    steps = ratio_steps(families) if compares_families(rule) else None
    return Tested(direction, strength, p_value(rule, design(families), direction, strength, steps))


@dataclass(frozen=True)
class Rates:
    """The chance of each verdict with no effect, each with its Monte Carlo standard error."""

    supported: float
    contradicted: float
    draws: int

    def of(self, side: int) -> float:
        return self.supported if side == 1 else self.contradicted

    def stderr(self, side: int) -> float:
        """The Monte Carlo standard error of a rate: its own draws', and the null's, whose p-values decide each draw
        (a threshold at alpha estimated from NULL_DRAWS studies)."""
        rate = self.of(side)
        own = max(rate * (1 - rate), 1 / self.draws) / self.draws
        return float(np.sqrt(own + verdicts.ALPHA * (1 - verdicts.ALPHA) / NULL_DRAWS))

    def holds(self, side: int) -> bool:
        """Whether the rule says this verdict no more often than alpha with no effect (plus HELD_WITHIN Monte Carlo
        standard errors): a verdict of a rule that does not is no verdict."""
        return self.of(side) <= verdicts.ALPHA + HELD_WITHIN * self.stderr(side)

    @property
    def holds_alpha(self) -> bool:
        """Both verdicts held (`holds`): the rule is a test at alpha at this design (the power analysis chooses no
        design whose rule is not)."""
        return self.holds(1) and self.holds(-1)

    def as_dict(self) -> dict:
        return {"supported": self.supported, "contradicted": self.contradicted, "stderr": self.stderr(1)}


def no_effect(rule: Rule, shape: Design, sd: Mapping[bool, np.ndarray] | None = None, level: float = verdicts.ALPHA,
              draws: int = 10_000, seed: int = 1) -> Rates:
    """The chance that the rule says each verdict at `level` in studies of the design with no effect (at a margin's
    boundary), each allocation with its SD `sd[family]` (1 where None, or where an SD is unknown): for each verdict,
    the largest over the configurations of no effect it is tested at (`configurations`)."""
    if sd is not None:
        sd = {family: np.where(np.isfinite(s) & (np.asarray(s) > 0), s, 1.0) for family, s in sd.items()}
    rule, rates = at_boundary(rule), {}
    studies = simulate(shape, sd, draws, np.random.default_rng(seed))
    for side in (1, -1):
        for sunk in configurations(rule, shape, side):
            verdict = test(rule, sink(studies, sunk)).verdict(level)
            rates[side] = max(rates.get(side, 0.0), float(np.mean(verdict == side)))
    return Rates(rates[1], rates[-1], draws)
