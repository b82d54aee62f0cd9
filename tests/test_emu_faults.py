"""Faults during emulator runs for real (root, Mininet): a killed worker and a downed link
leave every CROWDio input done exactly once; a bandwidth schedule slows a CROWDio job and
a ViT exchange."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
import yaml
from emu_checks import needs_emulator, teardown_checked
from test_emu_crowdio import assert_exactly_once

from edgetwin import cli
from edgetwin.calibration.emu_loop import LoopSettings, run_emulator
from edgetwin.emu.crowd_jobs import CrowdJobFailed
from edgetwin.emu.crowdio.records import PipelineSummary
from edgetwin.emu.local import LocalRun, measure_local
from edgetwin.emu.mininet.crowd import CrowdEmuRun, run_crowd_emu
from edgetwin.emu.mininet.faults import timeline
from edgetwin.emu.mininet.mn import mininet_module
from edgetwin.emu.mininet.net import EmuNetwork, emulated_network
from edgetwin.emu.mininet.runner import _HostLauncher, run_emu
from edgetwin.emu.mininet.topology import (
    EmuTopology,
    TcCommand,
    build_topology,
    class_show_command,
    parse_class_rate_mbps,
)
from edgetwin.network_spec import BandwidthStep, NetworkSpec
from edgetwin.scenario import validate_scenario

pytestmark = needs_emulator

FAULTS = Path(__file__).resolve().parents[1] / "scenarios/emu_crowdio_faults.yaml"
CROWDIO = FAULTS.with_name("emu_crowdio.yaml")


def _streaming(faults: list[dict[str, Any]]) -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(FAULTS.read_text())
    raw["strategies"] = [{"name": "crowdio_streaming"}]
    raw["emulator"]["faults"] = faults
    return raw


def _run_once(raw: dict[str, Any], path: Path = FAULTS) -> tuple[CrowdEmuRun, PipelineSummary]:
    """The scenario's one job, run and torn down cleanly, every input done exactly once."""
    scenario = validate_scenario(raw, path)
    with teardown_checked() as teardown:
        run = run_crowd_emu(scenario, path, link_check_s=0, timeout_s=60)
    teardown.assert_clean()
    (summary,) = run.summaries
    assert_exactly_once(summary)
    return run, summary


def test_a_killed_worker_loses_nothing_and_the_record_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "kill.yaml"
    path.write_text(yaml.safe_dump(_streaming([{"kind": "kill_worker", "host": 1, "at_s": 0.6}])))
    run, summary = _run_once(yaml.safe_load(path.read_text()), path)
    assert [w.worker for w in summary.workers if w.disconnected] == ["low"]
    assert summary.tasks_redispatched >= 1 and run.rows[0].tasks_redispatched >= 1
    requeued = {(e.input_index, e.stage_index) for e in summary.events if e.kind == "requeue"}
    redone = [t for t in summary.tasks if (t.input_index, t.stage_index) in requeued]
    assert redone and all(t.attempts == 2 and t.worker != "low" for t in redone)
    (record,) = run.faults
    assert (record.kind, record.host) == ("kill_worker", 1)
    # applied when due, or later on a busy machine: never early
    assert record.applied_s >= 0.6 and "low disconnected" in record.effect


DOWN_FOR_A_WHILE = {"kind": "link_down", "host": 2, "at_s": 0.5, "for_s": 1.5}


def test_a_downed_link_stalls_its_worker_and_loses_nothing() -> None:
    fault = DOWN_FOR_A_WHILE
    run, summary = _run_once(_streaming([fault]))
    assert not any(w.disconnected for w in summary.workers)
    down, up = run.faults
    assert (down.kind, down.host, up.kind) == ("link_down", 2, "link_up")
    assert down.applied_s >= 0.5 and up.applied_s >= 0.5 + 1.5  # when due, never early
    # the mid phone's task in flight waited for its link: longer than the outage
    slowest = max(t.done_ms - t.dispatch_ms for t in summary.tasks if t.worker == "mid")
    assert slowest > 1000 and "slowest task on mid" in down.effect


