"""What the probe reports say (Figs. 4, 12, 13): tables of recall and macro-F1, and the paper's pattern tested.

The paper's Fig. 4: probes on the final state of two large-budget recurrent agents with nearly equal returns;
the L = 4 agent's recall is higher at first and the L = 2 agent catches up within a few steps. A reading only
means something if the state beats its controls (the encoder output and the untrained agent), so every verdict
checks that first. The scores count only the test levels that every probed agent solves (App. F), so every page
says how many there are, beside the paper's 906.

The probes dataset holds each probed agent's scores by run and `agent` (a run's agent of one probed training seed,
`agent_seed`). The pages read one curve per run (`over_agents`: the mean over its agents, the band their range; with
one agent, its 95 % interval over levels); the claims page tests over agents (`agent_scores`, analysis.findings).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping

import numpy as np
import pandas as pd
import xarray as xr
from scipy import stats

from parallel_experts.analysis import verdicts
from parallel_experts.core import definitions
from parallel_experts.results import paper

PAPER_PATTERN = ("the paper (Fig. 4): on two large-budget recurrent agents with nearly equal returns, the L = 4 "
                 "agent's plan recall is higher at first and the L = 2 agent catches up within a few steps.")
PAPER_LEVELS, PAPER_TEST_LEVELS = paper.PROBES["solved_levels"].value, paper.PROBES["test_levels"].value
PAPER_PROTOCOL = (f"thresholds at {paper.PROBES['precision'].value * 100:.0f} % precision over the first "
                  f"{paper.PROBES['calibration_steps'].value} steps; "
                  f"the {PAPER_LEVELS} test levels all four probed policies solve")  # App. F
EARLY, LATE = (0, 2), (5, 10)  # step windows: "at first" and "within a few steps"
CONTROLS = ("encoder", "control")
REPRESENTATION_NAMES = {"state": "final state s_t", "encoder": "encoder output z_t (observation baseline)",
                        "control": "untrained agent's s_t (control)"}
TARGET_NAMES = {"agent_onto": "C_A: agent moves onto", "box_pushed": "C_B: box pushed off"}
# Fewer scored levels than this and the 95 % intervals over levels are rough (our choice): see `coverage`.
SMALL_LEVEL_SET = 30
# Fewer probed agents per run than this and a test over agents has little power (the minimum; our choice).
FEW_AGENTS = 3


def coverage(levels: int, interval: float = 0.95) -> float:
    """How often the probes' percentile bootstrap over `levels` levels covers the truth, for a mean of normal
    values: its interval is the mean ± z plug-in standard errors (dividing by n), which covers iff |t_{n-1}| ≤
    z·√((n − 1)/n). 0.85 over 5 levels, 0.90 over 10, 0.94 over 30 (tests/test_statistics.py checks it against
    bootstrap_ratio)."""
    z = stats.norm.ppf((1 + interval) / 2)
    return float(2 * stats.t.cdf(z * np.sqrt((levels - 1) / levels), levels - 1) - 1)


def run_label(probes: xr.Dataset, run: str) -> str:
    """ "recurrent L2 E4 d4" """
    r = probes.sel(run=run)
    return f"{definitions.family(bool(r['recurrent']))} L{int(r['depth'])} E{int(r['experts'])} d{int(r['width'])}"


def agents(probes: xr.Dataset) -> int:
    """How many agents of each run the probes read (one per probed training seed), in the dataset or its view."""
    return int(probes.sizes["agent"]) if "agent" in probes.dims else int(probes.attrs.get("probed_agents", 1))


def agents_words(probes: xr.Dataset) -> str:
    """ "3 agents per run" or "one agent per run", with a warning where they are few. """
    count = agents(probes)
    if count == 1:
        return "one agent per run"
    few = f" (fewer than {FEW_AGENTS}: a test over agents with little power)" if count < FEW_AGENTS else ""
    return f"{count} agents per run{few}"


def over_agents(probes: xr.Dataset) -> xr.Dataset:
    """The pages' view of the probes dataset, one curve per run: with one agent per run, that agent's scores (its
    intervals resample levels); with more, the mean over agents of each score, and as recall's and precision's band
    (`low`, `high`) the lowest and highest agent (the agents' spread, which an interval over one agent's levels
    misses). Fig. 13's picture is the first agent's. The count and seeds of the agents are in the attrs."""
    seeds = {str(run): [int(seed) for seed in probes["agent_seed"].sel(run=run).values]
             for run in probes["run"].values}
    attrs = probes.attrs | {"probed_agents": agents(probes), "agent_seeds": json.dumps(seeds)}
    if agents(probes) == 1:
        return probes.isel(agent=0, drop=True).assign_attrs(attrs)
    view = probes.mean("agent", keep_attrs=True)
    for name in ("recall", "precision"):
        value = probes[name].sel(estimate="value", drop=True)
        view[name] = xr.concat([value.mean("agent"), value.min("agent"), value.max("agent")],
                               dim="estimate").assign_coords(estimate=probes["estimate"].values)
        view[name].attrs = probes[name].attrs
    for name in ("plan", "plan_truth", "picture"):  # Fig. 13 pictures one agent: the first
        if name in probes:
            view[name] = probes[name].isel(agent=0, drop=True)
    if "scored" in probes:  # one level set for every agent (a boolean, which the mean leaves out)
        view["scored"] = probes["scored"]
    return view.assign_attrs(attrs)


def agent_scores(probes: xr.Dataset, runs, window: tuple[int, int], target: str = "agent_onto") -> np.ndarray:
    """Each probed agent's state recall over the steps of `window` (inclusive; mean over the steps some scored
    episode reaches), (runs, agents): the mean over steps of a ratio summed over the scored levels, so each agent's
    score carries its level-to-level noise. NaN where an agent's episodes reach no step of the window."""
    curves = probes["recall"].sel(run=list(runs), representation="state", target=target, estimate="value")
    values = curves.sel(step=slice(*window)).transpose("run", "agent", "step").values
    with warnings.catch_warnings():  # an agent whose episodes reach no step of the window: NaN, said by the caller
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values, axis=-1)


