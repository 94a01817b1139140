"""The statistics the claims and probe pages rest on, against independent facts: statsmodels' Welch test with a
margin (values computed with statsmodels 0.14), and the closed-form coverage of a percentile bootstrap of a mean."""

import numpy as np
import pytest
from scipy import stats

from parallel_experts.analysis import calibration, depth_rules, probes, verdicts
from parallel_experts.sokoban.probe_scores import bootstrap_ratio

RIVAL = [3.490, 3.502, 3.481, 3.497]  # per-seed validation losses


@pytest.mark.parametrize("ours, direction, p", [
    # statsmodels.stats.weightstats.ttest_ind(ours, RIVAL, alternative="smaller", usevar="unequal", value=0.02)
    ([3.495, 3.489, 3.501, 3.492, 3.497], 1, 0.010983326461979505),
    # ... alternative="larger", value=0.02: 0.05 nats worse, significantly more than the margin
    ([3.540, 3.552, 3.531, 3.547], -1, 0.00173928295513169),
    # ... alternative="smaller": within noise of the margin
    ([3.512, 3.498, 3.505, 3.521, 3.509], 1, 0.28796170624660133),
])
def test_the_margin_rule_is_statsmodels_welch_test_against_the_margin(ours, direction, p):
    """One allocation each, nothing picked: the rule's strength is Welch's t against the margin. Its null depends on
    the two SDs' ratio only through Welch's degrees of freedom, which run from the pooled n1 + n2 - 2 (the ratio
    where statsmodels' estimate puts them) down to the smaller side's n - 1 (one side's SD far the larger): its
    p-value, the largest over the ratio's interval plus GAMMA (Berger and Boos), lies between statsmodels' p and
    Student's t on n - 1 degrees of freedom plus GAMMA, within its Monte Carlo error."""
    assert verdicts.COMPARABLE == 0.02
    rule = depth_rules.RecurrenceBetter(shallow=2, margin=verdicts.COMPARABLE)
    arms = {True: depth_rules.Arms.of_scores(-np.array([ours]), [2]),
            False: depth_rules.Arms.of_scores(-np.array([RIVAL]), [4])}
    found = calibration.test(rule, arms)
    t = stats.ttest_ind(-np.array(ours) + verdicts.COMPARABLE, -np.array(RIVAL), equal_var=False).statistic
    assert int(found.direction) == direction and float(found.strength) == pytest.approx(abs(t), rel=1e-9)
    heaviest = stats.t.sf(abs(t), min(len(ours), len(RIVAL)) - 1) + calibration.GAMMA
    error = 4 * np.sqrt(heaviest * (1 - heaviest) / calibration.NULL_DRAWS)
    assert p - error <= float(found.p) <= heaviest + error, (float(found.p), p, heaviest)


@pytest.mark.parametrize("levels", [5, 10, 30])
def test_the_probe_bootstrap_covers_as_the_closed_form_says(levels):
    """With one probe seed and equal denominators, bootstrap_ratio is the percentile bootstrap of a mean over
    levels. For normal data its 95 % interval is the mean ± 1.96 plug-in standard errors (dividing by n), which
    covers iff |t_{n-1}| ≤ 1.96 √((n − 1)/n): 0.846 over 5 levels, 0.904 over 10, 0.936 over 30."""
    sims = 3000  # independent data sets, laid along the steps axis
    truth = 10.0
    data = np.random.default_rng(levels).normal(truth, 1, (1, levels, sims))
    _, low, high = bootstrap_ratio(data, np.ones_like(data), draws=2000, seed=levels)
    covered = np.mean((low <= truth) & (truth <= high))
    z = stats.norm.ppf(0.975)
    closed = 2 * stats.t.cdf(z * np.sqrt((levels - 1) / levels), levels - 1) - 1
    assert probes.coverage(levels) == pytest.approx(closed)  # what the probe pages say of a small level set
    assert abs(covered - closed) < 3 * np.sqrt(closed * (1 - closed) / sims) + 0.005  # + the bootstrap's own noise