def test_each_fault_counts_the_tasks_its_own_worker_lost() -> None:
    """A killed worker's re-dispatched task is its fault's, not a downed link's beside it
    (every fault's effect read the job's re-dispatches until 2026-12-07)."""
    kill = {"kind": "kill_worker", "host": 1, "at_s": 0.6}
    run, summary = _run_once(_streaming([kill, DOWN_FOR_A_WHILE]))
    assert summary.tasks_redispatched >= 1
    effects = {(r.kind, r.host): r.effect for r in run.faults}
    lost = sum(1 for e in summary.events if e.kind == "requeue" and e.worker == "low")
    assert effects[("kill_worker", 1)].endswith(f"tasks re-dispatched: {lost}") and lost >= 1
    assert effects[("link_down", 2)].endswith("tasks re-dispatched: 0")


def test_a_link_down_for_good_loses_its_worker_and_nothing_else() -> None:
    raw = _streaming([{"kind": "link_down", "host": 2, "at_s": 0.5}])
    raw["emulator"].update(heartbeat_s=0.25, silence_timeout_s=1.5)
    run, summary = _run_once(raw)
    assert [w.worker for w in summary.workers if w.disconnected] == ["mid"]
    (lost,) = [e for e in summary.events if e.kind == "disconnect"]
    assert lost.worker == "mid" and lost.detail is not None and "silent for" in lost.detail
    # silent from its last beat before the link went down, for longer than the timeout
    assert lost.t_ms > (0.5 - 0.25 + 1.5) * 1e3
    requeued = {(e.input_index, e.stage_index) for e in summary.events if e.kind == "requeue"}
    assert requeued and all(
        t.worker != "mid" and t.attempts == 2
        for t in summary.tasks
        if (t.input_index, t.stage_index) in requeued
    )
    (down,) = run.faults  # no link_up in the job: the link came back after it
    assert (down.kind, down.host, down.detail) == ("link_down", 2, "for good")
    assert "mid disconnected" in down.effect and "declared lost" in down.effect


def test_a_worker_cut_off_past_the_timeout_comes_back_as_a_fresh_one() -> None:
    # declared lost ~1.25 s into the job, 1.75 s before its link is up again
    raw = _streaming([{"kind": "link_down", "host": 2, "at_s": 0.5, "for_s": 2.5}])
    raw["crowd"]["job"]["inputs"] = 30  # the job outlasts the outage and TCP's next retry
    raw["emulator"].update(heartbeat_s=0.25, silence_timeout_s=0.75)
    run, summary = _run_once(raw)
    down, up = run.faults
    (lost,) = [e for e in summary.events if e.kind == "disconnect"]
    assert lost.worker == "mid" and lost.detail is not None and "silent for" in lost.detail
    assert all(t.done_ms < lost.t_ms for t in summary.tasks if t.worker == "mid")
    # its late frames met a reset once the link was up: it enrolled again, and worked
    back = {w.worker: w for w in summary.workers}["mid.2"]
    assert not back.disconnected and back.tasks_done >= 1
    first = next(e for e in summary.events if e.worker == "mid.2")
    assert first.t_ms > (0.5 + 2.5) * 1e3  # after its link was up again, never before
    assert up.kind == "link_up" and "mid disconnected" in down.effect


def test_a_bandwidth_schedule_plays_during_a_crowdio_job() -> None:
    raw = _streaming([])
    raw["emulator"]["task_delay_ms"] = 0
    raw["network"]["schedule"] = [{"at_ms": 0, "bandwidth_mbps": 5}]
    run, summary = _run_once(raw)
    assert run.rows[0].bandwidth_mbps == 100
    # every stage's blob crossed its phone's link at the scheduled 5 Mbps, not at 100: the
    # phone that loaded the most got at least its share of the bytes
    share_bytes = summary.model_bytes_sent / len(summary.workers)
    assert summary.pipeline_latency_ms > 0.8 * share_bytes * 8 / 5e3
    assert [(r.kind, r.effect) for r in run.faults] == [("bandwidth", "links at 5 Mbps")]


def test_a_job_that_loses_every_worker_fails_cleanly() -> None:
    """At once, not after its timeout (60 s here), and naming how the workers ended."""
    kills = [{"kind": "kill_worker", "host": host, "at_s": 0.3} for host in (1, 2, 3)]
    scenario = validate_scenario(_streaming(kills), FAULTS)
    gone = "every worker process exited: low was killed by SIGKILL, mid was killed by SIGKILL"
    with teardown_checked() as teardown, pytest.raises(CrowdJobFailed, match=gone):
        run_crowd_emu(scenario, FAULTS, link_check_s=0, timeout_s=60)
    teardown.assert_clean()


