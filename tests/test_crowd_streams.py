"""Same seed, same rows: a crowd run's random streams do not depend on what else runs."""

from __future__ import annotations

import pytest

from edgetwin.results import ResultRow
from edgetwin.scenario import load_scenario
from edgetwin.sim.crowd import run_crowd
from tests.conftest import REPO

SMALL = REPO / "scenarios/affinity_small.yaml"  # noise_cv 0.05, the four schedulers


def _by_scheduler(schedulers: str) -> dict[str | None, list[ResultRow]]:
    scenario = load_scenario(SMALL, ["repetitions=2", f"crowd.schedulers={schedulers}"])
    rows: dict[str | None, list[ResultRow]] = {}
    for row in run_crowd(scenario, SMALL):
        rows.setdefault(row.scheduler, []).append(row)
    return rows


@pytest.mark.timeout(120)
def test_a_schedulers_rows_do_not_depend_on_the_other_schedulers_listed() -> None:
    """The random scheduler's draws and the run's noise are the same whether the scenario
    lists one scheduler or four, in any order (as a strategy's rows are whatever other
    strategies it lists): a plan's crowd sweep runs only its question's scheduler."""
    every = _by_scheduler("[affinity, fifo, random, least_loaded]")
    assert every["random"] == _by_scheduler("[random]")["random"]
    reversed_order = _by_scheduler("[least_loaded, random, fifo, affinity]")
    assert reversed_order == every
