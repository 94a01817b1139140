# The allocation grids: every budget's (depth L, experts E, width d) and the work each one spends.


rule allocation_grid:
    input:
        CONFIG_JSON,
    output:
        paths.allocations("{domain}"),
    log:
        paths.log("allocations/{domain}"),
    wildcard_constraints:
        domain=one_of(budget.DOMAINS),
    conda:
        CONDA_ENV
    threads: threads("allocation_grid")
    resources:
        **resources("allocation_grid"),
    shell:
        "python -m parallel_experts allocations --config {input:q} --domain {wildcards.domain:q} --out {output:q} > {log:q} 2>&1"
