"""The language model's training speed at two or more commits, side by side (issue 42 §3): the Transformer L16 E1
and the recurrent L1 E16, Table 6's rows at either end, at one cell, each commit's code in a git worktree of its own.
The commits are timed in interleaved rounds, in a new random order each round, one fresh process per commit and
round, so that the machine's drift falls on every commit alike.

    python workflow/scripts/lm_commits.py 20bc726 HEAD [--width 64 --context 128 --batch-tokens 8192 --rounds 4]

Prints, per commit and row, the best and the median seconds of an update (the first update of each process is not
timed), and per commit the recurrent-over-Transformer ratio of each round's best updates. A regression of one row
shows as that row slower at one commit than at another, round after round. The cell is read through
`lm.throughput.trainer` and `timed_updates` and `lm.systems.model_config`, which every commit since 2 Dec 2026 has.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from statistics import median

ROWS = ((False, 16, 1), (True, 1, 16))  # Table 6's Transformer and its shallowest recurrent row


def cells(width: int, context: int, batch_tokens: int, updates: int) -> dict:
    """In a commit's checkout: each row's update seconds at the cell, after one untimed update (JSON on stdout)."""
    import jax
    import numpy as np
    import yaml

    from parallel_experts.lm import systems, throughput

    lm = yaml.safe_load(Path("config/config.yaml").read_text())["lm"]
    found = {}
    for row in ROWS:
        model = systems.model_config(row, width, lm)
        shards = [np.random.default_rng(0).integers(0, model.vocab, 64 * batch_tokens).astype(np.int32)]
        job = throughput.trainer(model, context, batch_tokens)
        _, inputs, labels, reset = next(job.batches(shards, (0, 0, 0)))
        update = jax.jit(job._update, donate_argnums=0).lower(job.init(), inputs, labels, reset).compile()
        seconds = [s for s, _ in throughput.timed_updates(job, update, job.init(), shards, updates + 1)]
        found[systems.label(row)] = seconds[1:]
    return found


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout.strip()


def timed(checkout: Path, options: argparse.Namespace) -> dict:
    """One process of `cells` in `checkout`, its own code first on the path."""
    env = {**os.environ, "PYTHONPATH": str(checkout / "src")}
    arguments = (options.width, options.context, options.batch_tokens, options.updates)
    run = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--cells", *map(str, arguments)],
                         cwd=checkout, env=env, capture_output=True, text=True)
    if run.returncode:
        sys.exit(f"{checkout}: the timing process failed:\n{run.stderr[-2000:]}")
    return json.loads(run.stdout.splitlines()[-1])


def summary(commits: list[str], rounds: list[dict[str, dict]]) -> list[str]:
    lines = []
    for commit in commits:
        per_row = {row: [s for found in rounds for s in found[commit][row]] for row in rounds[0][commit]}
        words = [f"{row} best {min(s):.3f} s, median {median(s):.3f} s" for row, s in per_row.items()]
        transformer, recurrent = rounds[0][commit]
        ratios = [min(found[commit][recurrent]) / min(found[commit][transformer]) for found in rounds]
        lines.append(f"{commit}: " + "; ".join(words) + f"; {recurrent} / {transformer} per round: "
                     + ", ".join(f"{r:.3f}" for r in ratios) + f" (median {median(ratios):.3f})")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commits", nargs="+", help="commits to compare (anything git rev-parse reads)")
    parser.add_argument("--width", type=int, default=64, help="d of both rows")
    parser.add_argument("--context", type=int, default=128, help="C: the Transformer's sequence, the recurrent segment")
    parser.add_argument("--batch-tokens", type=int, default=8192, help="tokens per update")
    parser.add_argument("--rounds", type=int, default=4, help="rounds, every commit timed once in each")
    parser.add_argument("--updates", type=int, default=2, help="timed updates per process")
    parser.add_argument("--seed", type=int, default=0, help="the seed of the rounds' orders")
    options = parser.parse_args()
    try:
        commits = {name: _git("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}") for name in options.commits}
    except subprocess.CalledProcessError as error:
        sys.exit(f"{error.cmd[-1].removesuffix('^{commit}')}: not a commit of this repository")
    order = random.Random(options.seed)
    with tempfile.TemporaryDirectory() as folder:
        checkouts = {name: Path(folder) / f"{i}-{sha[:10]}" for i, (name, sha) in enumerate(commits.items())}
        for name, path in checkouts.items():
            _git("worktree", "add", "--detach", "--quiet", str(path), commits[name])
        try:
            rounds = []
            for _ in range(options.rounds):
                names = list(checkouts)
                order.shuffle(names)
                rounds.append({name: timed(checkouts[name], options) for name in names})
        finally:
            for path in checkouts.values():
                _git("worktree", "remove", "--force", str(path))
    print(f"d = {options.width}, C = {options.context}, {options.batch_tokens} tokens per update, {options.rounds} "
          f"rounds of {options.updates} timed updates per commit and row")
    print("\n".join(summary(list(commits), rounds)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--cells"]:
        print(json.dumps(cells(*(int(value) for value in sys.argv[2:6]))))
    else:
        main()
