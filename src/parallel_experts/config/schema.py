"""Validating a configuration against its schema (schema.yaml, packaged with the wheel).

A bad config fails the same way from the workflow and from the CLI: one line that names the key and what was
expected, never a traceback. What needs the domains (every budget's grid, every run's settings) is checked by
`parallel_experts.study.check`, which calls this first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import jsonschema
import yaml

from parallel_experts.config.errors import ConfigError, key_path, quote, quote_key

SCHEMA_PATH = Path(__file__).with_name("schema.yaml")
# Every integer of a config fits JAX's int32 (config/README.md, "Limits"): counts become array shapes, step counters
# and time limits inside compiled programs, where a larger one overflows or wraps.
INT_MIN, INT_MAX = -(2**31), 2**31 - 1


def _is_integer(checker, value) -> bool:
    # JSON Schema counts 16.0 as an integer; a config means what it wrote, and a float count crashes or misnames
    # a run later (a window of 16.0 in a run id), so only a written integer is one.
    return isinstance(value, int) and not isinstance(value, bool)


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer))


@cache
def schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def validate(config: Mapping) -> None:
    """Check `config` against the schema; raise ConfigError naming the first problem."""
    _check_numbers(config, [])
    errors = sorted(_Validator(schema()).iter_errors(config), key=_error_rank)
    if errors:
        raise ConfigError(_describe(errors[0]))


def validate_part(value, where: str) -> None:
    """Check `value` against the schema of the config's key `where` (dotted, through `properties` only): a command's
    JSON option that holds what the config holds there. Raise ConfigError naming the first problem by its key."""
    keys = where.split(".")
    part = schema()
    for key in keys:
        part = part["properties"][key]
    for key in reversed(keys):  # nested as in a config, so that every error names its whole key
        part, value = {"type": "object", "properties": {key: part}}, {key: value}
    _check_numbers(value, [])
    errors = sorted(_Validator({"$defs": schema()["$defs"], **part}).iter_errors(value), key=_error_rank)
    if errors:
        raise ConfigError(_describe(errors[0]))


def _check_numbers(value, path: list) -> None:
    """NaN passes every bound of the schema (all its comparisons are false), so it is refused here, as is ±inf; and
    so is an integer outside int32, wherever it is (the schema's bounds are lower bounds mostly)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{key_path(path)}: expected a finite number, got {value}")
    if isinstance(value, int) and not isinstance(value, bool) and not INT_MIN <= value <= INT_MAX:
        raise ConfigError(f"{key_path(path)}: expected an integer from -2^31 to 2^31 - 1 (int32), got {quote(value)}")
    items = value.items() if isinstance(value, Mapping) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        _check_numbers(item, [*path, key])


def check_references(config: Mapping) -> None:
    """Names that must point at something defined elsewhere in the config."""
    sokoban = config["sokoban"]
    for name, sweep in sokoban.get("sweeps", {}).items():
        for index, budget_name in enumerate(sweep["budgets"]):
            if budget_name not in sokoban["budgets"]:
                raise ConfigError(f"sokoban.sweeps.{name}.budgets[{index}]: unknown budget {budget_name!r} "
                                  f"(defined: {', '.join(sokoban['budgets'])})")
    uses_boxoban = any("boxoban" in source for source in sokoban["levels"].values())
    boxoban = sokoban.get("boxoban", {})
    if uses_boxoban and not (boxoban.get("root") or boxoban.get("download")):
        raise ConfigError("sokoban.boxoban: the levels name a Boxoban split; give `root` (a local copy of "
                          "google-deepmind/boxoban-levels) or `download: true`")


def _error_rank(error: jsonschema.ValidationError) -> tuple:
    # Report the deepest, most specific problem first: "width must be >= 1" beats "oneOf failed".
    return (-len(error.absolute_path), error.validator in ("oneOf", "anyOf"), str(error.absolute_path))


def _describe(error: jsonschema.ValidationError) -> str:
    where = key_path(error.absolute_path)
    kind, detail = error.validator, error.validator_value
    if kind == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed))
        expected = f"expected one of: {', '.join(allowed)}" if allowed else "no other keys are allowed"
        more = f" and {len(unknown) - 5:,} more" if len(unknown) > 5 else ""
        return f"{where}: unknown key {', '.join(map(quote_key, unknown[:5]))}{more} ({expected})"
    if kind == "required":
        return f"{where}: missing key {error.message.split()[0]}"
    if kind == "oneOf" and error.schema.get("oneOf") == [{"required": ["allocations"]}, {"required": ["enumerate"]}]:
        return f"{where}: give exactly one of 'allocations' or 'enumerate'"
    if kind == "oneOf" and isinstance(error.instance, Mapping):
        return _describe_form(error, where)
    if kind == "type":
        written = detail == "integer" and isinstance(error.instance, float)
        hint = " (an integer is written without a point)" if written else ""
        return f"{where}: expected {detail}, got {quote(error.instance)}{hint}"
    if kind == "enum":
        return f"{where}: expected one of {', '.join(map(str, detail))}, got {quote(error.instance)}"
    if kind in ("minimum", "maximum"):
        bound = ">=" if kind == "minimum" else "<="
        return f"{where}: expected a value {bound} {detail}, got {quote(error.instance)}"
    if kind == "pattern":
        return f"{where}: expected a match of {detail}, got {quote(error.instance)}"
    if kind == "maxLength":  # a name: it becomes part of file names, which the file system bounds
        return f"{where}: {quote(error.instance)} is longer than {detail} characters, the most a name may have"
    # jsonschema's other messages open with the instance's repr, which may be any length
    return f"{where}: {error.message.replace(repr(error.instance), quote(error.instance), 1)}"


def _describe_form(error: jsonschema.ValidationError, where: str) -> str:
    """A mapping that matches none of a oneOf's forms (`lm.corpus`, a level source), each form told apart by its
    required keys: the problem inside the form the keys name, or which forms there are."""
    forms = [branch.get("required", []) for branch in error.validator_value]
    meant = [i for i, keys in enumerate(forms) if keys and set(keys) <= set(error.instance)]
    if len(meant) == 1:
        inside = sorted((e for e in error.context if e.schema_path and e.schema_path[0] == meant[0]), key=_error_rank)
        if inside:
            return _describe(inside[0])
    listed = ", ".join("{" + ", ".join(keys) + "}" for keys in forms)
    keys = ", ".join(map(quote_key, list(error.instance)[:10]))
    return f"{where}: expected one of the forms {listed}, got the keys {keys}"
