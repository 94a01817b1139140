"""Scoring planning probes (paper §5.1, Fig. 4, App. F): a threshold at 0.93 precision over the first 20 steps,
recall and precision by step with 95 % bootstrap intervals over levels, and EP's macro-F1.

A probe reads each square as the most probable direction ĉ and its probability p_ĉ. The square is predicted
positive iff p_ĉ ≥ τ, τ the smallest threshold whose precision on the calibration levels is at least the target,
over the predictions of steps t < 20 (App. F: "across predictions over the first 20 steps"); a positive square is
a true positive iff ĉ is its label. The scores count only the test levels that every probed agent solves
(App. F: "the 906 test levels solved by all four policies"). Then, over those test episodes still running at t,
    recall_t = Σ TP_t / #(squares with a label ≠ none at t),   precision_t = Σ TP_t / Σ positive_t,
averaged over the probe seeds. The interval resamples the scored levels with replacement (every seed sees the
same resample). EP's macro-F1 scores the plain 5-class argmax with sklearn's definitions (zero_division = 1).

Each probed agent (a run's agent of one probed training seed) is scored on its own; `collect` puts every agent's scores
in one dataset by run and agent, and the claims page tests Fig. 4's pattern over agents (analysis.findings).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict

import numpy as np
import xarray as xr

from parallel_experts.config import schema
from parallel_experts.config.errors import PipelineError
from parallel_experts.results import store
from parallel_experts.results.store import open_dataset
from parallel_experts.sokoban import jobs, probes
from parallel_experts.sokoban.experiment import Run
from parallel_experts.sokoban.settings import CLASSES, REPRESENTATIONS, TARGETS, ProbeConfig


def threshold(confidence: np.ndarray, correct: np.ndarray, precision: float) -> float:
    """The smallest τ with precision(p_ĉ ≥ τ) ≥ `precision` over the given squares; inf if no τ reaches it.

    Squares with equal confidence are positive together, so a τ is only realisable at the last of a tie."""
    order = np.argsort(-confidence.ravel(), kind="stable")
    score, hit = confidence.ravel()[order], correct.ravel()[order]
    reached = np.cumsum(hit) / np.arange(1, len(score) + 1) >= precision
    realisable = np.r_[score[1:] != score[:-1], True]
    candidates = np.flatnonzero(reached & realisable)
    return float(score[candidates[-1]]) if len(candidates) else float("inf")


def per_step(values: np.ndarray, level: np.ndarray, step: np.ndarray, levels: int, steps: int) -> np.ndarray:
    """Per-sample values (..., n) summed into (..., levels, steps) cells."""
    cell = level * steps + step
    rows = [np.bincount(cell, weights=row, minlength=levels * steps) for row in values.reshape(-1, values.shape[-1])]
    return np.stack(rows).reshape(values.shape[:-1] + (levels, steps))


def bootstrap_ratio(numerator: np.ndarray, denominator: np.ndarray, draws: int, interval: float = 0.95,
                    seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Σ numerator / Σ denominator over levels, the mean over seeds, and its percentile bootstrap interval.

    numerator (seeds, levels, steps), denominator broadcastable to it; returns (estimate, low, high), each
    (steps,), NaN where the denominator is 0."""
    numerator, denominator = np.broadcast_arrays(numerator, denominator)
    levels = numerator.shape[1]
    weights = np.random.default_rng(seed).multinomial(levels, np.full(levels, 1 / levels), size=draws)
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = (numerator.sum(1) / denominator.sum(1)).mean(0)
        resampled = (np.einsum("bl,slt->bst", weights, numerator) /
                     np.einsum("bl,slt->bst", weights, denominator)).mean(1)
    tail = 100 * (1 - interval) / 2
    if not draws:
        return estimate, estimate, estimate
    with warnings.catch_warnings():  # steps no test episode reaches have no interval: NaN, as their estimate
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanpercentile(resampled, [tail, 100 - tail], axis=0)
    return estimate, low, high


def macro_f1(predicted: np.ndarray, label: np.ndarray, classes: int = len(CLASSES)) -> float:
    """sklearn's f1_score(average="macro", zero_division=1): F1_c = 2TP/(2TP+FP+FN), 1 where that is 0/0."""
    predicted, label = predicted.ravel(), label.ravel()
    scores = []
    for c in range(classes):
        tp = np.sum((predicted == c) & (label == c))
        wrong = np.sum((predicted == c) != (label == c))  # FP + FN
        scores.append(1.0 if 2 * tp + wrong == 0 else 2 * tp / (2 * tp + wrong))
    return float(np.mean(scores))


