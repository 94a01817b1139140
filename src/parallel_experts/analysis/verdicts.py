"""The rules that turn a difference into a verdict, in one place: every report and the claims page decide with these.

* Welch: a one-sided Welch t-test over seeds at ALPHA, uncorrected (the authors' protocol for their depth tests,
  Tables 1 and 7, and the sweep reports' words).
* Two standard errors: a difference beyond NOISE standard errors of the difference (the sweep reports' effect of
  recurrence, the ablation pages' orderings, the expert count); within them, no separation.
* The claims page decides each part with a rule of `depth_rules` tested against its own null (`calibration`): PICKS
  where the rule picks the best of several allocations, MARGIN where the paper says "comparable" or "competitive"
  (a non-inferiority test within the config's Margins), MAX_OVER_GROUPS where many
  (L, d) groups are asked one question, ROUNDS where Tables 5 and 6 time rows in random rounds, AGENTS where Fig. 4's
  probes are compared over probed agents. A part with no test (one seed, one agent, one timing round) is UNTESTED,
  never supported or contradicted.

Each rule has a name, which the claims page shows beside every verdict it decided.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from scipy import stats

from parallel_experts.config.settings import Margins

ALPHA = 0.05  # the significance level of every Welch test
NOISE = 2  # standard errors of a difference
NOISE_TEXT = "two standard errors"  # NOISE in words
# The default margins of "comparable" in FineWeb (nats), "competitive" in Sokoban (final-five return) and "catches up"
# in Fig. 4 (probe recall): the config's `claims.margins`, typed once (config.settings.Margins).
COMPARABLE, SOKOBAN_COMPARABLE, RECALL_COMPARABLE = Margins.lm, Margins.sokoban, Margins.recall


WELCH = f"one-sided Welch test over seeds, p < {ALPHA}"
TWO_STANDARD_ERRORS = f"difference beyond {NOISE_TEXT}"
BOOTSTRAP = "95 % bootstrap intervals over test levels"
NO_RULE = ""  # nothing ran, or nothing to test (agents at chance)
_OWN_NULL = f"p < {ALPHA} against the rule's own null at this design"
PICKS = f"one-sided Welch t over seeds of the allocations the rule picks, {_OWN_NULL} (the picking included)"
MARGIN = f"non-inferiority over seeds: Welch t with the margin added, {_OWN_NULL} at the margin"
MAX_OVER_GROUPS = f"the strongest Welch t over the (L, d) groups, {_OWN_NULL} (a max-statistic over groups)"
ROUNDS = (f"paired t over rounds of the log time ratio to the Transformer, the rows in a new random order each round, "
          f"{_OWN_NULL}")
_OVER_AGENTS = ("each agent's score a mean over the test levels every probed agent solves, so that the test resamples "
                "agents and carries each agent's level-to-level noise")
AGENTS = (f"one-sided Welch t over probed agents (one per training seed) of the deeper run against the shallower run, "
          f"{_OVER_AGENTS}; {_OWN_NULL}")
AGENTS_MARGIN = (f"non-inferiority over probed agents (one per training seed): Welch t of the shallower run, the "
                 f"margin added, against the deeper run, {_OVER_AGENTS}; {_OWN_NULL} at the margin")
UNTESTED = "no test at this design"


def not_decided(faults: Sequence[str]) -> str:
    """Why a verdict was left undecided: what in the results it reads is no evidence (analysis.scored_seeds.faults)."""
    return "not decided, a result is missing or not finite: " + "; ".join(faults)


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


def significant(p):
    """p < ALPHA; False for no test (None or NaN). Elementwise over an array of p-values."""
    if p is None:
        return False
    found = np.asarray(p, float) < ALPHA
    return bool(found) if found.ndim == 0 else found


def welch_text(p: float | None) -> str:
    return "no test (fewer than two seeds)" if p is None else f"one-sided Welch p = {p:.4f}"


def tested_text(t: float, p: float, statistic: str = "Welch t") -> str:
    """A rule's strength and its p-value against the rule's own null (calibration)."""
    return f"{statistic} = {t:.2f}, {f'p = {p:.4f}' if p >= 1e-4 else 'p < 0.0001'} against the rule's null"


def noise(*stderrs: float) -> float:
    """NOISE standard errors of a difference of independent means with these standard errors."""
    return NOISE * float(np.sqrt(np.sum(np.square(stderrs))))


def direction(gap, stderr):
    """Whether a difference `gap` with standard error `stderr` is beyond NOISE standard errors above zero (+1), below
    (−1), or neither (0; also where one seed gives no standard error, NaN). Elementwise over arrays."""
    with np.errstate(invalid="ignore"):
        found = np.where(gap > NOISE * stderr, 1, np.where(gap < -NOISE * stderr, -1, 0))
    return int(found) if found.ndim == 0 else found
