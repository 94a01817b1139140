"""Compile seconds of a Sokoban and an LM training job of the demo with a cold and a warm compilation cache,
side by side.

    python workflow/scripts/compile_cache.py WORKDIR
    python workflow/scripts/compile_cache.py WORKDIR --sokoban convlstm/recurrent/small/L1-E4-d8 --lm none

WORKDIR holds the jobs' inputs as the workflow builds them, once:
`snakemake --directory WORKDIR --configfile config/config.yaml --cores 1 results/sokoban/levels/train.npz results/lm/tokens`.
Each job is the workflow's own command (`python -m parallel_experts sokoban-train` or `lm-train` on the config's
run), run twice in fresh processes and fresh run folders: first with an empty cache, then with the cache that the
first run wrote, which is what a resubmitted job or a second run of the same shapes finds. Per run: the seconds
XLA spent compiling or loading programs from the cache (JAX's own timer of each backend compile), the programs
and the cache hits (JAX's monitoring events), the seconds spent tracing and lowering (not cached: JAX lowers a
program to find its key) and the job's wall time. Nothing is written outside a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from parallel_experts.results import paths

REPO = Path(__file__).resolve().parents[2]
COMPILE = "/jax/core/compile/backend_compile_duration"  # XLA's compile, or the cache's load, of one program
LOWER = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration")
HITS = "/jax/compilation_cache/cache_hits"
COMMANDS = {  # domain -> the training command and its inputs in WORKDIR, as workflow/rules/{domain}.smk runs it
    "sokoban": ("sokoban-train", "--levels", paths.levels("train")),
    "lm": ("lm-train", "--tokens", paths.LM_TOKENS),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path, help="a working directory with the jobs' inputs (see above)")
    parser.add_argument("--config", nargs="+", default=[str(REPO / "config/config.yaml")])
    parser.add_argument("--sokoban", default="convlstm/recurrent/small/L4-E1-d8", help="a run id, or none")
    parser.add_argument("--lm", default="recurrent/small/W64/L2-E2-d64", help="a run id, or none")
    args = parser.parse_args()

    rows = []
    for domain, run in (("sokoban", args.sokoban), ("lm", args.lm)):
        if run == "none":
            continue
        command, flag, inputs = COMMANDS[domain]
        with tempfile.TemporaryDirectory() as scratch:
            cache = Path(scratch) / "xla-cache"
            for temperature in ("cold", "warm"):
                argv = [command, "--config", *map(os.path.abspath, args.config), "--run", run,
                        flag, str(args.workdir.resolve() / inputs), "--run-dir", f"{scratch}/{temperature}"]
                rows.append((f"{domain} {run}", temperature, measured(argv, cache, Path(scratch) / temperature)))
            entries = list(cache.glob("*-cache"))
            print(f"{domain} {run}: {len(entries)} cache entries, {sum(e.stat().st_size for e in entries) / 1e6:.1f}"
                  " MB", flush=True)
    print(table(rows))


def measured(argv: list[str], cache: Path, run_dir: Path) -> dict:
    """One job in a fresh process (this script's --measure mode) with `cache` as its compilation cache."""
    out = run_dir.with_suffix(".json")
    env = os.environ | {"JAX_COMPILATION_CACHE_DIR": str(cache),
                        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
    log = run_dir.with_suffix(".log")
    with open(log, "w") as sink:
        done = subprocess.run([sys.executable, __file__, "--measure", str(out), *argv], env=env, stdout=sink,
                              stderr=subprocess.STDOUT)
    if done.returncode:
        sys.exit(f"{' '.join(argv)} failed (exit status {done.returncode}):\n{log.read_text()[-3000:]}")
    return json.loads(out.read_text())


def measure(out: str, argv: list[str]) -> None:
    """Run one CLI command in this process and write what JAX's monitoring saw of its compiles to `out`."""
    from parallel_experts import cli, study

    study.load(cli.parser().parse_args(argv).config)  # sets the cache up as the command will, before JAX loads
    from jax import monitoring

    seconds, timed, events = Counter(), Counter(), Counter()

    def on_duration(event: str, duration: float, **_) -> None:
        seconds[event] += duration
        timed[event] += 1

    monitoring.register_event_duration_secs_listener(on_duration)
    monitoring.register_event_listener(lambda event, **_: events.update([event]))
    start = time.perf_counter()
    status = cli.main(argv)
    wall = time.perf_counter() - start
    if status:
        sys.exit(status)
    Path(out).write_text(json.dumps({
        "xla_s": seconds[COMPILE], "programs": timed[COMPILE],
        "hits": events[HITS], "lower_s": sum(seconds[e] for e in LOWER), "wall_s": wall}))


def table(rows: list[tuple[str, str, dict]]) -> str:
    lines = [f"{'job':<44} {'cache':<5} {'XLA s':>7} {'programs':>8} {'hits':>5} {'lower s':>7} {'wall s':>7}"]
    cold = {}
    for job, temperature, m in rows:
        lines.append(f"{job:<44} {temperature:<5} {m['xla_s']:7.1f} {m['programs']:8d} {m['hits']:5d} "
                     f"{m['lower_s']:7.1f} {m['wall_s']:7.1f}")
        if temperature == "cold":
            cold[job] = m
        else:
            c = cold[job]
            lines.append(f"{'':<44} {'ratio':<5} {m['xla_s'] / c['xla_s']:7.3f} {'':>8} {'':>5} "
                         f"{m['lower_s'] / c['lower_s']:7.2f} {m['wall_s'] / c['wall_s']:7.2f}   (warm / cold)")
    return "\n".join(lines)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--measure"]:
        measure(sys.argv[2], sys.argv[3:])
    else:
        main()
