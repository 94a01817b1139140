"""The claims page's decisions on allocations (or an ablation's values) summarised over seeds, elementwise over
simulated draws: the depth decisions of both domains, an ablation's default against its best rival, and each as a
rule (a direction and a Welch t) that `calibration` tests against its own null.

The claims page and the sweep reports decide one draw, our runs (a table of configuration scores or losses); the
power analysis decides thousands of simulated or resampled draws at once through the same functions, so that the
power it reports is that of the page's own rule. An `Arms` holds one family's allocations: the mean and sample
variance of each over its seeds (a leading axis of draws, or none), their seed counts and depths. Higher is better:
a language model's arms hold its negated losses. The selection is the page's: the allocation with the best mean,
the first of equal ones (tables list a family's allocations shallowest first).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from parallel_experts.analysis import verdicts


@dataclass(frozen=True)
class Arms:
    mean: np.ndarray  # (..., k)
    variance: np.ndarray  # (..., k), ddof 1; NaN for one seed
    seeds: np.ndarray  # (k,)
    depth: np.ndarray  # (k,)

    @classmethod
    def of_scores(cls, scores: np.ndarray, depth) -> Arms:
        """Per-seed scores of shape (..., k, seeds), the same seeds for every allocation (one: no variance)."""
        seeds = scores.shape[-1]
        variance = scores.var(-1, ddof=1) if seeds > 1 else np.full(scores.shape[:-1], np.nan)
        return cls(scores.mean(-1), variance, np.full(scores.shape[-2], seeds), np.asarray(depth))

    @classmethod
    def of_table(cls, table: pd.DataFrame) -> Arms:
        """Rows of `sokoban_scores.configuration_scores`, in their order."""
        return cls(table["mean"].to_numpy(float), table["variance"].to_numpy(float), table["seeds"].to_numpy(int),
                   table["depth"].to_numpy(int))

    @classmethod
    def of_losses(cls, table: pd.DataFrame) -> Arms:
        """Rows of `lm_losses.run_table` with a validation loss, in their order, negated (higher is better)."""
        variance = [np.var(losses, ddof=1) if len(losses) > 1 else np.nan for losses in table["losses"]]
        return cls(-table["validation_loss"].to_numpy(float), np.asarray(variance, float),
                   table["seeds"].to_numpy(int), table["depth"].to_numpy(int))

    def best(self, where: np.ndarray | None = None) -> np.ndarray:
        """The index of the best mean (among `where`, broadcast against the means); -1 where none qualifies."""
        where = np.ones(self.mean.shape, bool) if where is None else np.broadcast_to(where, self.mean.shape)
        found = np.argmax(np.where(where, self.mean, -np.inf), axis=-1)
        return np.where(where.any(-1), found, -1)

    def at(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mean, variance, seeds) of the allocation `index` of each draw."""
        safe = np.maximum(index, 0)[..., None]
        pick = lambda values: np.take_along_axis(values, safe, -1)[..., 0]  # noqa: E731
        return pick(self.mean), pick(self.variance), self.seeds[np.maximum(index, 0)]


def welch_t(a: Arms, i: np.ndarray, b: Arms, j: np.ndarray, margin: float = 0.0) -> np.ndarray:
    """The Welch t of allocation i of `a`, `margin` added, against allocation j of `b` (what a rule reads: its p is
    the rule's own, `calibration`); NaN where either is missing (-1) or has one seed."""
    (mean_a, variance_a, seeds_a), (mean_b, variance_b, seeds_b) = a.at(i), b.at(j)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (mean_a + margin - mean_b) / np.sqrt(variance_a / seeds_a + variance_b / seeds_b)
    return np.where((i < 0) | (j < 0) | (seeds_a < 2) | (seeds_b < 2), np.nan, t)


