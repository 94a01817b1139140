"""The claims page's rules against independent facts, printed: the numbers tests/test_statistics.py and
tests/test_power.py assert, side by side with their closed forms, the least favourable null where a rule picks on
both sides, and each rule's chance of a verdict with no effect at the paper's design beside alpha.

    python workflow/scripts/rule_checks.py
"""

import numpy as np
from scipy import integrate, optimize, stats
from statsmodels.stats.power import TTestIndPower

from parallel_experts import study
from parallel_experts.analysis import calibration, depth_rules, power
from parallel_experts.analysis.verdicts import ALPHA
from parallel_experts.planning import power as planned

DRAWS = 40_000


def equal_seeds() -> None:
    print("1. one allocation at each depth, equal seeds: the rule's p against Student's t on 2n - 2 df")
    rule = depth_rules.BestAgainst((2,), (1,))
    for n in (3, 5, 9):
        for t in (1.0, 2.0, 3.0):
            p = float(calibration.p_value(rule, ((True, (n, n), (2, 1)),), np.array(1), np.array(t)))
            print(f"   n = {n}, t = {t}: rule {p:.4f}, scipy {stats.t.sf(t, 2 * n - 2):.4f}")


def best_of_three() -> None:
    print("2. the best of three at L = 4 against the best at L = 2, 400 seeds: the maximum of normals' 5 % point; "
          "with three at L = 2 too, the rule's least favourable null (two of them sunk) is the same form")
    def tail(c):
        return integrate.quad(lambda z: (1 - stats.norm.cdf(c * np.sqrt(2) + z) ** 3) * stats.norm.pdf(z), -10, 10)[0]
    c = optimize.brentq(lambda c: tail(c) - ALPHA, 0.5, 4.0)
    rule = depth_rules.BestAgainst((4,), (2,))
    print(f"   closed form c = {c:.3f} (a test chosen in advance: 1.645)")
    for depth, words in (((4, 4, 4, 2), "one at L = 2"), ((4, 4, 4, 2, 2, 2), "three at L = 2")):
        p = float(calibration.p_value(rule, ((True, (400,) * len(depth), depth),), np.array(1), np.array(c)))
        print(f"   {words}: the rule's p at c {p:.4f} (alpha {ALPHA})")


def ties_at_the_top() -> None:
    print("3. picking on both sides, the paper's small grid (three allocations each at L = 2 and L = 4), 9 seeds: the "
          "rule's chance of 'supported' where every L = 4 allocation ties with the best L = 2 one")
    depth = np.array([1, 1, 1, 1, 2, 2, 2, 3, 3, 4, 4, 4, 8, 8])
    shape = ((True, (9,) * len(depth), tuple(depth)),)
    rule = depth_rules.BestAgainst((4,), (2,))
    for below in (0.0, 0.5, 50.0):
        centre = np.where(depth == 2, -below, 0.0)
        centre[4] = 0.0
        arms = calibration.simulate(shape, None, DRAWS, np.random.default_rng(3))[True]
        arms = depth_rules.Arms(arms.mean + centre, arms.variance, arms.seeds, arms.depth)
        supported = float(np.mean(calibration.test(rule, {True: arms}).verdict() == 1))
        print(f"   the other L = 2 allocations {below:g} SD below: {supported:.4f} (alpha {ALPHA})")


def pooled_power() -> None:
    print("4. power of one allocation at each depth, equal seeds and SD 0.15: simulated against the pooled t-test's")
    for difference, n in ((0.2, 4), (0.15, 6), (0.1, 12)):
        test = power.Decision(power.DEPTH_TEST, "", "", "", {True: power.Truth(
            ("L2", "L1"), np.array([2, 1]), np.array([13.0 + difference, 13.0]), np.array([0.15, 0.15]), "")},
            power.depth_test(2, 1))
        found = power.power(test, {True: n}, DRAWS)
        exact = TTestIndPower().power(difference / 0.15, nobs1=n, alpha=ALPHA, ratio=1, alternative="larger")
        print(f"   difference {difference}, {n} seeds: simulated {found.power:.4f} ± {found.stderr:.4f}, "
              f"statsmodels {exact:.4f}")


def agents_and_rounds() -> None:
    print("5. nothing picked: the probes' test over 3 agents a side (AgainstRival of two arms) against Student's t on "
          "4 df (the Welch statistic's null at equal SDs is close to it, not equal), and Tables 5/6's test over rounds "
          "(TimeRatio) against scipy's one-sample t, which is exact")
    rule = depth_rules.AgainstRival.of(np.array([True, False]))
    for t in (1.0, 2.0, 3.0):
        p = float(calibration.p_value(rule, ((True, (3, 3), (4, 2)),), np.array(1), np.array(t)))
        print(f"   3 vs 3 agents, t = {t}: rule {p:.4f}, Student (4 df) {stats.t.sf(t, 4):.4f}")
    for rounds in (3, 5, 10):
        for t in (1.0, 2.5):
            p = float(calibration.p_value(depth_rules.TimeRatio(slower=True), ((True, (rounds,), (0,)),),
                                          np.array(1), np.array(t)))
            print(f"   {rounds} rounds, t = {t}: rule {p:.4f}, scipy one-sample t {stats.t.sf(t, rounds - 1):.4f}")


def paper_design() -> None:
    print("6. the paper's design (config/paper.yaml): resampling the authors' seeds against the normal model, and each "
          "rule's chance of each verdict with no effect (supported, contradicted) beside alpha")
    tests = planned.tests(study.load(["config/paper.yaml"]))
    given = planned.config_designs(study.load(["config/paper.yaml"]))
    for test in tests:
        seeds = {family: planned._given(given, test, family) for family in test.truth}
        if min(np.min(n) for n in seeds.values()) < 2:
            continue
        normal, resampled = power.power(test, seeds), power.bootstrap_power(test, seeds)
        chance = power.no_effect(test, seeds)
        boot = f", resampling the authors' seeds {resampled.power:.3f}" if resampled else ""
        print(f"   {test.claim}, {test.part}: power {normal.power:.3f}{boot}; with no effect {chance.supported:.3f}, "
              f"{chance.contradicted:.3f} (alpha {ALPHA} + 3 SE = {ALPHA + 3 * chance.stderr(1):.3f})"
              f"{'' if chance.holds_alpha else '  <- does not hold alpha'}")


if __name__ == "__main__":
    equal_seeds()
    best_of_three()
    ties_at_the_top()
    pooled_power()
    agents_and_rounds()
    paper_design()
