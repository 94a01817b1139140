"""Loading and validating the pipeline configuration (config/*.yaml).

The workflow and the CLI both call `validate`, so a bad config fails the same way from either door:
one line that names the key and what was expected, never a traceback.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

import jsonschema
import yaml

from parallel_experts import atomic, budget
from parallel_experts.errors import ConfigError, key_path

SCHEMA_PATH = Path(__file__).with_name("config.schema.yaml")


@cache
def schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def load(paths: Sequence[str | Path]) -> dict:
    """Merge YAML files in order (later files override keys of earlier ones, as `--configfile` does)."""
    config: dict = {}
    for path in paths:
        loaded = read(path)
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: expected a mapping of keys at the top level")
        _merge(config, loaded)
    return config


def read(path: str | Path):
    """One YAML file, strictly: UTF-8, no duplicate keys (YAML would keep the last silently), string keys only."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read ({error.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise ConfigError(f"{path}: line {line}: not UTF-8 text (byte {data[error.start]:#04x})") from None
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f" line {mark.line + 1}:" if mark else ""
        raise ConfigError(f"{path}:{where} {error.problem or error.context}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML ({error})") from None


class _StrictLoader(yaml.SafeLoader):
    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults`: explicit keys may override those
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if not isinstance(key, str):
                raise yaml.MarkedYAMLError(problem=f"key {key!r} is not a string (quote it: '{key}')",
                                           problem_mark=key_node.start_mark)
            if key in seen:
                raise yaml.MarkedYAMLError(problem=f"duplicate key {key!r} (first at line {seen[key]})",
                                           problem_mark=key_node.start_mark)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _merge(base: dict, update: Mapping) -> None:
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def validate(config: Mapping) -> None:
    """Check `config` against the schema, then the allocation grids; raise ConfigError on the first problem."""
    _check_finite(config, [])
    errors = sorted(jsonschema.Draft202012Validator(schema()).iter_errors(config), key=_error_rank)
    if errors:
        raise ConfigError(_describe(errors[0]))
    for domain in budget.DOMAINS:
        budget.budgets(config, domain)
    _check_references(config)
    # Build the Sokoban runs, so that what their TrainConfig and AgentConfig reject (e.g. fewer updates than
    # one log interval) fails here too. A late import: sokoban.experiment loads JAX, Equinox and Jumanji
    # (2 s), which every other importer of this module (results.digest, the CLI at startup) does not need.
    from parallel_experts.sokoban import experiment as sokoban_experiment

    sokoban_experiment.runs(config)
    sokoban_experiment.probed_runs(config)
    sokoban_experiment.expert_count_runs(config)
    sokoban_experiment.ablation_runs(config)
    _check_lm(config)


def _check_lm(config: Mapping) -> None:
    """Build the LM runs (their TrainConfig refuses a window or segment that does not divide batch_tokens, and
    so on) and check that the evaluation fits the validation shard, so that neither fails after training."""
    from parallel_experts.lm import evaluate, experiment as lm_experiment
    from parallel_experts.lm.shards import DataError

    lm_experiment.runs_by_id(config)  # the sweep and the ablations
    if "pretokenized" in config["lm"]["corpus"]:  # the published validation shard: 100M tokens, fits any setting
        return
    spec = lm_experiment.evaluation(config)
    for window in config["lm"]["windows"]:
        try:  # shard 0 (validation) holds lm.shard_tokens tokens wherever training shards follow it
            evaluate.check_fit(config["lm"]["shard_tokens"], window, spec["streams"], spec["lanes"])
        except DataError as error:
            raise ConfigError(f"lm.evaluation: {error}") from None


def _check_finite(value, path: list) -> None:
    """NaN passes every bound of the schema (all its comparisons are false), so it is refused here, as is ±inf."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{key_path(path)}: expected a finite number, got {value}")
    items = value.items() if isinstance(value, Mapping) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        _check_finite(item, [*path, key])


def _check_references(config: Mapping) -> None:
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
        return f"{where}: unknown key {', '.join(map(repr, unknown))} ({expected})"
    if kind == "required":
        return f"{where}: missing key {error.message.split()[0]}"
    if kind == "oneOf" and error.schema.get("oneOf") == [{"required": ["allocations"]}, {"required": ["enumerate"]}]:
        return f"{where}: give exactly one of 'allocations' or 'enumerate'"
    if kind == "oneOf" and isinstance(error.instance, Mapping):
        return _describe_form(error, where)
    if kind == "type":
        return f"{where}: expected {detail}, got {json.dumps(error.instance)}"
    if kind == "enum":
        return f"{where}: expected one of {', '.join(map(str, detail))}, got {json.dumps(error.instance)}"
    if kind in ("minimum", "maximum"):
        bound = ">=" if kind == "minimum" else "<="
        return f"{where}: expected a value {bound} {detail}, got {json.dumps(error.instance)}"
    return f"{where}: {error.message}"


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
    return f"{where}: expected one of the forms {listed}, got the keys {', '.join(map(repr, error.instance))}"


def write_snapshot(config: Mapping, path: str | Path) -> None:
    """Write the effective configuration as JSON (results/config.json, which every job reads its runs from),
    only where it changed: its modification time is when the config last changed."""
    text = json.dumps(config, indent=2, sort_keys=True) + "\n"
    if not (Path(path).is_file() and Path(path).read_text(encoding="utf-8", errors="replace") == text):
        atomic.write_text(path, text)


def digest(config: Mapping) -> str:
    """A short fingerprint of the effective configuration, shown on every report."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]
