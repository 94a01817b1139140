# The ablations of both domains (sokoban.ablations, lm.ablations): one dataset per domain that names each
# ablation's runs. The runs themselves train and are evaluated by their domain's rules.


rule ablations:
    """Every ablation's runs of one domain in one dataset that names each ablation's runs."""
    input:
        curves=ablation_files(paths.curve),
        evals=ablation_files(paths.evaluation),
    output:
        paths.ablations("{domain}"),
    log:
        paths.log("{domain}/ablations"),
    wildcard_constraints:
        domain=one_of(ABLATIONS),
    conda:
        CONDA_ENV
    threads: threads("ablations")
    resources:
        **resources("ablations"),
    params:
        ablations=lambda wildcards: members_json(ABLATIONS[wildcards.domain][0]),
        command=lambda wildcards: ABLATIONS[wildcards.domain][2],
    shell:
        "python -m parallel_experts {params.command} --ablations {params.ablations:q} --out {output:q} "
        "--curves {input.curves:q} --evals {input.evals:q} > {log:q} 2>&1"