def agents_beat_controls(probes: xr.Dataset, run: str, target: str = "agent_onto") -> tuple[bool, str]:
    """Whether every probed agent of `run` reads more from its state than from its controls (`beats_controls`, each
    with its own intervals over levels), and the sentence that says so."""
    checks = [beats_controls(probes.isel(agent=k, drop=True), run, target) for k in range(agents(probes))]
    if len(checks) == 1:
        return checks[0]
    above = sum(ok for ok, _ in checks)
    return above == len(checks), (f"{run_label(probes, run)}: the state's recall over steps {EARLY[0]}-{LATE[1]} is "
                                  f"above both controls for {above} of its {len(checks)} agents")


def recall_curves(probes: xr.Dataset, target: str = "agent_onto", steps: int = 31) -> pd.DataFrame:
    """Long table for plotting: run (with its label, depth and recurrence), representation, step, recall and
    precision with their intervals, and the test episodes still running."""
    ds = probes.sel(target=target).isel(step=slice(0, steps))
    table = ds[["recall", "precision"]].to_dataframe()[["recall", "precision"]].unstack("estimate")
    table.columns = [name if estimate == "value" else f"{name}_{estimate}" for name, estimate in table.columns]
    table = table.reset_index()
    table["label"] = table["run"].map(lambda run: run_label(probes, run))
    table["depth"] = table["run"].map(lambda run: int(probes["depth"].sel(run=run)))
    table["recurrent"] = table["run"].map(lambda run: bool(probes["recurrent"].sel(run=run)))
    running = ds["episodes"].to_dataframe().reset_index()[["run", "step", "episodes"]]
    table = table.merge(running, on=["run", "step"])
    last = table.loc[table["episodes"] > 0, "step"].max()  # past it no scored episode runs: nothing to read
    return table[table["step"] <= (last + 1 if pd.notna(last) else 0)]


def band_words(probes: xr.Dataset) -> str:
    """What the band around a page's recall curve spans (`over_agents`)."""
    return "95 % interval over levels" if agents(probes) == 1 else "lowest to highest agent"


def window_mean(probes: xr.Dataset, run: str, representation: str, window: tuple[int, int],
                target: str = "agent_onto", estimate: str = "value") -> float:
    """Mean recall over the steps window[0]..window[1] (inclusive) that some test episode reaches."""
    curve = probes["recall"].sel(run=run, representation=representation, target=target, estimate=estimate)
    values = curve.sel(step=slice(*window)).values
    return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")  # NaN: no episode got there


def beats_controls(probes: xr.Dataset, run: str, target: str = "agent_onto") -> tuple[bool, str]:
    """Whether the state's recall over the first steps is above both controls' (its lower 95 % bound above their
    upper bounds on average over steps 0..10), and the sentence that says so."""
    window = (EARLY[0], LATE[1])
    state = window_mean(probes, run, "state", window, target)
    low = window_mean(probes, run, "state", window, target, "low")
    controls = {name: window_mean(probes, run, name, window, target) for name in CONTROLS}
    highs = [window_mean(probes, run, name, window, target, "high") for name in CONTROLS]
    above = bool(low > max(highs))
    words = "above" if above else "not clearly above"
    return above, (f"{run_label(probes, run)}: recall of the final state over steps {window[0]}-{window[1]} "
                   f"{state:.3f}, {words} the encoder output ({controls['encoder']:.3f}) and the untrained control "
                   f"({controls['control']:.3f})")


