"""Fig. 10 (right): the FineWeb ablations, scored as the sweeps are (validation cross-entropy at the run's window,
lower is better), beside the paper's value of the same configuration, with a verdict on the paper's finding.

Each ablation trains the recurrent model at one allocation of one budget and window once per value of one model
setting and seed (`lm.ablations`, see lm/experiment.py); the ablations dataset lists each ablation's configurations
in its attribute `ablations` and holds every varied setting as a coordinate. The run at ModelConfig's default is
the sweep's run. A value's loss is the mean over its seeds; by default the LM has one seed (the paper has no seeds
either), and then no difference here has an error bar.
"""

from __future__ import annotations


import pandas as pd
import xarray as xr

from parallel_experts.analysis import lm_losses
from parallel_experts.results import paper as published
from parallel_experts.results import store
from parallel_experts.study import Study

# Each setting's default (ModelConfig's, the sweep's run; lm.models is not imported, so notebooks need no JAX).
DEFAULTS = {"aggregation": "sqrt_sum", "kv_cache": "level"}
# The run of each ablation (Fig. 10 right; our choice, as the paper names none): budget, window, allocation
# (L, E, d); the paper's value of the default (§5.2: the small budget's L = 2 at W = 128); and its finding. The
# KV-sharing pair has no stated run, only its effect (App. A.3).
PAPER_RUNS, PAPER_VALUES = published.FINEWEB_ABLATION_RUNS, published.FINEWEB_ABLATION_VALUES
PAPER_KV_SHARING_COST = published.KV_SHARING_COST
_BUDGET, _WINDOW, _ALLOCATION = PAPER_RUNS["aggregation"]
PAPER_FINDINGS = {
    "aggregation": "the paper's finding (App. D): the sqrt-sum, its default, is consistently competitive across "
                   "domains; the FineWeb bars of Fig. 10 are not published as numbers, only the sqrt-sum run's "
                   f"≈ {PAPER_VALUES['aggregation']} (§5.2).",
    "kv_cache": f"the paper's finding (App. A.3): sharing the cache between the experts of a level increases "
                f"validation loss by about {PAPER_KV_SHARING_COST}, and saves memory and time.",
}
# Each ablation's section: its title and what it varies (shown above its figure).
PAGES = {
    "aggregation": ("FineWeb aggregation rules (Fig. 10, right)",
        "The recurrent Transformer at one allocation, trained once per rule that merges the experts' outputs "
        "into the shared state s (paper App. D; authors' PRE/recnanogpt/): sqrt-sum Σh/√E (the default), mean Σh/E, "
        "routed-mean Σαh/(ε+Σα), routed-sqrt-sum Σαh/√(ε+Σα²), with α = σ(λ) from a router that reads "
        "[z; s] at every level. Only the merge of the outputs changes: every rule merges the experts' key and "
        "value proposals into the level's cache by the sqrt-sum, and the router never sees them. Everything "
        "else is the sweep's run, which is the sqrt-sum point. Points: validation cross-entropy at the run's "
        "window (lower is better). The reference run (our choice; the paper names none) is the "
        f"{_BUDGET} budget's {_ALLOCATION} at W = {_WINDOW}, whose sqrt-sum value (≈ {PAPER_VALUES['aggregation']}, "
        "§5.2) is drawn beside ours where this config runs the same configuration."),
    "kv_cache": ("FineWeb KV-cache sharing (App. A.3)",
        "The recurrent Transformer at one allocation, trained twice: with one rolling key/value cache per depth "
        "level that all its experts read, their key and value proposals merged into one entry by the sqrt-sum "
        "(`level`: the paper's model and the sweep's run), and with one cache per expert that holds only its "
        "own proposals (`expert`). Everything else is the sweep's run. Points: validation cross-entropy at the "
        "run's window (lower is better). The paper states no run for this pair, only its effect."),
}
NOISE = ("one run per value (the paper's FineWeb runs have no seeds either): a difference of a few hundredths of a "
         "nat may be the run-to-run noise of one seed, so an ordering that close is not resolved.")
SEEDS_NOISE = ("losses are means over seeds ({seeds}), ± one standard error in the table and figure; an ordering "
               "within a few standard errors is not resolved.")


def scores(data: xr.Dataset, setting: str) -> pd.DataFrame:
    """One row per value of the ablation's `setting`, in the config's order: the value, the run's budget, window,
    allocation, validation loss (with its standard error and seed count where a value has several seeds) and
    final training cross-entropy, means over seeds."""
    runs = lm_losses.run_table(data)
    table = members(runs, data, setting)
    return table[lm_losses.with_seed_columns(runs, [
        "run", setting, "budget", "window", *lm_losses.ALLOCATION, "q_heads", "kv_heads", "validation_loss",
        "final_train_ce_loss", "train_tokens", "scored_tokens"])]


