"""Language-model training throughput and memory: the Transformer against recurrent allocations of equal work.

The protocol of the paper's Table 6 (App. H.2): one complete optimiser update (forward, backward, optimiser) of
`batch_tokens` tokens in one microbatch, at context C: the Transformer trains on independent sequences of C
tokens, the recurrent model on segments of C tokens with a C-token cache. The allocations are the issue's:
Transformer L=16,E=1 and recurrent (L,E) = (1,16), (2,8), (4,4), all at width d, so every one spends the same
16 blocks of work per token (SPEC D.2 proxy; widths reduced to fit a CPU).

Measured side by side in one process, so that the ratios are the numbers to quote:
* tokens/s: batch_tokens / median update time (after a compile and a warm-up call), and its ratio to the
  Transformer's at the same C;
* FLOPs per update, counted by XLA on the lowered update with every `lax.scan` unrolled (a loop body is
  otherwise counted once); achieved GFLOP/s over the fp32 matmul peak measured next to each allocation;
* memory: XLA's buffer assignment of the compiled update (arguments + temporaries + outputs − aliased), and
  the device's peak bytes in use where the backend reports it (GPUs). An update whose planned memory exceeds
  `--memory-limit` is not run and is reported as OOM, as in the paper's table.

`python -m parallel_experts lm-bench --help` for the options; `--json PATH` writes every number.
"""

from __future__ import annotations

import json
import statistics
import time

import jax
import numpy as np

from parallel_experts import atomic
from parallel_experts.benchmarking import flops_of, fmt, machine_info, matmul_peak, table, time_calls, unrolled_scans
from parallel_experts.lm.models import ModelConfig
from parallel_experts.lm.train import Trainer, TrainConfig

ALLOCATIONS = ((False, 16, 1), (True, 1, 16), (True, 2, 8), (True, 4, 4))  # (recurrent, L, E)


def planned_bytes(compiled) -> int:
    m = compiled.memory_analysis()
    return int(m.argument_size_in_bytes + m.temp_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes)


def update_speed(model_config: ModelConfig, context: int, batch_tokens: int, repeats: int, memory_limit: float,
                 count_flops: bool) -> dict:
    """Compile, warm up and time one update; count its FLOPs and memory."""
    recurrent = model_config.recurrent
    config = TrainConfig(sequence=context, memory=context if recurrent else 0, batch_tokens=batch_tokens,
                         microbatch=batch_tokens // context, train_tokens=batch_tokens * 1000)
    trainer = Trainer(model_config, config)
    carry = trainer.init()
    shape = (1, config.microbatch, context)
    tokens = np.random.default_rng(0).integers(0, model_config.vocab, shape).astype(np.int32)
    reset = np.zeros(shape[:2], bool)
    start = time.perf_counter()
    compiled = jax.jit(trainer._update, donate_argnums=0).lower(carry, tokens, tokens, reset).compile()
    result = {"compile_s": time.perf_counter() - start, "planned_bytes": planned_bytes(compiled)}
    if count_flops:
        with unrolled_scans():
            result["flops_per_update"] = flops_of(jax.jit(trainer._update).lower(carry, tokens, tokens, reset))
    if result["planned_bytes"] > memory_limit:
        return result | {"oom": True}
    holder = {"carry": carry}

    def call():
        holder["carry"], metrics = compiled(holder["carry"], tokens, tokens, reset)
        return metrics["loss"]

    time_calls(call, 1)  # warm-up: faults in fresh memory
    times = time_calls(call, repeats)
    stats = jax.devices()[0].memory_stats() or {}
    return result | {"oom": False, "seconds": times, "tokens_per_s": batch_tokens / statistics.median(times),
                     "device_peak_bytes": stats.get("peak_bytes_in_use")}


def run(args) -> int:
    """The benchmark of `python -m parallel_experts lm-bench` (see the CLI for the options)."""
    if args.quick:
        args.width, args.head_dim, args.vocab, args.contexts, args.batch_tokens, args.repeats = 16, 8, 64, [16], 256, 1
    heads = args.width // args.head_dim
    machine = machine_info()
    print(f"{machine['cpu']} · {machine['backend']} · {len(jax.devices())} device(s)", flush=True)
    peak_start = matmul_peak(512 if args.quick else 2048, 3)
    rows, runs = [], []
    for context in args.contexts:
        reference = None
        for recurrent, depth, n_experts in ALLOCATIONS:
            model_config = ModelConfig(depth, n_experts, args.width, heads, heads // 2, vocab=args.vocab,
                                       recurrent=recurrent, dtype=args.dtype)
            label = f"{'recurrent' if recurrent else 'Transformer'} L{depth} E{n_experts}"
            result = update_speed(model_config, context, args.batch_tokens, args.repeats,
                                  args.memory_limit_gb * 2**30, context <= args.count_flops_up_to)
            peak = matmul_peak(512 if args.quick else 2048, 2)["gflops"]
            result |= {"label": label, "context": context, "recurrent": recurrent, "depth": depth,
                       "experts": n_experts, "matmul_peak_gflops": peak}
            if not result["oom"]:
                reference = reference or (result["tokens_per_s"] if not recurrent else None)
                result["vs_transformer"] = result["tokens_per_s"] / reference if reference else float("nan")
                if "flops_per_update" in result:
                    achieved = result["flops_per_update"] * result["tokens_per_s"] / args.batch_tokens / 1e9
                    result |= {"achieved_gflops": achieved, "fraction_of_peak": achieved / peak}
            runs.append(result)
            rows.append([label, str(context), "OOM" if result["oom"] else fmt(result["tokens_per_s"]),
                         "" if result["oom"] else f"{result['vs_transformer']:.2f}",
                         f"{result['flops_per_update'] / args.batch_tokens / 1e6:.2f}" if "flops_per_update" in result
                         else "", f"{100 * result['fraction_of_peak']:.0f}%" if "fraction_of_peak" in result else "",
                         f"{result['planned_bytes'] / 2**20:,.0f}", f"{result['compile_s']:.1f}"])
            print(table(rows[-1:], HEADER).splitlines()[-1], flush=True)
    peak_end = matmul_peak(512 if args.quick else 2048, 3)
    print()
    print(table(rows, HEADER))
    print(f"\nmatmul peak {peak_start['gflops']:.1f} → {peak_end['gflops']:.1f} GFLOP/s (start → end); "
          f"{args.batch_tokens} tokens per update, width {args.width}, vocabulary {args.vocab}, {args.dtype}. "
          "FLOPs/token: XLA count of the whole update (forward, backward with rematerialisation, optimiser).")
    if args.json:
        settings = {k: str(v) for k, v in vars(args).items() if k != "handler"}
        atomic.write_text(args.json, json.dumps({"machine": machine, "args": settings, "matmul_peak_start": peak_start,
                                                 "matmul_peak_end": peak_end, "runs": runs}, indent=1))
    return 0


HEADER = ["allocation", "C", "tokens/s", "vs Transformer", "MFLOP/token", "% peak", "planned MiB", "compile s"]
