# Language modelling: token shards, one training job per run, the sliding-window validation loss and the sweep
# (the ablations' dataset is in ablations.smk).


rule lm_tokens:
    """The corpus as GPT-2 token shards (shard 0 is validation), tokenised here or downloaded pre-tokenised."""
    output:
        directory(paths.LM_TOKENS),
    log:
        paths.log("lm/tokens"),
    conda:
        CONDA_ENV
    threads: threads("lm_tokens")
    resources:
        **resources("lm_tokens"),
    params:
        corpus=json.dumps(STUDY.config["lm"]["corpus"], sort_keys=True),
        shard_tokens=STUDY.lm.settings.shard_tokens,
    shell:
        "python -m parallel_experts lm-tokens --corpus {params.corpus:q} --shard-tokens {params.shard_tokens:q} "
        "--out {output:q} > {log:q} 2>&1"


rule lm_train:
    """One allocation of one family at one window; resumes from its checkpoint after a kill or a stop before the
    time limit (core/walltime.py)."""
    input:
        config=ancient(CONFIG_JSON),  # the run's definition; its edits rerun jobs via params
        tokens=paths.LM_TOKENS,
    output:
        curve=paths.curve("lm", "{run}"),
        model=paths.weights("lm", "{run}"),
    log:
        paths.log("lm/train/{run}"),
    benchmark:
        paths.benchmark("lm_train", run="{run}")
    wildcard_constraints:
        run=one_of(LM_RUNS),
    priority: 1  # after Sokoban's training and the power analysis, before everything else (see sokoban_train)
    retries: retries("lm_train")
    conda:
        CONDA_ENV
    threads: threads("lm_train")
    resources:
        **resources("lm_train"),
    params:
        definition=run_json(LM_RUNS),  # reruns the job when the run's definition changes
        run_dir=run_dir("lm"),
    shell:
        "python -m parallel_experts lm-train --config {input.config:q} --run {wildcards.run:q} --tokens {input.tokens:q} "
        "--run-dir {params.run_dir:q} > {log:q} 2>&1"


rule lm_evaluate:
    """Streaming validation loss at the run's window; both families score the same tokens."""
    input:
        config=ancient(CONFIG_JSON),  # the run's definition; its edits rerun jobs via params
        model=paths.weights("lm", "{run}"),
        tokens=paths.LM_TOKENS,
    output:
        paths.evaluation("lm", "{run}"),
    log:
        paths.log("lm/evaluate/{run}"),
    benchmark:
        paths.benchmark("lm_evaluate", run="{run}")
    wildcard_constraints:
        run=one_of(LM_RUNS),
    conda:
        CONDA_ENV
    threads: threads("lm_evaluate")
    resources:
        **resources("lm_evaluate"),
    params:
        definition=run_json(LM_RUNS),  # reruns the job when the run's definition changes
        run_dir=run_dir("lm"),
        evaluation=json.dumps(dataclasses.asdict(STUDY.lm.settings.evaluation), sort_keys=True),
    shell:
        "python -m parallel_experts lm-evaluate --config {input.config:q} --run {wildcards.run:q} --run-dir {params.run_dir:q} "
        "--tokens {input.tokens:q} --evaluation {params.evaluation:q} --out {output:q} > {log:q} 2>&1"


rule lm_sweep:
    """Every sweep run's learning curve and validation loss in one dataset (the ablations have their own)."""
    input:
        curves=[paths.curve("lm", run) for run in LM_SWEEP_RUNS],
        evals=[paths.evaluation("lm", run) for run in LM_SWEEP_RUNS],
    output:
        paths.LM_SWEEP,
    log:
        paths.log("lm/sweep"),
    conda:
        CONDA_ENV
    threads: threads("lm_sweep")
    resources:
        **resources("lm_sweep"),
    shell:
        "python -m parallel_experts lm-sweep --out {output:q} --curves {input.curves:q} --evals {input.evals:q} > {log:q} 2>&1"
