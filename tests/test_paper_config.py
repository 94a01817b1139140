"""config/paper.yaml against the paper: every number the paper or the authors' code states, read where the
pipeline uses it (the runs the config defines, with the library defaults they take where the config is silent)
and compared with the sourced constants of results.paper. A check that fails names the config key, both values
and the source, so that an edit that drifts from the paper says which sentence or file it contradicts."""

from dataclasses import replace
from numbers import Number

import numpy as np
import pytest
from helpers import REPO

from parallel_experts.analysis.sokoban_scores import PAPER_EXPERT
from parallel_experts.config.files import load
from parallel_experts.core import budget
from parallel_experts.lm import systems
from parallel_experts.results import paper
from parallel_experts.results.paper import Quoted
from parallel_experts.sokoban.settings import ProbeConfig
from parallel_experts.study import Study

PAPER_YAML = REPO / "config/paper.yaml"
DEFAULT = "omitted: the library's default"


@pytest.fixture(scope="module")
def config() -> dict:
    return load([PAPER_YAML])


def agrees(key: str, ours, quoted: Quoted, how: str = "") -> None:
    """Assert that the config's `key` (as its runs use it; `how` says where the value came from if not from the
    file) holds the paper's value; the message names the key, both values and the source."""
    expected = quoted.value
    number = isinstance(expected, Number) and not isinstance(expected, bool)
    same = ours == pytest.approx(expected, rel=1e-9, abs=0) if number else ours == expected
    assert same, (f"{PAPER_YAML.name}: {key} = {ours!r}{f' ({how})' if how else ''}, but the paper's is "
                  f"{expected!r}: {quoted.source}")


def plain(name: str, value) -> Quoted:
    """One of results.paper's plain constants (or reference tables), with its source from paper.SOURCES."""
    return Quoted(value, paper.SOURCES[name])


def fineweb(name: str) -> Quoted:
    """One number of paper.FINEWEB_RUN with its source."""
    return plain(f"FINEWEB_RUN.{name}", paper.FINEWEB_RUN[name])


def shared(values, key: str):
    """The one value every run has for `key`; several would mean runs of one config train differently."""
    found = set(values)
    assert len(found) == 1, f"{PAPER_YAML.name}: {key} differs between runs: {sorted(map(repr, found))}"
    return found.pop()


def written(block: dict, name: str) -> str:
    return "" if name in block else DEFAULT


# --------------------------------------------------------------------------------------------------- Sokoban

@pytest.fixture(scope="module")
def sokoban_runs(config) -> list:
    return list(Study.of(config).sokoban.by_id.values())


@pytest.mark.parametrize("name", list(paper.SOKOBAN_TRAINING))
def test_every_sokoban_run_trains_as_the_authors(config, sokoban_runs, name):
    if name == "env_steps":
        key, how = "sokoban.env_steps", ""
    else:
        key, how = f"sokoban.training.{name}", written(config["sokoban"].get("training", {}), name)
    agrees(key, shared((getattr(run.train, name) for run in sokoban_runs), key), paper.SOKOBAN_TRAINING[name], how)


