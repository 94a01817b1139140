"""Tables 5 and 6 measured on this machine (`lm-latency`, `lm-throughput`): the language model's benchmark run, its
dataset written, and the analysis' table of it printed. It joins the domain (JAX) to the analysis, which never
imports JAX, so it sits above both. The benchmarks time compiling too: they never read the compile cache."""

from __future__ import annotations

import os
from parallel_experts.analysis import latency as table5
from parallel_experts.analysis import throughput as table6
from parallel_experts.core import compile_cache
from parallel_experts.lm import jobs, latency, throughput
from parallel_experts.results import store
from parallel_experts.study import Study


def latency_job(options: jobs.Latency, study: Study) -> int:
    """`lm-latency`: Table 5's decode latency of every row, as netCDF."""
    compile_cache.off()
    ds = latency.run(study.lm, study.config)
    store.write_netcdf(ds, options.out)
    print(table5.printed(ds))
    print(f"{options.out}: {table5.goal_line(ds)}")
    return 0


def throughput_job(options: jobs.Throughput, study: Study) -> int:
    """`lm-throughput`: Table 6's training tokens/s and memory of every row, as netCDF."""
    # Before JAX starts its backend: on a GPU this process only coordinates, and the fresh process of each cell must
    # get the memory, not JAX's default preallocation of 75 % here.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    compile_cache.off()
    ds = throughput.run(study.lm, study.config, options.tokens, batch_tokens=options.batch_tokens,
                        devices=options.devices)
    store.write_netcdf(ds, options.out)
    print(table6.printed(ds))
    print(f"{options.out}: {ds.sizes['allocation']} allocations at {ds.sizes['context']} contexts")
    return 0
