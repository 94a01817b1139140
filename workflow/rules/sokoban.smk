# Sokoban: level sets, one training job per run (all its seeds under vmap), solve rates, and one dataset per run
# family: the budget sweeps, the expert-count sweep (the ablations' is in ablations.smk).


rule sokoban_levels:
    """Training, test or probe-calibration levels, from the config's source (generated offline, or a Boxoban split)."""
    output:
        paths.levels("{set}"),
    log:
        paths.log("sokoban/levels/{set}"),
    wildcard_constraints:
        set="train|test|valid",
    conda:
        CONDA_ENV
    threads: threads("sokoban_levels")
    resources:
        **resources("sokoban_levels"),
    params:
        source=lambda wildcards: json.dumps(STUDY.config["sokoban"]["levels"][wildcards.set], sort_keys=True),
        boxoban=json.dumps(STUDY.config["sokoban"].get("boxoban", {}), sort_keys=True),
    shell:
        "python -m parallel_experts sokoban-levels --source {params.source:q} --boxoban {params.boxoban:q} "
        "--out {output:q} > {log:q} 2>&1"


rule sokoban_train:
    """One allocation, recurrent or not, all seeds; resumes from its checkpoint after a kill or a stop before the
    time limit (core/walltime.py)."""
    input:
        config=ancient(CONFIG_JSON),  # the run's definition; its edits rerun jobs via params
        levels=paths.levels("train"),
    output:
        curve=paths.curve("sokoban", "{run}"),
        agents=paths.weights("sokoban", "{run}"),
    log:
        paths.log("sokoban/train/{run}"),
    benchmark:
        paths.benchmark("sokoban_train", run="{run}")
    wildcard_constraints:
        run=one_of(SOKOBAN_RUNS),
    # Training first, Sokoban's before the LM's (its runs feed the longest chains: evaluation, probe data, fits),
    # so that the short jobs fill both cores at the end instead of one long job running alone.
    priority: 2
    retries: retries("sokoban_train")
    conda:
        CONDA_ENV
    threads: threads("sokoban_train")
    resources:
        **resources("sokoban_train"),
    params:
        definition=run_json(SOKOBAN_RUNS),  # reruns the job when the run's definition changes
        run_dir=run_dir("sokoban"),
    shell:
        "python -m parallel_experts sokoban-train --config {input.config:q} --run {wildcards.run:q} --levels {input.levels:q} "
        "--run-dir {params.run_dir:q} > {log:q} 2>&1"


rule sokoban_evaluate:
    """Greedy and sampled solve rate of every seed's agent, each test level played exactly once."""
    input:
        config=ancient(CONFIG_JSON),  # the run's definition; its edits rerun jobs via params
        agents=paths.weights("sokoban", "{run}"),
        levels=paths.levels("test"),
    output:
        paths.evaluation("sokoban", "{run}"),
    log:
        paths.log("sokoban/evaluate/{run}"),
    benchmark:
        paths.benchmark("sokoban_evaluate", run="{run}")
    wildcard_constraints:
        run=one_of(SOKOBAN_RUNS),
    conda:
        CONDA_ENV
    threads: threads("sokoban_evaluate")
    resources:
        **resources("sokoban_evaluate"),
    params:
        definition=run_json(SOKOBAN_RUNS),  # reruns the job when the run's definition changes
        run_dir=run_dir("sokoban"),
    shell:
        "python -m parallel_experts sokoban-evaluate --config {input.config:q} --run {wildcards.run:q} --run-dir {params.run_dir:q} "
        "--levels {input.levels:q} --out {output:q} > {log:q} 2>&1"


rule sokoban_dataset:
    """One family's runs (the budget sweeps or the expert-count sweep): every run's learning curve, final-five
    score and solve rate in one dataset."""
    input:
        curves=dataset_files(paths.curve),
        evals=dataset_files(paths.evaluation),
    output:
        f"{paths.ROOT}/sokoban/{{dataset}}.nc",
    log:
        paths.log("sokoban/{dataset}"),
    wildcard_constraints:
        dataset=one_of(SOKOBAN_DATASETS),
    conda:
        CONDA_ENV
    threads: threads("sokoban_dataset")
    resources:
        **resources("sokoban_dataset"),
    params:
        # the expert-count sweep's runs, some of them the budget sweeps' (sokoban.experiment.shared), as one family
        family=lambda wildcards: (
            f"--family {sokoban_experiment.EXPERT_COUNT}" if wildcards.dataset == Path(paths.EXPERT_COUNT).stem else ""
        ),
    shell:
        "python -m parallel_experts sokoban-sweep --out {output:q} --curves {input.curves:q} "
        "--evals {input.evals:q} {params.family} > {log:q} 2>&1"