def deeper_first(probes: xr.Dataset, runs) -> list[str]:
    """A compared pair (sokoban.probes.compare) as Fig. 4 reads it: the deeper run first."""
    return sorted(runs, key=lambda run: int(probes["depth"].sel(run=run)), reverse=True)


def compare_pattern(probes: xr.Dataset, deeper: str, shallower: str, target: str = "agent_onto",
                    margin: float = verdicts.RECALL_COMPARABLE) -> dict:
    """Fig. 4's pattern on a pair, from the recall and its 95 % bootstrap intervals over levels: whether both
    states beat their controls (`meaningful`), the deeper agent leads at first (its early lower bound above the
    shallower one's upper bound; `shallower_leads` the reverse), and the shallower one catches up (late, the deeper
    one leads by less than `margin` of recall: "both maintain similar recall"); the gaps, and the control sentences
    (`controls`)."""
    checks = [beats_controls(probes, run, target) for run in (deeper, shallower)]
    early = {run: window_mean(probes, run, "state", EARLY, target) for run in (deeper, shallower)}
    late = {run: window_mean(probes, run, "state", LATE, target) for run in (deeper, shallower)}
    bound = {(run, estimate): window_mean(probes, run, "state", EARLY, target, estimate)
             for run in (deeper, shallower) for estimate in ("low", "high")}
    early_gap, late_gap = early[deeper] - early[shallower], late[deeper] - late[shallower]
    return {"meaningful": all(above for above, _ in checks), "controls": [text for _, text in checks],
            "early_gap": early_gap, "late_gap": late_gap,
            "leads": early_gap > 0 and bound[deeper, "low"] > bound[shallower, "high"],
            "shallower_leads": early_gap < 0 and bound[shallower, "low"] > bound[deeper, "high"],
            "catches_up": late_gap < margin}


def gaps_words(found: Mapping) -> str:
    """The early and late gaps of `compare_pattern` in words; a window no scored level lasts into has no gap."""
    return ", ".join(f"{gap:+.3f} over steps {first}-{last}" if np.isfinite(gap) else
                     f"none over steps {first}-{last} (no scored level lasts that long)"
                     for gap, (first, last) in ((found["early_gap"], EARLY), (found["late_gap"], LATE)))


def compare_verdict(probes: xr.Dataset, deeper: str, shallower: str, target: str = "agent_onto",
                    margin: float = verdicts.RECALL_COMPARABLE) -> list[str]:
    """Fig. 4's verdict on a pair (compare_pattern) in words: controls first, the gaps, then the verdict."""
    if not scored_levels(probes):
        return ["this run cannot test the paper's pattern: no test level is solved by every probed agent, so no "
                "probe was scored", PAPER_PATTERN]
    found = compare_pattern(probes, deeper, shallower, target, margin)
    lines = [*found["controls"], f"deeper minus shallower recall: {gaps_words(found)}, {scored_words(probes)}"]
    if not found["meaningful"]:
        verdict = ("cannot test the paper's pattern: the probes do not read more from the state than from the "
                   "controls, so there is no plan to compare at this scale")
    elif found["leads"] and found["catches_up"]:
        verdict = "shows the paper's pattern: the deeper agent leads at first and the shallower one catches up"
    elif found["leads"]:
        verdict = (f"shows half the paper's pattern: the deeper agent leads at first, but its late lead stays at "
                   f"{margin} of recall or more")
    else:
        verdict = "does not show the paper's pattern: the deeper agent does not lead at first"
    if found["meaningful"] and agents(probes) > 1:  # the curves are means over agents: the claims page tests them
        verdict += f" (a reading of the mean curves; the claims page tests it over the {agents(probes)} agents per run)"
    return [*lines, f"this run {verdict}", PAPER_PATTERN]


def f1_table(probes: xr.Dataset) -> pd.DataFrame:
    """Fig. 12's table: EP's macro-F1 per run, representation and target (test levels, mean over probe seeds)."""
    table = probes["macro_f1"].to_dataframe().reset_index()
    table["run"] = table["run"].map(lambda run: run_label(probes, run))
    table["target"] = table["target"].map(TARGET_NAMES)
    wide = table.pivot_table(index=["run", "representation"], columns="target", values="macro_f1", sort=False)
    return wide.reset_index().rename_axis(columns=None)


def depth_summary(probes: xr.Dataset, target: str) -> list[str]:
    """Fig. 12 panel text: each run's early and late recall, and whether its state beats the controls."""
    lines = []
    for run in probes["run"].values:
        above, _ = beats_controls(probes, run, target)
        lines.append(f"{run_label(probes, run)}: recall {window_mean(probes, run, 'state', EARLY, target):.3f} "
                     f"(steps {EARLY[0]}-{EARLY[1]}), {window_mean(probes, run, 'state', LATE, target):.3f} "
                     f"(steps {LATE[0]}-{LATE[1]}); {'above' if above else 'not clearly above'} its controls")
    return lines


