"""config/README.md documents every key of the configuration schema, and no key the schema lacks.

Key paths are read from src/parallel_experts/config/schema.yaml: each property adds `.name`; a map whose values
are a schema (additionalProperties, patternProperties) adds `.<name>`, the README's placeholder for a name the
user chooses; array items add no segment; `$ref` (into `$defs` or `definitions`) and the branches of
oneOf/anyOf/allOf (and if/then/else) are followed. A key is documented when it is the key cell of a README
table row: | `sokoban.training.num_envs` | meaning | default | unit |.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "src" / "parallel_experts" / "config" / "schema.yaml"
README = ROOT / "config" / "README.md"
PLACEHOLDER = "<name>"

TABLE_KEY = re.compile(r"^\|\s*`([^`]+)`\s*\|", re.MULTILINE)  # the key cell that opens a table row
CODE_SPAN = re.compile(r"`([^`\n]+)`")


def _resolve(schema: dict, ref: str) -> dict:
    if not ref.startswith("#/"):
        raise ValueError(f"only local references are supported, got {ref!r}")
    node = schema
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _walk(schema: dict, node, prefix: str, found: set[str], refs: tuple[str, ...] = ()) -> None:
    if not isinstance(node, dict):  # `true`, `false` (e.g. items: false)
        return
    if "$ref" in node and node["$ref"] not in refs:  # 2020-12: siblings of $ref apply too, so both are walked
        _walk(schema, _resolve(schema, node["$ref"]), prefix, found, (*refs, node["$ref"]))
    for keyword in ("oneOf", "anyOf", "allOf"):
        for branch in node.get(keyword, []):
            _walk(schema, branch, prefix, found, refs)
    for keyword in ("if", "then", "else"):
        _walk(schema, node.get(keyword), prefix, found, refs)

    def add(name: str, sub) -> None:
        path = f"{prefix}.{name}" if prefix else name
        found.add(path)
        _walk(schema, sub, path, found, refs)

    for name, sub in node.get("properties", {}).items():
        add(name, sub)
    if isinstance(node.get("additionalProperties"), dict):
        add(PLACEHOLDER, node["additionalProperties"])
    for sub in node.get("patternProperties", {}).values():
        add(PLACEHOLDER, sub)
    items = node.get("items")
    for sub in items if isinstance(items, list) else [items]:  # a list: the items of drafts before 2020-12
        _walk(schema, sub, prefix, found, refs)
    for sub in node.get("prefixItems", []):
        _walk(schema, sub, prefix, found, refs)


def schema_keys() -> set[str]:
    schema = yaml.safe_load(SCHEMA.read_text())
    found: set[str] = set()
    _walk(schema, schema, "", found)
    return found


def test_walk_follows_refs_branches_and_maps():
    schema = {
        "properties": {
            "a": {"$ref": "#/$defs/block", "properties": {"extra": {}}},
            "m": {"additionalProperties": {"properties": {"x": {"type": "array", "items": {"$ref": "#/definitions/d"}}}}},
            "o": {"oneOf": [{"properties": {"p": {}}}, {"properties": {"q": {"properties": {"r": {}}}}}]},
            "closed": {"additionalProperties": False},
        },
        "$defs": {"block": {"properties": {"inner": {}}}},
        "definitions": {"d": {"properties": {"y": {}}}},
    }
    found: set[str] = set()
    _walk(schema, schema, "", found)
    assert found == {"a", "a.inner", "a.extra", "m", "m.<name>", "m.<name>.x", "m.<name>.x.y",
                     "o", "o.p", "o.q", "o.q.r", "closed"}


def test_readme_documents_every_schema_key():
    keys = schema_keys()
    documented = set(TABLE_KEY.findall(README.read_text()))
    missing = sorted(keys - documented)
    assert not missing, (f"{len(missing)} of {len(keys)} schema keys have no row in {README.relative_to(ROOT)}: "
                         + ", ".join(missing))


def test_readme_names_no_key_the_schema_lacks():
    keys = schema_keys()
    top = sorted({key.split(".")[0] for key in keys}, key=len, reverse=True)
    dotted = re.compile(rf"^(?:{'|'.join(map(re.escape, top))})(?:\.[^\s.]+)+$")
    named = {span for span in CODE_SPAN.findall(README.read_text()) if dotted.match(span)}
    unknown = sorted(named - keys)
    assert not unknown, f"{README.relative_to(ROOT)} names keys the schema does not have: " + ", ".join(unknown)
