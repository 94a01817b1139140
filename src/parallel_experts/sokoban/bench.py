"""Sokoban training throughput on this machine: matmul peak, env-only speed and A2C training speed per allocation.

Everything is measured in ONE process, side by side, so that the numbers worth quoting are ratios (an allocation's
env-steps/s against the anchor's, achieved GFLOP/s against the matmul peak measured next to it): on a shared,
noisy machine absolute speeds drift from minute to minute, ratios taken a few seconds apart much less.

1. Matmul peak: a jitted fp32 n×n matmul (2n³ FLOPs) at the training's matmul precision (`sokoban.training.
   matmul_precision`, which `study.load` sets), median of several calls → GFLOP/s. Measured once at the
   start and the end (drift check) and briefly again right before each allocation's timing (the denominator of
   its fraction of peak).
2. Env only: the batched Jumanji env (`env.batched(env.make_env(levels))`) stepped with uniformly random actions
   in a jitted `lax.scan`, on generated 10×10 4-box levels.
3. Training, per allocation: the real `Trainer.run_updates` (compiled ahead of time with `.lower().compile()`,
   so compile time is reported apart), one warm-up call, then timed calls; env-steps/s = seeds × log_interval ×
   num_envs × num_steps / median call time.
   FLOPs per env step, from XLA's cost analysis:
   * forward: `agent_step_flops` (one compiled agent step, one environment);
   * training: one whole A2C update (rollout, the backward pass through it, GAE, loss, Adam) divided by the
     num_envs × num_steps env steps it makes. XLA's cost analysis counts the body of a while loop ONCE, whatever
     its trip count, so the compiled `run_updates` (a scan of updates, each a scan of rollout steps and its
     reverse-mode scan) is undercounted by about num_steps × log_interval; that naive number is kept in the JSON
     as `naive_loop_flops_per_step` for comparison only. The training count here traces one update with every
     `lax.scan` fully unrolled (`jax.lax.scan` patched to `unroll=True` while tracing, nothing else changed) and
     reads the cost analysis of the lowered, not yet optimised, program: compiling the unrolled program would
     take minutes, and on the anchor the optimised count differs by under 2%.
   Achieved GFLOP/s = training FLOPs per env step × env-steps/s; the work proxy L·E·d·(C+2d) is shown as a
   ratio to the budget's anchor.

`python -m parallel_experts sokoban-bench --help` for the options; `--json PATH` writes every number and the
machine and JAX versions.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from typing import Any

import jax
import numpy as np

from parallel_experts.config.errors import ConfigError
from parallel_experts.core import atomic, budget, compile_cache
from parallel_experts.core.benchmarking import (counted_flops, flops_of, machine_info, matmul_peak, time_calls,
                                                unrolled_scans, usable_cpus)
from parallel_experts.core.tables import fmt, table
from parallel_experts.sokoban import env as sokoban_env
from parallel_experts.sokoban import experiment, jobs
from parallel_experts.sokoban.agent import agent_step_flops
from parallel_experts.sokoban.generator import generated_set
from parallel_experts.sokoban.settings import AgentConfig, TrainConfig
from parallel_experts.sokoban.train import Trainer

QUICK_ALLOCATION = budget.Allocation(1, 2, 8)
# --quick: tiny sizes for tests, one small allocation.
QUICK: dict[str, Any] = {"num_envs": 4, "num_steps": 5, "log_interval": 2, "warmup": 1, "repeats": 2, "min_time": 0.0,
                         "levels": 20, "matmul_size": 512, "matmul_repeats": 3, "local_peak_repeats": 2,
                         "env_steps": 50, "env_repeats": 2}


# ---------------------------------------------------------------------------------------------- env only


def env_speed(levels: np.ndarray, num_envs: int, steps: int, repeats: int, reward: str = "clipped",
              time_limit: int = 120) -> dict:
    """Env-steps/s of the batched environment alone, random actions, `steps` steps per jitted scan."""
    env = sokoban_env.make_env(levels, reward=reward, time_limit=time_limit)
    envs = sokoban_env.batched(env)
    num_actions = int(env.action_spec.num_values)

    def rollout(state, key):
        def step(state, key):
            action = jax.random.randint(key, (num_envs,), 0, num_actions)
            state, timestep = envs.step(state, action)
            return state, timestep.reward.sum()

        state, rewards = jax.lax.scan(step, state, jax.random.split(key, steps))
        return state, rewards.sum()

    key, reset_key = jax.random.split(jax.random.PRNGKey(0))
    state, _ = jax.jit(envs.reset)(jax.random.split(reset_key, num_envs))
    start = time.perf_counter()
    run = jax.jit(rollout).lower(state, key).compile()
    compile_s = time.perf_counter() - start
    state, _ = jax.block_until_ready(run(state, key))  # warm-up
    keys = iter(jax.random.split(key, repeats))
    holder = {"state": state}

    def call():
        holder["state"], total = run(holder["state"], next(keys))
        return holder["state"], total

    times = time_calls(call, repeats)
    per_call = num_envs * steps
    return {"num_envs": num_envs, "steps_per_call": steps, "env_steps_per_call": per_call, "seconds": times,
            "compile_s": compile_s, "env_steps_per_s": per_call / statistics.median(times)}


# ---------------------------------------------------------------------------------------------- training


def update_flops(trainer, carry) -> float:
    """XLA-counted FLOPs of ONE A2C update of one seed, every scan unrolled (see the module docstring)."""
    single = jax.tree.map(lambda x: x[0], carry)
    with unrolled_scans():  # a fresh lambda: no trace cache can hand the unrolled program to anyone else
        return counted_flops(lambda levels, c: trainer._update(levels, c), trainer.levels, single)


def training_speed(agent_config, train_config, levels: np.ndarray, seeds: int, warmup: int, repeats: int,
                   min_time: float, max_repeats: int, peak_size: int = 2048, peak_repeats: int = 3) -> dict:
    """Compile, warm up and time `Trainer.run_updates` for one agent configuration; count its FLOPs.

    The matmul peak is measured right before and right after the timed calls (`peak_repeats` matmuls each,
    0: not at all), so that the fraction of peak compares two speeds seen under the same machine load."""
    trainer = Trainer(agent_config, train_config, levels)
    carry = trainer.init(list(range(seeds)))
    start = time.perf_counter()
    compiled = trainer.run_updates.lower(trainer.levels, carry).compile()
    compile_s = time.perf_counter() - start
    steps_per_call = seeds * train_config.log_interval * train_config.num_envs * train_config.num_steps
    naive = flops_of(compiled) / steps_per_call

    holder = {"carry": carry}

    def call():
        holder["carry"], metrics = compiled(trainer.levels, holder["carry"])
        return holder["carry"], metrics

    warmup_times = time_calls(call, warmup) if warmup else []  # the first call also faults in fresh memory
    peak_before = matmul_peak(peak_size, peak_repeats) if peak_repeats else None
    cpu: list[float] = []
    times = time_calls(call, repeats, min_time, max_repeats, cpu)
    peak_after = matmul_peak(peak_size, peak_repeats) if peak_repeats else None

    # FLOPs after timing: tracing the unrolled update cannot touch the compiled program timed above.
    start = time.perf_counter()
    forward = agent_step_flops(agent_config)
    train_flops = update_flops(trainer, holder["carry"]) / (train_config.num_envs * train_config.num_steps)
    flops_s = time.perf_counter() - start
    median = statistics.median(times)
    return {
        "compile_s": compile_s, "warmup_s": warmup_times, "seconds": times, "env_steps_per_call": steps_per_call,
        "env_steps_per_s": steps_per_call / median,
        "env_steps_per_s_spread": [steps_per_call / max(times), steps_per_call / min(times)],
        "forward_flops_per_step": forward, "train_flops_per_step": train_flops,
        "train_over_forward": train_flops / forward, "naive_loop_flops_per_step": naive,
        "achieved_gflops": train_flops * steps_per_call / median / 1e9, "flop_count_s": flops_s,
        "cpu_seconds": cpu, "cpu_share": sum(cpu) / sum(times) / usable_cpus(),
        "achieved_gflops_cpu": train_flops * steps_per_call / (statistics.median(cpu) / usable_cpus()) / 1e9,
        "peak_gflops_bracket": [p["gflops"] for p in (peak_before, peak_after) if p],
        "peak_gflops_cpu_bracket": [p["gflops_cpu"] for p in (peak_before, peak_after) if p],
    }


# ---------------------------------------------------------------------------------------------- CLI


def _anchor_and_allocations(args: jobs.Bench, sokoban: experiment.Families
                            ) -> tuple[budget.Allocation, list[budget.Allocation]]:
    found = {b.name: b for b in sokoban.budgets}
    if args.budget not in found:
        raise ConfigError(f"--budget: unknown Sokoban budget {args.budget!r} "
                                        f"(defined: {', '.join(found)})")
    chosen = found[args.budget]
    allocations = list(args.allocations or chosen.allocations)
    return chosen.anchor, allocations


def run(args: jobs.Bench, sokoban: experiment.Families) -> int:
    """The benchmark of `python -m parallel_experts sokoban-bench` (`sokoban.jobs.Bench`: the options), on a
    validated config's Sokoban runs (their budgets and training settings)."""
    compile_cache.off()
    if args.quick:
        args = dataclasses.replace(args, **QUICK, allocations=tuple(args.allocations or [QUICK_ALLOCATION])[:1])
    wall_start = time.perf_counter()
    anchor, allocations = _anchor_and_allocations(args, sokoban)
    encoder_channels = sokoban.settings.encoder_channels
    overrides: dict[str, Any] = {"num_envs": args.num_envs, "num_steps": args.num_steps,
                                 "log_interval": args.log_interval}
    if "view" in TrainConfig.__dataclass_fields__:
        overrides["view"] = 10  # the benchmark's levels fill Jumanji's whole 10×10 grid (a demo config's view won't)
    train_config = dataclasses.replace(sokoban.settings.train, **overrides)
    machine = machine_info()
    print(f"# sokoban-bench  jax {machine['jax']} ({machine['backend']}), {machine['usable_cpus']} usable CPUs "
          f"({machine['cpu']}), load {machine['loadavg_start'][0]:.2f}", flush=True)

    levels = generated_set(args.levels, seed=0).levels  # 10×10, 4 boxes: the generator's defaults
    peak_start = matmul_peak(args.matmul_size, args.matmul_repeats)
    print(f"matmul peak ({args.matmul_size}², fp32 at precision {train_config.matmul_precision}): "
          f"{peak_start['gflops']:.1f} GFLOP/s "
          f"({peak_start['gflops_cpu']:.1f} per {usable_cpus()} CPU-seconds)", flush=True)
    env = env_speed(levels, args.num_envs, args.env_steps, args.env_repeats, train_config.reward,
                    train_config.time_limit)
    print(f"env only ({args.num_envs} envs, random actions): {env['env_steps_per_s']:,.0f} env-steps/s", flush=True)

    anchor_work = budget.sokoban_work(anchor, encoder_channels)
    results = []
    for a in allocations:
        agent_config = AgentConfig(depth=a.depth, experts=a.experts, width=a.width, expert=args.expert,
                                   recurrent=args.recurrent, encoder_channels=encoder_channels)
        load_before = os.getloadavg()[0]
        r = training_speed(agent_config, train_config, levels, args.seeds, args.warmup, args.repeats,
                           args.min_time, args.max_repeats, args.matmul_size, args.local_peak_repeats)
        work = budget.sokoban_work(a, encoder_channels)
        local = statistics.mean(r["peak_gflops_bracket"]) if r["peak_gflops_bracket"] else peak_start["gflops"]
        local_cpu = (statistics.mean(r["peak_gflops_cpu_bracket"]) if r["peak_gflops_cpu_bracket"]
                     else peak_start["gflops_cpu"])
        r |= {"allocation": a.as_list(), "label": a.label(), "work_proxy": work, "work_ratio": work / anchor_work,
              "peak_gflops_local": local, "fraction_of_peak": r["achieved_gflops"] / local,
              "fraction_of_start_peak": r["achieved_gflops"] / peak_start["gflops"],
              "peak_gflops_cpu_local": local_cpu, "fraction_of_peak_cpu": r["achieved_gflops_cpu"] / local_cpu,
              "over_env_only": r["env_steps_per_s"] / env["env_steps_per_s"],
              "loadavg_before": load_before, "loadavg_after": os.getloadavg()[0]}
        results.append(r)
        print(f"  {a.label():<14} {r['env_steps_per_s']:8.1f} env-steps/s  {r['achieved_gflops']:6.1f} GFLOP/s "
              f"({100 * r['fraction_of_peak']:.0f}% of {local:.0f})  compile {r['compile_s']:.1f} s  "
              f"cpu share {r['cpu_share']:.2f}",
              flush=True)
    peak_end = matmul_peak(args.matmul_size, args.matmul_repeats)

    reference = next((r for r in results if r["allocation"] == anchor.as_list()), results[0])
    for r in results:
        r["speed_vs_reference"] = r["env_steps_per_s"] / reference["env_steps_per_s"]
        r["gflops_vs_reference"] = r["achieved_gflops"] / reference["achieved_gflops"]
    header = ["allocation", "work×", "fwd MF/step", "train MF/step", "train/fwd", "compile s", "steps/s",
              "×ref", "GFLOP/s", "peak", "%peak", "cpu", "%peak/cpu"]
    rows = [[r["label"], f"{r['work_ratio']:.2f}", fmt(r["forward_flops_per_step"] / 1e6),
             fmt(r["train_flops_per_step"] / 1e6), f"{r['train_over_forward']:.2f}", f"{r['compile_s']:.1f}",
             fmt(r["env_steps_per_s"]), f"{r['speed_vs_reference']:.2f}", f"{r['achieved_gflops']:.1f}",
             f"{r['peak_gflops_local']:.0f}", f"{100 * r['fraction_of_peak']:.0f}%", f"{r['cpu_share']:.2f}",
             f"{100 * r['fraction_of_peak_cpu']:.0f}%"]
            for r in results]
    total_s = time.perf_counter() - wall_start
    print()
    print(f"Sokoban training throughput: {args.expert}, {'recurrent' if args.recurrent else 'non-recurrent'}, "
          f"{args.seeds} seed(s) × {args.num_envs} envs × {args.num_steps} steps × {args.log_interval} update(s) "
          f"per call; median of ≥{args.repeats} timed call(s) after {args.warmup} warm-up")
    print(table(rows, header))
    print(f"work× = L·E·d·(C+2d) / anchor {anchor.label()}; ×ref = env-steps/s / those of "
          f"{reference['label']}; MF = MFLOP (XLA cost analysis); train = one whole update (rollout + backward + "
          f"Adam) / its env steps; peak = matmul GFLOP/s measured just before and after the timed calls (mean); "
          f"%peak = GFLOP/s / peak; cpu = process CPU time / (wall time × {usable_cpus()} CPUs) of the timed "
          f"calls (below ~0.9: other processes took cores); %peak/cpu = the same fraction with both speeds taken "
          f"per CPU-second of this process instead of per wall second (less sensitive to other processes)")
    print(f"matmul peak {peak_start['gflops']:.1f} GFLOP/s at the start, {peak_end['gflops']:.1f} at the end; "
          f"env only {env['env_steps_per_s']:,.0f} env-steps/s "
          f"({env['env_steps_per_s'] / reference['env_steps_per_s']:.0f}× training {reference['label']}); "
          f"load {machine['loadavg_start'][0]:.2f} → {os.getloadavg()[0]:.2f}; total {total_s:.0f} s")

    if args.json:
        machine["loadavg_end"] = list(os.getloadavg())
        out = {"machine": machine,
               "settings": {k: (v if not isinstance(v, (list, tuple)) else [str(x) for x in v])
                            for k, v in ({"command": "sokoban-bench"} | vars(args)).items()}
               | {"train_config": {k: getattr(train_config, k) for k in train_config.__dataclass_fields__},
                  "anchor": anchor.as_list(), "reference": reference["allocation"]},
               "matmul_peak_start": peak_start, "matmul_peak_end": peak_end, "env_only": env,
               "allocations": results, "total_s": total_s,
               "notes": ["naive_loop_flops_per_step: XLA cost analysis of the compiled run_updates / env steps "
                         "per call; XLA counts each while-loop body once, so it undercounts (for comparison only)",
                         "train_flops_per_step: one update traced with all scans unrolled, cost analysis of the "
                         "lowered program / (num_envs × num_steps)"]}
        atomic.write_text(args.json, json.dumps(out, indent=1))
    return 0

