"""The processes that run on a board or a phone import only what they run (docs/architecture.md).

Each worker module is imported in a fresh interpreter and its ``sys.modules`` read back:
a board worker that pulled in SimPy, SciPy or plotly, or a phone worker that pulled in
the twin, the calibration or the reports, would carry them onto every device.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

BOARD_WORKER = "edgetwin.emu.vit.worker"
LLM_WORKER = "edgetwin.emu.llm.worker"  # a decoder's rank, on a board too
PHONE_WORKER = "edgetwin.emu.crowdio.worker"
DELAY_LINE = "edgetwin.emu.mininet.delayline"  # in every emulated host, beside the work


def modules_after_import(module: str) -> set[str]:
    """Every module loaded once ``module`` is imported in a fresh interpreter."""
    code = f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return set(json.loads(done.stdout))


def under(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


@pytest.mark.parametrize(
    ("worker", "forbidden"),
    [
        (BOARD_WORKER, ("simpy", "scipy", "plotly")),
        (LLM_WORKER, ("simpy", "scipy", "plotly")),
        (
            PHONE_WORKER,
            (
                "edgetwin.sim",
                "edgetwin.calibration",
                "edgetwin.reports",
                "edgetwin.evaluate",
                "edgetwin.plan",
                "simpy",
                "plotly",
            ),
        ),
        (DELAY_LINE, ("numpy", "torch", "pydantic", "yaml", "edgetwin.scenario")),
    ],
    ids=["board", "llm", "phone", "delay-line"],
)
def test_a_worker_imports_only_what_it_runs(worker: str, forbidden: tuple[str, ...]) -> None:
    loaded = modules_after_import(worker)
    assert worker in loaded
    assert under(loaded, forbidden) == []


def test_the_check_sees_a_forbidden_import() -> None:
    # the twin's runner does import SimPy: the check above would catch a worker that did
    assert under(modules_after_import("edgetwin.sim.runner"), ("simpy",)) != []
