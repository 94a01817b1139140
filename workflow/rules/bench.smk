# Systems benchmarks: Table 5 (decode latency) and Table 6 (training throughput and memory), each one job that
# measures every row side by side and writes one netCDF. They read the config snapshot (lm.latency,
# lm.throughput) but rerun only when the settings they use change (params), not on every config edit; the
# throughput job also reads the token shards, as training does.


rule lm_latency:
    """Per-token decode latency of every row after pre-filling the caches to each C (random weights)."""
    input:
        config=ancient(CONFIG_JSON),
    output:
        paths.LATENCY,
    log:
        paths.log("lm/latency"),
    benchmark:
        paths.benchmark("lm_latency")
    conda:
        CONDA_ENV
    threads: threads("lm_latency")
    resources:
        **resources("lm_latency"),
    params:
        settings=systems_settings("latency"),
    shell:
        "python -m parallel_experts lm-latency --config {input.config:q} --out {output:q} > {log:q} 2>&1"


rule lm_throughput:
    """Training tokens/s and memory of every row at each C, the complete update read from the shards."""
    input:
        config=ancient(CONFIG_JSON),
        tokens=paths.LM_TOKENS,
    output:
        paths.THROUGHPUT,
    log:
        paths.log("lm/throughput"),
    benchmark:
        paths.benchmark("lm_throughput")
    conda:
        CONDA_ENV
    threads: threads("lm_throughput")
    resources:
        **resources("lm_throughput"),
    params:
        settings=systems_settings("throughput"),
    shell:
        "python -m parallel_experts lm-throughput --config {input.config:q} --tokens {input.tokens:q} "
        "--out {output:q} > {log:q} 2>&1"
