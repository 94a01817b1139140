"""Check the rehearsal's memory estimate against a real job: XLA's planned peak of a Sokoban run's training programs
beside the peak resident memory of the real `sokoban-train` command for that run, and of the rehearsal of the same
programs (the same libraries, levels aside, and the same compilation, nothing run: the part of the job's RSS that
no program plan counts).

    python workflow/scripts/rehearsal_rss.py --config config/config.yaml --run convlstm/recurrent/small/L1-E4-d8

Prints the figures and their ratios; run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

def peak_rss(command: list[str]) -> int:
    """Peak resident bytes of `command`, run to the end as a child of a fresh helper (so it is the only child)."""
    probe = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL);"
             " print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", probe, *command], check=True, capture_output=True, text=True)
    return int(out.stdout.split()[-1]) * 1024  # Linux reports KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--run", required=True, help="a Sokoban run id of the config")
    args = parser.parse_args()
    cli = [sys.executable, "-m", "parallel_experts"]
    from parallel_experts.config import files
    from parallel_experts.sokoban import programs as sokoban_programs
    from parallel_experts.study import Study

    config = files.load([args.config])
    sokoban = Study.of(config).sokoban
    keys = [p.key for p in sokoban_programs.programs(sokoban) if ["sokoban_train", f"run={args.run}"] in
            [list(job) for job in p.jobs] and p.rule == "sokoban_train"]
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        levels = folder / "train.npz"
        subprocess.run([*cli, "sokoban-levels", "--source", json.dumps(config["sokoban"]["levels"]["train"]),
                        "--out", str(levels)], check=True, stdout=subprocess.DEVNULL)
        baseline = peak_rss([*cli, "rehearse", "--config", args.config, "--out", str(folder / "rehearsal.json"),
                             "--only", *keys])
        records = json.loads((folder / "rehearsal.json").read_text())["programs"]
        planned = max(r["peak_bytes"] for r in records)
        job = peak_rss([*cli, "sokoban-train", "--config", args.config, "--run", args.run, "--levels", str(levels),
                        "--run-dir", str(folder / "run")])
    seeds = len(sokoban.by_id[args.run].seeds)
    print(f"run {args.run} ({seeds} seeds), programs: {', '.join(keys)}")
    print(f"XLA's planned peak (largest program): {planned / 2**20:9.1f} MiB")
    print(f"peak RSS of the real job:              {job / 2**20:9.1f} MiB  (x{job / planned:.2f} of the plan)")
    print(f"peak RSS of its rehearsal (compiled):  {baseline / 2**20:9.1f} MiB")
    print(f"job RSS minus the rehearsal's:         {(job - baseline) / 2**20:9.1f} MiB  "
          f"(x{(job - baseline) / planned:.2f} of the plan)")


if __name__ == "__main__":
    main()
