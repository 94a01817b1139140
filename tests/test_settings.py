"""The typed settings (config/settings.py) against the schema and config/README.md, key by key: each class's fields
are its block's keys, a field without a default is a required key, and each default is the README's."""

import dataclasses
import re
import typing

import pytest
import yaml
from test_config_readme import README, SCHEMA, _resolve

from parallel_experts.analysis import verdicts
from parallel_experts.config import settings
from parallel_experts.core import budget
from parallel_experts.lm import settings as lm_settings
from parallel_experts.results import paper
from parallel_experts.sokoban import settings as sokoban_settings

# Each class and a key of its block as the README's tables name it (a family, a domain or a setting as an example).
BLOCKS = {
    settings.Resource: "resources.default",
    settings.AssumedDevice: "plan.default",
    settings.Serial: "plan.default.serial",
    settings.FamilyAssumption: "power.sokoban.recurrent",
    settings.AblationAssumption: "power.sokoban.ablations.radius",
    settings.DomainPower: "power.sokoban",
    settings.PowerAssumptions: "power",
    settings.Margins: "claims.margins",
    sokoban_settings.SokobanSettings: "sokoban",
    sokoban_settings.Sweep: "sokoban.sweeps.<name>",
    sokoban_settings.ExpertCount: "sokoban.expert_count",
    sokoban_settings.Ablation: "sokoban.ablations.radius",
    sokoban_settings.Probes: "sokoban.probes",
    sokoban_settings.Picture: "sokoban.probes.picture",
    budget.BudgetSpec: "sokoban.budgets.<name>",
    budget.Enumerated: "sokoban.budgets.<name>.enumerate",
    lm_settings.LmSettings: "lm",
    lm_settings.Training: "lm.training",
    lm_settings.Evaluation: "lm.evaluation",
    lm_settings.Ablation: "lm.ablations.kv_cache",
}
# Fields that are not keys of their block: Sokoban's seeds are the top-level `seeds`.
NOT_KEYS = {sokoban_settings.SokobanSettings: {"seeds"}}
# The classes whose every default the README states in its own cell (the domains' blocks that the runs' own classes
# fill in, as `sokoban.training` by TrainConfig, state theirs there).
README_DEFAULTS = [cls for cls in BLOCKS if cls.__module__ == settings.__name__] + [
    lm_settings.Training, lm_settings.Evaluation, sokoban_settings.Picture]
# The blocks whose keys are families of rules (`resources.<family>`, `plan.<family>`).
BY_FAMILY = ("resources", "plan")


def node(schema: dict, key: str) -> dict:
    """The schema of the block at `key`, its references followed."""
    found = schema
    for part in key.split("."):
        found = found["additionalProperties"] if part == "<name>" else found["properties"][part]
        while "$ref" in found:  # the block's own keys over the referenced block's; their properties merged
            referenced, own = _resolve(schema, found["$ref"]), {k: v for k, v in found.items() if k != "$ref"}
            found = referenced | own | {"properties": referenced.get("properties", {}) | own.get("properties", {})}
    return found


def readme_defaults() -> dict[str, str]:
    """Each key of the README's tables -> its default cell."""
    rows = re.findall(r"^\|\s*`([^`]+)`\s*\|[^|]*\|([^|]*)\|", README.read_text(), re.MULTILINE)
    return {key: cell.strip() for key, cell in rows}


@pytest.fixture(scope="module")
def schema():
    return yaml.safe_load(SCHEMA.read_text())


@pytest.mark.parametrize("cls", BLOCKS, ids=lambda cls: cls.__name__)
def test_each_field_is_a_key_of_its_block_and_required_where_it_has_no_default(schema, cls):
    block = node(schema, BLOCKS[cls])
    fields = {field.name: field for field in dataclasses.fields(cls) if field.name not in NOT_KEYS.get(cls, ())}
    assert set(fields) == set(block["properties"])
    required = {name for name, field in fields.items()
                if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING}
    assert required == set(block.get("required", []))


