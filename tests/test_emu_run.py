"""The emulator for real (root, Mininet): a small ViT over shaped links, and no leftovers."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from emu_checks import RecordedSteps

from edgetwin.emu.mininet import checks
from edgetwin.emu.mininet.lock import emulator_lock
from edgetwin.emu.mininet.medium import MEDIUM_DEVICE
from edgetwin.emu.mininet.mn import missing_requirements
from edgetwin.emu.mininet.net import (
    MARKER_ENV,
    EmuError,
    cleanup_leftovers,
    emulated_network,
    leftover_links,
    leftover_processes,
)
from edgetwin.emu.mininet.runner import EmuRun, run_emu
from edgetwin.emu.mininet.topology import build_topology
from edgetwin.links import TOLERANCE_PCT
from edgetwin.network_spec import NetworkSpec
from edgetwin.scenario import Scenario, validate_scenario

pytestmark = pytest.mark.skipif(
    bool(missing_requirements()), reason=f"emulator needs: {missing_requirements()}"
)

# ViT-B/16's sequence at half its width, one block, batch 4: Voltage moves ~1.2 MB
# per forward (the terminal's scatter and one AllGather), ~48 ms at 200 Mbps.
SMALL = {
    "name": "emu_small",
    "repetitions": 1,
    "model": {"tokens": 197, "width": 384, "heads": 6, "blocks": 1},
    "devices": [{"name": "board", "profile": "jetson_orin_nano", "count": 2}],
    "strategies": [{"name": "voltage"}],
    "sweeps": [{"batch": [4], "bandwidth_mbps": [200, 800], "devices": [2]}],
}


def _links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip() for line in out.splitlines()}


@pytest.fixture(scope="module")
def small() -> Scenario:
    return validate_scenario(SMALL, Path("emu_small.yaml"))


@pytest.fixture(scope="module")
def steps() -> RecordedSteps:
    return RecordedSteps()


@pytest.fixture(scope="module")
def told() -> list[str]:
    return []


@pytest.fixture(scope="module")
def run(small: Scenario, steps: RecordedSteps, told: list[str]) -> EmuRun:
    before = _links()
    one_warmup = small.model_copy(update={"real_warmups": 1})
    result = run_emu(one_warmup, on_progress=told.append, link_check_s=1, steps=steps)
    assert _links() == before and not leftover_links() and not leftover_processes()
    return result


def test_link_checks_show_their_progress(run: EmuRun, steps: RecordedSteps) -> None:
    """Each bandwidth's link checks (a few seconds a direction) ran without a word: an
    emulator run said nothing for its first 15-30 s and between bandwidths."""
    assert steps.seen[1:] == [("link checks at 200 Mbps", 2, 2), ("link checks at 800 Mbps", 2, 2)]


def test_the_start_up_shows_its_steps(run: EmuRun, steps: RecordedSteps) -> None:
    """The network's building is told as done, before the first link check."""
    assert steps.seen[0] == ("emu start-up", 1, 1)
    assert steps.names["emu start-up"] == ["network up"]


def test_each_repetition_is_told_as_rank_0_ends_it(run: EmuRun, told: list[str]) -> None:
    """The ranks on the hosts report each timed forward (their --progress file), by name."""
    rows = [f"voltage x2, batch 4, {r.bandwidth_mbps:g} Mbps, rep {r.rep}" for r in run.rows]
    assert told == rows and rows, told


def test_rows_are_emu_and_comm_grows_as_bandwidth_drops(run: EmuRun) -> None:
    assert [(r.strategy, r.bandwidth_mbps, r.mode) for r in run.rows] == [
        ("voltage", 200, "emu"),
        ("voltage", 800, "emu"),
    ]
    slow, fast = run.rows
    assert slow.status == fast.status == "ok" and slow.bytes_sent == fast.bytes_sent > 1e6
    # both directions carry half the bytes on average: the busier one takes at least this
    # long at 200 Mbps (other load only adds to it); unshaped, it would take a tenth of it
    assert slow.comm_ms > 0.8 * slow.bytes_sent / 2 * 8 / 200e3
    # each row carries its bandwidth's worst link check
    for row in run.rows:
        errors = [c.error_pct for c in run.links if c.bandwidth_mbps == row.bandwidth_mbps]
        assert row.link_error_pct == max(errors, key=abs)


