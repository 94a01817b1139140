# The rehearsal (opt-in, not part of `all`): every distinct program of the config's DAG compiled at its exact
# shapes with abstract inputs, on the machine Snakemake runs on (local rules: run it on a GPU node for the GPU's
# own figures), in parts that run side by side and each stay done (a paper rehearsal compiles for hours), then
# Sokoban training updates run for real at the config's shapes (sokoban.rehearsal_updates).
# `snakemake rehearsal --configfile config/paper.yaml`; the plan report reads its file.


localrules:
    rehearsal,
    rehearse,
    rehearse_part,


rule rehearse_part:
    """Compile one part of the programs and record compile seconds, parameters, XLA's FLOPs and memory per device."""
    input:
        config=ancient(CONFIG_JSON),  # a program's key is its definition: a part reruns when its keys change (params)
    output:
        paths.rehearsal_part(STUDY.scale, "{part}"),
    log:
        paths.log(f"rehearsal/{STUDY.scale}-parts/{{part}}"),
    wildcard_constraints:
        part=r"\d+",
    conda:
        CONDA_ENV
    params:
        # the part's programs: a new program list rehearses the parts it changes again
        programs=lambda wildcards: [program.key for program in rehearsal_parts()[int(wildcards.part)]],
    shell:
        "python -m parallel_experts rehearse --config {input.config:q} --part {wildcards.part} --out {output:q} "
        "> {log:q} 2>&1"


rule rehearse:
    """Merge the parts (every program of the config once) and train the chosen runs for a few updates."""
    input:
        config=CONFIG_JSON,
        levels=paths.levels("train"),
        parts=rehearsal_part_files,
    output:
        paths.rehearsal(STUDY.scale),
    log:
        paths.log(f"rehearsal/{STUDY.scale}"),
    conda:
        CONDA_ENV
    params:
        run_dir=paths.rehearsal_runs(STUDY.scale),
    shell:
        "python -m parallel_experts rehearse --config {input.config:q} --merge {input.parts:q} --out {output:q} "
        "--levels {input.levels:q} --run-dir {params.run_dir:q} > {log:q} 2>&1"


rule rehearsal:
    """The rehearsal of the config's DAG (results/rehearsal/SCALE.json)."""
    input:
        rules.rehearse.output,
