"""A CROWDio job with no worker left (killed, or cut off by a link down for good) fails
instead of waiting out its timeout; one whose last result is in still finishes; a worker
that cannot reach its foreman yet keeps trying. Real worker-shaped processes, without
root: the emulator's faults feed ``unreachable`` the way ``mininet/crowd.py`` does."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from edgetwin.emu.crowdio import launcher
from edgetwin.emu.crowdio.launcher import JobStarted, Processes, WorkerSpec, _while_a_worker_lives
from edgetwin.emu.crowdio.sdk import JobError
from edgetwin.emu.crowdio.worker import REJOIN_WAIT_S
from edgetwin.emu.mininet.crowd import _track_cut_off
from edgetwin.emu.mininet.faults import Action
from edgetwin.emu.vit.launcher import free_port

NAMES = ("low", "mid", "high")


@pytest.fixture
def workers() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    processes = {name: subprocess.Popen(["sleep", "60"]) for name in NAMES}
    yield processes
    for process in processes.values():
        process.kill()
        process.wait()


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launcher, "WORKERS_POLL_S", 0.01)


async def _wait(job: asyncio.Future[str]) -> Any:
    return await job


def _running() -> JobStarted:
    """A job the foreman has started (its first event came): cut-offs now fail it."""
    started = JobStarted(None)
    started.started = True
    return started


def _watch(
    job: asyncio.Future[str], workers: Processes, cut_off: dict[str, str]
) -> Coroutine[Any, Any, Any]:
    return _while_a_worker_lives(_wait(job), workers, lambda: cut_off, _running())


@pytest.mark.timeout(30)
def test_workers_cut_off_or_killed_fail_the_job_naming_each(
    workers: dict[str, subprocess.Popen[bytes]],
) -> None:
    workers["low"].kill()
    workers["low"].wait()
    cut_off = {n: f"{n}'s link is down for good" for n in ("mid", "high")}

    async def never_done() -> Any:
        return await _watch(asyncio.get_running_loop().create_future(), workers, cut_off)

    with pytest.raises(JobError) as failed:
        asyncio.run(never_done())
    assert str(failed.value) == (
        "no worker can reach the foreman again: low was killed by SIGKILL, mid's link is down "
        "for good, high's link is down for good (SIGKILL: most often the out-of-memory killer "
        "(see dmesg), unless a kill_worker fault sent it)"
    )


@pytest.mark.timeout(30)
def test_a_job_finishing_as_its_last_worker_is_cut_off_still_returns(
    workers: dict[str, subprocess.Popen[bytes]],
) -> None:
    """Its last result was in: the job ends within the poll that follows, and returns."""
    cut_off: dict[str, str] = {}

    async def finishing() -> Any:
        job: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        def cut() -> Mapping[str, str]:  # the first poll finds every worker cut off ...
            cut_off.update({n: f"{n}'s link is down for good" for n in NAMES})
            asyncio.get_running_loop().call_soon(job.set_result, "summary")  # ... and it ends
            return cut_off

        return await _while_a_worker_lives(_wait(job), workers, cut, _running())

    assert asyncio.run(finishing()) == "summary"


def test_the_foremans_link_cuts_off_every_worker_until_it_is_up_again() -> None:
    specs = [WorkerSpec(name, 0.0) for name in NAMES]
    cut_off: dict[str, tuple[int, str]] = {}
    down, up = Action(1.0, "link_down", 0, "for good", for_good=True), Action(2.0, "link_up", 0, "")
    _track_cut_off(down, specs, {}, cut_off)
    assert cut_off["mid"] == (0, "mid is cut off from the foreman, whose link is down for good")
    assert set(cut_off) == set(NAMES)
    _track_cut_off(Action(1.5, "link_down", 2, "for good", for_good=True), specs, {}, cut_off)
    _track_cut_off(up, specs, {}, cut_off)  # a shorter fault on host 0 ended after
    assert cut_off == {"mid": (2, "mid's link is down for good")}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("rejoin_s", [0.0, 30.0])
def test_a_worker_keeps_trying_to_enrol_for_its_rejoin_time(
    tmp_path: Path, rejoin_s: float
) -> None:
    """A foreman not reachable yet (nothing listens; in the emulator, a link just up whose
    neighbour entry still says unreachable) is tried again for --rejoin-s; the worker
    gave up at its first refusal, and its job waited out its timeout for it."""
    port = free_port()  # nothing listens on it, and no other process can take it meanwhile
    command = [sys.executable, "-m", launcher.WORKER, "--foreman", f"127.0.0.1:{port}"]
    command += ["--cache", str(tmp_path / "cache"), "--token", "t", "--rejoin-s", str(rejoin_s)]
    worker = subprocess.Popen(command, stderr=subprocess.PIPE)
    try:
        if rejoin_s == 0:
            assert worker.wait(timeout=30) != 0  # refused: it gives up at once, as before
            assert b"Connect call failed" in (worker.stderr.read() if worker.stderr else b"")
        else:
            with pytest.raises(subprocess.TimeoutExpired):  # still trying, after tries
                worker.wait(timeout=3 * REJOIN_WAIT_S + 1)
    finally:
        worker.kill()
        worker.wait()
