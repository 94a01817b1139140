"""Reading the pipeline configuration (config/*.yaml): strict YAML, merged in order, and its fingerprint."""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from parallel_experts.config.errors import ConfigError, quote, quote_key

# What a config file may be (config/README.md, "Limits"): a config of the paper's grids is about 10 KB, a few levels
# deep and some thousand values; these bounds are far above any real one and stop a file that would hang the
# reader or every walk over the config (a stream without end, deep brackets, an alias bomb) before it is walked.
MAX_BYTES = 4 * 2**20
MAX_DEPTH = 32
MAX_VALUES = 1_000_000
YTE = "__use_yte__"  # Snakemake's switch that runs a config file's templates as Python


def load(paths: Sequence[str | Path]) -> dict:
    """Merge YAML files in order (later files override keys of earlier ones, as `--configfile` does)."""
    config: dict = {}
    for path in paths:
        loaded = read(path)
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: expected a mapping of keys at the top level, got {quote(loaded)}")
        if YTE in loaded:
            raise ConfigError(f"{path}: {YTE}: a config file is code under Snakemake, which runs the Python of its "
                              "templates (YTE) while it loads the file, before any check; this project's configs are "
                              "plain YAML, so check-config refuses it: do not run this file with snakemake")
        merge(config, loaded)
    return config


def read(path: str | Path):
    """One YAML file, strictly: a regular file of at most MAX_BYTES, UTF-8, one document of plain values (mappings
    with string keys and no duplicates, which YAML would keep the last of silently; lists, strings, numbers,
    booleans, null), nested at most MAX_DEPTH deep, at most MAX_VALUES values once its aliases are expanded."""
    data = _bytes(path)
    if data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise ConfigError(f"{path}: UTF-16 or UTF-32 text (byte-order mark); save it as UTF-8")
    if b"\0" in data:
        line = data[:data.index(b"\0")].count(b"\n") + 1
        raise ConfigError(f"{path}: line {line}: a NUL byte: binary data or UTF-16 text, not UTF-8 YAML")
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
        raise ConfigError(f"{path}: not valid YAML ({quote(str(error), 200)})") from None


