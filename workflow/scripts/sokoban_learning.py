"""Does a Sokoban training setting learn? Train one run of a config with some training keys changed and print its
learning curve, then its test solve rates beside a random policy's. This is how the demo's rollouts (4 envs × 5
steps) and step count were chosen; config/config.yaml lists what each setting gave.

    python workflow/scripts/sokoban_learning.py convlstm/recurrent/small/L1-E4-d8 num_envs=8 env_steps=256000
    python workflow/scripts/sokoban_learning.py convlstm/recurrent/small/L4-E1-d8 --seeds 0 1 gamma=0.9

KEY=VALUE sets a key of `sokoban.training` (or `env_steps`); log_interval follows to keep 10 log points. Nothing is
written outside a temporary folder.
"""

import argparse
import dataclasses
import tempfile
import time

import equinox as eqx
import numpy as np
import yaml

from parallel_experts.config import files
from parallel_experts.sokoban import evaluate, experiment, train
from parallel_experts.study import Study


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a Sokoban run id of the config, e.g. convlstm/recurrent/small/L1-E4-d8")
    parser.add_argument("changes", nargs="*", metavar="KEY=VALUE", help="training keys to change")
    parser.add_argument("--config", nargs="+", default=["config/config.yaml"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    args = parser.parse_args()

    sokoban = Study.of(files.load(args.config)).sokoban
    run = sokoban.by_id[args.run]
    changes = {key: yaml.safe_load(value) for key, value in (change.split("=", 1) for change in args.changes)}
    settings = dataclasses.replace(run.train, **{"log_interval": 1, **changes})  # any step count is valid
    settings = dataclasses.replace(settings, log_interval=max(1, settings.num_updates // 10))
    levels = {split: experiment.level_set(sokoban.settings.levels[split], sokoban.settings.boxoban)
              for split in ("train", "test")}
    trainer = train.Trainer(run.agent, settings, levels["train"].levels)
    start = time.monotonic()
    steps_per_update = settings.num_envs * settings.num_steps

    def show(point):
        print(f"{point['update'] * steps_per_update:>9,} steps  {time.monotonic() - start:5.0f} s  solved "
              f"{np.round(point['solve_fraction'], 3)}  return {np.round(point['episodic_return'], 2)}", flush=True)

    with tempfile.TemporaryDirectory() as run_dir:
        carry, _ = train.train(trainer, args.seeds, run_dir, on_log=show)
    tried = dataclasses.replace(run, train=settings, seeds=tuple(args.seeds))
    found = evaluate.evaluate_run(tried, eqx.combine(carry.params, trainer.static), levels["test"])
    rates = found["solved"].mean("level")
    for seed in tried.seeds:
        print(f"seed {seed}: test solve rate greedy {float(rates.sel(seed=seed, mode='greedy')):.3f}, sampled "
              f"{float(rates.sel(seed=seed, mode='sampled')):.3f}")
    print(f"random policy: {found.attrs['random_solve_rate']:.3f}; {time.monotonic() - start:.0f} s in all")

if __name__ == "__main__":
    main()