def test_the_sokoban_learning_rate_anneals_linearly_to_zero(sokoban_runs):
    from parallel_experts.sokoban import train  # loads JAX: only this test needs it

    settings = sokoban_runs[0].train
    rate, updates = train.learning_rate(settings), settings.num_updates
    start = paper.SOKOBAN_TRAINING["learning_rate"]
    for update, fraction in ((0, 1.0), (updates // 5, 0.8), (updates, 0.0)):
        agrees(f"sokoban.training.learning_rate at update {update:,} of {updates:,}", float(rate(update)),
               start._replace(value=pytest.approx(fraction * start.value, rel=1e-6, abs=1e-12)))


@pytest.mark.parametrize("name", list(paper.SOKOBAN_AGENT))
def test_every_sokoban_agent_has_the_authors_sizes(config, sokoban_runs, name):
    key = f"sokoban.{name}"
    agrees(key, shared((getattr(run.agent, name) for run in sokoban_runs), key), paper.SOKOBAN_AGENT[name],
           written(config["sokoban"], name))


@pytest.mark.parametrize("split", list(paper.SOKOBAN_LEVELS))
def test_the_sokoban_levels_are_boxobans_unfiltered_splits(config, split):
    agrees(f"sokoban.levels.{split}.boxoban", config["sokoban"]["levels"][split].get("boxoban"),
           paper.SOKOBAN_LEVELS[split])


def test_the_recurrent_convlstm_runs_train_the_authors_grid(config):
    """The authors' Sokoban grid is their recurrent ConvLSTM runs'. Allocations that only the non-recurrent agents
    train (inferred from §5.1, not published) may come on top, so the grid is read off the recurrent runs."""
    published = paper.allocations("sokoban")
    recurrent = [run for run in Study.of(config).sokoban.sweeps
                 if run.agent.recurrent and run.agent.expert == PAPER_EXPERT]
    for name in paper.ANCHORS["sokoban"]:
        ours = sorted({(run.agent.depth, run.agent.experts, run.agent.width)
                       for run in recurrent if run.budget == name})
        theirs = published[published["budget"] == name][["depth", "experts", "width"]].values.tolist()
        theirs = sorted(map(tuple, theirs))
        agrees(f"sokoban.budgets.{name}.allocations (the recurrent {PAPER_EXPERT} runs)", ours,
               plain("allocations", theirs))


def test_each_sokoban_sweep_trains_the_papers_seeds(config, sokoban_runs):
    """Seeds per expert, family and budget: 9 / 9 / 3 for the recurrent ConvLSTM, 3 for ConvGLU (small and medium
    only) and, assumed at §5's stated minimum, the non-recurrent ConvLSTM."""
    counts = {}
    for run in sokoban_runs:
        if run.sweep in config["sokoban"]["sweeps"]:
            counts.setdefault((run.agent.expert, run.agent.recurrent), {}).setdefault(run.budget, set()).add(
                len(run.seeds))
    ours = {key: {name: shared(found, f"the seeds of {key} at {name}") for name, found in by_budget.items()}
            for key, by_budget in counts.items()}
    agrees("sokoban.sweeps.<name>.seeds (how many per expert, family, budget)", ours, paper.SOKOBAN_SEEDS)


def test_the_large_budget_adds_the_nonrecurrent_depth_16_runs(config, sokoban_runs):
    """§5.1's non-recurrent L = 16 at the large budget: the L = 16 allocations of the published grid's widths that
    the budget code admits, trained by the non-recurrent runs only (none of App. K's ConvGLU runs are large)."""
    large = next(b for b in Study.of(config).sokoban.budgets if b.name == "large")
    quoted = paper.SOKOBAN_FAMILY_ALLOCATIONS
    inferred = quoted._replace(value={family: tuple(budget.Allocation(*a) for a in by_budget["large"])
                                      for family, by_budget in quoted.value.items()})
    agrees("sokoban.budgets.large.family_allocations", large.family_only, inferred)
    anchor = budget.sokoban_work(large.anchor)
    admitted = budget.enumerate_allocations(budget.Allocation, lambda a: np.array([budget.sokoban_work(a) / anchor]),
                                            [16], sorted({a.width for a in large.allocations}), large.tolerance)
    assert set(admitted) == set(inferred.value[False])
    deep = {(run.agent.expert, run.agent.recurrent) for run in sokoban_runs if run.agent.depth == 16}
    assert deep == {("convlstm", False)}
    assert not any(run.agent.expert == "convglu" and run.budget == "large" for run in sokoban_runs)


def test_the_sokoban_ablations_vary_the_papers_runs(config):
    ablations = config["sokoban"]["ablations"]
    for setting, (budget_name, allocation) in paper.SOKOBAN_ABLATION_RUNS.items():
        spec = ablations[setting]
        agrees(f"sokoban.ablations.{setting}.budget, .allocation", (spec["budget"], tuple(spec["allocation"])),
               plain("SOKOBAN_ABLATION_RUNS", (budget_name, allocation)))
    agrees("sokoban.ablations.aggregation.seeds (how many)", len(ablations["aggregation"]["seeds"]),
           plain("SOKOBAN_ABLATION_SEEDS", paper.SOKOBAN_ABLATION_SEEDS))


def test_the_probes_read_the_papers_agents_with_its_settings(config):
    probes = config["sokoban"]["probes"]
    compared = [Study.of(config).sokoban.by_id[name] for name in probes["compare"]]
    ours = shared((run.budget for run in compared), "sokoban.probes.compare (budget)"), tuple(
        sorted(run.agent.depth for run in compared if run.agent.recurrent))
    agrees("sokoban.probes.compare (budget, recurrent depths)", ours, paper.PROBES["compare"])
    fit = ProbeConfig(**probes.get("fit", {}))  # as the probe jobs read it, defaults included
    agrees("sokoban.probes.fit.precision", fit.precision, paper.PROBES["precision"])
    agrees("sokoban.probes.fit.calibration_steps", fit.calibration_steps, paper.PROBES["calibration_steps"],
           "" if "calibration_steps" in probes.get("fit", {}) else "omitted: the library's default")
    agrees("sokoban.probes.episodes", probes["episodes"], paper.PROBES["episodes"])


@pytest.mark.parametrize("domain", budget.DOMAINS)
def test_every_budget_of_the_paper_is_anchored_where_the_paper_anchors_it(config, domain):
    ours = {b.name: b.anchor.as_list() for b in Study.of(config).families(domain).budgets}
    for name, anchor in paper.ANCHORS[domain].items():
        agrees(f"{domain}.budgets.{name}.anchor", ours.get(name), plain("ANCHORS", anchor))


# -------------------------------------------------------------------------------------------------- FineWeb

@pytest.fixture(scope="module")
def lm_runs(config) -> list:
    return list(Study.of(config).lm.by_id.values())


def test_every_fineweb_run_has_the_papers_data_and_precision(config, lm_runs):
    agrees("lm.vocabulary", shared((r.model.vocab for r in lm_runs), "lm.vocabulary"), fineweb("vocabulary"))
    agrees("lm.dtype", shared((r.model.dtype for r in lm_runs), "lm.dtype"), fineweb("dtype"))
    agrees("lm.windows", tuple(sorted({r.window for r in lm_runs})), fineweb("windows"))
    agrees("lm.head_dim", config["lm"]["head_dim"], plain("DOMAIN_CONFIG", paper.DOMAIN_CONFIG["lm"]["head_dim"]))


def test_every_fineweb_run_trains_the_papers_tokens(config, lm_runs):
    training = config["lm"].get("training", {})
    agrees("lm.train_tokens", shared((r.train.train_tokens for r in lm_runs), "lm.train_tokens"),
           fineweb("train_tokens"))
    agrees("lm.training.batch_tokens", shared((r.train.batch_tokens for r in lm_runs), "lm.training.batch_tokens"),
           fineweb("batch_tokens"), written(training, "batch_tokens"))
    agrees("lm.train_tokens / lm.training.batch_tokens (updates)",
           shared((r.train.updates for r in lm_runs), "updates"), paper.FINEWEB_TRAINING["updates"])


def test_each_fineweb_family_trains_on_the_authors_windows(config, lm_runs):
    """Recurrent: 64-token segments with a rolling cache of W; non-recurrent: independent sequences of 2W."""
    training = config["lm"].get("training", {})
    for r in lm_runs:
        where = f"{'recurrent' if r.model.recurrent else 'non-recurrent'} run {r.id}"
        if r.model.recurrent:
            agrees(f"lm.training.segment ({where})", r.train.sequence, paper.FINEWEB_TRAINING["segment"],
                   written(training, "segment"))
            assert r.train.memory == r.window, f"{where}: its rolling cache holds {r.train.memory}, not W"
        else:
            agrees(f"the training sequence / W ({where})", r.train.sequence / r.window,
                   paper.FINEWEB_TRAINING["sequence_per_window"])
    for name in ("reg", "schedule"):
        agrees(f"lm.training.{name}", shared((getattr(r.train, name) for r in lm_runs), name),
               paper.FINEWEB_TRAINING[name], written(training, name))


def test_fineweb_evaluation_and_machines_are_the_authors(config):
    agrees("lm.evaluation.streams", Study.of(config).lm.settings.evaluation.streams,
           paper.FINEWEB_TRAINING["evaluation_streams"], written(config["lm"].get("evaluation", {}), "streams"))
    for family in ("lm_train", "bench"):
        agrees(f"resources.{family}.gpus", config["resources"][family]["gpus"], paper.FINEWEB_TRAINING["gpus"])


@pytest.mark.parametrize("recurrent", [False, True], ids=["non-recurrent", "recurrent"])
def test_each_fineweb_family_optimises_as_the_authors(lm_runs, recurrent):
    from parallel_experts.lm import optim  # loads JAX: only this test needs it

    schedule, updates = shared(((r.train.schedule, r.train.updates) for r in lm_runs
                                if r.model.recurrent == recurrent), "lm.training.schedule, updates")
    ours = replace(optim.OptimConfig.for_family(recurrent), schedule=schedule)  # as lm.train builds it
    quoted = paper.FINEWEB_OPTIMISER
    for name in ("peak_lr", "embed_lr", "head_lr", "adam_betas", "adam_eps", "muon_beta", "ns_steps",
                 "cautious_decay", "clip_norm"):
        agrees(f"lm.optim.OptimConfig.{name}", getattr(ours, name), quoted[name], DEFAULT)
    floor = quoted["min_lr"]._replace(value=quoted["min_lr"].value[recurrent])
    agrees("lm.optim.OptimConfig.for_family(...).min_lr", ours.min_lr, floor, DEFAULT)
    agrees(f"the warm-up of {updates:,} updates", ours.warmup_steps(updates), quoted["warmup"], DEFAULT)
    rate = optim.schedule(ours, updates)
    for update, expected in ((0, floor), (quoted["warmup"].value, quoted["peak_lr"]), (updates, floor)):
        agrees(f"the matrix learning rate at update {update:,}", float(rate(update)),
               expected._replace(value=pytest.approx(expected.value, rel=1e-3)), DEFAULT)  # float32


def test_every_fineweb_budget_trains_the_authors_grid_in_both_families(lm_runs):
    """The authors' LM/README.md grid serves both families' commands."""
    published = paper.allocations("lm")
    columns = ["depth", "experts", "width", "q_heads", "kv_heads"]
    for name in paper.ANCHORS["lm"]:
        theirs = sorted(map(tuple, published[published["budget"] == name][columns].values.tolist()))
        for recurrent in (False, True):
            ours = sorted({(r.model.depth, r.model.experts, r.model.width, r.model.q_heads, r.model.kv_heads)
                           for r in lm_runs if r.budget == name and r.model.recurrent == recurrent})
            agrees(f"lm.budgets.{name}.allocations ({'' if recurrent else 'non-'}recurrent runs)", ours,
                   plain("allocations", theirs))


@pytest.mark.parametrize("table, block, value", [("table5_latency", "latency", "ms_per_token"),
                                                 ("table6_throughput", "throughput", "tokens_per_s")])
def test_the_systems_tables_measure_the_papers_cells(config, table, block, value):
    published, spec = paper.reference(table), config["lm"][block]
    agrees(f"lm.{block}.contexts", sorted(spec["contexts"]), plain(table, sorted(set(published["context"].tolist()))))
    rows = systems.LATENCY_ROWS if block == "latency" else systems.THROUGHPUT_ROWS
    agrees(f"lm.systems rows of {table}", sorted(rows),
           plain(table, sorted(set(map(tuple, published[["recurrent", "depth", "experts"]].values.tolist())))))
    # the paper's Transformer L16 E1 is the small budget's anchor, (16, 1, 768)
    agrees(f"lm.{block}.width", spec["width"], plain("ANCHORS", paper.ANCHORS["lm"]["small"][2]))
    if block == "latency":
        missing = set(published["batch"].tolist()) - set(spec["batches"])
        assert not missing, f"{PAPER_YAML.name}: lm.latency.batches lacks the paper's B = {sorted(missing)}"
    else:
        agrees("lm.throughput.batch_tokens", spec["batch_tokens"], fineweb("batch_tokens"))