def members(runs: pd.DataFrame, data: xr.Dataset, setting: str) -> pd.DataFrame:
    """The rows of `runs` (lm_losses.run_table of `data`) that the ablation of `setting` trains, in the config's
    order, each with its value of the setting (column `setting`) after its run id."""
    table = runs.set_index("run").loc[store.ablation_members(data)[setting]].reset_index()
    table.insert(1, setting, data[setting].sel(run=table["run"].values).values)
    return table


def paper_value(study: Study, setting: str, table: pd.DataFrame, vocab: int) -> tuple[float | None, list[str]]:
    """The paper's value of the default setting, where this ablation is the paper's configuration (its budget,
    window and allocation, and the sweep's corpus, vocabulary and anchors); else None and the reasons."""
    if setting not in PAPER_RUNS:
        return None, ["the paper gives no value of this configuration, only the effect stated below"]
    budget, window, allocation = PAPER_RUNS[setting]
    row = table.iloc[0]
    ours = (row["budget"], int(row["window"]), tuple(int(row[c]) for c in lm_losses.ALLOCATION))
    reasons = lm_losses.comparability(study, ours[0], ours[1], vocab)
    if ours != (budget, window, allocation):
        reasons.append(f"this ablation runs the {ours[0]} budget's L{ours[2][0]} E{ours[2][1]} d{ours[2][2]} at "
                       f"W = {ours[1]}, the paper's the {budget} budget's L{allocation[0]} E{allocation[1]} "
                       f"d{allocation[2]} at W = {window}")
    return (None, reasons) if reasons else (PAPER_VALUES[setting], [])


def aggregation_verdict(table: pd.DataFrame) -> str:
    """Whether the sqrt-sum has the lowest validation loss of the rules in `table`, its rank and the gap."""
    if "sqrt_sum" not in set(table["aggregation"]) or len(table) < 2:
        return "the paper's pattern cannot be checked: it needs the sqrt-sum and at least one other rule."
    ranked = table.sort_values("validation_loss", kind="stable").reset_index(drop=True)
    rank = int(ranked.index[ranked["aggregation"] == "sqrt_sum"][0])
    sqrt_sum, best = ranked.iloc[rank], ranked.iloc[0]
    if rank == 0:
        runner_up = ranked.iloc[1]
        return (f"the sqrt-sum has the lowest validation loss ({sqrt_sum['validation_loss']:.3f}), "
                f"{runner_up['validation_loss'] - sqrt_sum['validation_loss']:.3f} nats below the next rule, "
                f"{runner_up['aggregation']}.")
    return (f"{best['aggregation']} has the lowest validation loss ({best['validation_loss']:.3f}), "
            f"{sqrt_sum['validation_loss'] - best['validation_loss']:.3f} nats below the sqrt-sum "
            f"({sqrt_sum['validation_loss']:.3f}), which ranks {rank + 1} of {len(ranked)}.")


def kv_cache_verdict(table: pd.DataFrame) -> str:
    """What sharing one cache per level costs against one cache per expert, beside the paper's +0.02."""
    losses = dict(zip(table["kv_cache"], table["validation_loss"]))
    if not {"level", "expert"} <= set(losses):
        return "the paper's effect cannot be checked: it needs both the shared (level) and the per-expert cache."
    cost = losses["level"] - losses["expert"]
    return (f"sharing one cache per level {'costs' if cost >= 0 else 'gains'} {abs(cost):.3f} nats of validation "
            f"loss against one cache per expert ({losses['level']:.3f} against {losses['expert']:.3f}; the paper: "
            f"+{PAPER_KV_SHARING_COST}).")


VERDICTS = {"aggregation": aggregation_verdict, "kv_cache": kv_cache_verdict}


def summary(study: Study, setting: str, table: pd.DataFrame, vocab: int) -> list[str]:
    """The lines under an ablation's figure: the verdict, the paper's value or why it is not shown, the paper's
    finding, the noise of one run per value (or of the means over seeds)."""
    value, why_not = paper_value(study, setting, table, vocab)
    default = DEFAULTS[setting]
    if value is None:
        paper = f"the paper's {default} value is not shown beside ours: " + "; ".join(why_not) + "."
    else:
        budget, window, (depth, experts, width) = PAPER_RUNS[setting]
        paper = (f"paper, {default}: ≈ {value:.2f} (the authors' {budget} L{depth} E{experts} d{width} at "
                 f"W = {window}, {published.FINEWEB_RUN['train_tokens'] / 1e9:.2f}B tokens; the same "
                 "configuration)")
    noise = (SEEDS_NOISE.format(seeds=", ".join(f"{v}: {n}" for v, n in zip(table[setting], table["seeds"])))
             if "seeds" in table else NOISE)
    return [f"this run: {VERDICTS[setting](table)}", paper, PAPER_FINDINGS[setting], noise]