def test_a_job_whose_workers_are_all_cut_off_for_good_fails_at_once() -> None:
    """A link down for good counts as a worker gone: with the others killed, the job fails
    at once (it waited out its timeout), naming how each worker ended."""
    faults = [{"kind": "kill_worker", "host": 1, "at_s": 0.3}]
    faults += [{"kind": "link_down", "host": host, "at_s": 0.3} for host in (2, 3)]
    scenario = validate_scenario(_streaming(faults), FAULTS)
    gone = (
        "no worker can reach the foreman again: low was killed by SIGKILL, "
        "mid's link is down for good, high's link is down for good"
    )
    with teardown_checked() as teardown, pytest.raises(CrowdJobFailed, match=gone):
        run_crowd_emu(scenario, FAULTS, link_check_s=0, timeout_s=120)  # not "timed out"
    teardown.assert_clean()


def test_the_cli_writes_faults_csv(tmp_path: Path) -> None:
    """... and, with ``emulator.link_check_s`` 0, checks no link (18 s of this test)."""
    raw = _streaming([{"kind": "kill_worker", "host": 3, "at_s": 0.5}])
    raw["emulator"]["link_check_s"] = 0
    path = tmp_path / "kill.yaml"
    path.write_text(yaml.safe_dump(raw))
    out = tmp_path / "out"
    assert cli.main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    with (out / "link_check.csv").open() as handle:
        assert list(csv.DictReader(handle)) == []  # its header alone
    with (out / "faults.csv").open() as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["kind"], row["host"], row["at_s"]) == ("kill_worker", "3", "0.5")
    assert "high disconnected" in row["effect"]
    with (out / "results.csv").open() as handle:
        (result,) = list(csv.DictReader(handle))
    assert (result["mode"], result["status"]) == ("emu", "ok")
    assert "link_error_pct" not in result  # no check, no error to carry


def test_a_bandwidth_schedule_plays_during_a_vit_launch() -> None:
    raw = {
        "name": "emu_schedule",
        "repetitions": 1,
        "model": {"tokens": 197, "width": 384, "heads": 6, "blocks": 1},
        "devices": [{"name": "board", "profile": "jetson_orin_nano", "count": 2}],
        "network": {  # the second step comes after the launch has ended: said, not played
            "schedule": [{"at_ms": 0, "bandwidth_mbps": 100}, {"at_ms": 500e3, "bandwidth_mbps": 5}]
        },
        "strategies": [{"name": "voltage"}],
        "sweeps": [{"batch": [4], "bandwidth_mbps": [800], "devices": [2]}],
        "real_warmups": 1,
    }
    scenario = validate_scenario(raw, Path("emu_schedule.yaml"))
    with teardown_checked() as teardown:
        run = run_emu(scenario, link_check_s=0)
    teardown.assert_clean()
    (row,) = run.rows
    assert row.status == "ok" and row.bandwidth_mbps == 800
    # the exchange ran at the scheduled 100 Mbps, not at the configured 800
    assert row.comm_ms > 0.8 * row.bytes_sent / 2 * 8 / 100e3
    assert [(r.kind, r.detail) for r in run.faults] == [("bandwidth", "100 Mbps")]
    (warning,) = run.warnings
    assert "step to 5 Mbps at 500 s did not play in 1 of 1 runs" in warning


