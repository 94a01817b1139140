"""Atomic checkpoints of a training run, shared by the Sokoban and language-model trainers.

Leaves via Equinox serialisation, host state (update counter, logs, data position) as JSON, both named by
the update; a pointer file `latest`, replaced atomically last, names the complete pair, so a kill at any
moment leaves the previous checkpoint usable.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import equinox as eqx

from parallel_experts.errors import PipelineError


class CheckpointError(PipelineError, ValueError):
    """A checkpoint or saved model that cannot be read."""


class NonFiniteLossError(PipelineError, FloatingPointError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


def save_checkpoint(run_dir: Path, carry, host: dict) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    name = f"checkpoint-{host['update']:09d}"
    with open(run_dir / f"{name}.eqx.tmp", "wb") as f:
        eqx.tree_serialise_leaves(f, carry)
    (run_dir / f"{name}.json.tmp").write_text(json.dumps(host))
    os.replace(run_dir / f"{name}.eqx.tmp", run_dir / f"{name}.eqx")
    os.replace(run_dir / f"{name}.json.tmp", run_dir / f"{name}.json")
    (run_dir / "latest.tmp").write_text(name)
    os.replace(run_dir / "latest.tmp", run_dir / "latest")
    for old in run_dir.glob("checkpoint-*"):
        if not old.name.startswith(name):
            old.unlink()


def checkpoint_update(run_dir: Path) -> int | None:
    latest = Path(run_dir) / "latest"
    return int(latest.read_text().split("-")[1]) if latest.exists() else None


def load_checkpoint(run_dir: Path, like):
    """(carry, host state) of the latest checkpoint, deserialised like `like`; None when there is none."""
    latest = Path(run_dir) / "latest"
    if not latest.exists():
        return None
    name = latest.read_text().strip()
    try:
        carry = eqx.tree_deserialise_leaves(run_dir / f"{name}.eqx", like)
        host = json.loads((run_dir / f"{name}.json").read_text())
    except (OSError, ValueError, RuntimeError) as error:
        raise CheckpointError(f"{run_dir / name}: unreadable checkpoint ({error}); delete {run_dir} to start "
                              "over") from None
    return carry, host