def solved_by_all(evaluations: Sequence[xr.Dataset], seeds: Mapping[str, Sequence[int]], levels: int) -> np.ndarray:
    """The test levels that every probed agent solves, as sorted level indices: `evaluations` are the runs' test
    evaluations (`evaluate.evaluate_run`), each read in greedy play (as the probe data plays) at each of the run's
    probed seeds (`seeds`, by run id); each must have played the `levels` test levels the probe data plays."""
    solved = np.ones(levels, bool)
    for evaluation in evaluations:
        run = evaluation.attrs["run"]
        if evaluation.sizes["level"] != levels:
            raise PipelineError(f"test evaluation of {run}: {evaluation.sizes['level']} levels, but the probe data "
                                f"plays {levels}; evaluate the run on the probes' test levels")
        probed = seeds.get(run)
        if not probed or not set(probed) <= set(evaluation["seed"].values.tolist()):
            raise PipelineError(f"test evaluation of {run}: probed seeds {probed} not all among its seeds "
                                f"{evaluation['seed'].values.tolist()}")
        greedy = evaluation["solved"].sel(mode="greedy", seed=list(probed)).transpose("seed", "level")
        solved &= greedy.values.astype(bool).all(0)
    return np.flatnonzero(solved)


def calibrate(prediction: tuple[np.ndarray, ...], truth: np.ndarray, step: np.ndarray, mask: np.ndarray,
              config: ProbeConfig) -> tuple[np.ndarray, np.ndarray]:
    """Each probe seed's threshold τ on the calibration samples (`probes.predict` output, labels and each sample's
    step) over the predictions of steps t < `config.calibration_steps`, and the precision it reaches there (NaN
    where no square is positive)."""
    early = step < config.calibration_steps
    direction, confidence, _ = (part[:, early] for part in prediction)
    truth = truth[early]
    thresholds, reached = [], []
    for seed_direction, seed_confidence in zip(direction[:, :, mask], confidence[:, :, mask]):
        correct = seed_direction == truth[:, mask]
        tau = threshold(seed_confidence, correct, config.precision)
        positive = seed_confidence >= tau
        thresholds.append(tau)
        reached.append(correct[positive].mean() if positive.any() else np.nan)
    return np.array(thresholds), np.array(reached)


