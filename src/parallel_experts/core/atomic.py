"""Atomic writes: a file appears under its final name complete, or not at all.

Every writer of a result, cache, shard or checkpoint goes through `atomic_path`, so that a killed job never
leaves a half-written file that a later job (or Snakemake) takes for a finished one. The temporary file lies
beside the target, so the final `os.replace` is a rename within one file system. A write that the file system
refuses (disk full, read-only, no permission) is a `WriteError` naming the path: nothing already there changes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from parallel_experts.config import locations
from parallel_experts.config.errors import PipelineError

# What a file system answers when it will not take the write (full, read-only, not permitted, a file or folder
# in the way): the input or the machine, not a bug, so one line naming the path.
REFUSED = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EISDIR}
_UMASK = os.umask(0)
os.umask(_UMASK)


class WriteError(PipelineError, OSError):
    """The file system refused a write: disk full, read-only or not permitted."""


def writable(path: str | Path) -> Path:
    """`path` (a file or a folder), refused with a WriteError where a symbolic link takes it out of the project
    (config/locations.py)."""
    leads = locations.outside(path)
    if leads is not None:
        raise WriteError(f"{path}: a link leads it to {leads}, outside the project {Path.cwd()} and its `external` "
                         "folders; nothing is written through it (remove the link, or list the folder in the config's "
                         "`external`)")
    return Path(path)


def writable_file(path: str | Path) -> Path:
    """`writable`, and refused where something other than a regular file is there (a write replaces what it finds,
    so `--out /dev/null` would replace the device) or a file stands where its folder should be. A command checks
    its output files with it before its work starts; every write (`atomic_path`) checks again."""
    path = writable(path)
    nearest = next(folder for folder in path.parents if folder.exists())  # the folder mkdir would start from
    if not nearest.is_dir():
        raise WriteError(f"{path}: {nearest} is a file, not a folder; nothing is written")
    if path.exists() and not path.is_file():
        kind = "a folder" if path.is_dir() else "a device, pipe or socket"
        raise WriteError(f"{path}: it is {kind}, and only a regular file is replaced; nothing is written")
    return path


def writable_folder(path: str | Path) -> Path:
    """`writable`, and refused where something other than a folder is there, or a file stands where one of its
    parents should be: what a command checks of its output folders before its work starts."""
    path = writable(path)
    nearest = next(folder for folder in [path, *path.parents] if folder.exists())  # where mkdir would start
    if not nearest.is_dir():
        kind = "a file" if nearest.is_file() else "a device, pipe or socket"
        raise WriteError(f"{path}: {nearest} is {kind}, not a folder; nothing is written")
    return path


def refusal(error: BaseException) -> OSError | None:
    """The file system's refusal behind `error`, if any: libraries wrap it (Equinox in a TreePathError, h5py and
    xarray in their own errors), so the whole chain of causes is searched."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, OSError) and error.errno in REFUSED:
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path` to write to: renamed onto `path` if the block succeeds, removed if not."""
    path = writable_file(path)
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Ends like the target: writers that choose a format or warn by extension (papermill) see the real one.
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=f".tmp{path.suffix}")
        os.close(handle)
        yield Path(temporary)
        os.chmod(temporary, 0o666 & ~_UMASK)  # mkstemp's file is private; the result is as readable as any
        os.replace(temporary, path)
    except Exception as error:
        refused = refusal(error)
        if refused is None or isinstance(error, PipelineError):
            raise
        if refused.filename not in (None, temporary, str(path), str(path.parent)):  # another file, read in the block
            raise WriteError(f"{refused.filename}: {os.strerror(refused.errno)} (while writing {path}; nothing already "
                             "written was changed)") from None
        raise WriteError(f"{path}: cannot write ({os.strerror(refused.errno)}); nothing already written was changed"
                         ) from None
    finally:
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "wb") -> Iterator[IO]:
    """`open(path, mode)` for writing, atomically (see `atomic_path`)."""
    with atomic_path(path) as temporary, open(temporary, mode) as file:
        yield file


def write_text(path: str | Path, text: str) -> None:
    with atomic_open(path, "w") as file:
        file.write(text)
