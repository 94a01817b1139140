"""The claims page's decisions on allocations (or an ablation's values) summarised over seeds, elementwise over
simulated draws: the depth decisions of both domains, and an ablation's default against its best rival.

The claims page and the sweep reports decide one draw, our runs (a table of configuration scores or losses); the
power analysis decides thousands of simulated or resampled draws at once through the same functions, so that the
power it reports is that of the page's own rule. An `Arms` holds one family's allocations: the mean and sample
variance of each over its seeds (a leading axis of draws, or none), their seed counts and depths. Higher is better:
a language model's arms hold its negated losses. The selection is the page's: the allocation with the best mean,
the first of equal ones (tables list a family's allocations shallowest first).
"""

from __future__ import annotations

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


def welch_between(a: Arms, i: np.ndarray, b: Arms, j: np.ndarray) -> np.ndarray:
    """One-sided Welch p of H1: allocation i of `a` better than allocation j of `b`; NaN where either is missing
    (-1) or has one seed."""
    p = verdicts.welch_from_summaries(*a.at(i), *b.at(j))[1]
    return np.where((i < 0) | (j < 0), np.nan, p)


def depth_test(arms: Arms, deeper: int, shallower: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The authors' depth test (Tables 1 and 7): the best allocation at exactly `deeper` against the best at exactly
    `shallower`, one-sided Welch. (index of the deeper, index of the shallower, p); an index is -1 where the depth
    has no allocation."""
    i, j = (arms.best(arms.depth == depth) for depth in (deeper, shallower))
    return i, j, welch_between(arms, i, arms, j)


@dataclass(frozen=True)
class FewerLayers:
    """`fewer_layers` of each draw."""

    recurrent: np.ndarray  # index of the best recurrent allocation
    nonrecurrent: np.ndarray  # of the best non-recurrent one
    direction: np.ndarray  # +1: the recurrent best is shallower (the paper), −1 deeper, 0 the same depth
    rival: np.ndarray  # the deeper family's best within the other's depth (-1: none)
    p: np.ndarray  # one-sided Welch of the deeper family's best against `rival`; NaN: no test

    @property
    def supported(self) -> np.ndarray:
        return (self.direction == 1) & verdicts.significant(self.p)


def fewer_layers(recurrent: Arms, nonrecurrent: Arms) -> FewerLayers:
    """Fig. 3's claim in one budget: the depth of each family's best allocation; the family whose best is deeper
    must be significantly better there than at its best within the other family's depth."""
    rec, non = recurrent.best(), nonrecurrent.best()
    rec_depth, non_depth = recurrent.depth[rec], nonrecurrent.depth[non]
    shallow = np.minimum(rec_depth, non_depth)[..., None]
    rec_rival, non_rival = recurrent.best(recurrent.depth <= shallow), nonrecurrent.best(nonrecurrent.depth <= shallow)
    deeper_is_recurrent = rec_depth > non_depth
    rival = np.where(deeper_is_recurrent, rec_rival, non_rival)
    p = np.where(deeper_is_recurrent, welch_between(recurrent, rec, recurrent, rec_rival),
                 welch_between(nonrecurrent, non, nonrecurrent, non_rival))
    direction = np.sign(non_depth - rec_depth).astype(int)
    return FewerLayers(rec, non, direction, np.where(direction == 0, -1, rival), np.where(direction == 0, np.nan, p))


def recurrence_better(recurrent: Arms, nonrecurrent: Arms) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The best recurrent allocation against the best non-recurrent one: (difference of means, its standard error,
    verdicts.direction of the two)."""
    (rec, rec_var, rec_n), (non, non_var, non_n) = recurrent.at(recurrent.best()), nonrecurrent.at(nonrecurrent.best())
    gap, stderr = rec - non, np.sqrt(rec_var / rec_n + non_var / non_n)
    return gap, stderr, verdicts.direction(gap, stderr)


def comparable_shallow(recurrent: Arms, nonrecurrent: Arms, shallow: int = 2
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Fig. 5's claim on language-model arms (negated losses): the best recurrent allocation at L ≤ `shallow` against
    the best non-recurrent one, comparable or better within verdicts.COMPARABLE nats, tested over seeds where both have
    several, by the single-run rule where not. (index of each, verdicts direction, p; NaN where no test)."""
    i, j = recurrent.best(recurrent.depth <= shallow), nonrecurrent.best()
    (ours, ours_var, ours_n), (rival, rival_var, rival_n) = recurrent.at(i), nonrecurrent.at(j)
    tested, p = verdicts.comparable_from_summaries(-ours, ours_var, ours_n, -rival, rival_var, rival_n)
    one_run = (ours_n < 2) | (rival_n < 2)
    return i, j, np.where(one_run, verdicts.comparable(rival - ours), tested), np.where(one_run, np.nan, p)


def against_rival(arms: Arms, default: int, others: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An ablation's default value (arm `default`) against the best of the `others` (a mask over the arms): (index
    of that rival, difference of means, the one-sided Welch p on the side the difference lies; NaN for one seed)."""
    rival = arms.best(others)
    mine = np.full(np.shape(rival), default)
    gap = arms.at(mine)[0] - arms.at(rival)[0]
    p = np.where(gap >= 0, welch_between(arms, mine, arms, rival), welch_between(arms, rival, arms, mine))
    return rival, gap, p
