import os
import sys

from parallel_experts.core import signals


def run() -> None:
    """The command line (`python -m parallel_experts`, `parallel-experts`): a stop asked for while the rest imports
    is kept for the trainer (core/signals.py), so the handler comes first. A reader that goes away (`... | head`)
    ends the command quietly, as it ends a Unix tool."""
    signals.hold()
    from parallel_experts.cli import main

    try:
        try:
            status = main()
        finally:
            sys.stdout.flush()  # where a reader that went away shows, rather than in Python's own flush at exit
    except BrokenPipeError:
        # Nothing more can reach the reader; point stdout at /dev/null so that the flush at exit cannot raise again
        # (the Python docs' recipe: library/signal, "Note on SIGPIPE").
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 1
    sys.exit(status)


if __name__ == "__main__":
    run()
