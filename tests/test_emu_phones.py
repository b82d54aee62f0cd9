"""The twin on the emulator's phones: profiles fitted from the real foreman's task
records of a recorded emulator run, latencies predicted (docs/crowd.md)."""

from __future__ import annotations

import logging
from pathlib import Path
from statistics import fmean

import pytest

from edgetwin.calibration.emu_phones import (
    _class_of_worker,
    fit_emulated_phones,
    read_summaries,
    twin_latencies,
)
from edgetwin.emu.crowdio.rows import summary_row
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


def test_a_summary_written_before_waited_loads_were_kept_counts_whole_loads() -> None:
    """The shipped summaries have no ``waited_load_ms``: they read, and their rows count
    every task's whole reported load, as they did when they were written."""
    summary = read_summaries(RUN)[0]
    assert all(t.waited_load_ms is None for t in summary.tasks)
    last = max(summary.tasks, key=lambda t: t.done_ms).input_index
    chain = [t for t in summary.tasks if t.input_index == last]
    row = summary_row(summary, scenario="emu_crowdio_cpu", bandwidth_mbps=10.0)
    assert row.load_ms == pytest.approx(sum(t.report.load_ms for t in chain))
    assert row.load_ms > 0


def test_a_task_counts_only_the_part_of_its_load_after_its_dispatch() -> None:
    task = max(read_summaries(RUN)[0].tasks, key=lambda t: t.report.load_ms)
    load_ms = task.report.load_ms
    assert load_ms > 100
    whole = task.model_copy(
        update={"ready_ms": 0.0, "dispatch_ms": 40.0, "waited_load_ms": load_ms}
    )
    assert whole.load_after_dispatch_ms == load_ms  # began at dispatch
    tail = whole.model_copy(update={"waited_load_ms": 100.0})  # ended 100 ms after ready
    assert tail.load_after_dispatch_ms == pytest.approx(60.0)
    before = whole.model_copy(update={"waited_load_ms": 30.0})  # ended before dispatch
    assert before.load_after_dispatch_ms == 0.0
    assert task.model_copy(update={"waited_load_ms": None}).load_after_dispatch_ms == load_ms


def test_a_load_over_before_its_task_was_ready_is_message_time_no_more() -> None:
    """Loads that ended before their tasks were ready (broadcast or JIT loads) are not in
    the tasks' round trips: the fitted message overhead does not subtract them."""
    scenario = load_scenario(SCENARIO)
    summaries = read_summaries(RUN)
    early = [
        s.model_copy(
            update={"tasks": tuple(t.model_copy(update={"waited_load_ms": 0.0}) for t in s.tasks)}
        )
        for s in summaries
    ]
    whole = fit_emulated_phones(scenario, SCENARIO, summaries)[0].network.message_overhead_ms
    waited = fit_emulated_phones(scenario, SCENARIO, early)[0].network.message_overhead_ms
    assert waited > whole


def test_the_phone_fit_warns_of_a_link_short_of_its_rate(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The fit takes the link's share of its rate from the run's link checks; one short of
    its rate lowered that share without a word (the machine fit warned, this one did not)."""
    header, first, *rest = (RUN / "link_check.csv").read_text().splitlines()
    cells = dict(zip(header.split(","), first.split(","), strict=True))
    cells.update(goodput_mbps="270", wire_mbps="282.3", error_pct="-5.9")
    short = "\n".join([header, ",".join(cells.values()), *rest]) + "\n"
    (tmp_path / "link_check.csv").write_text(short)
    scenario = load_scenario(SCENARIO)
    with caplog.at_level(logging.WARNING, logger="edgetwin"):
        fit_emulated_phones(scenario, SCENARIO, read_summaries(RUN), tmp_path / "link_check.csv")
    assert [r.getMessage() for r in caplog.records] == [
        "warning: link etwh1 -> etwh0 set to 300 Mbps carried 282.3 Mbps on the wire (-5.9 %, "
        "tolerance 5 %): times at 300 Mbps are not the link's alone; "
        "network.bandwidth_efficiency is fitted from it"
    ]


def test_a_worker_belongs_to_the_class_the_fleet_named_it_for() -> None:
    """A class named ``a-b`` beside a class ``a``: its phone was counted as one of ``a``'s."""
    renamed = ["crowd.fleet.0.name=a", "crowd.fleet.0.count=2", "crowd.fleet.1.name=a-b"]
    scenario = load_scenario(REPO / "scenarios/emu_crowdio.yaml", renamed)
    assert _class_of_worker(scenario) == {"a-0": "a", "a-1": "a", "a-b": "a-b", "high": "high"}
