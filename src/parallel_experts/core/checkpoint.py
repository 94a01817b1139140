"""Atomic checkpoints of a training run and the trained weights it ends with, for both domains' trainers.

Leaves via Equinox serialisation, host state (update counter, logs, data position) as JSON, both named by
the update; a pointer file `latest`, replaced atomically last, names the complete pair, so a kill at any
moment leaves the previous checkpoint usable. A trainer holds `run_lock` on its run folder while it runs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import equinox as eqx

from parallel_experts.config.errors import PipelineError, reason
from parallel_experts.core import atomic, records
from parallel_experts.core.run_folder import CheckpointError, latest, member


class NonFiniteLossError(PipelineError, FloatingPointError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


def save_weights(path: str | Path, tree) -> None:
    """The array leaves of `tree` (trained parameters, or a whole training carry), written atomically."""
    with atomic.atomic_open(path) as file:
        eqx.tree_serialise_leaves(_Writes(file), tree)


class _Writes:
    """A file seen only through its `write`. numpy writes a real file with `tofile`, whose short write on a full
    disk is an OSError without errno; through `write` it writes in chunks, and the OS's refusal is what it raises."""

    def __init__(self, file):
        self.write = file.write


def load_weights(path: str | Path, like, what: str):
    """The leaves saved at `path`, deserialised into the structure of `like`; `what` names them in errors."""
    path = member(Path(path).parent, Path(path).name)
    try:
        return eqx.tree_deserialise_leaves(path, like)
    except (OSError, ValueError, RuntimeError) as error:
        raise CheckpointError(f"{path}: cannot load {what} ({error})") from None


def save_checkpoint(run_dir: Path, carry, host: dict) -> None:
    name = f"checkpoint-{host['update']:09d}"
    save_weights(run_dir / f"{name}.eqx", carry)
    atomic.write_text(run_dir / f"{name}.json", json.dumps(host))
    atomic.write_text(run_dir / "latest", name)
    for old in run_dir.glob("checkpoint-*"):
        if not old.name.startswith(name):
            old.unlink()


def checkpoint_update(run_dir: Path) -> int | None:
    found = latest(run_dir)
    return found and found[1]


def load_checkpoint(run_dir: Path, like, fields: Mapping[str, type] = MappingProxyType({"update": int})):
    """(carry, host state) of the latest checkpoint, deserialised like `like`; None when there is none. The host
    state must hold every key of `fields` (the trainer's), of its type."""
    found = latest(run_dir)
    if found is None:
        return None
    name, update = found
    leaves, state = member(run_dir, f"{name}.eqx"), member(run_dir, f"{name}.json")
    try:  # the small JSON first: a damaged one is named before any weights are read
        host = records.read_json(state, fields, f"the training state of update {update}")
    except PipelineError as error:
        raise CheckpointError(f"{error}; delete {run_dir} to start over") from None
    if host["update"] != update:
        raise CheckpointError(f"{state}: expected the training state of update {update}, got update "
                              f"{host['update']}; delete {run_dir} to start over")
    try:
        carry = eqx.tree_deserialise_leaves(leaves, like)
    except (OSError, ValueError, RuntimeError) as error:
        raise CheckpointError(f"{run_dir / name}.eqx: unreadable checkpoint ({reason(error)}); delete {run_dir} to "
                              "start over") from None
    return carry, host
