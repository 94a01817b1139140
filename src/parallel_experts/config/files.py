"""Reading the pipeline configuration (config/*.yaml): strict YAML, merged in order, and its fingerprint."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from parallel_experts.config.errors import ConfigError


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


def digest(config: Mapping) -> str:
    """A short fingerprint of the effective configuration, shown on every report."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]