def plan(prediction: tuple[np.ndarray, ...], thresholds: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Each sample's plan as the first probe seed reads it: ĉ on positive squares, else 0."""
    direction, confidence, _ = prediction
    return np.where((confidence[0] >= thresholds[0]) & mask, direction[0], 0)


def scores_by_step(prediction: tuple[np.ndarray, ...], truth: np.ndarray, thresholds: np.ndarray, mask: np.ndarray,
                   level: np.ndarray, step: np.ndarray, levels: int, steps: int, config: ProbeConfig) -> dict:
    """Recall and precision by step (value, low, high) and macro-F1 overall and by step, all means over probe
    seeds, of the samples of `levels` levels (`level`: each sample's level, 0..levels-1, the bootstrap's unit)."""
    direction, confidence, argmax = prediction
    positive = (confidence >= thresholds[:, None, None, None]) & mask
    counts = {name: per_step(value, level, step, levels, steps) for name, value in (
        ("hits", (positive & (direction == truth)).sum((-2, -1))), ("positive", positive.sum((-2, -1))),
        ("labelled", ((truth != 0) & mask).sum((-2, -1))))}

    def f1(at=slice(None)) -> float:
        return float(np.mean([macro_f1(seed[at][:, mask], truth[at][:, mask]) for seed in argmax]))

    by_step = np.full(steps, np.nan)
    for k in np.unique(step):
        by_step[k] = f1(step == k)
    return {"recall": np.stack(bootstrap_ratio(counts["hits"], counts["labelled"][None], config.bootstrap,
                                               config.interval), -1),
            "precision": np.stack(bootstrap_ratio(counts["hits"], counts["positive"], config.bootstrap,
                                                  config.interval), -1),
            "macro_f1": f1(), "macro_f1_by_step": by_step}


def score(train: xr.Dataset, calibration: xr.Dataset, test: xr.Dataset, scored_levels: np.ndarray,
          config: ProbeConfig = ProbeConfig(), picture_level: int = 0, picture_steps: int = 3) -> xr.Dataset:
    """Fit every (representation, target) probe on `train`, calibrate on the first `config.calibration_steps`
    steps of `calibration`, score on the test levels `scored_levels` of `test` (data from `probes.collect`;
    `solved_by_all` gives the paper's levels). With no level to score, the scores are NaN. Also the plan the first
    probe seed reads on test level `picture_level` at its first `picture_steps` steps (Fig. 13), scored or not."""
    representations = [name for name in REPRESENTATIONS if name in train]  # all three, unless a test leaves some out
    mask = probes.interior(train.sizes["row"], train.sizes["col"])
    levels, steps = int(test.attrs["levels"]), int(test.attrs["time_limit"])
    scored_levels = np.unique(np.asarray(scored_levels, int))  # sorted: a sample's level is its position in it
    scored = test.isel(sample=np.isin(test["level"].values, scored_levels))
    level, step = np.searchsorted(scored_levels, scored["level"].values), scored["step"].values
    pictured = test.isel(sample=(test["level"].values == picture_level) & (test["step"].values < picture_steps))
    out = {name: np.full((len(representations), len(TARGETS)) + shape, np.nan) for name, shape in {
        "recall": (steps, 3), "precision": (steps, 3), "macro_f1_by_step": (steps,), "macro_f1": (),
        "threshold": (config.seeds,), "calibration_precision": (config.seeds,), "loss": (config.seeds, config.epochs),
        "plan": (pictured.sizes["sample"], train.sizes["row"], train.sizes["col"])}.items()}
    for r, representation in enumerate(representations):
        for t, target in enumerate(TARGETS):
            weights, out["loss"][r, t] = probes.fit(train[representation].values, train[target].values,
                                                    config.seeds, config.kernel, config.epochs, config.batch,
                                                    config.learning_rate, config.weight_decay)
            thresholds, out["calibration_precision"][r, t] = calibrate(
                probes.predict(weights, calibration[representation].values, config.kernel),
                calibration[target].values, calibration["step"].values, mask, config)
            out["threshold"][r, t] = thresholds
            if len(scored_levels):
                found = scores_by_step(probes.predict(weights, scored[representation].values, config.kernel),
                                       scored[target].values, thresholds, mask, level, step, len(scored_levels),
                                       steps, config)
                for name in ("recall", "precision", "macro_f1", "macro_f1_by_step"):
                    out[name][r, t] = found[name]
            out["plan"][r, t] = plan(probes.predict(weights, pictured[representation].values, config.kernel),
                                     thresholds, mask)
    grid = ("representation", "target")
    episodes = np.bincount(step, minlength=steps)
    return xr.Dataset(
        {
            "recall": (grid + ("step", "estimate"), out["recall"], {"long_name": "probe recall of labelled squares"}),
            "precision": (grid + ("step", "estimate"), out["precision"], {"long_name": "probe precision"}),
            "macro_f1": (grid, out["macro_f1"], {"long_name": "EP's macro-F1 of the 5-class argmax (scored levels)"}),
            "macro_f1_by_step": (grid + ("step",), out["macro_f1_by_step"], {"long_name": "macro-F1 at each step"}),
            "threshold": (grid + ("probe_seed",), out["threshold"],
                          {"long_name": f"τ at precision {config.precision} over steps < {config.calibration_steps}"}),
            "calibration_precision": (grid + ("probe_seed",), out["calibration_precision"],
                                      {"long_name": "precision at τ on the calibration levels' early steps"}),
            "loss": (grid + ("probe_seed", "epoch"), out["loss"], {"long_name": "mean training cross-entropy"}),
            "episodes": ("step", episodes, {"long_name": "scored test episodes still running"}),
            "scored": ("test_level", np.isin(np.arange(levels), scored_levels),
                       {"long_name": "test level solved by every probed agent (scored)"}),
            "plan": (grid + ("picture_step", "row", "col"), out["plan"].astype(np.int8),
                     {"long_name": f"ĉ on positive squares of test level {picture_level}, probe seed 0",
                      "classes": ", ".join(CLASSES)}),
            "plan_truth": (("target", "picture_step", "row", "col"),
                           np.stack([np.where(mask, pictured[target].values, 0) for target in TARGETS]),
                           {"long_name": f"labels of test level {picture_level} at the pictured steps"}),
            "picture": (("picture_step", "row", "col", "layer"), pictured["grid"].values,
                        {"long_name": f"observation of test level {picture_level}"}),
        },
        coords={"representation": representations, "target": list(TARGETS), "step": np.arange(steps),
                "estimate": ["value", "low", "high"], "probe_seed": np.arange(config.seeds),
                "epoch": np.arange(config.epochs), "picture_step": pictured["step"].values},
        attrs={f"probe_{key}": value for key, value in asdict(config).items()} |
              {"picture_level": picture_level, "train_samples": train.sizes["sample"],
               "train_levels": train.attrs["levels"], "calibration_levels": calibration.attrs["levels"],
               "test_levels": levels, "scored_levels": len(scored_levels), "agent_seed": test.attrs.get("seed", 0)} |
              {key: test.attrs[key] for key in ("run", "run_config") if key in test.attrs},
    )


def collect(paths: list[str]) -> xr.Dataset:
    """Every probed agent's scores in one dataset, indexed by run id and `agent` (the run's k-th probed agent, its
    training seed the coordinate `agent_seed`), with each run's family and allocation, and the test levels they all
    score (`scored`). Every run must have as many probed agents (`sokoban.probes.seeds` is one list for all)."""
    by_run, scored = {}, []
    for path in paths:
        scores = open_dataset(path)
        run = Run.from_dict(json.loads(scores.attrs["run_config"]))
        scored.append(scores["scored"])
        if not scored[-1].equals(scored[0]):
            raise PipelineError(f"{path}: scored other test levels than {paths[0]}; every probed agent's scores must "
                                "count the levels all of them solve (rerun its sokoban_probe_fit)")
        found = by_run.setdefault(run.id, (run, []))[1]
        found.append(scores.drop_vars("scored").drop_attrs().expand_dims(agent=[len(found)]).assign_coords(
            agent_seed=("agent", [int(scores.attrs["agent_seed"])])))
    counts = {run_id: len(agents) for run_id, (_, agents) in by_run.items()}
    if len(set(counts.values())) > 1:
        raise PipelineError(f"probe scores: the runs have different numbers of probed agents ({counts}); give every "
                            "run the same sokoban.probes.seeds")
    per_run = []
    for run, agents in by_run.values():
        a = run.agent
        found = xr.concat(agents, dim="agent", join="outer")
        per_run.append(found.drop_vars("agent_seed").expand_dims(run=[run.id]).assign_coords(
            sweep=("run", [run.sweep]), recurrent=("run", [a.recurrent]), budget=("run", [run.budget]),
            depth=("run", [a.depth]), experts=("run", [a.experts]), width=("run", [a.width]),
            agent_seed=(("run", "agent"), [found["agent_seed"].values])))  # by run: each run's own seeds
    return xr.concat(per_run, dim="run", join="outer").assign(scored=scored[0]).assign_attrs(
        {key: value for key, value in scores.attrs.items() if key not in ("run", "run_config", "agent_seed")})


def fit_job(options: jobs.ProbeFit) -> int:
    """`sokoban-probe-fit`: the probes of one probed agent fitted, calibrated and scored on the levels every probed
    agent solves, as netCDF."""
    picture, fit = json.loads(options.picture), json.loads(options.fit)
    schema.validate_part(fit, "sokoban.probes.fit")  # what the config's checks refuse there, before any work
    train, calibration, test = (open_dataset(path) for path in (options.train, options.calibration, options.test))
    scored = solved_by_all([open_dataset(path) for path in options.solved], json.loads(options.seeds),
                           int(test.attrs["levels"]))
    scores = score(train, calibration, test, scored, ProbeConfig(**fit), picture.get("level", 0),
                   picture.get("steps", 3))
    store.write_netcdf(scores, options.out)
    recall = scores["recall"].sel(representation="state", target="agent_onto", estimate="value")
    print(f"{options.out}: {len(scored)} of {test.attrs['levels']} test levels solved by every probed agent; C_A recall "
          f"of the state at steps 0-4 {recall.values[:5].round(3).tolist()}")
    return 0


def collect_job(options: jobs.Probes) -> int:
    """`sokoban-probes`: every probed agent's scores in one dataset."""
    ds = collect(options.scores)
    store.write_netcdf(ds, options.out)
    print(f"{options.out}: {ds.sizes['run']} probed runs, {ds.sizes['agent']} probed agents each")
    return 0