def test_a_rate_change_is_one_tc_batch_per_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rate change (the launch's rate put back, ``set_bandwidth``; a schedule step's
    commands, ``run_all``) starts one ``tc -batch`` in each node (both hosts and the bridge's
    root namespace) before it waits for any. Until 2026-12-07 it ran the 4 tc commands of 2
    hosts one after another (a step's ``applied_s`` came 11-25 ms after its ``started_s``).
    Every shaped queue then reads back the new rate."""
    node_class = mininet_module("node").Node
    popen = node_class.popen
    started: list[tuple[str, list[str]]] = []

    def watched(node: Any, *args: Any, **kwargs: Any) -> Any:
        started.append((node.name, list(args[0])))
        return popen(node, *args, **kwargs)

    def step(topology: EmuTopology, rate_mbps: float) -> tuple[TcCommand, ...]:
        """A schedule step's commands to ``rate_mbps``, as the launchers apply them."""
        schedule = (BandwidthStep(at_ms=0, bandwidth_mbps=rate_mbps),)
        (action,) = timeline(topology, NetworkSpec(schedule=schedule))
        return action.commands

    rates: dict[float, list[float]] = {}
    with (
        teardown_checked() as teardown,
        emulated_network(build_topology(2), NetworkSpec(), 100) as net,
    ):
        changes = ((net.set_bandwidth, 300.0), (lambda r: net.run_all(step(net.topology, r)), 50.0))
        for change, rate in changes:
            with monkeypatch.context() as patch:
                patch.setattr(node_class, "popen", watched)
                change(rate)
            rates[rate] = [_rate_read_back(net, command) for command in step(net.topology, rate)]
    teardown.assert_clean()
    nodes = ["etwh0", "etws0", "etwh1"]
    assert sorted({c.node for c in step(build_topology(2), 1)}) == sorted(nodes)
    assert sorted(started) == sorted((node, ["tc", "-batch", "-"]) for node in nodes * 2)
    assert rates == {300.0: [300.0] * 4, 50.0: [50.0] * 4}


def _rate_read_back(net: EmuNetwork, command: TcCommand) -> float:
    """The rate of the queue a rate change's ``command`` set (its ``dev``), read back."""
    return parse_class_rate_mbps(net.output(class_show_command(command.node, command.argv[4])))


def test_every_repetition_meets_a_vit_launchs_schedule_from_its_start() -> None:
    """A step at 0 ms puts the links at 2 Mbps, and one at 1 s raises them to 800, about as
    a forward's exchange at 2 Mbps ends. Until 2026-12-07 one clock ran across the launch's
    three repetitions: the first crossed at 2 Mbps, the later ones, started after the step,
    at 800 (a hundredth of the first's comm time or less), and the 0 ms step was applied
    once. Now each
    repetition is a run of its own, as in the twin: the links go back and the schedule
    starts again from 0 ms before each, so each crosses the same way."""
    raw = {
        "name": "emu_schedule_reps",
        "repetitions": 3,
        "model": {"tokens": 197, "width": 384, "heads": 6, "blocks": 1},
        "devices": [{"name": "board", "profile": "jetson_orin_nano", "count": 2}],
        "network": {
            "schedule": [{"at_ms": 0, "bandwidth_mbps": 2}, {"at_ms": 1000, "bandwidth_mbps": 800}]
        },
        "strategies": [{"name": "voltage"}],
        "sweeps": [{"batch": [1], "bandwidth_mbps": [800], "devices": [2]}],
        "real_warmups": 1,
    }
    scenario = validate_scenario(raw, Path("emu_schedule_reps.yaml"))
    with teardown_checked() as teardown:
        run = run_emu(scenario, link_check_s=0)
    teardown.assert_clean()
    first, _, last = run.rows
    assert last.comm_ms > 0.5 * first.comm_ms
    at_start = [record.run for record in run.faults if record.at_s == 0]
    assert at_start == [f"launch 1 at 800 Mbps, timed run {rep}" for rep in range(3)]
    # the step at 1 s played in a run, or that run said it did not: 3 runs in all
    raised = [record for record in run.faults if record.at_s == 1]
    said = [f"did not play in {3 - len(raised)} of 3 runs" in w for w in run.warnings]
    assert said == ([] if len(raised) == 3 else [True])


def _stepped_voltage_launch(name: str, batches: list[int]) -> tuple[_HostLauncher, list[LocalRun]]:
    """One emulated voltage launch on 2 hosts whose links start at 2 Mbps, a step at 1 ms
    raising them to 800 in every timed run, one warm-up forward per batch size: its
    launcher (with the faults it played) and its runs."""
    raw = {
        "name": name,
        "repetitions": 1,
        "model": {"tokens": 197, "width": 384, "heads": 6, "blocks": 1},
        "devices": [{"name": "board", "profile": "jetson_orin_nano", "count": 2}],
        "network": {"schedule": [{"at_ms": 1, "bandwidth_mbps": 800}]},
        "strategies": [{"name": "voltage"}],
        "sweeps": [{"batch": batches, "bandwidth_mbps": [2], "devices": [2]}],
        "real_warmups": 1,
    }
    scenario = validate_scenario(raw, Path(f"{name}.yaml"))
    with (
        teardown_checked() as teardown,
        emulated_network(build_topology(2), scenario.network, 2) as net,
    ):
        launch = _HostLauncher(net)
        launch.bandwidth_mbps = 2
        runs = list(measure_local(scenario, launch=launch))
    teardown.assert_clean()
    return launch, runs


def test_a_vit_launchs_schedule_counts_from_its_timed_forwards() -> None:
    """The links start at 2 Mbps and a step at 1 ms raises them to 800. Until 2026-12-07
    the step counted from the launch's start and played while the ranks were still
    starting, so the warm-up forward crossed at 800 Mbps; now it counts from rank 0's first
    timed forward, as the twin counts from its run's start, so it plays after the warm-up,
    which crossed every byte at 2 Mbps: no slower than those bytes take at that rate."""
    launch, (run,) = _stepped_voltage_launch("emu_schedule_start", [1])
    (record,) = launch.faults
    assert (record.kind, record.detail) == ("bandwidth", "800 Mbps")  # it played, in the launch
    # rank 0's warm-up waited for rank 1's half of the exchange, crossing rank 1's link
    received_bits = run.ranks[1].bytes_sent_per_forward * 8
    (warmup_ms,) = run.ranks[0].warmup_ms
    assert warmup_ms > 0.8 * received_bits / 2e3


def test_a_later_configurations_warm_up_meets_the_launchs_rate() -> None:
    """The links start at 2 Mbps and a step at 1 ms raises them to 800 in every timed run.
    Until 2026-12-07 the second batch's warm-up followed the first batch's timed run with
    the links still at 800 (rank 0 asked for its go after its warm-ups); now the links go
    back to 2 Mbps before it, as before the first batch's: every byte of it at 2 Mbps."""
    launch, (first, second) = _stepped_voltage_launch("emu_schedule_warmups", [1, 2])
    # the first batch's timed run left the links at 800: its step played in it
    assert ("launch 1 at 2 Mbps, timed run 0", 0.001) in [(r.run, r.at_s) for r in launch.faults]
    for run in (first, second):  # each warm-up waited for rank 1's half, across its link
        (warmup_ms,) = run.ranks[0].warmup_ms
        assert warmup_ms > 0.8 * run.ranks[1].bytes_sent_per_forward * 8 / 2e3


def test_a_fault_after_the_jobs_end_is_said_not_played() -> None:
    """This job ends in ~0.2 s, and stopping its processes took over 0.3 s more: a kill due
    at 0.5 s fell in that wind-down, was applied and recorded as played ("low not seen to
    leave; tasks re-dispatched: 0"), and nothing was said of it. One worker is killed, so a
    busy machine that stretches the job past 0.5 s loses nothing: then the kill played in
    the job, and its record says so."""
    after_the_job_s = 0.5
    raw: dict[str, Any] = yaml.safe_load(CROWDIO.read_text())
    raw["strategies"] = [{"name": "crowdio_streaming"}]
    raw["sweeps"] = [{"bandwidth_mbps": [100]}]
    raw["emulator"]["faults"] = [{"kind": "kill_worker", "host": 1, "at_s": after_the_job_s}]
    run, summary = _run_once(raw, CROWDIO)
    unplayed = (
        f"emulator.faults kill_worker on host 1 at {after_the_job_s:g} s did not play in 1 of "
        "1 jobs: each ended before it (times count from each job's start)"
    )
    # played, or said not to: never both, never neither
    assert (run.faults == []) == (run.warnings == [unplayed])
    # ended well before it: the summary reaches the clock a moment after the job ends
    if summary.pipeline_latency_ms < 0.5 * after_the_job_s * 1e3:
        assert run.faults == [] and run.warnings == [unplayed]


def test_the_loops_emulator_run_passes_on_what_never_played(tmp_path: Path) -> None:
    """``close_loop``'s emulator sweeps dropped ``EmuRun.warnings``: a schedule step its
    launches ended before went unsaid."""
    raw = {
        "name": "loop_schedule",
        "repetitions": 1,
        "model": {"tokens": 197, "width": 384, "heads": 6, "blocks": 1},
        "devices": [{"name": "board", "profile": "jetson_orin_nano", "count": 2}],
        "network": {"schedule": [{"at_ms": 500e3, "bandwidth_mbps": 5}]},
        "strategies": [{"name": "voltage"}],
        "sweeps": [{"batch": [1], "bandwidth_mbps": [800], "devices": [2]}],
        "real_warmups": 1,
    }
    path = tmp_path / "loop_schedule.yaml"
    scenario = validate_scenario(raw, path)
    settings = LoopSettings(link_check_s=0)
    with teardown_checked() as teardown:
        warnings = run_emulator(scenario, path, tmp_path / "emu_fit", settings)
    teardown.assert_clean()
    (warning,) = warnings
    assert warning.startswith("emu_fit: network.schedule step to 5 Mbps at 500 s did not play")