@pytest.mark.parametrize("cls", README_DEFAULTS, ids=lambda cls: cls.__name__)
def test_each_default_is_the_one_the_readme_states(cls):
    """A default value is the README's number or `name`; None is "none" (or required only in one form, as
    `below_recurrent` for the non-recurrent family, or another class's default, named); a required key is
    "required"."""
    cells = readme_defaults()
    for field in dataclasses.fields(cls):
        cell = cells[f"{BLOCKS[cls]}.{field.name}"]
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            assert cell.startswith("required"), (field.name, cell)
        elif field.default is None or field.default_factory is not dataclasses.MISSING:
            assert cell.startswith(("none", "required for")) or "(`" in cell, (field.name, cell)
        elif dataclasses.is_dataclass(field.default):
            assert cell.startswith("none"), (field.name, cell)  # a block whose keys all have their own defaults
        elif isinstance(field.default, str):
            assert cell.startswith(f"`{field.default}`"), (field.name, cell)
        else:
            number = float(re.match(r"[\d,.e-]+", cell).group().replace(",", ""))
            assert number == field.default, (field.name, cell)


@pytest.mark.parametrize("block", BY_FAMILY)
def test_the_families_of_rules_are_the_schemas(schema, block):
    assert set(settings.FAMILIES) == set(node(schema, block)["properties"])


def test_the_margins_defaults_are_the_papers_and_the_verdicts():
    assert settings.Margins().lm == paper.KV_SHARING_COST
    assert (verdicts.COMPARABLE, verdicts.SOKOBAN_COMPARABLE, verdicts.RECALL_COMPARABLE) == (0.02, 0.2, 0.05)


def test_a_config_block_reads_into_its_typed_values():
    config = {"resources": {"default": {"cpus": 1, "mem_mb": 100, "runtime": 1, "gpus": 0},
                            "bench": {"cpus": 2, "mem_mb": 100, "runtime": 1, "gpus": 4, "resubmissions": 3}},
              "plan": {"default": {"device": "d", "peak_tflops": 2.0, "efficiency": {"recurrent": 0.1,
                                                                                   "non-recurrent": 0.2},
                                   "serial": {"step_ms": 1.0, "per_sequence_us": 2.0}}},
              "power": {"lm": {"nonrecurrent": {"best_depth": "deepest", "depth_gain": 0.1, "sd": 0.2,
                                                "reason": "r", "below_recurrent": 0.3}}},
              "claims": {"margins": {"lm": 0.01}}}
    resources = settings.Resources.of(config)
    assert resources.of_family("train") == resources.default and resources.of_family("bench").devices == 4
    assert resources.any_gpu and resources.of_family("bench").resubmissions == 3
    assert resources.default.resubmissions == 0
    plan = settings.PlanAssumptions.of(config)
    assert plan.where("lm_train") == "default" and plan.families["default"].serial == settings.Serial(1.0, 2.0)
    assert plan.families["default"].efficiency["non-recurrent"] == 0.2
    assert settings.PlanAssumptions.of({}).where("train") is None
    power = settings.PowerAssumptions.of(config)
    assert power.draws == 10_000 and power.sokoban == settings.DomainPower()
    assert power.lm.family(False).below_recurrent == 0.3 and power.lm.family(True) is None
    assert settings.Margins.of(config) == settings.Margins(lm=0.01)


def test_the_typed_values_cannot_be_changed():
    resources = settings.Resources.of({"resources": {"default": {"cpus": 1, "mem_mb": 100, "runtime": 1, "gpus": 0}}})
    with pytest.raises(dataclasses.FrozenInstanceError):
        resources.default.gpus = 8
    with pytest.raises(TypeError):
        resources.families["bench"] = resources.default  # type: ignore[index]


def test_every_annotation_resolves():
    """The annotations name real types (a type checker reads them; a typo would only show there)."""
    for cls in [*BLOCKS, settings.Resources, settings.PlanAssumptions]:
        typing.get_type_hints(cls)
