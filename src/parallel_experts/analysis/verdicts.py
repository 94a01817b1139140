"""The rules that turn a difference into a verdict, in one place: every report and the claims page decide with these.

* Welch: a one-sided Welch t-test over seeds at ALPHA, uncorrected (the authors' protocol for their depth tests,
  Tables 1 and 7, and the sweep reports' words).
* Two standard errors: a difference beyond NOISE standard errors of the difference (the sweep reports' effect of
  recurrence, the ablation pages' orderings, the expert count); within them, no separation.
* The claims page decides each part with a rule of `depth_rules` tested against its own null (`calibration`): PICKS
  where the rule picks the best of several allocations, MARGIN where the paper says "comparable" or "competitive"
  (a non-inferiority test: COMPARABLE nats in FineWeb, SOKOBAN_COMPARABLE in Sokoban), MAX_OVER_GROUPS where many
  (L, d) groups are asked one question. A part with no test (one seed, one agent, one timing block) is UNTESTED,
  never supported or contradicted.

Each rule has a name, which the claims page shows beside every verdict it decided.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from scipy import stats

from parallel_experts.results import paper

ALPHA = 0.05  # the significance level of every Welch test
NOISE = 2  # standard errors of a difference
NOISE_TEXT = "two standard errors"  # NOISE in words
COMPARABLE = paper.KV_SHARING_COST  # nats between single language-model runs
# Sokoban's "competitive" margin, in final-five return: about one seed's SD of the authors' returns (Table 7's SDs are
# 0.1-0.3 per allocation; config/paper.yaml's power assumptions take 0.2 for the same reason). A rule within it is as
# good as the paper could tell apart with its three seeds per ablation value.
SOKOBAN_COMPARABLE = 0.2

WELCH = f"one-sided Welch test over seeds, p < {ALPHA}"
TWO_STANDARD_ERRORS = f"difference beyond {NOISE_TEXT}"
ONE_RUN = f"one run each: comparable within {COMPARABLE} nats, contradicted beyond {2 * COMPARABLE}"
COMPARABLE_SEEDS = f"one-sided Welch test over seeds against a margin of {COMPARABLE} nats, p < {ALPHA}"
BOOTSTRAP = "95 % bootstrap intervals over test levels"
NO_RULE = ""  # nothing ran, or nothing to test (agents at chance)
_OWN_NULL = f"p < {ALPHA} against the rule's own null at this design"
PICKS = f"one-sided Welch t over seeds of the allocations the rule picks, {_OWN_NULL} (the picking included)"
MARGIN = f"non-inferiority over seeds: Welch t with the margin added, {_OWN_NULL} at the margin"
MAX_OVER_GROUPS = f"the strongest Welch t over the (L, d) groups, {_OWN_NULL} (a max-statistic over groups)"
UNTESTED = "no test at this design"


def welch(a: Iterable[float], b: Iterable[float]) -> tuple[float, float] | None:
    """(t, p) of the one-sided Welch test of H1: mean(a) > mean(b); None where either side has fewer than two
    values."""
    a, b = np.asarray(list(a), float), np.asarray(list(b), float)
    if min(len(a), len(b)) < 2:
        return None
    t, p = welch_from_summaries(a.mean(), a.var(ddof=1), len(a), b.mean(), b.var(ddof=1), len(b))
    return float(t), float(p)


def welch_from_summaries(mean_a, variance_a, seeds_a, mean_b, variance_b, seeds_b) -> tuple[np.ndarray, np.ndarray]:
    """(t, p) of the one-sided Welch test of H1: mean a > mean b from each side's mean, sample variance and count,
    elementwise over arrays (a leading axis of simulated draws: the power analysis decides with this too). NaN where a
    side has fewer than two values."""
    with np.errstate(divide="ignore", invalid="ignore"):
        test = stats.ttest_ind_from_stats(mean_a, np.sqrt(variance_a), seeds_a, mean_b, np.sqrt(variance_b), seeds_b,
                                          equal_var=False, alternative="greater")
    few = (np.asarray(seeds_a) < 2) | (np.asarray(seeds_b) < 2)
    return np.where(few, np.nan, test.statistic), np.where(few, np.nan, test.pvalue)


def welch_greater(a: Iterable[float], b: Iterable[float]) -> float | None:
    """The one-sided Welch p-value of H1: mean(a) > mean(b); None where either side has fewer than two values."""
    found = welch(a, b)
    return None if found is None else found[1]


def welch_toward(a: Iterable[float], b: Iterable[float], a_greater: bool) -> float | None:
    """The one-sided Welch p-value on the side a difference lies: H1 mean(a) > mean(b) where `a_greater`, else
    H1 mean(b) > mean(a); None where either side has fewer than two values."""
    return welch_greater(a, b) if a_greater else welch_greater(b, a)


def significant(p):
    """p < ALPHA; False for no test (None or NaN). Elementwise over an array of p-values."""
    if p is None:
        return False
    found = np.asarray(p, float) < ALPHA
    return bool(found) if found.ndim == 0 else found


def welch_text(p: float | None) -> str:
    return "no test (fewer than two seeds)" if p is None else f"one-sided Welch p = {p:.4f}"


def tested_text(t: float, p: float) -> str:
    """A rule's strength and its p-value against the rule's own null (calibration)."""
    return f"Welch t = {t:.2f}, {f'p = {p:.4f}' if p >= 1e-4 else 'p < 0.0001'} against the rule's null"


def noise(*stderrs: float) -> float:
    """NOISE standard errors of a difference of independent means with these standard errors."""
    return NOISE * float(np.sqrt(np.sum(np.square(stderrs))))


def direction(gap, stderr):
    """Whether a difference `gap` with standard error `stderr` is beyond NOISE standard errors above zero (+1), below
    (−1), or neither (0; also where one seed gives no standard error, NaN). Elementwise over arrays."""
    with np.errstate(invalid="ignore"):
        found = np.where(gap > NOISE * stderr, 1, np.where(gap < -NOISE * stderr, -1, 0))
    return int(found) if found.ndim == 0 else found


def comparable(worse_by):
    """A single-run comparison where the paper says "comparable or better": `worse_by` nats above the rival. +1:
    comparable or better; −1: worse by more than twice COMPARABLE; 0: in between. Elementwise over arrays."""
    found = np.where(worse_by <= COMPARABLE, 1, np.where(worse_by > 2 * COMPARABLE, -1, 0))
    return int(found) if found.ndim == 0 else found


def comparable_from_summaries(ours_mean, ours_variance, ours_seeds, rival_mean, rival_variance, rival_seeds
                              ) -> tuple[np.ndarray, np.ndarray]:
    """`comparable_over_seeds` from each side's mean loss, sample variance and count, elementwise over arrays:
    (direction, p); p NaN and direction 0 where a side has fewer than two values."""
    margin = np.asarray(rival_mean) + COMPARABLE
    within = np.asarray(ours_mean) <= margin
    toward = welch_from_summaries(margin, rival_variance, rival_seeds, ours_mean, ours_variance, ours_seeds)[1]
    away = welch_from_summaries(ours_mean, ours_variance, ours_seeds, margin, rival_variance, rival_seeds)[1]
    p = np.where(within, toward, away)
    return np.where(significant(p), np.where(within, 1, -1), 0), p


def comparable_over_seeds(ours: Iterable[float], rival: Iterable[float]) -> tuple[int, float] | None:
    """The paper's "comparable or better" over seeds, for losses (lower is better): +1 where `ours` is significantly
    less than COMPARABLE nats above `rival` (one-sided Welch of the rival's losses plus COMPARABLE against ours),
    −1 where it is significantly more, 0 where neither; with the p-value of the side the means lie on. None where
    either side has fewer than two values (then `comparable` decides)."""
    ours, rival = np.asarray(list(ours), float), np.asarray(list(rival), float)
    if min(len(ours), len(rival)) < 2:
        return None
    direction, p = comparable_from_summaries(ours.mean(), ours.var(ddof=1), len(ours),
                                             rival.mean(), rival.var(ddof=1), len(rival))
    return int(direction), float(p)