def scored_levels(probes: xr.Dataset) -> int:
    """How many test levels the scores count: those every probed agent solves."""
    return int(probes.attrs["scored_levels"])


def scored_words(probes: xr.Dataset) -> str:
    """ "on the 12 test levels every probed agent solves (the paper: 906)" """
    return (f"on the {scored_levels(probes):,} test levels every probed agent solves (the paper: "
            f"{PAPER_LEVELS:,})")


def level_set_note(probes: xr.Dataset) -> str:
    """What the scored level set is, beside the paper's, and what it means for the page's numbers."""
    scored, runs, count = scored_levels(probes), probes.sizes["run"], agents(probes)
    who = f"{runs} probed runs" if count == 1 else f"{runs * count} probed agents ({runs} runs × {count} seeds)"
    found = (f"Scored levels: the {scored:,} of {probes.attrs['test_levels']:,} test levels that each of the {who} "
             f"solves in greedy play (the paper: the {PAPER_LEVELS:,} of {PAPER_TEST_LEVELS:,} that all four of its "
             "probed policies solve, App. F).")
    if not scored:
        return found + (" No test level is solved by every probed agent, so there is nothing to score and this page "
                        "shows no recall: the probes need agents that solve some of the same levels.")
    if scored < SMALL_LEVEL_SET:
        rough = f"{100 * coverage(scored):.0f} % of the time" if scored > 1 else "never: one level has no spread"
        return found + (f" That is fewer than {SMALL_LEVEL_SET} levels: the intervals over levels are rough (over "
                        f"{scored} levels a 95 % interval of this bootstrap covers the truth about {rough}), and "
                        "levels solved early leave the later steps few or no episodes.")
    return found


def data_note(probes: xr.Dataset) -> str:
    """The lines under the scale banner: what the probes were fitted and scored on."""
    a = probes.attrs
    seeds = sorted({seed for found in json.loads(a["agent_seeds"]).values() for seed in found})
    band = (f"each curve is the run's one agent, its band a 95 % interval from {a['probe_bootstrap']:,} resamples of "
            "the scored levels" if agents(probes) == 1 else
            "each curve is the mean over the run's agents, its band spans the lowest to the highest agent (their "
            "spread; each agent's own interval over levels is in the data, not drawn), and each table the mean; the "
            "plan pictured is the first seed's agent's")
    seed_words = f"training seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"
    return (f"Probe data: greedy episodes of {agents_words(probes)} ({seed_words}) on "
            f"{a['train_levels']:,} training levels (probe training), {a['calibration_levels']:,} calibration levels "
            f"(threshold at {a['probe_precision']:.0%} precision over the predictions of steps t < "
            f"{a['probe_calibration_steps']}, as App. F) and all {a['test_levels']:,} test levels, each once, with "
            f"probes fitted per agent; the scores count the levels every probed agent solves. Probe: "
            f"{a['probe_kernel']}×{a['probe_kernel']} convolution, no bias, AdamW "
            f"{a['probe_learning_rate']:g} (weight decay {a['probe_weight_decay']:g}), batch {a['probe_batch']}, "
            f"{a['probe_epochs']} epochs, {a['probe_seeds']} probe seeds. On this page {band}."
            f"\n\n{level_set_note(probes)}")


def recall_table(probes: xr.Dataset, runs, target: str = "agent_onto", steps=(0, 1, 2, 5, 10, 20)) -> pd.DataFrame:
    """Recall at a few steps per run and representation (NaN where no test episode is still running)."""
    steps = [step for step in steps if step < probes.sizes["step"]]
    rows = []
    for run in runs:
        for representation in probes["representation"].values:
            curve = probes["recall"].sel(run=run, representation=representation, target=target, estimate="value")
            rows.append({"run": run_label(probes, run), "probe reads": REPRESENTATION_NAMES[representation]}
                        | {f"t={step}": float(curve.sel(step=step)) for step in steps})
    return pd.DataFrame(rows)


def plan_summary(probes: xr.Dataset, run: str, target: str = "agent_onto") -> list[str]:
    """Fig. 13's text: at each pictured step, how many squares the probe marks and how many of them name the move
    by which the agent really enters the square later in the episode."""
    shown = probes.sel(run=run, representation="state", target=target)
    lines = []
    for step, plan, truth in zip(shown["picture_step"].values, shown["plan"].values, shown["plan_truth"].values):
        marked, right = int((plan > 0).sum()), int(((plan > 0) & (plan == truth)).sum())
        lines.append(f"t = {step}: {marked} squares marked, {right} of them with the direction the agent later "
                     f"enters by; the agent's remaining path enters {int((truth > 0).sum())} squares")
    return lines
