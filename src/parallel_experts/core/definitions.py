"""A run's definition: a frozen dataclass of settings that travels as JSON and is rebuilt from it; the two
families of every sweep and how reports and run ids name them."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping, Sequence

from parallel_experts.config.errors import ConfigError, quote

# The two families of every sweep: the name shown in reports for each value of `recurrent`, recurrent first.
FAMILIES = {True: "recurrent", False: "non-recurrent"}


def family(recurrent: bool) -> str:
    """The name of a family in reports: "recurrent" or "non-recurrent"."""
    return FAMILIES[bool(recurrent)]


def family_id(recurrent: bool) -> str:
    """The name of a family on disk (run ids, the `family` coordinate): its report name without the hyphen."""
    return family(recurrent).replace("-", "")


class Definition:
    """A frozen dataclass of settings (nested dataclasses, tuples, plain values) that travels as JSON, in rule
    params and netCDF attributes, and is rebuilt from it: a run's definition."""

    def to_dict(self) -> dict:
        assert dataclasses.is_dataclass(self)  # every definition is a frozen dataclass
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping):
        """The definition of `d`; a setting that `d` lacks takes its default (a `to_dict` may drop a default, so
        that runs defined before the setting existed keep their definition)."""
        assert dataclasses.is_dataclass(cls)
        types = typing.get_type_hints(cls)
        return cls(**{f.name: _rebuilt(types[f.name], d[f.name]) for f in dataclasses.fields(cls)
                      if f.name in d or f.default is dataclasses.MISSING})


def _rebuilt(kind, value):
    if dataclasses.is_dataclass(kind):
        return kind(**value)
    return tuple(value) if typing.get_origin(kind) is tuple else value


class Identified(typing.Protocol):
    """A run as the planner and `by_id` read it, of either domain: its id (what defines it, as its folder and the
    reports name it) and its definition, which its run folder records."""

    @property
    def id(self) -> str: ...

    def to_dict(self) -> dict: ...


D = typing.TypeVar("D", bound=Identified)  # a domain's run


def named(runs: Mapping[str, D], run_id: str, config_files: Sequence[str]) -> D:
    """The run `run_id` of a domain's `runs` (its `Families.by_id`) in the config of `config_files`."""
    if run_id not in runs:
        raise ConfigError(f"{' + '.join(config_files)}: defines no run {run_id!r}")
    return runs[run_id]


def by_id(groups: Iterable[Iterable[D]]) -> dict[str, D]:
    """Every run of `groups` (a domain's sweep, each ablation, ...) once, by id; one id never names two
    definitions, as a run id shows every setting that varies."""
    found: dict[str, D] = {}
    for run in (run for group in groups for run in group):
        if found.setdefault(run.id, run) != run:
            (key, first, second), *others = _differences(found[run.id].to_dict(), run.to_dict())
            more = f" and {len(others)} more settings" if others else ""
            raise ConfigError(f"run id {run.id} names two different runs, with {key} {quote(first)} and "
                              f"{quote(second)}{more}; a setting that varies must appear in the run id")
    return found


def _differences(first: Mapping, second: Mapping, prefix: str = "") -> list[tuple[str, object, object]]:
    """(dotted key, first value, second value) of every setting in which two definitions differ."""
    found = []
    for key in first:
        a, b = first[key], second[key]
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            found += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            found.append((f"{prefix}{key}", a, b))
    return found
