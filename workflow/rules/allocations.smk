# The allocation grids: every budget's (depth L, experts E, width d) and the work each one spends.

rule allocation_grid:
    input:
        CONFIG_JSON,
    output:
        paths.allocations("{domain}"),
    wildcard_constraints:
        domain=one_of(budget.DOMAINS),
    log:
        "results/logs/allocations/{domain}.log",
    threads: threads()
    resources:
        **resources(),
    conda:
        CONDA_ENV
    shell:
        "python -m parallel_experts allocations --config {input:q} --domain {wildcards.domain:q} --out {output:q} > {log:q} 2>&1"
