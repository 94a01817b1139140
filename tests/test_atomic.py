"""Atomic writes: the target holds the old content or the new, never part of it, and no temporary is left."""

import os
import stat

import pytest

from parallel_experts import atomic


def test_write_replaces_the_target_and_leaves_nothing_else(tmp_path):
    target = tmp_path / "sub" / "result.txt"
    atomic.write_text(target, "first")
    atomic.write_text(target, "second")
    assert target.read_text() == "second"
    assert os.listdir(target.parent) == ["result.txt"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask  # not mkstemp's private 0o600


def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary(tmp_path):
    target = tmp_path / "result.bin"
    atomic.write_text(target, "complete")
    with pytest.raises(RuntimeError), atomic.atomic_open(target) as file:
        file.write(b"half of it")
        raise RuntimeError("killed mid-write")
    assert target.read_text() == "complete"
    assert os.listdir(tmp_path) == ["result.bin"]


def test_atomic_path_hands_a_writable_path_beside_the_target(tmp_path):
    target = tmp_path / "data.nc"
    with atomic.atomic_path(target) as temporary:
        assert temporary.parent == tmp_path and temporary != target and not target.exists()
        temporary.write_bytes(b"x")
    assert target.read_bytes() == b"x"