@pytest.mark.parametrize("seeds", [3, 5, 9])
def test_with_equal_seeds_and_nothing_picked_the_rules_null_is_students_t(seeds):
    """One allocation at each depth, the same seeds: Welch's t is then Student's pooled t, whose null is exactly
    t on 2n - 2 degrees of freedom at equal SDs, so the rule's simulated p-value is scipy's within its Monte Carlo
    error (calibration.NULL_DRAWS null studies)."""
    rule = depth_rules.BestAgainst((2,), (1,))
    for t in (0.5, 1.0, 2.0, 3.0):
        p = float(calibration.p_value(rule, ((True, (seeds, seeds), (2, 1)),), np.array(1), np.array(t)))
        exact = stats.t.sf(t, 2 * seeds - 2)
        assert abs(p - exact) < 4 * np.sqrt(exact * (1 - exact) / calibration.NULL_DRAWS) + 1e-4, (t, p, exact)


def test_picking_the_best_of_three_moves_the_null_as_the_maximum_of_normals_says():
    """The best of three allocations at L = 4 against the one at L = 2, with many seeds (Welch's t is then normal):
    t ≈ (max(Z1, Z2, Z3) - Z0) / √2, so P(t > c) = ∫ (1 - Φ(c√2 + z)³) φ(z) dz, the closed form of the winner's curse.
    The rule's p-value at that form's 5 % point (c = 2.06) is 0.05, where a test chosen in advance puts it at 1.645."""
    from scipy import integrate, optimize

    def tail(c):
        return integrate.quad(lambda z: (1 - stats.norm.cdf(c * np.sqrt(2) + z) ** 3) * stats.norm.pdf(z), -10, 10)[0]

    c = optimize.brentq(lambda c: tail(c) - 0.05, 0.5, 4.0)
    rule = depth_rules.BestAgainst((4,), (2,))
    p = float(calibration.p_value(rule, ((True, (400,) * 4, (4, 4, 4, 2)),), np.array(1), np.array(c)))
    assert c > 2.0 and abs(p - 0.05) < 4 * np.sqrt(0.05 * 0.95 / calibration.NULL_DRAWS) + 0.002, (c, p)
    # Three at L = 2 as well: the least favourable null sinks two of them, which is the same closed form.
    p = float(calibration.p_value(rule, ((True, (400,) * 6, (4, 4, 4, 2, 2, 2)),), np.array(1), np.array(c)))
    assert abs(p - 0.05) < 4 * np.sqrt(0.05 * 0.95 / calibration.NULL_DRAWS) + 0.002, p


@pytest.mark.parametrize("seeds", [3, 9])
def test_with_picking_on_both_sides_ties_at_the_top_hold_alpha(seeds):
    """The paper's small ConvLSTM grid (14 allocations, three each at L = 2 and L = 4): where every L = 4 allocation
    ties with the best L = 2 one and the other L = 2 ones are far below, the best at L = 4 enjoys the winner's curse
    and the best at L = 2 does not. Tested against the null where every allocation is equal, the rule said
    "supported" 0.19-0.22 of the time there with no effect; against the largest p over its configurations of no
    effect, no more than alpha, while any configuration in between stays below alpha too."""
    depth = np.array([1, 1, 1, 1, 2, 2, 2, 3, 3, 4, 4, 4, 8, 8])
    shape = ((True, (seeds,) * len(depth), tuple(depth)),)
    rule = depth_rules.BestAgainst((4,), (2,))
    draws = 20_000
    bound = verdicts.ALPHA + 3 * np.sqrt(verdicts.ALPHA * (1 - verdicts.ALPHA) / draws) + 0.003  # + the null's error
    for below in (50.0, 0.5, 0.0):  # the other L = 2 allocations this many seed SDs under the best one
        centre = np.where(depth == 2, -below, 0.0)
        centre[4] = 0.0
        arms = calibration.simulate(shape, None, draws, np.random.default_rng(11))[True]
        arms = depth_rules.Arms(arms.mean + centre, arms.variance, arms.seeds, arms.depth)
        supported = float(np.mean(calibration.test(rule, {True: arms}).verdict() == 1))
        assert supported <= bound, (below, supported)
    assert calibration.no_effect(rule, shape).supported == pytest.approx(verdicts.ALPHA, abs=0.015)


