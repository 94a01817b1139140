import sys

from parallel_experts.core import signals


def run() -> None:
    """The command line (`python -m parallel_experts`, `parallel-experts`): a stop asked for while the rest imports
    is kept for the trainer (core/signals.py), so the handler comes first."""
    signals.hold()
    from parallel_experts.cli import main

    sys.exit(main())


if __name__ == "__main__":
    run()
