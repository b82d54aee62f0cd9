"""A ViT or decoder launch's ``network.schedule`` plays from 0 ms in every timed run, as the
twin's does in each of its runs (no root): rank 0 announces each timed forward or
generation and waits for the launcher's go before the next (``emu.timed_start``); the
launcher's ``RunClocks`` stops the run's clock, puts the links back and applies the 0 ms
steps again before it gives the go. Until 2026-12-07 one clock ran from the launch's first
timed forward across all its repetitions, so repetition k met the schedule k forwards in."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from edgetwin.emu import timed_start
from edgetwin.emu.llm.worker import main as decoder_main
from edgetwin.emu.mininet.faults import Action, FaultClock, timeline, unplayed_warnings
from edgetwin.emu.mininet.run_clocks import RunClocks
from edgetwin.emu.mininet.topology import build_topology
from edgetwin.emu.vit.records import read_record
from edgetwin.emu.vit.worker import main as vit_main
from edgetwin.emu.vit.worker import model_args
from edgetwin.model_spec import ModelSpec
from edgetwin.network_spec import BandwidthStep, NetworkSpec
from tests.test_llm_distributed import LLAMA_KIND

TINY = ModelSpec(tokens=17, width=32, blocks=1, heads=4, patch_size=2, classes=5)
SLOW, FAST = 5.0, 800.0
pytestmark = pytest.mark.timeout(120)


def _actions(at_ms: float) -> list[Action]:
    """A step to ``SLOW`` at 0 ms, one to ``FAST`` at ``at_ms``."""
    network = NetworkSpec(schedule=(BandwidthStep(at_ms=0, bandwidth_mbps=SLOW),
                                    BandwidthStep(at_ms=at_ms, bandwidth_mbps=FAST)))  # fmt: skip
    return timeline(build_topology(2), network)


class _Links:
    """What the launcher did to the links, in order: a step's rate, or ``restore``."""

    def __init__(self) -> None:
        self.done: list[str] = []
        self.done_at: list[float] = []  # time.monotonic() as each was done
        self.fast = threading.Event()

    def apply(self, action: Action) -> None:
        self._did(action.detail)
        if action.detail == f"{FAST:g} Mbps":
            self.fast.set()

    def restore(self) -> None:
        self._did("restore")

    def _did(self, what: str) -> None:
        self.done.append(what)
        self.done_at.append(time.monotonic())


