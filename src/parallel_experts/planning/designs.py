"""A design of the power analysis as a config that runs it (`power --write DIR`): the analysed config with the
sweeps its decisions read cut down to the design's budgets, families, allocations and seeds (and FineWeb's windows),
and nothing else of that domain (no ablation, probe, expert-count run or systems table). It validates, dry-runs,
rehearses and plans as the config it came from; its description says which claims it is designed to decide, at what
power, and which target shows them.

A domain no decision reads is kept as it was (the schema needs it), and runs only where a target asks for it: run a
written config with its targets (`snakemake --configfile FILE tables_1_7`), not with `all`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from parallel_experts.analysis import power as stats
from parallel_experts.analysis.power import Decision
from parallel_experts.core import atomic

# The named target whose page shows each decision's verdict on our runs; Fig. 6's, the Sokoban depth page, which
# trains the same runs (the fig6 target would also train the FineWeb sweep, which a written config keeps as it was).
TARGET = {stats.DEPTH_TEST: "tables_1_7", "sokoban_fewer_layers": "fig3_left",
          "sokoban_recurrence_better": "fig3_left", "lm_fewer_layers": "fig3_right", "lm_comparable_shallow": "fig5",
          "full_communication": "fig11", "sqrt_sum_default": "fig10_left", "more_experts": "fig3_left"}
SCALE = "claims"


GRID = ("allocations", "family_allocations", "enumerate")  # a budget's grid, which a written budget lists anew


def _at_once(group: int, counts: Sequence[int]) -> int:
    """The most seeds trained at once, at most the budget's `group` (it bounds memory), that divides every seed
    count of its runs larger than it (sokoban.experiment.budget_train_config)."""
    return max(g for g in range(1, group + 1) if all(count <= g or count % g == 0 for count in counts))


def _allocations(labels: Sequence[str]) -> list[list[int]]:
    return [[int(part[1:]) for part in label.split()] for label in labels]


def config(base: Mapping, chosen: Sequence[tuple[Decision, Mapping[bool, list[int]], int, float]], sweep: str,
           what: str) -> dict:
    """`base` running every (decision, allocations kept per family, seeds, power) of `chosen`: the Sokoban ones in
    its ConvLSTM sweep `sweep`, the FineWeb ones in its sweep; `what` names the set in the description."""
    found = copy.deepcopy(dict(base))
    by_domain = {domain: [c for c in chosen if c[0].domain == domain]
                 for domain in ("sokoban", "experts", "ablation", "lm")}
    if by_domain["sokoban"] or by_domain["experts"] or by_domain["ablation"]:
        _sokoban(found["sokoban"], by_domain["sokoban"] + by_domain["experts"], by_domain["ablation"], sweep)
    if by_domain["lm"]:
        _lm(found["lm"], by_domain["lm"])
    decided = "; ".join(f"{test.claim.replace('_', ' ')}, {test.part} (power {p:.2f}, {n} seeds)"
                        for test, _, n, p in chosen)
    targets = " ".join(dict.fromkeys(TARGET[test.claim] for test, *_ in chosen))
    found["scale"] = SCALE
    found["description"] = (f"{what}, written by `python -m parallel_experts power`: the cheapest design that decides "
                            f"{decided}. Run it with `snakemake --configfile FILE {targets}`.")
    return found


def _sokoban(sokoban: dict, chosen: Sequence, ablations: Sequence, sweep: str) -> None:
    """The ConvLSTM sweep cut to the `chosen` decisions' budgets, allocations and seeds, the ablations to the chosen
    ones' settings and seeds; neither where none is chosen."""
    budgets: dict[str, dict] = {}
    families = set()
    for test, keep, n, _ in chosen:
        for family, truth in test.truth.items():
            for i in keep[family]:  # an allocation of the decision's budget, or of its own (Fig. 6's)
                name = truth.budget[i] if truth.budget else test.budget
                spec = budgets.setdefault(name, {key: value for key, value in sokoban["budgets"][name].items()
                                                 if key not in GRID + ("seeds",)})
                field = spec.setdefault("allocations", []) if family else spec.setdefault("nonrecurrent", [])
                field += [a for a in _allocations([truth.allocation[i]]) if a not in field]
                spec["seeds"] = list(range(max(n, len(spec.get("seeds", [])))))  # a budget's decisions share runs
            families.add(family)
    for spec in budgets.values():  # the non-recurrent family trains the budget's allocations and its own extra
        own = spec.pop("nonrecurrent", [])
        if "allocations" not in spec:  # a budget of non-recurrent runs only
            spec["allocations"] = own
        elif extra := [a for a in own if a not in spec["allocations"]]:
            spec["family_allocations"] = {"nonrecurrent": extra}
    swept = list(budgets)
    chosen_ablations = {test.budget: sokoban["ablations"][test.budget] | {"seeds": list(range(n))}
                        for test, _, n, _ in ablations}
    for spec in chosen_ablations.values():  # an ablation's allocation stays in its budget, with no sweep run of it
        kept = budgets.setdefault(spec["budget"], sokoban["budgets"][spec["budget"]])
        if spec["budget"] in swept and spec["allocation"] not in kept["allocations"]:
            kept["allocations"].append(spec["allocation"])  # a swept budget cut to its decisions: the sweep trains it too
    for name, spec in budgets.items():
        if "seeds_at_once" in spec:
            counts = [len(spec.get("seeds", []))] + [len(a["seeds"]) for a in chosen_ablations.values()
                                                     if a["budget"] == name]
            spec["seeds_at_once"] = _at_once(spec["seeds_at_once"], counts)
    sokoban["budgets"] = budgets
    if families:
        sokoban["sweeps"] = {sweep: {"expert": sokoban["sweeps"][sweep]["expert"],
                                     "recurrent": sorted(families, reverse=True), "budgets": swept}}
    else:
        sokoban.pop("sweeps", None)
    for key in ("ablations", "probes", "expert_count"):
        sokoban.pop(key, None)
    if chosen_ablations:
        sokoban["ablations"] = chosen_ablations


def _lm(lm: dict, chosen: Sequence) -> None:
    """Both families train a FineWeb budget's allocations at every window: the union of the kept ones, the largest
    seeds, the chosen windows."""
    budgets: dict[str, dict] = {}
    windows: list[int] = []
    for test, keep, n, _ in chosen:
        given = lm["budgets"][test.budget]
        spec = budgets.setdefault(test.budget, {key: value for key, value in given.items()
                                                if key not in GRID + ("seeds",)} | {"allocations": []})
        labels = {label for family, truth in test.truth.items() for label in
                  (truth.allocation[i] for i in keep[family])}
        spec["allocations"] += [a for a in given["allocations"]
                                if f"L{a[0]} E{a[1]} d{a[2]}" in labels and a not in spec["allocations"]]
        spec["seeds"] = list(range(max(n, len(spec.get("seeds", [])))))
        windows += [test.window] if test.window not in windows else []
    lm["budgets"], lm["windows"] = budgets, windows
    for key in ("ablations", "latency", "throughput"):
        lm.pop(key, None)


def write(path: str | Path, config: Mapping) -> None:
    atomic.write_text(path, "# Written by `python -m parallel_experts power --write`; see its description.\n"
                      + yaml.safe_dump(config, sort_keys=False, width=120, default_flow_style=None))
