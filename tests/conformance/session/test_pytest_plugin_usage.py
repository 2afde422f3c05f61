"""``pytest --ftspec-impl NAME`` with a name that names nothing (issue 22): one usage error before
collection, naming the registered plugins and the nearest one, instead of the same error in each of
the suite's 136 tests."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ftspec.conformance import pytest_plugin


class _Config:
    def __init__(self, names: list[str]) -> None:
        self.names = names

    def getoption(self, name: str):
        assert name == "--ftspec-impl"
        return self.names


def test_a_typo_is_one_usage_error_with_a_suggestion():
    with pytest.raises(pytest.UsageError) as info:
        pytest_plugin.pytest_configure(_Config(["numpy", "nupmy"]))
    message = str(info.value)
    assert "--ftspec-impl 'nupmy': no plugin named 'nupmy'; did you mean 'numpy'?" in message
    assert "registered: " in message and "torch" in message and "\n" not in message


def test_a_module_that_cannot_be_found_is_a_usage_error_too():
    with pytest.raises(pytest.UsageError, match="no module named 'no_such_module_ftspec'"):
        pytest_plugin.pytest_configure(_Config(["no_such_module_ftspec:impl"]))


@pytest.mark.parametrize("names", [[], ["numpy"], ["tests.conformance.misbehaving_plugins:good"]])
def test_names_that_name_something_pass(names):
    pytest_plugin.pytest_configure(_Config(names))


def test_the_suite_stops_before_collection_with_one_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "ftspec.conformance.suite", "--ftspec-impl",
                           "nupmy", "-p", "no:xdist", "-p", "no:cacheprovider", "-q"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert output.count("no plugin named 'nupmy'") == 1 and "did you mean 'numpy'?" in output, output
    assert "test_conforms" not in output  # nothing collected, nothing run
