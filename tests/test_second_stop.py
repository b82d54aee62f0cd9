"""A second Ctrl-C or SIGTERM while a stopped command cleans up, or once it has said it
stopped, and what a plan stopped in its last steps leaves (README, "Provenance").

The subprocesses get real signals, each sent once the process has printed that it got
where the signal is meant to land: no clock decides."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

import edgetwin
from edgetwin.atomic import remove_whole
from edgetwin.errors import second_stop_note
from edgetwin.plan.executors import SerialExecutor
from edgetwin.plan.question_file import load_question
from edgetwin.plan.run import PlanOutcome, run_plan
from edgetwin.reports.plan import write_plan_report
from tests.conftest import REPO, ctrl_c_reaches

STOPS = pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])

# A command's block whose clean-up waits (as one for a browser's last figures or an
# emulator's teardown does) until the test closes its stdin.
_SLOW_CLEAN_UP = """
import signal, sys
from edgetwin.errors import sigterm_interrupts, stopped_exit_code
try:
    with sigterm_interrupts(command=True):
        try:
            print("working", flush=True)
            signal.pause()
        finally:
            print("cleaning up", flush=True)
            sys.stdin.readline()
            print("cleaned up", flush=True)
except KeyboardInterrupt:
    sys.exit(stopped_exit_code())
"""


def _started(argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_reaches,
    )


def _wait_for(stream: object, line: str) -> None:
    """Read ``stream`` up to ``line`` (a marker the process prints)."""
    assert hasattr(stream, "readline")
    while (got := stream.readline()) != line:
        assert got, f"ended before {line!r}"


@pytest.mark.timeout(60)
@STOPS
def test_a_second_stop_during_the_clean_up_says_it_cuts_it_short(stop: signal.Signals) -> None:
    """A second stop raised another KeyboardInterrupt wherever the clean-up stood, and a
    command said nothing of it: its last line was the first stop's. It still cuts the
    clean-up short, with the stop's exit status, and a command says so, once."""
    proc = _started([sys.executable, "-c", _SLOW_CLEAN_UP])
    _wait_for(proc.stdout, "working\n")
    proc.send_signal(stop)
    _wait_for(proc.stdout, "cleaning up\n")
    proc.send_signal(stop)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + stop, err
    assert err == second_stop_note(stop) + "\n"
    assert "cleaned up" not in out
    name = "Ctrl-C" if stop == signal.SIGINT else "SIGTERM"
    assert err.startswith(f"edgetwin: {name} again: stopping now, cutting the clean-up short")


# The command's entry point, then a wait (as a slow interpreter exit's) until stdin closes.
_ENDING = """
import sys
from edgetwin.__main__ import main
sys.argv = ["edgetwin", *sys.argv[1:]]
code = main()
print("ended", flush=True)
sys.stdin.readline()
sys.exit(code)
"""


@pytest.mark.timeout(120)
def test_a_stop_after_the_command_said_it_stopped_does_not_kill_it(tmp_path: Path) -> None:
    """Once a stopped command had said so, its handlers were gone: a second SIGTERM while
    the process exited killed it (status -15, not 143) after its line, or before it."""
    argv = [sys.executable, "-c", _ENDING, "run", str(REPO / "scenarios" / "prism_jetson.yaml")]
    proc = _started([*argv, "--out", str(tmp_path / "out"), "--set", "repetitions=200"])
    assert proc.stderr is not None and proc.stdin is not None
    first = proc.stderr.readline()  # a line per step: stderr is no terminal
    assert first.startswith("twin prism_jetson: 1/13,000 "), first
    proc.send_signal(signal.SIGTERM)
    _wait_for(proc.stdout, "ended\n")
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate("\n", timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert err.splitlines()[-1] == "edgetwin: interrupted; no output was published", err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.timeout(120)
def test_a_plan_stopped_in_its_last_steps_keeps_its_journal(tmp_path: Path) -> None:
    """A plan writing into its own new folder removed its journal before its caller's last
    files (its figures, provenance.json): stopped there, it left a folder with answer.json
    and plan.html that looked finished, without the journal that says it is not (and a new
    folder, so that its clean-up removed it all). The journal now goes last: a rerun
    resumes it and ends the folder."""
    question = REPO / "scenarios" / "plan_crossover.plan.yaml"
    overrides = ("axes.batch=[8]", "axes.bandwidth_mbps=[200, 400]")
    out = tmp_path / "out"

    def stopped(_outcome: PlanOutcome) -> None:
        raise KeyboardInterrupt  # a stop while the figures are drawn

    loaded = load_question(question, overrides)
    with pytest.raises(KeyboardInterrupt):
        run_plan(loaded, out, SerialExecutor(), write_plan_report, finish=stopped)
    assert (out / "partial" / "rows.jsonl").stat().st_size > 0
    assert not (out / "provenance.json").exists()
    again = edgetwin.run_plan(question, out=out, overrides=overrides)
    assert again.ran_now == 0 and again.configurations > 0
    assert (out / "provenance.json").is_file() and not (out / "partial").exists()


def test_a_folder_removed_whole_leaves_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    (folder / "figures").mkdir(parents=True)
    (folder / "results.csv").write_text("a\n")
    remove_whole(folder)
    assert list(tmp_path.iterdir()) == []
