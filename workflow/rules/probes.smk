# Planning probes of trained Sokoban runs (Figs. 4, 12, 13): per probed agent (a run's agent of one probed seed) its
# probe data per split and its fitted and scored probes, and one dataset over all probed agents.


rule sokoban_probe_data:
    """Greedy episodes of one probed agent: its states, encoder outputs, the untrained control, and labels."""
    input:
        config=ancient(CONFIG_JSON),  # the run's definition; its edits rerun jobs via params
        agents=paths.weights("sokoban", "{run}"),
        levels=probe_levels,
    output:
        paths.probe_data("{run}", "{seed}", "{split}"),
    log:
        paths.log("sokoban/probe_data/{run}/seed-{seed}/{split}"),
    benchmark:
        paths.benchmark("sokoban_probe_data", run="{run}", seed="{seed}", split="{split}")
    wildcard_constraints:
        run=one_of(PROBED_RUNS),
        seed=one_of(map(str, PROBED_SEEDS)),
        split=one_of(sokoban_experiment.PROBE_SPLITS),
    conda:
        CONDA_ENV
    threads: threads("sokoban_probe_data")
    resources:
        **resources("sokoban_probe_data"),
    params:
        definition=run_json(SOKOBAN_RUNS),  # reruns the job when the run's definition changes
        run_dir=run_dir("sokoban"),
        played=probe_count,
    shell:
        "python -m parallel_experts sokoban-probe-data --config {input.config:q} --run {wildcards.run:q} --run-dir {params.run_dir:q} "
        "--seed {wildcards.seed:q} --levels {input.levels:q} --count {params.played:q} --out {output:q} > {log:q} 2>&1"


rule sokoban_probe_fit:
    """One probed agent's probes of every representation and target: fitted, calibrated to the precision over the
    first steps, scored by step on the test levels that every probed agent solves (App. F; the runs' test evaluations
    say which)."""
    input:
        **{split: paths.probe_data("{run}", "{seed}", split) for split in sokoban_experiment.PROBE_SPLITS},
        solved=[paths.evaluation("sokoban", run) for run in PROBED_RUNS],
    output:
        paths.probe_scores("{run}", "{seed}"),
    log:
        paths.log("sokoban/probe_fit/{run}/seed-{seed}"),
    benchmark:
        paths.benchmark("sokoban_probe_fit", run="{run}", seed="{seed}")
    wildcard_constraints:
        run=one_of(PROBED_RUNS),
        seed=one_of(map(str, PROBED_SEEDS)),
    conda:
        CONDA_ENV
    threads: threads("sokoban_probe_fit")
    resources:
        **resources("sokoban_probe_fit"),
    params:
        seeds=json.dumps({run.id: STUDY.sokoban.probe_seeds[run.id] for run in PROBED_RUNS.values()}),
        fit=json.dumps(STUDY.config["sokoban"].get("probes", {}).get("fit", {}), sort_keys=True),
        picture=json.dumps(
            {k: v for k, v in STUDY.config["sokoban"].get("probes", {}).get("picture", {}).items() if k != "run"},
            sort_keys=True,
        ),
    shell:
        "python -m parallel_experts sokoban-probe-fit --train {input.train:q} --calibration {input.calibration:q} "
        "--test {input.test:q} --solved {input.solved:q} --seeds {params.seeds:q} --fit {params.fit:q} "
        "--picture {params.picture:q} --out {output:q} > {log:q} 2>&1"


rule sokoban_probes:
    """Every probed agent's scores in one dataset (by run and agent)."""
    input:
        probe_score_files(),
    output:
        paths.SOKOBAN_PROBES,
    log:
        paths.log("sokoban/probes"),
    conda:
        CONDA_ENV
    threads: threads("sokoban_probes")
    resources:
        **resources("sokoban_probes"),
    shell:
        "python -m parallel_experts sokoban-probes --out {output:q} {input:q} > {log:q} 2>&1"
