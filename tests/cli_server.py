"""Runs `python -m parallel_experts ...` commands one after another in one interpreter, each as `-m` runs it
(runpy), for the tables of bad inputs (test_bad_inputs.py): the interpreter and the library load once per test
worker, not once per case (two thirds of that file's time went to start-ups).

Protocol: one JSON case per line on stdin ({"args": [...], "cwd": folder, "file_size_limit": bytes or null}),
one JSON outcome per line on stdout ({"status": ..., "stdout": ..., "stderr": ...}). A case's output is what the
command wrote on file descriptors 1 and 2, read through pipes, so that a C library's message to stderr counts as
it would for a user (and a file-size limit does not cut it short). An uncaught exception is printed as Python
prints it, with status 1; an alarm turns a hang into that case's failure. What differs from a new process per
case: modules stay imported between cases, which no command relies on (each reads its inputs afresh).
"""

import json
import os
import resource
import runpy
import signal
import sys
import threading
import traceback

import parallel_experts.cli  # noqa: F401  (loaded once, outside every case's time)

SECONDS = 120  # per case: a hang is that case's failure, not a stuck test


def hang(*_):
    raise TimeoutError(f"no answer within {SECONDS} s")


def drain(fd: int, into: list) -> threading.Thread:
    def read():
        with os.fdopen(fd, "rb") as pipe:
            into.append(pipe.read())

    thread = threading.Thread(target=read)
    thread.start()
    return thread


def run(args: list[str], cwd: str, file_size_limit: int | None) -> dict:
    os.chdir(cwd)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    captured, readers = ([], []), []
    for fd, into in zip((1, 2), captured):
        read_end, write_end = os.pipe()
        readers.append(drain(read_end, into))
        os.dup2(write_end, fd)
        os.close(write_end)
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    if file_size_limit is not None:  # a write past it fails with EFBIG, as on a full disk (SIGXFSZ is ignored)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, limits[1]))
    sys.argv = ["parallel_experts", *args]
    signal.alarm(SECONDS)
    try:
        runpy.run_module("parallel_experts", run_name="__main__")
        status = 0
    except SystemExit as exit:  # as the interpreter turns it into a status: a message is printed, status 1
        status = exit.code or 0
        if not isinstance(status, int):
            print(status, file=sys.stderr)
            status = 1
    except BaseException:  # what a user would see as a traceback
        traceback.print_exc()
        status = 1
    finally:
        signal.alarm(0)
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, old in zip((1, 2), saved):
            os.dup2(old, fd)  # closes the pipe's last write end: its reader sees the end
            os.close(old)
        for reader in readers:
            reader.join()
    stdout, stderr = (b"".join(c).decode(errors="replace") for c in captured)
    return {"status": status, "stdout": stdout, "stderr": stderr}


if __name__ == "__main__":
    signal.signal(signal.SIGALRM, hang)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    requests, replies = os.fdopen(os.dup(0)), os.fdopen(os.dup(1), "w")
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # a command never reads the next case as its input
    for line in requests:
        case = json.loads(line)
        print(json.dumps(run(case["args"], case["cwd"], case["file_size_limit"])), file=replies, flush=True)
