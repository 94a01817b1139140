"""Error messages name the config key: key paths written by hand."""

from parallel_experts.config import errors
from parallel_experts.config.errors import ConfigError, PipelineError, key_path


def test_key_paths_by_hand():
    assert key_path(["sokoban", "budgets", "small", "allocations", 3]) == "sokoban.budgets.small.allocations[3]"
    assert key_path([]) == "(top level)"
    assert key_path(["lm", "windows", 0]) == "lm.windows[0]"


def test_a_config_error_is_an_expected_failure():
    assert issubclass(ConfigError, PipelineError) and issubclass(ConfigError, ValueError)


def test_a_reason_is_one_short_line():
    assert errors.reason(FileNotFoundError(2, "No such file", "x")) == "No such file or directory"
    assert errors.reason(OSError("Unable to open\nfile = 'x', time = 12:00\n")) == "Unable to open"
    assert errors.reason(ValueError()) == "ValueError" and len(errors.reason(ValueError("x" * 500))) == 160
