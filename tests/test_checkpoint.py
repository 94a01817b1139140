"""Checkpoints and trained weights: what is saved loads back, a pointer names the one complete checkpoint, and
what cannot be read fails in one line naming the file."""

import json
import os
import socket
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from parallel_experts.config.errors import PipelineError
from parallel_experts.core import checkpoint, run_folder
from parallel_experts.core.run_folder import CheckpointError

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


@pytest.mark.parametrize("pointer", ["garbage", "{}", "", "../../elsewhere/checkpoint-000000010",
                                     "/tmp/checkpoint-000000010", "checkpoint-10"])
def test_a_pointer_that_names_no_checkpoint_of_the_folder_is_refused(tmp_path, pointer):
    checkpoint.save_checkpoint(tmp_path, TREE, {"update": 10})
    (tmp_path / "latest").write_text(pointer)
    for read in (checkpoint.load_checkpoint, lambda run_dir, _: checkpoint.checkpoint_update(run_dir)):
        with pytest.raises(CheckpointError, match=f"^{tmp_path / 'latest'}: expected a checkpoint name"):
            read(tmp_path, TREE)


def test_a_pointer_that_is_a_folder_or_not_text_is_refused(tmp_path):
    (tmp_path / "latest").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(CheckpointError, match="latest: unreadable checkpoint pointer"):
        checkpoint.load_checkpoint(tmp_path, TREE)
    (tmp_path / "latest").unlink()
    (tmp_path / "latest").mkdir()
    with pytest.raises(CheckpointError, match="latest: unreadable checkpoint pointer"):
        checkpoint.load_checkpoint(tmp_path, TREE)


@pytest.mark.parametrize("host", ["{}", "[]", "not json", '{"update": 20}'])
def test_training_state_of_another_update_or_no_state_is_refused(tmp_path, host):
    checkpoint.save_checkpoint(tmp_path, TREE, {"update": 10})
    (tmp_path / "checkpoint-000000010.json").write_text(host)
    with pytest.raises(CheckpointError, match="checkpoint-000000010"):
        checkpoint.load_checkpoint(tmp_path, TREE)


def test_a_second_trainer_in_a_locked_run_folder_stops_naming_the_first(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from parallel_experts.core.run_folder import run_lock\n"
         f"with run_lock({str(tmp_path)!r}, {{}}):\n    print('locked', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(PipelineError, match=f"^{tmp_path}: another trainer \\(pid {holder.pid} on .*\\) is "
                                                "training in this run folder"):
            with run_folder.run_lock(tmp_path, {}):
                pass
    finally:
        holder.kill()
        holder.wait()
    with run_folder.run_lock(tmp_path, {}):  # a killed holder leaves no stale lock
        assert (tmp_path / ".lock").read_text() == f"pid {os.getpid()} on {socket.gethostname()}"


def test_a_run_folder_that_cannot_be_written_stops_before_training(tmp_path):
    (tmp_path / "run").write_text("")  # a file where the run folder should be
    with pytest.raises(PipelineError, match="run: cannot write the run folder"):
        with run_folder.run_lock(tmp_path / "run", {}):
            pass


def test_a_checkpoint_of_another_definition_is_discarded_not_resumed(tmp_path):
    with run_folder.run_lock(tmp_path, {"lr": 1}):
        checkpoint.save_checkpoint(tmp_path, TREE, {"update": 10})
    with run_folder.run_lock(tmp_path, {"lr": 1}):  # the same run: resumed
        assert checkpoint.checkpoint_update(tmp_path) == 10
    with run_folder.run_lock(tmp_path, {"lr": 2}):  # the config changed the run: trained from the start
        assert checkpoint.load_checkpoint(tmp_path, TREE) is None
    assert json.loads((tmp_path / "run.json").read_text()) == {"lr": 2}
    checkpoint.save_checkpoint(tmp_path, TREE, {"update": 10})
    (tmp_path / "run.json").unlink()  # a checkpoint of an unknown run: refused, and kept
    with pytest.raises(CheckpointError, match="a checkpoint without the run.json that names its run"):
        with run_folder.run_lock(tmp_path, {"lr": 2}):
            pass
    assert checkpoint.checkpoint_update(tmp_path) == 10