@contextmanager
def _launcher(clocks: RunClocks) -> Iterator[None]:
    """The launcher's looks at rank 0's events while the block runs (``RunClocks.look``
    every 10 ms), then its last look and ``finish``."""
    done = threading.Event()

    def look() -> None:
        while not done.wait(0.01):
            clocks.look()

    thread = threading.Thread(target=look, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        clocks.look()
        clocks.finish()


def _run_worker(
    main: Callable[[list[str]], int], args: list[str], tmp_path: Path, links: _Links | None = None
) -> RunClocks:
    """One rank run as the emulator's launcher runs it, a schedule playing: a step at 100 s
    no forward reaches."""
    path = tmp_path / timed_start.FILE
    links = links or _Links()
    clocks = RunClocks("launch 1 at 100 Mbps", path, _actions(100e3), links.apply, links.restore)
    clocks.begin()
    with _launcher(clocks):
        assert main([*args, "--timed-start", str(path)]) == 0
    assert links.done == [f"{SLOW:g} Mbps"] * len(clocks.unplayed) + ["restore"]
    return clocks


def _kinds(path: Path) -> list[tuple[str, int]]:
    return [(event.kind, event.run) for event in timed_start.events(path)]


def _expected_kinds(runs: int) -> list[tuple[str, int]]:
    """Rank 0's events over ``runs`` timed runs: each started and ended, a go asked for
    before each after the first."""
    kinds = [("start", 0), ("end", 0)]
    for run in range(1, runs):
        kinds += [("ready", run), ("start", run), ("end", run)]
    return kinds


def test_every_timed_forward_meets_the_schedule_from_its_start(tmp_path: Path) -> None:
    """Two batches x two repetitions: four timed forwards, each one run with its own clock:
    the 0 ms step applied before each, and the step at 100 s unplayed in each (the
    warning counts runs, as the twin's does); rank 0 waited for a go before forwards 1-3."""
    args = ["--rank", "0", "--world", "1", "--strategy", "single", *model_args(TINY)]
    args += ["--batch", "1", "2", "--reps", "2", "--warmup", "1"]
    clocks = _run_worker(vit_main, args, tmp_path)
    path = tmp_path / timed_start.FILE
    assert _kinds(path) == _expected_kinds(4)
    assert (tmp_path / timed_start.GO_FILE).read_text() == "1\n2\n3\n"
    starts = [event.at for event in timed_start.events(path) if event.kind == "start"]
    assert starts == sorted(starts)
    assert [(r.run, r.detail) for r in clocks.records] == [
        (f"launch 1 at 100 Mbps, timed run {run}", f"{SLOW:g} Mbps") for run in range(4)
    ]
    assert unplayed_warnings(clocks.unplayed, "run") == [
        f"network.schedule step to {FAST:g} Mbps at 100 s did not play in 4 of 4 runs: each "
        "ended before it (times count from each run's start, its warm-ups left out)"
    ]


def test_a_later_configurations_warm_ups_meet_the_launchs_rate(tmp_path: Path) -> None:
    """Two batches, one repetition each: the second configuration's warm-ups come after
    the launcher has set the links for its first timed run (back at the launch's rate, the
    0 ms step applied), as the first configuration's met them before the ranks started.
    Until 2026-12-07 rank 0 asked for that go after the warm-ups, which crossed the links
    at whatever rate the previous configuration's schedule had left."""
    model = ModelSpec(tokens=65, width=128, blocks=2, heads=4, patch_size=4, classes=5)
    args = ["--rank", "0", "--world", "1", "--strategy", "single", *model_args(model)]
    args += ["--batch", "1", "2", "--reps", "1", "--warmup", "5", "--threads", "1"]
    args += ["--result", str(tmp_path / "rank0.json")]
    links = _Links()
    _run_worker(vit_main, args, tmp_path, links)
    (record,) = [read_record(tmp_path / "rank0.json")]
    assert links.done == ["5 Mbps", "5 Mbps", "restore"]
    set_for_run_1 = links.done_at[1]
    (start_1,) = [e.at for e in timed_start.events(tmp_path / timed_start.FILE)
                  if e.kind == "start" and e.run == 1]  # fmt: skip
    assert start_1 is not None
    assert (start_1 - set_for_run_1) * 1e3 >= sum(record.runs[1].warmup_ms)


def test_every_timed_generation_meets_the_schedule_from_its_start(tmp_path: Path) -> None:
    args = ["--rank", "0", "--world", "1", "--strategy", "single", "--prompt-tokens", "4"]
    args += ["--output-tokens", "2", "--model", LLAMA_KIND.model_dump_json()]
    args += ["--reps", "3", "--warmup", "1"]
    clocks = _run_worker(decoder_main, args, tmp_path)
    assert _kinds(tmp_path / timed_start.FILE) == _expected_kinds(3)
    assert len(clocks.records) == len(clocks.unplayed) == 3


def test_the_links_go_back_before_the_next_runs_go(tmp_path: Path) -> None:
    """Run 0 plays both steps (it started 200 s ago, so the one at 100 s is due at once);
    before run 1's go the links go back to the launch's rate and meet the 0 ms step
    again; run 1 ends before its step at 100 s."""
    path = tmp_path / timed_start.FILE
    links = _Links()
    clocks = RunClocks("launch", path, _actions(100e3), links.apply, links.restore)
    clocks.begin()

    def rank0(*lines: str) -> None:
        with path.open("a") as out:
            out.writelines(line + "\n" for line in lines)
        clocks.look()

    rank0(f"start 0 {time.monotonic() - 200!r}")
    assert links.fast.wait(30)
    rank0(f"end 0 {time.monotonic()!r}", "ready 1")
    assert links.done == ["5 Mbps", "800 Mbps", "restore", "5 Mbps"]
    assert (tmp_path / timed_start.GO_FILE).read_text() == "1\n"
    rank0(f"start 1 {time.monotonic()!r}", f"end 1 {time.monotonic()!r}")
    clocks.finish()
    assert links.done[4:] == ["restore"]
    assert [(r.run, r.detail) for r in clocks.records] == [
        ("launch, timed run 0", "5 Mbps"),
        ("launch, timed run 0", "800 Mbps"),
        ("launch, timed run 1", "5 Mbps"),
    ]
    assert [[a.detail for a in run] for run in clocks.unplayed] == [[], ["800 Mbps"]]


def test_a_rank_without_its_go_fails_by_the_deadline(tmp_path: Path) -> None:
    """A launcher that never answers does not hang rank 0: past the launch's deadline it
    fails, naming what it waited for; run 0 needs no go."""
    path = tmp_path / timed_start.FILE
    runs = timed_start.TimedRuns(path, deadline=time.monotonic() + 0.2)
    runs.wait_go(0)
    assert not path.exists()
    with pytest.raises(timed_start.NoGo, match="no go for timed run 1 from the launcher"):
        runs.wait_go(1)
    assert _kinds(path) == [("ready", 1)]


def test_a_step_due_before_the_launchers_next_look_starts_when_due(tmp_path: Path) -> None:
    """Rank 0 announces run 0's start and a step is due 10 ms in; the launcher does not
    look again before the step has been applied (it looks every 50 ms; here not at all).
    Until 2026-12-07 the run's clock started at the launcher's next look after rank 0's
    announcement, so a step due before that look started late, at the look (in the
    emulator over 20 runs of a step at 10 ms, a median 38 ms into the run); now the clock
    looks for the start itself, and the step starts at 10 ms of the run's clock, no
    sooner."""
    path = tmp_path / timed_start.FILE
    links = _Links()
    clocks = RunClocks("launch", path, _actions(10), links.apply, links.restore)
    clocks.begin()
    rank0 = timed_start.TimedRuns(path, deadline=time.monotonic() + 60)
    rank0.started(0)
    assert links.fast.wait(30)  # no look yet
    rank0.ended(0)
    clocks.look()
    clocks.finish()
    (started,) = [e.at for e in timed_start.events(path) if e.kind == "start"]
    assert started is not None and links.done_at[1] >= started + 0.01
    assert links.done == ["5 Mbps", "800 Mbps", "restore"]
    assert [(r.detail, r.at_s) for r in clocks.records] == [("5 Mbps", 0), ("800 Mbps", 0.01)]
    assert clocks.records[1].started_s >= 0.01
    assert clocks.unplayed == [[]]


def test_a_step_due_after_the_runs_announced_end_does_not_play(tmp_path: Path) -> None:
    """Run 0 ends 0.1 s in and says so at once; a step is due at 1 s, and the launcher's
    next look comes after it (it looks every 50 ms; here at 1.2 s). Until 2026-12-07 the
    run's clock ran to that look: the step was applied after the run's end, recorded as
    played in it, and its warning left the run out."""
    path = tmp_path / timed_start.FILE
    links = _Links()
    clocks = RunClocks("launch", path, _actions(1000), links.apply, links.restore)
    clocks.begin()
    start = time.monotonic()
    with path.open("a") as out:
        out.write(f"start 0 {start!r}\n")
    clocks.look()
    with path.open("a") as out:  # at once, saying 0.1 s: however busy the machine, before 1 s
        out.write(f"end 0 {start + 0.1!r}\n")
    time.sleep(max(start + 1.2 - time.monotonic(), 0.0))
    clocks.look()
    clocks.finish()
    assert links.done == ["5 Mbps", "restore"]  # the step at 0 ms alone, then undone
    assert [(r.run, r.detail) for r in clocks.records] == [("launch, timed run 0", "5 Mbps")]
    assert [[a.detail for a in run] for run in clocks.unplayed] == [["800 Mbps"]]


def test_a_step_started_as_the_run_was_ending_did_not_play_in_it() -> None:
    """Rank 0 ended its run just before a step started, and wrote so just after the clock
    had looked for the end: the step was applied, after the run, so it did not play in it
    (no record; unplayed), and the launcher still puts the links back (``late``)."""
    ended: list[float] = []
    start = time.monotonic()

    def apply(action: Action) -> None:
        if action.at_s > 0:  # rank 0's end, written as tc runs
            ended.append(start + action.at_s - 0.001)

    clock = FaultClock("run", _actions(50), apply, lambda: ended[0] if ended else None)
    clock.apply_rates_at_start()
    clock.start(start)
    deadline = time.monotonic() + 30
    while not ended and time.monotonic() < deadline:
        time.sleep(0.01)
    records = clock.stop()
    assert [r.detail for r in records] == ["5 Mbps"]  # the step at 0 ms, before the run
    assert [r.detail for r in clock.late] == ["800 Mbps"]
    assert [a.detail for a in clock.unplayed()] == ["800 Mbps"]
