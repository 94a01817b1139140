"""Checkpoints and trained weights: what is saved loads back, a pointer names the one complete checkpoint, and
what cannot be read fails in one line naming the file."""

import jax.numpy as jnp
import numpy as np
import pytest

from parallel_experts import checkpoint
from parallel_experts.checkpoint import CheckpointError

TREE = {"w": jnp.arange(6.0).reshape(2, 3), "b": jnp.array([1, 2], jnp.int32)}


def test_weights_round_trip_and_bad_files_name_themselves(tmp_path):
    checkpoint.save_weights(tmp_path / "model.eqx", TREE)
    loaded = checkpoint.load_weights(tmp_path / "model.eqx", TREE, "the model")
    np.testing.assert_array_equal(loaded["w"], TREE["w"])
    (tmp_path / "bad.eqx").write_bytes(b"not leaves")
    with pytest.raises(CheckpointError, match="bad.eqx: cannot load the model"):
        checkpoint.load_weights(tmp_path / "bad.eqx", TREE, "the model")


def test_latest_checkpoint_replaces_the_previous_one(tmp_path):
    assert checkpoint.load_checkpoint(tmp_path, TREE) is None and checkpoint.checkpoint_update(tmp_path) is None
    checkpoint.save_checkpoint(tmp_path, TREE, {"update": 10})
    later = {"w": TREE["w"] + 1, "b": TREE["b"]}
    checkpoint.save_checkpoint(tmp_path, later, {"update": 20, "log": [1.5]})
    carry, host = checkpoint.load_checkpoint(tmp_path, TREE)
    np.testing.assert_array_equal(carry["w"], later["w"])
    assert host == {"update": 20, "log": [1.5]} and checkpoint.checkpoint_update(tmp_path) == 20
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-000000020.eqx", "checkpoint-000000020.json",
                                                          "latest"]
    (tmp_path / "checkpoint-000000020.eqx").write_bytes(b"torn")
    with pytest.raises(CheckpointError, match="unreadable checkpoint"):
        checkpoint.load_checkpoint(tmp_path, TREE)
