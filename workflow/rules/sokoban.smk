# Sokoban: level sets, one training job per run (all its seeds under vmap), solve rates, and the sweep table.

# The paper's figure for each (expert, budget) sweep, and the named target that renders it.
SOKOBAN_FIGURES = {("convlstm", "small"): ("Fig. 2", "fig2"), ("convlstm", "medium"): ("Fig. 16", "fig16"),
                   ("convlstm", "large"): ("Fig. 17", "fig17"), ("convglu", "small"): ("Figs. 18-20", "fig18_20_small"),
                   ("convglu", "medium"): ("Figs. 18-20", "fig18_20_medium"),
                   ("convglu", "large"): ("Figs. 18-20", "fig18_20_large")}
SWEEP_RESULT = {"sweep": "results/sokoban/sweep.nc"}
named_targets = set()  # the first sweep of an (expert, budget) pair gets the figure's name
for sweep_name, sweep in config["sokoban"].get("sweeps", {}).items():
    for budget_name in sweep["budgets"]:
        figure, target = SOKOBAN_FIGURES.get((sweep["expert"], budget_name), ("", None))
        report_name = f"sokoban_{sweep_name}_{budget_name}"
        if target and target not in named_targets:
            named_targets.add(target)

            rule:
                name:
                    target
                localrule: True
                input:
                    f"reports/{report_name}.html",

        REPORTS[report_name] = {
            "paper": f"{figure} Sokoban allocation sweep: {sweep_name}, {budget_name} budget".strip(),
            "notebook": "sokoban_sweep", "inputs": SWEEP_RESULT,
            "params": {"sweep_name": sweep_name, "budget": budget_name}}
if SOKOBAN_RUNS:
    REPORTS["sokoban_depth"] = {"paper": "Fig. 3 (left): best Sokoban return with depth at most L",
                                "inputs": SWEEP_RESULT}
    REPORTS["sokoban_tables"] = {"paper": "Tables 1 and 7, depth tests: Sokoban solve rates and final-five scores",
                                 "inputs": SWEEP_RESULT}


rule sokoban_levels:
    """Training or test levels, from the config's source (generated offline, or a Boxoban split)."""
    output:
        "results/sokoban/levels/{set}.npz",
    wildcard_constraints:
        set="train|test",
    params:
        source=lambda wildcards: json.dumps(config["sokoban"]["levels"][wildcards.set], sort_keys=True),
        boxoban=json.dumps(config["sokoban"].get("boxoban", {}), sort_keys=True),
    log:
        "results/logs/sokoban/levels/{set}.log",
    threads: threads()
    resources:
        **resources(),
    conda:
        CONDA_ENV
    shell:
        "python -m parallel_experts sokoban-levels --source {params.source:q} --boxoban {params.boxoban:q} "
        "--out {output} > {log} 2>&1"


rule sokoban_train:
    """One allocation, recurrent or not, all seeds; resumes from its checkpoint after a kill."""
    input:
        levels="results/sokoban/levels/train.npz",
    output:
        curve="results/sokoban/runs/{run}/curve.nc",
        agents="results/sokoban/runs/{run}/agents.eqx",
    wildcard_constraints:
        run=RUN_PATTERN,
    params:
        run=sokoban_run_json,
        run_dir=lambda wildcards: f"results/sokoban/runs/{wildcards.run}",
    log:
        "results/logs/sokoban/train/{run}.log",
    benchmark:
        "results/benchmarks/sokoban/train/{run}.tsv"
    threads: threads("train")
    resources:
        **resources("train"),
    conda:
        CONDA_ENV
    shell:
        "python -m parallel_experts sokoban-train --run {params.run:q} --levels {input.levels} "
        "--run-dir {params.run_dir} > {log} 2>&1"


rule sokoban_evaluate:
    """Greedy and sampled solve rate of every seed's agent, each test level played exactly once."""
    input:
        agents="results/sokoban/runs/{run}/agents.eqx",
        levels="results/sokoban/levels/test.npz",
    output:
        "results/sokoban/runs/{run}/eval.nc",
    wildcard_constraints:
        run=RUN_PATTERN,
    params:
        run=sokoban_run_json,
        run_dir=lambda wildcards: f"results/sokoban/runs/{wildcards.run}",
    log:
        "results/logs/sokoban/evaluate/{run}.log",
    benchmark:
        "results/benchmarks/sokoban/evaluate/{run}.tsv"
    threads: threads("train")
    resources:
        **resources("train"),
    conda:
        CONDA_ENV
    shell:
        "python -m parallel_experts sokoban-evaluate --run {params.run:q} --run-dir {params.run_dir} "
        "--levels {input.levels} --out {output} > {log} 2>&1"


rule sokoban_sweep:
    """Every run's learning curve, final-five score and solve rate in one dataset."""
    input:
        curves=expand("results/sokoban/runs/{run}/curve.nc", run=SOKOBAN_RUNS),
        evals=expand("results/sokoban/runs/{run}/eval.nc", run=SOKOBAN_RUNS),
    output:
        "results/sokoban/sweep.nc",
    log:
        "results/logs/sokoban/sweep.log",
    threads: threads()
    resources:
        **resources(),
    conda:
        CONDA_ENV
    shell:
        "python -m parallel_experts sokoban-sweep --out {output} --curves {input.curves} "
        "--evals {input.evals} > {log} 2>&1"


localrules:
    fig3_left,
    tables_1_7,


rule fig3_left:
    """Named target: Fig. 3 (left)."""
    input:
        "reports/sokoban_depth.html",


rule tables_1_7:
    """Named target: Tables 1 and 7 and the depth tests."""
    input:
        "reports/sokoban_tables.html",
