"""The seconds this process has spent getting programs ready: tracing, lowering, and XLA's compile or, on a hit of
the persistent compilation cache, its read. JAX's own duration events, counted by one listener per process, read
by whatever needs to tell compiling from computing (a trainer's deadline, its TensorBoard throughput)."""

from __future__ import annotations

from jax import monitoring

EVENTS = "/jax/core/compile/"  # the prefix of JAX's duration events of tracing, lowering and compiling
_seconds = 0.0


def _count(event: str, seconds: float, **_) -> None:
    global _seconds
    if event.startswith(EVENTS):
        _seconds += seconds


monitoring.register_event_duration_secs_listener(_count)


def seconds() -> float:
    """Seconds spent compiling since this module was imported."""
    return _seconds