def depth_test(arms: Arms, deeper: int, shallower: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The authors' depth test (Tables 1 and 7): the best allocation at exactly `deeper` against the best at exactly
    `shallower`, one-sided Welch. (index of the deeper, index of the shallower, p); an index is -1 where the depth
    has no allocation."""
    i, j = BestAgainst((deeper,), (shallower,)).picks(arms)
    p = verdicts.welch_from_summaries(*arms.at(i), *arms.at(j))[1]
    return i, j, np.where((i < 0) | (j < 0), np.nan, p)


@dataclass(frozen=True)
class FewerLayers:
    """`fewer_layers` of each draw."""

    recurrent: np.ndarray  # index of the best recurrent allocation
    nonrecurrent: np.ndarray  # of the best non-recurrent one
    direction: np.ndarray  # +1: the recurrent best is shallower (the paper), −1 deeper, 0 the same depth
    rival: np.ndarray  # the deeper family's best within the other's depth (-1: none)
    t: np.ndarray  # Welch t of the deeper family's best against `rival`; NaN: no test (its p: calibration's)


def fewer_layers(recurrent: Arms, nonrecurrent: Arms) -> FewerLayers:
    """Fig. 3's claim in one budget: the depth of each family's best allocation; the family whose best is deeper
    must be significantly better there than at its best within the other family's depth."""
    rec, non = recurrent.best(), nonrecurrent.best()
    rec_depth, non_depth = recurrent.depth[rec], nonrecurrent.depth[non]
    shallow = np.minimum(rec_depth, non_depth)[..., None]
    rec_rival, non_rival = recurrent.best(recurrent.depth <= shallow), nonrecurrent.best(nonrecurrent.depth <= shallow)
    deeper_is_recurrent = rec_depth > non_depth
    rival = np.where(deeper_is_recurrent, rec_rival, non_rival)
    t = np.where(deeper_is_recurrent, welch_t(recurrent, rec, recurrent, rec_rival),
                 welch_t(nonrecurrent, non, nonrecurrent, non_rival))
    direction = np.sign(non_depth - rec_depth).astype(int)
    same = direction == 0
    return FewerLayers(rec, non, direction, np.where(same, -1, rival), np.where(same, np.nan, t))


# ------------------------------------------------------------------------------------------------ the rules
# Each rule of the claims page as a statistic: the families' arms (recurrent: True) -> (direction, strength) per draw.
# The direction is the paper's (+1), the opposite (−1) or neither (0: the same depth); the strength is the Welch t of
# the two allocations the rule compares, after the rule has picked them, and NaN where there is no test (a side with
# one seed, or none). `calibration` turns it into a p-value against the rule's own null, so that picking the best of
# several noisy allocations is inside the test. Rules are frozen (hashable): a design's null is simulated once.


# Each rule also names its least favourable configurations of no effect for a direction (`least_favourable`, see
# calibration): where it picks the best of one side against the best of another, the side that must be better has
# every arm tied at the top and the other side one arm at the top, the rest sunk (calibration.Sunk).


def _family(shape, family: bool) -> tuple[np.ndarray, np.ndarray]:
    """(seeds, depth) of a family's arms in a design (calibration.Design)."""
    (seeds, depth), = [(np.array(n), np.array(d)) for f, n, d in shape if f == family]
    return seeds, depth


def _all_but_one(side: np.ndarray, seeds: np.ndarray) -> tuple[bool, ...] | None:
    """The arms of `side` to sink so that one is left at the top: all but the one with the fewest seeds (its Welch t
    the widest); None where the side has one arm or none."""
    if side.sum() < 2:
        return None
    keep = np.flatnonzero(side)[np.argmin(seeds[side])]
    return tuple(bool(x) for x in side & (np.arange(len(side)) != keep))


def _sinking(family: bool, side: np.ndarray, seeds: np.ndarray) -> list:
    sunk = _all_but_one(side, seeds)
    return [] if sunk is None else [((family, sunk),)]


def signed(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(direction, strength) of a Welch t whose sign is the paper's direction: its sign, 0 where there is no test."""
    t = np.asarray(t, float)
    return np.where(np.isnan(t), 0, np.sign(t)).astype(int), np.abs(t)


@dataclass(frozen=True)
class BestAgainst:
    """One family's best allocation at `depths` against its best at `rivals`: the authors' depth test of Tables 1 and
    7 (the best at L = 4 against the best at L = 2), and §5.1's "still improving" (the best at L = 16 against the
    best at L ≤ 8)."""

    depths: tuple[int, ...]
    rivals: tuple[int, ...]
    family: bool = True

    def picks(self, arms: Arms) -> tuple[np.ndarray, np.ndarray]:
        return arms.best(np.isin(arms.depth, self.depths)), arms.best(np.isin(arms.depth, self.rivals))

    def __call__(self, families: Mapping[bool, Arms]) -> tuple[np.ndarray, np.ndarray]:
        arms = families[self.family]
        i, j = self.picks(arms)
        return signed(welch_t(arms, i, arms, j))

    def least_favourable(self, shape, side: int) -> list:
        seeds, depth = _family(shape, self.family)
        return _sinking(self.family, np.isin(depth, self.rivals if side == 1 else self.depths), seeds)


@dataclass(frozen=True)
class FewerLayersRule:
    """Fig. 3: the recurrent family's best allocation shallower than the non-recurrent one's (`fewer_layers`), the
    deeper family's best against its best within the other family's depth."""

    def __call__(self, families: Mapping[bool, Arms]) -> tuple[np.ndarray, np.ndarray]:
        found = fewer_layers(families[True], families[False])
        return np.where(np.isnan(found.t), 0, found.direction), found.t

    def least_favourable(self, shape, side: int) -> list:
        """For each depth D the shallower family's best may take (that family's other depths sunk): the deeper
        family's arms beyond D tied at the top, and one of its arms at L ≤ D with them, the rest sunk."""
        shallower = side == 1  # +1: the recurrent family is the shallower one
        own = _family(shape, shallower)[1]
        seeds, depth = _family(shape, not shallower)
        found = []
        for at in np.unique(own):
            if (depth > at).any() and (depth <= at).any():
                within = _all_but_one(depth <= at, seeds) or tuple(False for _ in depth)
                found.append(((shallower, tuple(bool(d != at) for d in own)), (not shallower, within)))
        return found


def best_pair(recurrent: Arms, nonrecurrent: Arms, shallow: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The best recurrent allocation (at L ≤ `shallow` where given) and the best non-recurrent one."""
    return recurrent.best(None if shallow is None else recurrent.depth <= shallow), nonrecurrent.best()


@dataclass(frozen=True)
class RecurrenceBetter:
    """§5.1: the best recurrent allocation against the best non-recurrent one; with a `margin` (and `shallow`), Fig.
    5's "comparable or better": the best recurrent at L ≤ `shallow`, `margin` added, against the best non-recurrent
    one (a non-inferiority test: +1 within the margin or better, −1 worse by more than it)."""

    shallow: int | None = None
    margin: float = 0.0

    def __call__(self, families: Mapping[bool, Arms]) -> tuple[np.ndarray, np.ndarray]:
        i, j = best_pair(families[True], families[False], self.shallow)
        return signed(welch_t(families[True], i, families[False], j, self.margin))

    def least_favourable(self, shape, side: int) -> list:
        if side == 1:  # one non-recurrent allocation at the top
            seeds, _ = _family(shape, False)
            return _sinking(False, np.ones(len(seeds), bool), seeds)
        seeds, depth = _family(shape, True)
        return _sinking(True, depth <= (self.shallow or depth.max()), seeds)


@dataclass(frozen=True)
class AgainstRival:
    """An ablation's default value (arm `default`) against the best of the others (`others`, a mask over the arms),
    with a `margin` for "competitive" (non-inferiority) and none for "best"."""

    default: int
    others: tuple[bool, ...]
    margin: float = 0.0

    @classmethod
    def of(cls, is_default: np.ndarray, margin: float = 0.0) -> AgainstRival:
        """The first arm `is_default` marks against the best of the arms it does not."""
        return cls(int(np.flatnonzero(is_default)[0]), tuple(bool(x) for x in ~np.asarray(is_default)), margin)

    def rival(self, arms: Arms) -> np.ndarray:
        return arms.best(np.array(self.others))

    def __call__(self, families: Mapping[bool, Arms]) -> tuple[np.ndarray, np.ndarray]:
        (arms,) = families.values()
        rival = self.rival(arms)
        return signed(welch_t(arms, np.full(np.shape(rival), self.default), arms, rival, self.margin))

    def least_favourable(self, shape, side: int) -> list:
        """+1: one rival at the default's level, the others sunk; −1 (the default is one arm): every arm equal."""
        (family, seeds, _), = shape
        return _sinking(family, np.array(self.others), np.array(seeds)) if side == 1 else []


@dataclass(frozen=True)
class MoreExperts:
    """Fig. 6, one family: each (L, d) group's allocation at its largest E (arms `last`) against its smallest
    (`first`). The strongest Welch t over the groups decides, in its direction: a max-statistic over groups, so that
    many groups do not make a chance gain likely."""

    first: tuple[int, ...]
    last: tuple[int, ...]

    def groups(self, arms: Arms) -> np.ndarray:
        """Each group's Welch t of its largest E against its smallest, (..., groups); NaN for a side of one seed."""
        at = lambda index: np.full(arms.mean.shape[:-1], index)  # noqa: E731
        return np.stack([welch_t(arms, at(last), arms, at(first))
                         for first, last in zip(self.first, self.last)], -1)

    def __call__(self, families: Mapping[bool, Arms]) -> tuple[np.ndarray, np.ndarray]:
        (arms,) = families.values()
        t = self.groups(arms)
        tested = ~np.isnan(t)
        strongest = np.argmax(np.where(tested, np.abs(t), -1.0), -1)
        found = np.take_along_axis(t, strongest[..., None], -1)[..., 0]
        return signed(np.where(tested.any(-1), found, np.nan))

    def least_favourable(self, shape, side: int) -> list:
        return []  # each group compares two fixed arms: every arm equal is the hardest null


@dataclass(frozen=True)
class TimeRatio:
    """Tables 5 and 6: one row's time over the Transformer's, round by round: one arm whose "seeds" are the rounds and
    whose values are log time ratios (rows interleaved in a random order each round, so that the rounds are
    independent repeats). The one-sample t over rounds (paired by round), in the paper's direction: the row slower
    where `slower` (training, Table 6), quicker where not (decode, Table 5)."""

    slower: bool

    def __call__(self, families: Mapping[bool, Arms]) -> tuple[np.ndarray, np.ndarray]:
        (arms,) = families.values()
        rounds = arms.seeds[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = arms.mean[..., 0] / np.sqrt(arms.variance[..., 0] / rounds)
        return signed(t if self.slower else -t)

    def least_favourable(self, shape, side: int) -> list:
        return []  # nothing is picked


Rule = BestAgainst | FewerLayersRule | RecurrenceBetter | AgainstRival | MoreExperts | TimeRatio


def compares_families(rule: Rule) -> bool:
    """Whether the rule's null depends on the ratio of the two families' seed-to-seed SDs: where it sets one family's
    pick against the other's (RecurrenceBetter). FewerLayersRule picks each family's best by its own means and tests
    within one family, which neither family's scale changes; the other rules read one family."""
    return isinstance(rule, RecurrenceBetter)
