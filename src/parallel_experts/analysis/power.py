"""The power of the claims page's decisions: the probability that a design (which allocations of a budget, how many
seeds each) reaches the paper's verdict.

Each draw simulates every allocation's per-seed scores (normal, with the mean and seed-to-seed SD the inputs give)
and decides with the page's own rule (`depth_rules`, tested against its own null by `calibration`); power is the
share of draws that reach the paper's verdict, with its Monte Carlo standard error, and `no_effect` the chance of each
verdict when every allocation has the same mean (at a margin's boundary for "comparable"). Beside the simulation:

* the approximate closed form where the decision is one two-sample Welch test (two fixed allocations): the
  noncentral t with the Welch-Satterthwaite degrees of freedom of the true SDs (statsmodels' `ttest_power`), and
* a resampling of the authors' own seeds (a bootstrap over their per-seed returns) in place of the normal model,
  where every allocation has at least BOOTSTRAP_SEEDS of them.

Each part is tested at verdicts.ALPHA as the page tests it; a claim of several parts is supported only where every
part is (findings.combine), so a part's power bounds its claim's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from statsmodels.stats.power import ttest_power

from parallel_experts.analysis import calibration, depth_rules, verdicts
from parallel_experts.analysis.depth_rules import Arms
from parallel_experts.config.settings import PowerAssumptions

DRAWS = PowerAssumptions.draws  # per design, where the config gives no `power.draws`
BOOTSTRAP_SEEDS = 5  # the fewest observed seeds per allocation a bootstrap of them is shown for


@dataclass(frozen=True)
class Truth:
    """One family's allocations in one budget as the simulation assumes them."""

    allocation: tuple[str, ...]  # "L4 E1 d64"
    depth: np.ndarray
    mean: np.ndarray
    sd: np.ndarray  # seed to seed
    source: str  # where the means and SDs come from, in words
    per_seed: tuple[np.ndarray, ...] = ()  # the observed per-seed scores behind them, where there are any
    budget: tuple[str, ...] = ()  # each allocation's budget, where they are not all the decision's

    def take(self, keep: Sequence[int] | np.ndarray) -> Truth:
        keep = list(keep)
        pick = lambda values: tuple(values[i] for i in keep) if values else ()  # noqa: E731
        return replace(self, allocation=pick(self.allocation), depth=self.depth[keep], mean=self.mean[keep],
                       sd=self.sd[keep], per_seed=pick(self.per_seed), budget=pick(self.budget))

    def best_per_depth(self) -> list[int]:
        """The index of the allocation with the best true mean at each depth."""
        return [int(np.flatnonzero(self.depth == d)[np.argmax(self.mean[self.depth == d])])
                for d in np.unique(self.depth)]


@dataclass(frozen=True)
class Decision:
    """A decision of the claims page (or an authors' depth test) at one budget, and the truth it is simulated on."""

    claim: str  # the claims page's name (findings.DECISIONS), or DEPTH_TEST
    part: str  # e.g. "small budget" or "small budget, L=2 > L=1"
    budget: str
    rule: str  # the verdicts rule that decides it, in words
    truth: Mapping[bool, Truth]  # by family, recurrent: True
    statistic: depth_rules.Rule  # the rule, tested against its own null (calibration); its +1 is the paper's verdict
    domain: str = "sokoban"  # "lm"; "ablation" (a Sokoban ablation: `budget` is its setting, the arms its values);
    # "experts" (Fig. 6 over the Sokoban sweep's budgets: each arm's budget is in its truth)
    window: int | None = None  # FineWeb's training window
    # where the rule depends on the arms kept (Fig. 6's groups): the rule of a truth's allocations
    of_truth: Callable[[Mapping[bool, Truth]], depth_rules.Rule] | None = None

    @property
    def setting(self) -> str:
        return setting(self.budget, self.window)


def setting(budget: str, window: int | None = None) -> str:
    """The runs a decision reads, in words: a budget, and a window in FineWeb."""
    return budget if window is None else f"{budget}, W = {window}"


DEPTH_TEST = "depth_test"  # the authors' Welch depth tests of Tables 1 and 7


def depth_test(deeper: int, shallower: int) -> depth_rules.Rule:
    return depth_rules.BestAgainst((deeper,), (shallower,))


def seeds_text(seeds: Mapping[str, int | list]) -> str:
    """A design's seeds per allocation by family (as the analysis's JSON holds them) in words; a family whose
    allocations differ, as its counts, most first."""
    def counts(n) -> str:
        return "/".join(map(str, sorted(set(n), reverse=True))) if isinstance(n, list) else str(n)
    return ", ".join(f"{family_name} {counts(n)}" for family_name, n in seeds.items())


@dataclass(frozen=True)
class Estimate:
    power: float
    stderr: float  # Monte Carlo
    draws: int


def estimate(hits: np.ndarray) -> Estimate:
    power = float(np.mean(hits))
    return Estimate(power, float(np.sqrt(power * (1 - power) / hits.size)), int(hits.size))


Seeds = int | np.ndarray  # per allocation: one count for all, or each its own


