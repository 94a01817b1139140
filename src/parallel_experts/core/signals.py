"""A stop asked for before a trainer listens for it.

SLURM's warning signal (`sbatch --signal=USR1@...`, or `scancel --signal=USR1`) may arrive while the process
still imports JAX, seconds before `core.walltime.Deadline.listening` installs its handler; SIGUSR1's default
would kill it. `hold` (the CLI's first line) keeps such a signal in `ASKED`, and the deadline starts with it.
"""

from __future__ import annotations

import signal

ASKED: list[str] = []  # the signals that came before a deadline listened, by name


def hold() -> None:
    """From now on, a SIGUSR1 is kept in ASKED instead of ending the process."""
    signal.signal(signal.SIGUSR1, lambda number, _frame: ASKED.append(signal.Signals(number).name))
