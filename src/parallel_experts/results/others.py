"""Other systems' published numbers, set beside ours (the paper's own are in `paper`): earlier agents' solve rates
on Boxoban's unfiltered test levels, each with its source and how its protocol differs from the paper's (A2C for
50M environment steps, greedy and sampled play of every test level)."""

from __future__ import annotations

from dataclasses import dataclass

# The test levels of every row below.
LEVELS = {"boxoban": "unfiltered/test"}
TAUFEEQUE_2024 = ("Taufeeque et al. (2024), Planning in a recurrent neural network that plays Sokoban "
                  "(arXiv:2407.15421): the public evaluation data of AlignmentResearch/learned-planner")
LOOPED_ACTOR = "camail-official/LoopedActor, sokoban/README.md (final checkpoints, seeds 1-3)"
LOOPED_ACTOR_PROTOCOL = ("PPO for 100M environment steps; the argmax policy for at most 120 steps on every level "
                         "(its first 2,000 of a 1,000-level bank); mean ± standard deviation over three seeds; a "
                         "token-per-cell core, not ConvLSTM experts")


@dataclass(frozen=True)
class SolveRate:
    agent: str
    env_steps: int  # environment steps of training
    solve_rate: float  # fraction of the test levels solved
    spread: float | None  # the standard deviation over seeds, where published
    source: str
    protocol: str = ""  # how it differs from the paper's, where the source says


# The paper's Table 2 cites the DRC and ResNet rows (Chung et al. 2023; Taufeeque et al. 2024).
SOKOBAN_SOLVE_RATES = (
    SolveRate("DRC(3,3)", 50_000_000, 0.934, None, TAUFEEQUE_2024),
    SolveRate("DRC(3,3)", 2_000_000_000, 0.993, None, TAUFEEQUE_2024),
    SolveRate("ResNet", 50_000_000, 0.775, None, TAUFEEQUE_2024),
    SolveRate("LoopedActor, weight-tied looped core", 100_000_000, 0.815, 0.057, LOOPED_ACTOR, LOOPED_ACTOR_PROTOCOL),
    SolveRate("LoopedActor, 16 untied cores", 100_000_000, 0.428, 0.062, LOOPED_ACTOR, LOOPED_ACTOR_PROTOCOL),
    SolveRate("LoopedActor, one core", 100_000_000, 0.002, 0.003, LOOPED_ACTOR, LOOPED_ACTOR_PROTOCOL),
)
