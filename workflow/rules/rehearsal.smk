# The rehearsal (opt-in, not part of `all`): every distinct program of the config's DAG compiled at its exact
# shapes with abstract inputs, on the machine Snakemake runs on (a local rule: run it on a GPU node for the GPU's
# own figures), then Sokoban training updates run for real at the config's shapes (rehearsal_updates).
# `snakemake rehearsal --configfile config/paper.yaml`; the plan report reads its file.


localrules:
    rehearsal,
    rehearse,


rule rehearse:
    """Compile every distinct program and record compile seconds, parameters, XLA's FLOPs and memory per device;
    train the chosen runs for a few updates."""
    input:
        config=CONFIG_JSON,
        levels=paths.levels("train"),
    output:
        paths.rehearsal(config["scale"]),
    log:
        f"results/logs/rehearsal/{config['scale']}.log",
    conda:
        CONDA_ENV
    params:
        run_dir=f"results/rehearsal/{config['scale']}-runs",
    shell:
        "python -m parallel_experts rehearse --config {input.config:q} --out {output:q} --levels {input.levels:q} "
        "--run-dir {params.run_dir:q} > {log:q} 2>&1"


rule rehearsal:
    """The rehearsal of the config's DAG (results/rehearsal/SCALE.json)."""
    input:
        rules.rehearse.output,
