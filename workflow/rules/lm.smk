# Language modelling: token shards, one training job per run, the sliding-window validation loss, the sweep.

# Fig. 5 is the small budget at the first window (128 tokens in the paper); every other (budget, window) sweep
# is one of the appendix's fixed-compute panels (Figs. 14-15).
LM_RESULT = {"sweep": "results/lm/sweep.nc"}
LM_SETTINGS = sorted({(run.budget, run.window) for run in LM_RUNS.values()},
                     key=lambda s: (list(config["lm"]["budgets"]).index(s[0]), s[1]))
LM_FIG5 = ("small", config["lm"]["windows"][0])
for budget_name, window in LM_SETTINGS:
    figure = "Fig. 5" if (budget_name, window) == LM_FIG5 else "Figs. 14-15"
    REPORTS[f"lm_{budget_name}_W{window}"] = {
        "paper": f"{figure} FineWeb allocation sweep: {budget_name} budget, {window}-token window",
        "notebook": "lm_sweep", "inputs": LM_RESULT, "params": {"budget": budget_name, "window": window}}
if LM_RUNS:
    REPORTS["lm_depth"] = {"paper": "Fig. 3 (right): best FineWeb validation loss with depth at most L",
                           "inputs": LM_RESULT}


localrules:
    fig5,
    fig14_15,
    fig3_right,


rule fig5:
    """Named target: Fig. 5 (small budget, first window)."""
    input:
        [f"reports/lm_{b}_W{w}.html" for b, w in LM_SETTINGS if (b, w) == LM_FIG5],


rule fig14_15:
    """Named target: the other fixed-compute LM sweeps."""
    input:
        [f"reports/lm_{b}_W{w}.html" for b, w in LM_SETTINGS if (b, w) != LM_FIG5],


rule fig3_right:
    """Named target: Fig. 3 (right)."""
    input:
        "reports/lm_depth.html",


rule lm_tokens:
    """The corpus as GPT-2 token shards (shard 0 is validation), tokenised here or downloaded pre-tokenised."""
    output:
        directory("results/lm/tokens"),
    params:
        corpus=json.dumps(config["lm"]["corpus"], sort_keys=True),
        shard_tokens=config["lm"]["shard_tokens"],
    log:
        "results/logs/lm/tokens.log",
    threads: threads()
    resources:
        **resources(),
    conda:
        CONDA_ENV
    shell:
        "python -m parallel_experts lm-tokens --corpus {params.corpus:q} --shard-tokens {params.shard_tokens} "
        "--out {output} > {log} 2>&1"


rule lm_train:
    """One allocation of one family at one window; resumes from its checkpoint after a kill."""
    input:
        tokens="results/lm/tokens",
    output:
        curve="results/lm/runs/{run}/curve.nc",
        model="results/lm/runs/{run}/model.eqx",
    wildcard_constraints:
        run=LM_RUN_PATTERN,
    params:
        run=lm_run_json,
        run_dir=lambda wildcards: f"results/lm/runs/{wildcards.run}",
    log:
        "results/logs/lm/train/{run}.log",
    benchmark:
        "results/benchmarks/lm/train/{run}.tsv"
    threads: threads("lm_train")
    resources:
        **resources("lm_train"),
    conda:
        CONDA_ENV
    shell:
        "python -m parallel_experts lm-train --run {params.run:q} --tokens {input.tokens} "
        "--run-dir {params.run_dir} > {log} 2>&1"


rule lm_evaluate:
    """Streaming validation loss at the run's window; both families score the same tokens."""
    input:
        model="results/lm/runs/{run}/model.eqx",
        tokens="results/lm/tokens",
    output:
        "results/lm/runs/{run}/validation.nc",
    wildcard_constraints:
        run=LM_RUN_PATTERN,
    params:
        run=lm_run_json,
        run_dir=lambda wildcards: f"results/lm/runs/{wildcards.run}",
        evaluation=json.dumps(lm_experiment.evaluation(config), sort_keys=True),
    log:
        "results/logs/lm/evaluate/{run}.log",
    benchmark:
        "results/benchmarks/lm/evaluate/{run}.tsv"
    threads: threads("lm_train")
    resources:
        **resources("lm_train"),
    conda:
        CONDA_ENV
    shell:
        "python -m parallel_experts lm-evaluate --run {params.run:q} --run-dir {params.run_dir} "
        "--tokens {input.tokens} --evaluation {params.evaluation:q} --out {output} > {log} 2>&1"


rule lm_sweep:
    """Every run's learning curve and validation loss in one dataset."""
    input:
        curves=expand("results/lm/runs/{run}/curve.nc", run=LM_RUNS),
        evals=expand("results/lm/runs/{run}/validation.nc", run=LM_RUNS),
    output:
        "results/lm/sweep.nc",
    log:
        "results/logs/lm/sweep.log",
    threads: threads()
    resources:
        **resources(),
    conda:
        CONDA_ENV
    shell:
        "python -m parallel_experts lm-sweep --out {output} --curves {input.curves} --evals {input.evals} > {log} 2>&1"
