"""Leaving before the time limit: SLURM's time left, the stop rule, signals (training itself: test_*_train.py)."""

import argparse
import os
import signal
import subprocess
import sys
import time

import pytest
from jax import monitoring

from parallel_experts.config import options
from parallel_experts.core import signals, walltime
from parallel_experts.core.walltime import Deadline


@pytest.mark.parametrize("text, seconds", [("2-03:04:05", 2 * 86400 + 3 * 3600 + 4 * 60 + 5), ("03:04:05", 11045),
                                           ("4:05", 245), ("59", 59), ("0:00", 0), ("INVALID", 0),
                                           ("UNLIMITED", None), ("NOT_SET", None), ("", None), ("1-x:00", None)])
def test_squeue_time_left_in_seconds(text, seconds):
    assert walltime.parse_time_left(text) == seconds


def test_outside_slurm_and_without_a_limit_there_is_no_deadline(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    deadline = Deadline()
    assert deadline.end is None and deadline.should_stop() is None
    assert str(deadline) == "no deadline (not in a SLURM job)"


def test_slurm_end_time_sets_the_deadline(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_END_TIME", str(int(time.time()) + 600))
    deadline = Deadline()
    assert 590 < deadline.end - time.monotonic() <= 600 and str(deadline).endswith("(SLURM_JOB_END_TIME of job 7)")


def test_a_failing_squeue_leaves_no_deadline_and_says_why(monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.delenv("SLURM_JOB_END_TIME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no squeue
    deadline = Deadline()
    assert deadline.end is None and str(deadline).startswith("no deadline (squeue failed for job 7")


@pytest.mark.parametrize("end", ["garbage", "nan", "inf", "1e400"])
def test_an_end_time_that_is_no_unix_time_is_named_and_squeue_is_asked(monkeypatch, tmp_path, end):
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_END_TIME", end)
    monkeypatch.setenv("PATH", str(tmp_path))  # no squeue either: no deadline, and the log says both
    deadline = Deadline()
    assert deadline.end is None
    assert str(deadline).startswith(f"no deadline (SLURM_JOB_END_TIME={end!r} of job 7 is not a Unix time, so squeue "
                                    "is asked instead; squeue failed for job 7")


def test_an_end_time_in_the_past_stops_at_the_first_log_point(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_JOB_END_TIME", str(int(time.time()) - 60))
    deadline = Deadline()
    assert "has passed" in str(deadline) and deadline.should_stop().endswith("before the time limit, a log interval "
                                                                             "takes up to 0 s")


@pytest.mark.parametrize("limit", ["nan", "inf", "-5", "0", "abc"])
def test_a_time_limit_that_is_no_positive_number_is_refused_in_one_line(limit):
    with pytest.raises(argparse.ArgumentTypeError, match="give a finite number of seconds above 0"):
        options.seconds(limit)
    assert options.seconds("1e3") == 1000.0


def test_stops_when_the_next_interval_would_end_after_the_deadline():
    deadline = Deadline(seconds=3.0)
    time.sleep(0.5)
    assert deadline.should_stop() is None  # 2.5 s left > 1.5 x 0.5 s
    time.sleep(1.3)
    assert "before the time limit" in deadline.should_stop()  # 1.2 s left < 1.5 x 1.3 s


def test_a_signal_asks_for_a_stop_and_the_handlers_are_restored():
    before = signal.getsignal(signal.SIGUSR1)
    with Deadline().listening() as deadline:
        assert deadline.should_stop() is None
        os.kill(os.getpid(), signal.SIGUSR1)  # delivered to the main thread before kill returns
        assert deadline.should_stop() == "SIGUSR1 received"
    assert signal.getsignal(signal.SIGUSR1) == before


def test_a_signal_that_came_while_the_process_started_asks_for_a_stop(monkeypatch):
    monkeypatch.setattr(signals, "ASKED", ["SIGUSR1"])  # kept by the CLI's first line (signals.hold)
    with Deadline().listening() as deadline:
        assert deadline.should_stop() == "SIGUSR1 received"


def test_sigusr1_while_the_cli_imports_is_kept_not_a_kill():
    """SLURM's warning signal in the first second: the entry point installs its handler before it imports the CLI.
    Here the CLI is a stand-in whose import takes the signal; without the handler first the process would die."""
    script = ("import os, signal, sys, types\n"
              "cli = types.ModuleType('parallel_experts.cli')\n"
              "cli.main = lambda: (os.kill(os.getpid(), signal.SIGUSR1), 0)[1]\n"
              "sys.modules['parallel_experts.cli'] = cli\n"
              "from parallel_experts.__main__ import run\n"
              "from parallel_experts.core import signals\n"
              "try:\n    run()\nfinally:\n    print(signals.ASKED)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "['SIGUSR1']", (done.returncode, done.stderr[-2000:])


def test_seconds_spent_compiling_do_not_count_as_a_log_interval():
    """Compiling happens once per attempt: an interval is timed without it (JAX's own compile events)."""
    with Deadline(seconds=5.0).listening() as deadline:
        time.sleep(3.0)  # "compiling" for 2.9 s, as JAX reports it, then training for 0.1 s
        monitoring.record_event_duration_secs("/jax/core/compile/backend_compile_duration", 2.9)
        assert deadline.should_stop() is None  # 2 s left > 1.5 x 0.1 s (not 1.5 x 3 s)
        assert deadline.slowest < 0.5


def test_attempts_with_the_same_limit_are_compared_whole_however_long_they_set_up(tmp_path):
    """The first attempt of a job compiles its setting up, the next may find it compiled: the second must still see
    that it has no more time than the first, which a hard kill ended before its first checkpoint."""
    first = Deadline(seconds=6.0)
    time.sleep(0.8)  # setting up: more than a tenth of the limit
    walltime.begin(tmp_path, 0, first)
    with pytest.raises(walltime.NoProgress, match="also started from update 0, with 6 s"):
        walltime.begin(tmp_path, 0, Deadline(seconds=6.0))
    walltime.begin(tmp_path, 0, Deadline(seconds=60.0))  # ten times the time: a fair new try
    assert [entry["seconds"] for entry in walltime.attempts(tmp_path)] == [6.0, 60.0]
