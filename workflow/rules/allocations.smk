# The allocation grids: every budget's (depth L, experts E, width d) and the work each one spends.

REPORTS["allocations"] = {
    "paper": "Sec. 4 and App. J grids: allocations of every budget and their per-step work",
    "inputs": {"sokoban": "results/allocations/sokoban.nc", "lm": "results/allocations/lm.nc"},
}


localrules:
    allocations,


rule allocations:
    """Named target: reports/allocations.html."""
    input:
        "reports/allocations.html",


rule allocation_grid:
    input:
        CONFIG_JSON,
    output:
        "results/allocations/{domain}.nc",
    wildcard_constraints:
        domain="sokoban|lm",
    log:
        "results/logs/allocations/{domain}.log",
    threads: threads()
    resources:
        **resources(),
    conda:
        CONDA_ENV
    shell:
        "python -m parallel_experts allocations --config {input} --domain {wildcards.domain} --out {output} > {log} 2>&1"