def _arms(draw: Callable[[int, int], np.ndarray], seeds: np.ndarray, depth: np.ndarray) -> Arms:
    """Arms of allocations with seed counts of their own: `draw(i, n)` gives allocation i's (draws, n) scores."""
    columns = [draw(i, int(n)) for i, n in enumerate(seeds)]
    variance = [c.var(-1, ddof=1) if c.shape[-1] > 1 else np.full(c.shape[:-1], np.nan) for c in columns]
    return Arms(np.stack([c.mean(-1) for c in columns], -1), np.stack(variance, -1), np.asarray(seeds), depth)


def simulate(truth: Truth, seeds: Seeds, draws: int, rng: np.random.Generator) -> Arms:
    """`draws` studies of `seeds` seeds per allocation: normal scores around each allocation's mean."""
    if np.ndim(seeds):
        return _arms(lambda i, n: rng.normal(truth.mean[i], truth.sd[i], size=(draws, n)), np.asarray(seeds),
                     truth.depth)
    scores = rng.normal(truth.mean[:, None], truth.sd[:, None], size=(draws, len(truth.mean), seeds))
    return Arms.of_scores(scores, truth.depth)


def resample(per_seed: Sequence[np.ndarray], depth: np.ndarray, seeds: Seeds, draws: int,
             rng: np.random.Generator) -> Arms:
    """`draws` studies of `seeds` seeds per allocation, each seed drawn with replacement from that allocation's
    observed per-seed scores (a bootstrap of the authors' seeds)."""
    if np.ndim(seeds):
        return _arms(lambda i, n: rng.choice(np.asarray(per_seed[i], float), size=(draws, n)), np.asarray(seeds),
                     depth)
    scores = np.stack([rng.choice(np.asarray(values, float), size=(draws, seeds)) for values in per_seed], axis=1)
    return Arms.of_scores(scores, depth)


def family_sd(test: Decision) -> dict[bool, float]:
    """Each family's seed-to-seed SD, pooled over its allocations."""
    return {family: float(np.sqrt(np.mean(np.square(truth.sd)))) for family, truth in test.truth.items()}


def paper_verdict(test: Decision, arms: Mapping[bool, Arms]) -> np.ndarray:
    """Whether the page's rule reaches the paper's verdict (supported) on each draw."""
    return calibration.test(test.statistic, arms).verdict() == 1


def power(test: Decision, seeds: Mapping[bool, Seeds], draws: int = DRAWS, seed: int = 0) -> Estimate:
    """The share of `draws` simulated studies, `seeds[family]` seeds per allocation, in which the page reaches the
    paper's verdict."""
    rng = np.random.default_rng(seed)
    arms = {family: simulate(truth, seeds[family], draws, rng) for family, truth in test.truth.items()}
    return estimate(paper_verdict(test, arms))


def design(test: Decision, seeds: Mapping[bool, Seeds]) -> calibration.Design:
    """The shape of a design: each family's seeds and depth per allocation."""
    return tuple((family, tuple(int(n) for n in np.broadcast_to(seeds[family], len(truth.depth))),
                  tuple(int(d) for d in truth.depth)) for family, truth in test.truth.items())


def no_effect(test: Decision, seeds: Mapping[bool, Seeds], draws: int = DRAWS, seed: int = 0,
              per_allocation: bool = False) -> calibration.Rates:
    """The chance of each verdict of the page's rule at this design with no effect (at a margin's boundary), each
    family at its SD (`family_sd`), or with `per_allocation` each allocation at its own truth's SD (the authors'
    per-allocation SDs differ, which the page's null, simulated at one SD per family, does not know)."""
    pooled = family_sd(test)
    sd = {family: truth.sd if per_allocation else np.full(len(truth.sd), pooled[family])
          for family, truth in test.truth.items()}
    return calibration.no_effect(test.statistic, design(test, seeds), sd, draws=draws, seed=seed)


def bootstrap_power(test: Decision, seeds: Mapping[bool, Seeds], draws: int = DRAWS, seed: int = 0) -> Estimate | None:
    """`power`, with each family's seeds resampled from its observed per-seed scores instead of the normal model;
    None where a family has none, or an allocation fewer than BOOTSTRAP_SEEDS (from 3 seeds a ninth of resamples
    repeat one value, whose variance 0 makes any difference infinitely significant)."""
    observed = [len(values) for truth in test.truth.values() for values in truth.per_seed]
    if not observed or min(observed) < BOOTSTRAP_SEEDS or not all(t.per_seed for t in test.truth.values()):
        return None
    rng = np.random.default_rng(seed)
    arms = {family: resample(truth.per_seed, truth.depth, seeds[family], draws, rng)
            for family, truth in test.truth.items()}
    return estimate(paper_verdict(test, arms))


def welch_power(difference: float, sd_a: float, seeds_a: int, sd_b: float, seeds_b: int,
                alpha: float = verdicts.ALPHA) -> float:
    """Approximate closed-form power of the one-sided Welch test of H1: mean a > mean b when it is `difference`
    larger: the noncentral t of noncentrality difference / SE, on the Welch-Satterthwaite degrees of freedom of the
    true SDs (the test's own, estimated from the sample, run lower with few seeds: the approximation overstates the
    power at 3-5 seeds)."""
    a, b = sd_a**2 / seeds_a, sd_b**2 / seeds_b
    df = (a + b) ** 2 / (a**2 / (seeds_a - 1) + b**2 / (seeds_b - 1))
    return float(ttest_power(difference / np.sqrt(a + b), nobs=1, alpha=alpha, df=df, alternative="larger"))