def test_links_are_shaped_at_the_set_rate(run: EmuRun) -> None:
    """The shaper holds each direction to its rate: tc reports the set rate on both queues
    it crosses, and iperf3 never gets more through (less, on a busy machine, is reported:
    tests/test_emu_topology.py)."""
    assert sorted((c.bandwidth_mbps, c.sender) for c in run.links) == [
        (200, "etwh0"),
        (200, "etwh1"),
        (800, "etwh0"),
        (800, "etwh1"),
    ]
    for check in run.links:
        assert check.shaped_mbps == check.bandwidth_mbps, check
        assert check.error_pct <= TOLERANCE_PCT, check
    # and the rate follows the setting: the 800 Mbps links carry well over twice the 200s
    at_200 = max(c.wire_mbps for c in run.links if c.bandwidth_mbps == 200)
    assert min(c.wire_mbps for c in run.links if c.bandwidth_mbps == 800) > 2 * at_200


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
@pytest.mark.parametrize("medium", ["dedicated", "shared"])
def test_torn_down_after_an_error_mid_run(error: type[BaseException], medium: str) -> None:
    scenario = validate_scenario({**SMALL, "network": {"medium": medium}}, Path("emu_small.yaml"))
    before = _links()
    during: set[str] = set()

    def fail() -> None:
        during.update(_links())
        raise error

    with pytest.raises(error):
        run_emu(scenario.model_copy(update={"real_warmups": 0}), on_progress=fail, link_check_s=1)
    assert (MEDIUM_DEVICE in during) == (medium == "shared")  # there to be left behind
    assert _links() == before and not leftover_links() and not leftover_processes()


def test_cleanup_removes_leftovers_of_a_crashed_run() -> None:
    with emulator_lock():  # cleanup must not touch another engineer's live run
        subprocess.run(["ip", "link", "add", "etws0", "type", "bridge"], check=True)
        subprocess.run(["ip", "link", "add", MEDIUM_DEVICE, "type", "ifb"], check=True)
        stray = subprocess.Popen(["sleep", "60"], env={**os.environ, MARKER_ENV: "etw"})
        try:
            assert {"etws0", MEDIUM_DEVICE} <= set(leftover_links())
            assert stray.pid in leftover_processes()
            left = cleanup_leftovers()
            assert stray.pid in left.processes and {"etws0", MEDIUM_DEVICE} <= set(left.links)
            assert stray.wait(timeout=5) != 0
            assert not leftover_links() and not leftover_processes()
        finally:
            stray.kill()
            stray.wait()
            subprocess.run(["ip", "link", "del", "etws0"], capture_output=True)
            subprocess.run(["ip", "link", "del", MEDIUM_DEVICE], capture_output=True)


@pytest.mark.timeout(180)
def test_a_link_too_slow_for_its_check_is_a_clear_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 0.001 Mbit/s iperf3 never finishes: that was a TimeoutExpired traceback. (The
    client's 30 s of grace is cut to 3 here: the test is the failure, not the wait.)"""
    monkeypatch.setattr(checks, "_CLIENT_SETUP_S", 3.0)
    sweep = {"batch": [4], "bandwidth_mbps": [0.001], "devices": [2]}
    slow = validate_scenario({**SMALL, "sweeps": [sweep]}, Path("emu_slow.yaml"))
    before = _links()
    with pytest.raises(EmuError, match=r"did not finish in .* too slow, lossy or delayed"):
        run_emu(slow.model_copy(update={"real_warmups": 0}), link_check_s=1)
    assert _links() == before and not leftover_links() and not leftover_processes()


@pytest.mark.timeout(180)
def test_a_missing_tmpdir_is_not_the_hosts_problem(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With $TMPDIR a folder that is not there, Python puts this run's folders in /tmp, but
    the hosts' processes kept $TMPDIR: iperf3's link check failed once the network was
    built (exit 1, "unable to create a new stream")."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "missing"))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() looks again, as at start
    before = _links()
    with emulated_network(build_topology(2), NetworkSpec(), 200) as net:
        assert len(checks.measure_links(net, 200, range(1, 2), 1)) == 2  # both directions
    assert _links() == before and not leftover_links() and not leftover_processes()
