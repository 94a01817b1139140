"""Atomic writes: the target holds the old content or the new, never part of it, and no temporary is left."""

import errno
import os
import stat
from pathlib import Path

import pytest

from parallel_experts.core import atomic


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


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_a_refused_write_is_one_line_naming_the_file_and_changes_nothing(tmp_path, code):
    target = tmp_path / "curve.nc"
    atomic.write_text(target, "complete")
    with pytest.raises(atomic.WriteError, match=f"^{target}: cannot write \\({os.strerror(code)}\\); nothing "):
        with atomic.atomic_open(target) as file:
            file.write(b"half of it")
            raise OSError(code, os.strerror(code))  # what the file system answers on a full or read-only disk
    assert target.read_text() == "complete" and os.listdir(tmp_path) == ["curve.nc"]


def test_a_folder_that_cannot_be_created_is_a_write_error(tmp_path):
    (tmp_path / "file").write_text("")  # a file where a folder should be: mkdir fails even for root
    with pytest.raises(atomic.WriteError, match="file/sub/x.nc: .*/file is a file, not a folder; nothing is written"):
        atomic.write_text(tmp_path / "file" / "sub" / "x.nc", "data")


def test_other_os_errors_are_not_disguised(tmp_path):
    with pytest.raises(FileNotFoundError), atomic.atomic_path(tmp_path / "x") as temporary:
        open(temporary.parent / "missing" / "y")


def test_only_a_regular_file_is_replaced(tmp_path):
    """Issue 44, class 5: a write replaces what it finds, so `--out /dev/null` would replace the device (as root)."""
    with pytest.raises(atomic.WriteError, match="/dev/null: it is a device, pipe or socket"):
        atomic.write_text("/dev/null", "x")
    assert Path("/dev/null").is_char_device()
    with pytest.raises(atomic.WriteError, match="it is a folder, and only a regular file is replaced"):
        atomic.write_text(tmp_path, "x")
    assert atomic.writable(tmp_path) == tmp_path  # a folder that exists is a place to write into
