"""The twin on the emulator's phones: profiles fitted from the real foreman's task
records of a recorded emulator run, latencies predicted (docs/crowd.md)."""

from __future__ import annotations

from statistics import fmean

import pytest

from edgetwin.calibration.emu_phones import fit_emulated_phones, read_summaries, twin_latencies
from edgetwin.errors import InputError
from edgetwin.scenario import load_scenario
from tests.conftest import REPO

RUN = REPO / "data/traces/emu-crowdio-cpu-2026-12"
SCENARIO = REPO / "scenarios/emu_crowdio_cpu.yaml"


@pytest.mark.timeout(120)
def test_the_twin_on_the_emulated_phones_predicts_the_emulators_barrier_penalty() -> None:
    scenario = load_scenario(SCENARIO)
    summaries = read_summaries(RUN)
    phones = fit_emulated_phones(scenario, SCENARIO, summaries, RUN / "link_check.csv")
    assert [p.name for p in phones] == ["emu_low", "emu_mid", "emu_high"]
    cell_a = [p.session.load_s(179.128) for p in phones]
    assert cell_a == sorted(cell_a, reverse=True)  # 0.125, 0.25, 0.5 core
    measured = {
        mode: fmean(s.pipeline_latency_ms for s in summaries if s.mode == mode) / 1e3
        for mode in ("streaming", "barrier")
    }
    assert measured["barrier"] > 1.2 * measured["streaming"]  # what the emulator showed
    twin = {k: fmean(v) for k, v in twin_latencies(scenario, SCENARIO, phones).items()}
    assert twin["crowdio_barrier"] > 1.2 * twin["crowdio_streaming"]
    for mode, seconds in measured.items():
        assert twin[f"crowdio_{mode}"] == pytest.approx(seconds, rel=0.15)


def test_a_run_folder_without_records_is_refused() -> None:
    with pytest.raises(InputError, match="file not found"):
        read_summaries(REPO / "scenarios")