def _bytes(path: str | Path) -> bytes:
    """The file's bytes, refused unread where it is not a regular file (`/dev/zero` never ends, a FIFO may never
    open) and unparsed where it holds more than MAX_BYTES."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ConfigError(f"{path}: not a regular file")
        with open(path, "rb") as file:
            data = file.read(MAX_BYTES + 1)
    except OSError as error:
        raise ConfigError(f"{path}: cannot read ({error.strerror})") from None
    if len(data) > MAX_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_BYTES // 2**20} MiB, the most a config file may hold")
    return data


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing what a config has no use for and what would hang or crash later: a second
    document, a date or any other tag beyond JSON's values, a string that is not Unicode (a lone surrogate), a
    nesting too deep to walk, aliases that expand past MAX_VALUES (a "billion laughs") or refer to themselves."""

    def get_single_node(self):  # PyYAML's, with a second document named as such and the expanded tree measured
        self.get_event()  # the stream's start
        node = None if self.check_event(yaml.StreamEndEvent) else self.compose_document()
        if not self.check_event(yaml.StreamEndEvent):
            raise yaml.MarkedYAMLError(problem="a second YAML document starts here; a config file holds one",
                                       problem_mark=self.peek_event().start_mark)
        self.get_event()
        if node is not None:
            _expanded(node, 1, {})
        return node

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def fetch_flow_collection_start(self, TokenClass):
        # The scanner looks for a key after each opening bracket, over every open level (quadratic): bounded here.
        if self.flow_level >= MAX_DEPTH:
            raise yaml.MarkedYAMLError(problem=f"nested more than {MAX_DEPTH} levels deep",
                                       problem_mark=self.get_mark())
        super().fetch_flow_collection_start(TokenClass)

    def compose_node(self, parent, index):
        # The composer recurses once per level: bounded here, before Python's recursion limit is.
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.MarkedYAMLError(problem=f"nested more than {MAX_DEPTH} levels deep",
                                           problem_mark=self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_scalar(self, node):
        # YAML leaves the escapes "\ud83d\ude00" (JSON's for 😀, as the workflow's config.json writes it) two
        # surrogates: joined here into the character they encode; a surrogate without its pair encodes none.
        value = super().construct_scalar(node)
        try:
            return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
        except UnicodeDecodeError as error:
            lone = error.object[error.start:error.end].decode("utf-16-le", "surrogatepass")
            raise yaml.MarkedYAMLError(problem=f"{quote(lone)} is not a Unicode character (a lone surrogate)",
                                       problem_mark=node.start_mark) from None

    def construct_mapping(self, node, deep=False):
        seen: dict = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults`: explicit keys may override those
                continue
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, str):
                continue  # refused below
            if key in seen:
                raise yaml.MarkedYAMLError(problem=f"duplicate key {quote_key(key)} (first at line {seen[key]})",
                                           problem_mark=key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        self.flatten_mapping(node)  # the keys a merge (`<<`) brings in are keys too
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise yaml.MarkedYAMLError(problem="a key is a list or a mapping; a key is a string",
                                           problem_mark=key_node.start_mark)
            if not isinstance(self.construct_object(key_node, deep=deep), str):
                written = key_node.value
                raise yaml.MarkedYAMLError(problem=f"key {written or 'null'} is not a string (quote it: '{written}')",
                                           problem_mark=key_node.start_mark)
        return super().construct_mapping(node, deep=deep)

    def construct_not_json(self, node):
        kind = node.tag.rsplit(":", 1)[-1]
        shown = f" {quote(node.value)}" if isinstance(node, yaml.ScalarNode) else ""
        raise yaml.MarkedYAMLError(problem=f"a YAML {kind}{shown}; expected a string, number, boolean, null, list or "
                                   "mapping (quote text that looks like a date)", problem_mark=node.start_mark)


for _tag in ("timestamp", "binary", "set", "omap", "pairs"):
    _StrictLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _StrictLoader.construct_not_json)

# Plain scalars resolved as YAML 1.2's core schema does, and JSON: `4e-4` and `.5` are numbers (PyYAML's YAML 1.1
# resolver leaves the first a string), `0240` is 240 (1.1: octal 160), `1:00` and `1_000` stay strings (1.1: 60,
# 1000), `yes` and `on` stay strings (1.1: true). The workflow reads its config through this loader too
# (study.given), so that both routes read one file alike.
_CORE = {
    "tag:yaml.org,2002:bool": r"true|True|TRUE|false|False|FALSE",
    "tag:yaml.org,2002:int": r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+",
    "tag:yaml.org,2002:float": r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)",
}
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag not in _CORE]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
for _tag, _pattern in _CORE.items():
    _StrictLoader.add_implicit_resolver(_tag, re.compile(rf"^(?:{_pattern})$"), list("-+0123456789.tTfFoxn"))


def _core_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    text = loader.construct_scalar(node)
    base = {"0o": 8, "0x": 16}.get(text[:2], 10)
    return int(text[2:] if base != 10 else text, base)


def _core_float(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> float:
    text = loader.construct_scalar(node).lower().lstrip("+")
    return float(text.replace(".inf", "inf").replace(".nan", "nan"))


def _core_bool(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> bool:
    return loader.construct_scalar(node).lower() == "true"


_StrictLoader.add_constructor("tag:yaml.org,2002:bool", _core_bool)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _core_int)
_StrictLoader.add_constructor("tag:yaml.org,2002:float", _core_float)


def _expanded(node: yaml.Node, depth: int, seen: dict) -> tuple[int, int]:
    """(values, levels) under `node`, at `depth`, with every alias expanded, each distinct node walked once: an alias
    bomb is small to compose and only explodes when walked, and a chain of aliases nests deeper than it looks."""
    if depth > MAX_DEPTH:
        raise yaml.MarkedYAMLError(problem=f"nested more than {MAX_DEPTH} levels deep (aliases expanded)",
                                   problem_mark=node.start_mark)
    if id(node) in seen:
        if seen[id(node)] is None:
            raise yaml.MarkedYAMLError(problem="an alias refers to the value that holds it (a cycle)",
                                       problem_mark=node.start_mark)
        size, height = seen[id(node)]
        if depth + height - 1 > MAX_DEPTH:
            raise yaml.MarkedYAMLError(problem=f"nested more than {MAX_DEPTH} levels deep (aliases expanded)",
                                       problem_mark=node.start_mark)
        return size, height
    seen[id(node)] = None  # being walked: met again below itself, it is a cycle
    children = [] if isinstance(node, yaml.ScalarNode) else (
        [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode) else node.value)
    below = [_expanded(child, depth + 1, seen) for child in children]
    size, height = 1 + sum(s for s, _ in below), 1 + max((h for _, h in below), default=0)
    if size > MAX_VALUES:
        raise yaml.MarkedYAMLError(problem=f"more than {MAX_VALUES:,} values once its aliases are expanded",
                                   problem_mark=node.start_mark)
    seen[id(node)] = size, height
    return size, height


def merge(base: dict, update: Mapping) -> None:
    """Merge `update` into `base`, nested mappings key by key (as Snakemake merges --configfile and --config)."""
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value


def digest(config: Mapping) -> str:
    """A short fingerprint of the effective configuration, shown on every report."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]