@pytest.mark.parametrize("at", [1, 2])
def test_fewer_layers_holds_alpha_where_the_deeper_family_has_no_use_for_its_depth(at):
    """Fig. 3's rule, two allocations per depth in each family, 3 seeds: the recurrent family's best at L = `at` (its
    other depths far below), the non-recurrent family's allocations deeper than that tied with one of its own at
    L ≤ `at` (the others far below), so that depth buys it nothing. The rule's chance of "supported" stays within
    alpha (against the all-equal null alone: 0.24 at L = 1, 0.19 at L = 2)."""
    rec_depth, non_depth = np.array([1, 1, 2, 2, 4, 4]), np.array([1, 1, 2, 2, 4, 4, 8, 8])
    shape = ((True, (3,) * 6, tuple(rec_depth)), (False, (3,) * 8, tuple(non_depth)))
    centre = {True: np.where(rec_depth == at, 0.0, -50.0), False: np.where(non_depth <= at, -50.0, 0.0)}
    centre[False][0] = 0.0
    draws = 10_000
    studies = calibration.simulate(shape, None, draws, np.random.default_rng(5))
    studies = {f: depth_rules.Arms(a.mean + centre[f], a.variance, a.seeds, a.depth) for f, a in studies.items()}
    supported = float(np.mean(calibration.test(depth_rules.FewerLayersRule(), studies).verdict() == 1))
    assert supported <= verdicts.ALPHA + 3 * np.sqrt(verdicts.ALPHA * (1 - verdicts.ALPHA) / draws) + 0.003, supported


def _recurrence_better_shape(seeds):
    depth = (1, 1, 2, 2, 4, 4)
    return ((True, (seeds,) * len(depth), depth), (False, (seeds,) * len(depth), depth))


@pytest.mark.parametrize("ratio", [0.25, 4.0])
def test_recurrence_better_holds_alpha_when_the_families_spreads_differ(ratio, monkeypatch):
    """§5.1's rule (the best of each family, six allocations each, 3 seeds) with no effect, the non-recurrent
    family's seed-to-seed SD `ratio` times the recurrent one's: the noisier family's best enjoys the larger winner's
    curse. Against the null at equal SDs alone the rule said that family wins 0.11-0.12 of the time; with the SD
    ratio's confidence interval in the p-value (Berger and Boos) no verdict is said more often than alpha."""
    shape, rule = _recurrence_better_shape(3), depth_rules.RecurrenceBetter()
    sd = {True: np.ones(6), False: np.full(6, ratio)}
    rates = calibration.no_effect(rule, shape, sd, draws=10_000)
    assert rates.holds_alpha and max(rates.supported, rates.contradicted) <= verdicts.ALPHA + 0.005, rates
    monkeypatch.setattr(calibration, "compares_families", lambda rule: False)  # the null at equal SDs only
    naive = calibration.no_effect(rule, shape, sd, draws=10_000)
    assert (naive.contradicted if ratio > 1 else naive.supported) > verdicts.ALPHA + 0.04, naive


@pytest.mark.parametrize("seeds, ratio", [(2, 1.0), (3, 3.0), (9, 0.5)])
def test_the_sd_ratios_interval_covers_the_true_ratio(seeds, ratio):
    """The grid steps `ratio_steps` gives each study cover the true non-recurrent over recurrent SD ratio in at least
    1 - GAMMA of studies (an F interval of pooled variances, widened to the grid), at every number of seeds."""
    draws = 20_000
    shape = _recurrence_better_shape(seeds)
    studies = calibration.simulate(shape, {True: np.ones(6), False: np.full(6, ratio)}, draws,
                                   np.random.default_rng(seeds))
    low, high = calibration.ratio_steps(studies)
    truth = np.log(ratio) / np.log(calibration.RATIO_STEP)
    covered = np.mean((low <= truth) & (truth <= high))
    assert covered >= 1 - calibration.GAMMA - 3 * np.sqrt(calibration.GAMMA / draws), covered
    assert np.all(low <= high) and np.all(high - low <= 2 * calibration.RATIO_STEPS)


def test_the_p_of_a_rule_between_families_is_the_largest_over_its_interval_plus_gamma():
    """One study: p is the largest of the nulls' p over the steps of its interval, plus GAMMA; where the
    interval is the single ratio 1, it is the equal-SD null's p plus GAMMA."""
    shape, rule = _recurrence_better_shape(3), depth_rules.RecurrenceBetter()
    direction, strength = np.array(1), np.array(2.5)
    at = {step: float(calibration.p_value(rule, shape, direction, strength, (np.array(step), np.array(step))))
          for step in (-2, -1, 0, 1, 2)}
    equal = float(calibration.p_value(rule, shape, direction, strength))
    assert at[0] == pytest.approx(equal + calibration.GAMMA)
    over = float(calibration.p_value(rule, shape, direction, strength, (np.array(-2), np.array(2))))
    assert over == pytest.approx(max(at.values())) and len(set(at.values())) > 1
