"""Every test has a time limit: a test stuck on a hung process fails alone, its teardown
runs (the process is stopped), and the tests after it still run."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

HUNG = """
import subprocess, sys
import pytest

@pytest.fixture
def hung():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield process
    process.kill()
    process.wait()
    print("TORN DOWN", process.pid)

@pytest.mark.timeout(1)
def test_waits_on_a_hung_process(hung):
    hung.wait()

def test_after_it():
    assert True
"""


def test_a_hung_test_fails_alone_and_is_torn_down(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hung=HUNG)
    pytester.makeini("[pytest]\ntimeout_method = signal\n")
    result = pytester.runpytest_subprocess("-s", "-p", "timeout")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*TORN DOWN*"])
    result.stdout.fnmatch_lines(["*Failed: Timeout (>1.0s) from pytest-timeout*"])


def test_the_suite_sets_a_limit_on_every_test(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.getini("timeout") == "300"
    assert pytestconfig.getini("timeout_method") == "signal"
