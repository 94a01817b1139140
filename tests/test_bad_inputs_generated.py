"""Bad input as families, generated (Hypothesis): every bounded option refuses what it cannot mean, and a config with
any one value replaced by any JSON value is either valid or refused with a ConfigError, never another exception
(issue 44: "a property-based test over generated configs and options, kept to a bounded run time in CI").

The examples are derandomized (and no example database kept), so CI sees the same ones on every run; each test is
bounded by `max_examples`.
"""

import argparse
import copy
import math

import pytest
from helpers import REPO
from hypothesis import given, settings
from hypothesis import strategies as st

from parallel_experts import gpu_check, study
from parallel_experts.config import files, options
from parallel_experts.config.errors import ConfigError
from parallel_experts.planning import power

BOUNDED = settings(derandomize=True, database=None, deadline=None, max_examples=200)  # no .hypothesis folder
NUMBERS = st.one_of(st.text(max_size=12), st.integers(-10**20, 10**20).map(str),
                    st.floats(allow_nan=True, allow_infinity=True).map(repr),
                    st.sampled_from(["nan", "inf", "-0", "1e309"]))

# Each bounded option's parser with its bound: (type, low, the low itself allowed)
PARSERS = {"count": (options.count, int, 1, True), "seconds": (options.seconds, float, 0, False),
           "power --gpu-hours": (power.Power.__dataclass_fields__["gpu_hours"].metadata["type"], float, 0, False),
           "power --seed": (power.Power.__dataclass_fields__["seed"].metadata["type"], int, 0, True),
           "gpu-check --peak-tflops": (gpu_check.TFLOPS, float, 0, False)}


@pytest.mark.parametrize("name", PARSERS)
@BOUNDED
@given(text=NUMBERS)
def test_a_bounded_option_gives_a_finite_value_within_its_bound_or_refuses(name, text):
    parse, kind, low, inclusive = PARSERS[name]
    try:
        value = parse(text)
    except argparse.ArgumentTypeError as error:
        assert repr(text) in str(error) and "give" in str(error)
        return
    assert isinstance(value, kind) and math.isfinite(value)
    assert value >= low if inclusive else value > low


SMOKE = files.load([REPO / "config/smoke.yaml"])


def leaves(node, path=()):
    """Every place of the config that holds a scalar or a list, as a path of keys and indices."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, (*path, key))
    elif isinstance(node, list) and node and isinstance(node[0], (dict, list)):
        for i, value in enumerate(node):
            yield from leaves(value, (*path, i))
    else:
        yield path


PLACES = sorted(leaves(SMOKE), key=str)
JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                              st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6)),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=2),
                    max_leaves=4)


@BOUNDED
@given(place=st.sampled_from(PLACES), value=JSON)
def test_a_config_with_any_value_anywhere_is_valid_or_one_config_error(place, value):
    config = copy.deepcopy(SMOKE)
    at(config, place[:-1])[place[-1]] = value
    try:
        study.check(config)
    except ConfigError as error:
        assert str(error).strip() and "\n" not in str(error).strip(), str(error)


def at(config, place):
    for key in place:
        config = config[key]
    return config


def near(original):
    """Values of the original's kind near it: most pass the schema, so the checks behind it (budgets, references,
    the domains' own) see them."""
    if isinstance(original, bool):
        return st.booleans()
    if isinstance(original, int):
        return st.integers(-2, 2 * original + 2)
    if isinstance(original, float):
        return st.floats(-1.0, 2 * original + 1.0) | st.sampled_from([0.0, math.nan, math.inf])
    if isinstance(original, str):
        return st.sampled_from(sorted(STRINGS)) | st.text(max_size=4)
    if isinstance(original, list):
        return st.lists(near(original[0]) if original else JSON, max_size=len(original) + 1)
    return JSON


STRINGS = {at(SMOKE, place) for place in PLACES if isinstance(at(SMOKE, place), str) and len(at(SMOKE, place)) < 40}


@BOUNDED
@given(data=st.data())
def test_a_config_with_a_near_value_anywhere_is_valid_or_one_config_error(data):
    place = data.draw(st.sampled_from(PLACES))
    config = copy.deepcopy(SMOKE)
    at(config, place[:-1])[place[-1]] = data.draw(near(at(SMOKE, place)))
    try:
        study.check(config)
    except ConfigError as error:
        assert str(error).strip() and "\n" not in str(error).strip(), str(error)
