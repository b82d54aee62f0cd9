"""edgetwin plan: question files, answers vs direct runs, executors, resume, report."""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import edgetwin
from edgetwin.cli import main
from edgetwin.errors import InputError
from edgetwin.models import registry
from edgetwin.models.layout import resolved_segments
from edgetwin.plan.answer_text import describe, unmet_text
from edgetwin.plan.crossover import crossing
from edgetwin.plan.executors import PoolExecutor, SerialExecutor, stop_workers
from edgetwin.plan.question_file import LoadedQuestion, load_question
from edgetwin.plan.run import journal_for, run_plan, start_warnings, sweep_rows
from edgetwin.profile import MB, PROFILE_DIR
from edgetwin.progress import Steps, naming
from edgetwin.provenance import code_digest, modules_digest
from edgetwin.reports.plan import best_mode_figures, fleet_figures, write_plan_report
from edgetwin.result_cells import read_results
from edgetwin.results import ResultRow, write_results
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.runner import run_scenario
from tests.conftest import ctrl_c_reaches

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "prism_jetson.yaml"
# a board that holds ViT-B/16's weights and one device's forward at batch 16 (469 MB) but
# not at 32 (595 MB); Prism cr 9.9 holds 504 MB at batch 32 on 2 boards, 584 MB at batch
# 48 (446 and 496 MB on 4 boards; docs/twin.md's RAM)
BOARD_RAM_MB = 560


def out_of_board(batch: int, devices: int = 1) -> str:
    """The status of single (1 device) or Prism cr 9.9 at ``batch`` on BOARD_RAM_MB boards
    whose first board's weights and activations do not fit."""
    scenario = edgetwin.load_scenario(SCENARIO)
    model, source = scenario.encoder, scenario.input_source
    if devices == 1:
        plan = registry.cost_plan(model, "single", 1, None, source)
    else:
        segments = resolved_segments(model.tokens, devices, None, 9.9)
        plan = registry.cost_plan(model, "prism", devices, segments, source)
    need_mb = (plan.weight_bytes_per_device + plan.activation_bytes(0, batch, 4)) / MB
    return (
        f"out of memory on jetson-0: weights and activations need {need_mb:,.1f} MB of its "
        f"{BOARD_RAM_MB} MB"
    )


def question_file(tmp_path: Path, **changes: Any) -> Path:
    raw: dict[str, Any] = {
        "name": "q",
        "scenario": str(SCENARIO),
        "set": ["devices.0.count=4", "repetitions=5", "noise_cv=0.1"],
        "axes": {"batch": [4, 16], "bandwidth_mbps": [100, 400, 900], "devices": [2, 4]},
        "question": {"kind": "crossover", "strategy": {"name": "prism", "cr": [9.9, 4.95]}},
    }
    raw.update(changes)
    path = tmp_path / "q.plan.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def stepping(step: Callable[[], None]) -> Steps:
    """Progress that calls ``step`` after each unit."""
    return lambda label, total: contextlib.nullcontext(naming(step))


def direct_rows(loaded: LoadedQuestion) -> list[ResultRow]:
    fleet = build_fleet(loaded.scenario, loaded.scenario_path)
    return [o.row for o in run_scenario(loaded.scenario, fleet)]


def table_bytes(rows: list[ResultRow], path: Path) -> bytes:
    write_results(path, rows)
    return path.read_bytes()


@pytest.mark.parametrize(
    ("changes", "field", "problem"),
    [
        ({"colour": "red"}, "colour", "unknown key"),
        (  # a scenario's key set on the question: "unknown key", with no way on
            {"network": {"bandwidth_mbps": 100}},
            "network",
            "'network' is the scenario's: change it through the question's set list",
        ),
        ({"question": {"kind": "fastest"}}, "question", "kind"),
        (
            {"question": {"kind": "crossover", "strategy": {"name": "single"}}},
            "question.strategy",
            "distributed",
        ),
        ({"axes": {"batch": [0], "bandwidth_mbps": [100]}}, "axes.batch.0", "greater than 0"),
        # these ran: true as 1 inside a list, [] as the scenario's workload
        ({"axes": {"batch": [4, True], "bandwidth_mbps": [100]}}, "axes.batch.1", "not true"),
        (
            {"axes": {"batch": [4], "bandwidth_mbps": [100, False]}},
            "axes.bandwidth_mbps.1",
            "a number, not false",
        ),
        (
            {"axes": {"batch": [4], "bandwidth_mbps": [100], "prompt_tokens": []}},
            "axes.prompt_tokens",
            "give at least one value",
        ),
        ({"scenario": "missing.yaml"}, "scenario", "file not found"),
        (  # a ValueError traceback from a worker, the journal left behind
            {
                "set": ["devices.0.count=300"],
                "axes": {"batch": [1], "bandwidth_mbps": [100], "devices": [2, 300]},
            },
            "axes.devices",
            "prism: 197 tokens cannot be split over 300 devices",
        ),
        # these ran: each repeated value was a crossover curve, a heatmap row or column again
        (
            {"axes": {"batch": [4, 4], "bandwidth_mbps": [100]}},
            "axes.batch",
            "4 is given twice",
        ),
        (
            {"axes": {"batch": [4], "bandwidth_mbps": [100, 400, 100.0], "devices": [2]}},
            "axes.bandwidth_mbps",
            "100 is given twice",
        ),
        (
            {"axes": {"batch": [4], "bandwidth_mbps": [100], "devices": [2, 4, 2]}},
            "axes.devices",
            "2 is given twice",
        ),
        # these named a field of the other file ('name': required key is missing, ...)
        (
            {"scenario": str(REPO / "scenarios" / "adaptive_devices.eval.yaml")},
            "scenario",
            "adaptive_devices.eval.yaml is an evaluation of the adaptive policy, not a scenario",
        ),
        (
            {"scenario": str(REPO / "scenarios" / "plan_fleet.plan.yaml")},
            "scenario",
            "plan_fleet.plan.yaml is a plan question, not a scenario",
        ),
        # a crossover replaced the crowd scenario's strategies: no field, the wrong problem
        (  # (no devices.0.count: crowd_city has no devices list for it to index)
            {"scenario": str(REPO / "scenarios" / "crowd_city.yaml"), "set": []},
            "scenario",
            "a crowd scenario answers only crowd_capacity",
        ),
        # an encoder's rows have no ttft_ms: answering raised a TypeError, a traceback
        (
            {"question": {"kind": "best_mode", "metrics": ["total_ms", "ttft_ms"]}},
            "question.metrics",
            "ttft_ms is a decoder metric",
        ),
        (
            {"question": [{"kind": "best_mode", "metrics": ["tpot_ms"]}]},
            "question.0.metrics",
            "tpot_ms is a decoder metric",
        ),
        ({"set": ["repetitions=0"]}, "repetitions", "greater than 0"),
        # these named the scenario's key as a field of the question ('devices.9'), or none
        (
            {"set": ["devices.9.count=8"]},
            "set.0",
            "scenario field 'devices.9': override index '9' out of range",
        ),
        ({"set": ["repetitions=2", "no-value"]}, "set.1", "expected key=value or ~key"),
        (
            {"set": []},
            "axes.devices",
            "fleet has 2",
        ),
    ],
)
def test_question_errors_name_file_and_field(
    tmp_path: Path, changes: dict[str, Any], field: str, problem: str
) -> None:
    path = question_file(tmp_path, **changes)
    with pytest.raises(InputError) as caught:
        load_question(path)
    assert caught.value.path is not None and str(path) in caught.value.path
    assert caught.value.field is not None and caught.value.field.startswith(field)
    assert problem in caught.value.message


@pytest.mark.parametrize(
    "item",
    [
        "question.target_p95=500",
        "question.target_p95_ms=-1",
        "question.strategy=prism",
        "axes.devices.7=3",
        "~axes.devices.9",
    ],
)
def test_a_set_on_the_question_is_named_as_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], item: str
) -> None:
    """The field is the key the --set gave: it said 'question.smallest_fleet.target_p95',
    and that key given back was 'question.smallest_fleet.smallest_fleet: unknown key'; an
    index past the axes' devices said 'axes.7' (the device axes' tag, 'devices', was taken
    out of the key)."""
    question = REPO / "scenarios" / "plan_fleet.plan.yaml"
    out = tmp_path / "o"
    assert main(["plan", str(question), "--out", str(out), "--set", item]) == 2
    err = capsys.readouterr().err
    key = item.partition("=")[0].removeprefix("~")
    assert err.count("\n") == 1 and f"field '{key}'" in err, err
    assert not out.exists()


def test_a_scenario_key_indexed_on_the_question_says_to_use_its_set_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--set devices.0.count=3`` on a plan said "the file has no list 'devices' to index;
    set the whole list (devices=[...])", and ``--set devices=[...]`` was an unknown key."""
    question = REPO / "scenarios" / "plan_fleet.plan.yaml"
    out = tmp_path / "o"
    assert main(["plan", str(question), "--out", str(out), "--set", "devices.0.count=3"]) == 2
    err = capsys.readouterr().err
    assert "field 'devices.0': unknown key of the question ('devices' is the scenario's" in err
    assert 'set list, --set "set.N=KEY=VALUE"' in err and "devices=[" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("plan", "item", "problem"),
    [
        ("plan_crowd_capacity", "set.0=crowd.fleet_size=3", "the axes give fleet_size"),
        ("plan_crowd_capacity", "set.0=crowd.schedulers=[fifo]", "question.scheduler"),
        ("plan_fleet", "set.0=strategies.0.name=voltage", "question.strategy"),
        ("plan_best_mode", "set=[sweeps.0.batch=1]", "the axes replace the scenario's sweeps"),
        ("plan_best_mode", "set=[mode=emu]", "a plan sweeps in the twin"),
    ],
)
def test_a_set_item_of_a_key_the_plan_sets_itself_is_refused(
    plan: str, item: str, problem: str
) -> None:
    """The sweep replaced these without a word: ``crowd.fleet_size=3`` swept the axes' fleet
    sizes, ``mode=emu`` swept the twin."""
    with pytest.raises(InputError) as caught:
        load_question(REPO / "scenarios" / f"{plan}.plan.yaml", (item,))
    key = item.split("=")[1].removeprefix("[")
    assert caught.value.field == "set.0"
    assert caught.value.problem.startswith(f"{key} has no effect: ") and problem in str(
        caught.value
    )


def test_a_best_mode_set_item_of_the_strategies_is_read() -> None:
    """best_mode sweeps the scenario's own strategies: a set item of them is no error."""
    loaded = load_question(
        REPO / "scenarios" / "plan_best_mode.plan.yaml", ("set=[~strategies.1]",)
    )
    assert [s.name for s in loaded.scenario.strategies] == ["single", "prism"]


@pytest.mark.parametrize(
    ("items", "warning"),
    [
        (["devices.0.count=2"], None),
        (
            ["devices.0.count=3"],
            "devices.0.count=3 (set.0) sizes a fleet of 3, but a run takes its first devices, "
            "as many as axes.devices gives, at most 2: 1 device of devices.0 never runs "
            "(sweep 3 in axes.devices to run it)",
        ),
        (
            [
                "devices=[{name: a, profile: jetson_orin_nano}, {name: b, profile: "
                "jetson_orin_nano}]",
                "devices.1.count=3",
            ],
            "devices.1.count=3 (set.1) sizes a fleet of 4, but a run takes its first devices, "
            "as many as axes.devices gives, at most 2: 2 devices of devices.1 never run "
            "(sweep 4 in axes.devices to run them)",
        ),
    ],
)
def test_a_plan_warns_of_a_set_count_past_the_devices_its_runs_take(
    tmp_path: Path, items: list[str], warning: str | None
) -> None:
    """``devices.0.count=3`` on axes ``devices: [2]`` ran 2 boards without a word."""
    question = question_file(
        tmp_path,
        set=[*items, "repetitions=1"],
        axes={"batch": [1], "bandwidth_mbps": [400], "devices": [2]},
        question={"kind": "best_mode"},
    )
    outcome = run_plan(
        load_question(question), tmp_path / "out", SerialExecutor(), write_plan_report
    )
    assert {row.devices for row in outcome.rows} == {1, 2}
    assert outcome.warnings == (() if warning is None else (warning,))


_PAST_TWO = (
    "devices.0.count=6 (set.0) sizes a fleet of 6, but a run takes its first devices, as many "
    "as axes.devices gives, at most 2: 4 devices of devices.0 never run (sweep 6 in "
    "axes.devices to run them)"
)


@pytest.mark.parametrize(
    ("overrides", "warning"),
    [
        (("axes.devices=[2]",), None),
        (("axes={batch: [4], bandwidth_mbps: [400], devices: [2]}",), None),
        (("~axes.devices",), None),  # the default, [2]
        (("set.0=devices.0.count=6", "axes.devices=[2]"), _PAST_TWO),
        (("set.0=devices.0.count=6",), _PAST_TWO.replace("at most 2: 4", "at most 4: 2")),
    ],
)
def test_axes_narrowed_by_the_caller_warn_of_no_device_the_file_runs(
    tmp_path: Path, overrides: tuple[str, ...], warning: str | None
) -> None:
    """A question whose devices.0.count=4 its axes sweep up to 4, narrowed with --set
    "axes.devices=[2]" for a quick look, warned that 2 devices never run: the user chose
    that. A count past the file's own axes (set there or by --set) is still warned of."""
    loaded = load_question(question_file(tmp_path), overrides)
    assert start_warnings(loaded) == ([] if warning is None else [warning])


@pytest.mark.parametrize(
    ("plan", "axis", "value"),
    [
        ("plan_fleet", "batch", 16),
        ("plan_fleet", "bandwidth_mbps", 300),
        ("plan_fleet", "devices", 4),
        ("plan_llm", "prompt_tokens", 512),
        ("plan_llm", "output_tokens", 8),
        ("plan_crowd_capacity", "fleet_size", 8),
        ("plan_crowd_capacity", "bandwidth_mbps", 50),
    ],
)
def test_one_number_on_an_axis_is_a_sweep_of_it(plan: str, axis: str, value: float) -> None:
    """One number stands for a list of it on every axis, as in a scenario's sweeps: a
    crowd's ``fleet_size: 8`` was refused ("Input should be a valid tuple") where a device
    question's ``batch: 16`` ran as ``[16]``."""
    path = REPO / "scenarios" / f"{plan}.plan.yaml"
    one = load_question(path, (f"axes.{axis}={value}",))
    listed = load_question(path, (f"axes.{axis}=[{value}]",))
    assert getattr(one.question.axes, axis) == (value,)
    assert one.question == listed.question and one.scenario == listed.scenario


def test_cli_exits_2_on_bad_question(tmp_path: Path) -> None:
    path = question_file(tmp_path, axes={"batch": [1]})
    done = subprocess.run(
        [sys.executable, "-m", "edgetwin", "plan", str(path), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "axes.bandwidth_mbps" in done.stderr and str(path) in done.stderr
    assert not (tmp_path / "o").exists()


def test_crossover_matches_direct_runs(tmp_path: Path) -> None:
    loaded = load_question(question_file(tmp_path))
    outcome = run_plan(loaded, tmp_path / "out", SerialExecutor(), write_plan_report)
    direct = direct_rows(loaded)
    assert outcome.rows == direct
    for curve in outcome.answer["curves"]:
        batch, devices = curve["batch"], curve["devices"]
        for bw, single_ms, best_ms in zip(
            curve["bandwidths_mbps"], curve["single_ms"], curve["distributed_ms"], strict=True
        ):
            at = [r for r in direct if r.batch == batch and r.bandwidth_mbps == bw]
            single = np.mean([r.total_ms for r in at if r.strategy == "single"])
            prism = [r for r in at if r.strategy == "prism" and r.devices == devices]
            used = {r.cr for r in prism}  # the CRs 9.9 and 4.95 resolve to at this count
            assert len(used) == 2
            best = min(np.mean([r.total_ms for r in prism if r.cr == cr]) for cr in used)
            assert single_ms == pytest.approx(single) and best_ms == pytest.approx(best)
        wins = [b < s for b, s in zip(curve["distributed_ms"], curve["single_ms"], strict=True)]
        if curve["status"] == "crossover":
            low, high = curve["crossover_mbps"], max(curve["bandwidths_mbps"])
            assert wins[-1] and not wins[0] and 100 <= low <= high
        assert (curve["status"] == "always") == all(wins)
    assert (tmp_path / "out" / "plan.html").read_text().count("<section class='figure'>") == 2
    assert not (tmp_path / "out" / "partial").exists()


def test_a_crossover_is_said_to_three_digits() -> None:
    """Interpolated between grid points, it was said to the kbit/s (368.227 Mbit/s)."""
    curves = [
        {"batch": 4, "devices": 2, **crossing([300, 400], [253.4, 253.4], [259.7, 251.2])},
        {"batch": 1, "devices": 2, "status": "crossover", "crossover_mbps": 1234.5,
         "between_mbps": [1000, 1500], "interpolated": True},
    ]  # fmt: skip
    lines = describe({"kind": "crossover", "strategy": "prism", "curves": curves})
    assert lines == [
        "batch 4, 2 devices: prism beats one device from 368 Mbit/s "
        "(interpolated between 300 and 400 Mbit/s)",
        "batch 1, 2 devices: prism beats one device from 1,230 Mbit/s "
        "(interpolated between 1,000 and 1,500 Mbit/s)",
    ]


def test_a_crossover_is_where_latencies_that_go_as_one_over_bandwidth_meet() -> None:
    """A split's latency goes as a + b / bandwidth (its transfers' bits over the rate):
    100 + 60000 / W against one device's 250 ms meet at 400 Mbit/s exactly, which the sweep
    at 300 and 500 Mbit/s brackets; linear in bandwidth it was placed at 425."""
    bandwidths = [200.0, 300.0, 500.0, 800.0]
    prism_ms = [100 + 60000 / bw for bw in bandwidths]
    found = crossing(bandwidths, [250.0] * len(bandwidths), prism_ms)
    assert found["between_mbps"] == [300.0, 500.0]
    assert found["crossover_mbps"] == pytest.approx(400.0)


@pytest.mark.parametrize(
    ("single_ms", "prism_ms"),
    [([250.0, 250.0, 250.0], [None, 240.0, 230.0]), ([250.0, 250.0, None], [300.0, 260.0, 230.0])],
    ids=["prism-fails-below", "single-fails-above"],
)
def test_a_crossover_next_to_a_failed_run_says_it_was_not_interpolated(
    single_ms: list[float | None], prism_ms: list[float | None]
) -> None:
    """Next to a run that failed (out of memory) the crossover is the swept bandwidth above
    it; the line said "from 400 Mbit/s" as if it had been interpolated there."""
    bandwidths = [200.0, 400.0, 800.0]
    found = crossing(bandwidths, single_ms, prism_ms)
    high = 400.0 if prism_ms[0] is None else 800.0
    assert found["crossover_mbps"] == high and not found["interpolated"]
    curve = {"batch": 8, "devices": 2, **found}
    line = describe({"kind": "crossover", "strategy": "prism", "curves": [curve]})[0]
    low = bandwidths[bandwidths.index(high) - 1]
    assert line.endswith(
        f"from {high:g} Mbit/s (the swept {high:g} Mbit/s: a run failed at {low:g} or "
        f"{high:g}, not interpolated)"
    )


def test_a_plan_warns_that_its_twin_sweeps_drop_no_packets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The twin models no packet loss: a question whose scenario sets ``loss_pct`` answers as
    without it, and says so in the outcome's ``warnings`` and on the console."""
    axes = {"batch": [4], "bandwidth_mbps": [100, 900], "devices": [2]}
    plain = question_file(tmp_path, axes=axes, set=["devices.0.count=2", "repetitions=2"])
    quiet = run_plan(load_question(plain), tmp_path / "plain", SerialExecutor(), write_plan_report)
    assert quiet.warnings == ()
    lossy = ["--set", "set=[devices.0.count=2, repetitions=2, network.loss_pct=3]"]
    out = tmp_path / "lossy"
    assert main(["plan", str(plain), *lossy, "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().err
    warning = (
        "edgetwin: warning: network.loss_pct is 3 %, "
        "but only --mode emu (mode='emu' in Python) drops packets"
    )
    assert warning in printed
    answer = json.loads((out / "answer.json").read_text())
    assert answer == json.loads((tmp_path / "plain" / "answer.json").read_text())


def test_a_checked_plan_prints_the_warnings_it_would_start_with(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``run --check`` printed a scenario's unplayed settings; ``plan --check`` said "ok"
    alone of a question whose twin sweep drops no packets."""
    question = REPO / "scenarios" / "plan_fleet.plan.yaml"
    lossy = ["--set", "set=[devices.0.count=8, network.loss_pct=2]"]
    assert main(["plan", str(question), "--check", *lossy]) == 0
    printed = capsys.readouterr()
    assert printed.err == (
        "edgetwin: warning: network.loss_pct is 2 %, but only --mode emu (mode='emu' in "
        "Python) drops packets: a twin run has no loss\n"
    )
    assert printed.out.startswith(f"{question}: ok")


def test_a_plan_warns_of_a_schedule_step_its_runs_ended_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every run ends within a second, before a step at 1000 s: ``edgetwin run`` said so
    and a plan, which warned before its sweep ran, did not. A resumed plan counts every run
    once, the journal's too (it keeps what each run's network reached): it said "18 of 18
    runs this plan ran now (1 unit resumed from its journal not counted)". The folder keeps
    the warning (warnings.json), its page shows it and ``edgetwin report`` says it again."""
    question = question_file(
        tmp_path,
        set=["devices.0.count=2", "repetitions=2", _LATE_STEP],
        axes={"batch": [1], "bandwidth_mbps": [100, 400], "devices": [2]},
        question={"kind": "best_mode"},
    )
    loaded = load_question(question)
    whole = run_plan(loaded, tmp_path / "whole", SerialExecutor(), write_plan_report)
    runs = len(whole.rows)  # one row per run
    assert all(row.total_ms < 1e6 for row in whole.rows)
    (warning,) = whole.warnings
    assert warning == _late_warning(f"{runs} of {runs} runs")
    out = tmp_path / "resumed"

    def interrupt_after_one() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_plan(loaded, out, SerialExecutor(), write_plan_report, stepping(interrupt_after_one))
    resumed = run_plan(loaded, out, SerialExecutor(), write_plan_report)
    assert resumed.ran_now == whole.configurations - 1 and resumed.rows == whole.rows
    assert resumed.warnings == whole.warnings
    for folder in (tmp_path / "whole", out):
        assert json.loads((folder / "warnings.json").read_text()) == [warning]
        page = (folder / "plan.html").read_text()
        assert page.count(f"<p class='warning'><b>Warning:</b> {escape(warning)}</p>") == 1
    (out / "plan.html").unlink()
    assert main(["report", str(out)]) == 0
    assert f"edgetwin: warning: {warning}\n" in capsys.readouterr().err
    assert (out / "plan.html").read_text() == page
    assert edgetwin.report(out).warnings == (warning,)
    (out / "warnings.json").write_text(json.dumps([warning, 3]))  # broken: nothing written
    answer = (out / "answer.json").stat().st_mtime_ns
    assert main(["report", str(out)]) == 2
    assert f"{out / 'warnings.json'}: field '1'" in capsys.readouterr().err
    assert (out / "answer.json").stat().st_mtime_ns == answer


def test_a_plans_failed_runs_are_not_counted_among_the_runs_a_step_did_not_play_in(
    tmp_path: Path,
) -> None:
    """On 250 MB boards most of llm_smoke's runs are out of memory; the plan's warning
    counted them among its runs (a memory-edge search's run at T + 1 too), as if they had
    run. A plan without a warning writes no warnings.json and its page has no warning."""
    question = question_file(
        tmp_path,
        scenario=str(SCENARIO.parent / "llm_smoke.yaml"),
        set=["devices.0.ram_mb=250", _LATE_STEP],
        axes={"batch": [1], "bandwidth_mbps": [400], "devices": [2]},
        question={"kind": "best_mode"},
    )
    outcome = run_plan(
        load_question(question), tmp_path / "out", SerialExecutor(), write_plan_report
    )
    ran = [row.ok for row in outcome.rows].count(True)
    assert 0 < ran < len(outcome.rows)
    step = "network.schedule step to 5 Mbps at 1,000 s"
    assert outcome.warnings == (
        f"{step} did not play in {ran} of {ran} runs: each ended before it (times count from "
        "each run's start)",
    )
    quiet = question_file(
        tmp_path,
        set=["devices.0.count=2"],
        axes={"batch": [1], "bandwidth_mbps": [400], "devices": [2]},
        question={"kind": "best_mode"},
    )
    plain = run_plan(load_question(quiet), tmp_path / "plain", SerialExecutor(), write_plan_report)
    assert plain.warnings == () and not (tmp_path / "plain" / "warnings.json").exists()
    assert "<b>Warning:</b>" not in (tmp_path / "plain" / "plan.html").read_text()
    assert edgetwin.report(tmp_path / "plain").warnings == ()


_LATE_STEP = "network.schedule=[{at_ms: 1000000, bandwidth_mbps: 5}]"


def _late_warning(missed: str) -> str:
    return (
        f"network.schedule step to 5 Mbps at 1,000 s did not play in {missed}: each ended "
        "before it (times count from each run's start)"
    )


def test_smallest_fleet_matches_direct_p95(tmp_path: Path) -> None:
    question = {
        "kind": "smallest_fleet",
        "target_p95_ms": 600,
        "strategy": {"name": "prism", "cr": 9.9},
    }
    loaded = load_question(question_file(tmp_path, question=question))
    outcome = run_plan(loaded, tmp_path / "out", SerialExecutor(), write_plan_report)
    write_results(tmp_path / "direct.csv", direct_rows(loaded))
    direct = read_results(tmp_path / "direct.csv")  # an answer is its table's, to 7 digits
    for entry in outcome.answer["per_batch"]:
        meets = []
        for d in (2, 4):
            for bw in (100, 400, 900):
                reps = [
                    r.total_ms
                    for r in direct
                    if r.batch == entry["batch"] and r.devices == d and r.bandwidth_mbps == bw
                ]
                p95 = float(f"{np.percentile(reps, 95):.7g}")  # the table's digits
                assert entry["p95_ms"][(2, 4).index(d)][(100, 400, 900).index(bw)] == p95
                if p95 <= 600:
                    meets.append((d, bw))
        expected = min(meets, default=None)
        got = entry["smallest_split"]
        assert (None if got is None else (got["devices"], got["bandwidth_mbps"])) == expected
    answer = json.loads((tmp_path / "out" / "answer.json").read_text())
    assert answer["per_batch"][0]["smallest_split"] == {"devices": 2, "bandwidth_mbps": 100.0}
    assert answer["per_batch"][1]["smallest_split"] == {"devices": 4, "bandwidth_mbps": 400.0}
    # one board meets 600 ms at batch 4, not at 16
    assert answer["per_batch"][0]["smallest_fleet"] == {"devices": 1, "bandwidth_mbps": None}
    assert answer["per_batch"][1]["smallest_fleet"] == {"devices": 4, "bandwidth_mbps": 400.0}


def test_smallest_fleet_says_whether_one_device_meets_the_target(tmp_path: Path) -> None:
    """Would splitting pay off? The answer named a fleet without saying that one board
    already meets the target at batch 4. One board's p95 is over every swept bandwidth's
    repetitions (bandwidth does not touch it); a failed one (out of memory) misses it."""
    question = question_file(
        tmp_path,
        set=[
            "devices.0.count=4",
            f"devices.0.ram_mb={BOARD_RAM_MB}",
            "repetitions=3",
            "noise_cv=0.05",
        ],
        axes={"batch": [4, 16, 32], "bandwidth_mbps": [100, 1000], "devices": [2, 4]},
        question={
            "kind": "smallest_fleet",
            "target_p95_ms": 600,
            "strategy": {"name": "prism", "cr": 9.9},
        },
    )
    loaded = load_question(question)
    outcome = run_plan(loaded, tmp_path / "out", SerialExecutor(), write_plan_report)
    single = [r for r in outcome.rows if r.strategy == "single"]
    baselines = [entry["baseline"] for entry in outcome.answer["per_batch"]]
    for batch, baseline in zip((4, 16), baselines, strict=False):
        p95 = float(np.percentile([r.total_ms for r in single if r.batch == batch], 95))
        assert baseline == {
            "strategy": "single",
            "p95_ms": pytest.approx(p95, rel=1e-6),
            "meets_target": p95 <= 600,
            "failed": None,
        }
    assert [b["meets_target"] for b in baselines] == [True, False, False]
    assert baselines[2] == {
        "strategy": "single",
        "p95_ms": None,
        "meets_target": False,
        "failed": out_of_board(32),
    }
    assert outcome.answer["devices"] == [2, 4]  # one board is no row of the fleet's grid
    lines = describe(outcome.answer)
    p95_4, p95_16 = (f"{b['p95_ms']:.4g}" for b in baselines[:2])
    assert lines[0].startswith(
        f"batch 4, p95 <= 600 ms: smallest fleet 1 device (single, p95 {p95_4} ms); split with "
        "prism cr 9.9: "
    )
    assert lines[1].endswith(f"; one device (single) p95 {p95_16} ms: misses it")
    assert lines[2].startswith(
        "batch 32, p95 <= 600 ms with prism cr 9.9: no swept fleet (2-4 devices, 100-1,000 "
        "Mbit/s) meets it, the lowest p95 "
    )
    assert lines[2].endswith(f"; one device (single): misses it ({out_of_board(32)})")
    page = (tmp_path / "out" / "plan.html").read_text()
    assert f"smallest fleet 1 device (single, p95 {p95_4} ms)" in page


def test_one_device_that_meets_the_target_is_the_smallest_fleet(tmp_path: Path) -> None:
    """The answer led with a split fleet (``smallest fleet 2 devices``) where one board
    alone meets the target: that board is the smallest fleet (``devices`` 1, no bandwidth
    to need), the split's answer follows it (``smallest_split``), and a split that meets
    nothing asks for no more devices or bandwidth."""
    strategy = {"name": "prism", "cr": 9.9}
    question = question_file(
        tmp_path,
        set=["devices.0.count=4", "repetitions=3", "noise_cv=0.05"],
        axes={"batch": [1, 4, 16], "bandwidth_mbps": [100, 1000], "devices": [2, 4]},
        question={"kind": "smallest_fleet", "target_p95_ms": 150, "strategy": strategy},
    )
    outcome = run_plan(
        load_question(question), tmp_path / "out", SerialExecutor(), write_plan_report
    )
    answer = json.loads((tmp_path / "out" / "answer.json").read_text())
    one, four, sixteen = answer["per_batch"]
    assert [e["baseline"]["meets_target"] for e in answer["per_batch"]] == [True, False, False]
    assert one["smallest_fleet"] == {"devices": 1, "bandwidth_mbps": None}
    assert one["smallest_split"] is None  # no split meets 150 ms at batch 1
    lines = describe(outcome.answer)
    p95 = f"{one['baseline']['p95_ms']:.4g}"
    assert lines[0] == (
        f"batch 1, p95 <= 150 ms: smallest fleet 1 device (single, p95 {p95} ms); split with "
        f"prism cr 9.9: {unmet_text(answer, one)}"
    )
    assert four["smallest_fleet"] == four["smallest_split"]  # one board misses: as before
    at_600 = ["--set", "question.target_p95_ms=600"]
    assert main(["plan", str(question), "--out", str(tmp_path / "o600"), *at_600, "--quiet"]) == 0
    answer = json.loads((tmp_path / "o600" / "answer.json").read_text())
    one, four, sixteen = answer["per_batch"]
    assert [e["baseline"]["meets_target"] for e in answer["per_batch"]] == [True, True, False]
    assert four["smallest_fleet"] == {"devices": 1, "bandwidth_mbps": None}
    split = four["smallest_split"]
    assert split is not None and split["devices"] == 2
    assert describe(answer)[1].startswith(
        "batch 4, p95 <= 600 ms: smallest fleet 1 device (single, p95 "
    )
    assert describe(answer)[1].endswith(
        f"; split with prism cr 9.9: smallest fleet 2 devices (from "
        f"{split['bandwidth_mbps']:g} Mbit/s); smallest bandwidth "
        f"{four['smallest_bandwidth']['bandwidth_mbps']:g} Mbit/s (with "
        f"{four['smallest_bandwidth']['devices']} devices)"
    )
    assert sixteen["smallest_fleet"] == sixteen["smallest_split"]


def test_a_target_no_fleet_meets_is_answered_with_how_near_the_sweep_came(
    tmp_path: Path,
) -> None:
    """A target out of reach said "not met anywhere in the sweep", and the heatmap's title
    "framed: the least bandwidth ..." over a grid with no frame: the answer now names what
    was swept and the lowest p95 in it, the configuration a direct run gives it for."""
    question = question_file(
        tmp_path,
        question={
            "kind": "smallest_fleet",
            "target_p95_ms": 100,
            "strategy": {"name": "prism", "cr": 9.9},
        },
    )
    loaded = load_question(question)
    outcome = run_plan(loaded, tmp_path / "out", SerialExecutor(), write_plan_report)
    write_results(tmp_path / "direct.csv", direct_rows(loaded))
    direct = read_results(tmp_path / "direct.csv")  # an answer is its table's, to 7 digits
    lines = describe(outcome.answer)
    for entry, line in zip(outcome.answer["per_batch"], lines, strict=True):
        p95 = {
            (d, bw): float(f"{np.percentile(reps, 95):.7g}")  # the table's digits
            for d in (2, 4)
            for bw in (100.0, 400.0, 900.0)
            if (
                reps := [
                    r.total_ms
                    for r in direct
                    if r.batch == entry["batch"]
                    and r.devices == d
                    and r.bandwidth_mbps == bw
                    and r.strategy == "prism"
                ]
            )
        }
        (d, bw), lowest = min(p95.items(), key=lambda item: item[1])
        assert lowest > 100 and entry["smallest_fleet"] is None
        assert entry["lowest_p95"] == {"devices": d, "bandwidth_mbps": bw, "p95_ms": lowest}
        unmet = (
            f"no swept fleet (2-4 devices, 100-900 Mbit/s) meets it, the lowest p95 "
            f"{lowest:.4g} ms with {d} devices at {bw:g} Mbit/s"
        )
        assert line.startswith(
            f"batch {entry['batch']}, p95 <= 100 ms with prism cr 9.9: {unmet} (sweep more "
            "devices or bandwidth in axes, or ask less: question.target_p95_ms); one device"
        )
        heat = fleet_figures(outcome.answer)[outcome.answer["per_batch"].index(entry)]
        title = heat.layout.title.text.replace("<br>", " ")  # the subtitle is wrapped
        assert f"nothing framed, p95 ≤ 100 ms: {unmet}; one device" in title


def test_a_fleet_that_failed_says_why_in_the_answer_and_its_heatmap_cell(tmp_path: Path) -> None:
    """A configuration with a failed repetition (out of memory) has no p95: its heatmap
    cell was blank, why unsaid (answer.json had null); a batch every configuration failed
    at was "not met anywhere in the sweep". Boards of 560 MB: batch 48 runs on 4 of them,
    not on 2; batch 256 on neither."""
    question = question_file(
        tmp_path,
        set=["devices.0.count=4", f"devices.0.ram_mb={BOARD_RAM_MB}", "repetitions=2"],
        axes={"batch": [48, 256], "bandwidth_mbps": [100, 1000], "devices": [2, 4]},
        question={
            "kind": "smallest_fleet",
            "target_p95_ms": 600,
            "strategy": {"name": "prism", "cr": 9.9},
        },
    )
    loaded = load_question(question)
    outcome = run_plan(loaded, tmp_path / "out", SerialExecutor(), write_plan_report)
    direct = [r for r in direct_rows(loaded) if r.strategy == "prism"]
    heats = fleet_figures(outcome.answer)
    for entry, heat in zip(outcome.answer["per_batch"], heats, strict=True):
        statuses = [
            [
                [r.status for r in direct if (r.batch, r.devices, r.bandwidth_mbps) == key]
                for key in ((entry["batch"], d, bw) for bw in (100, 1000))
            ]
            for d in (2, 4)
        ]
        failed = [[next((s for s in reps if s != "ok"), None) for reps in row] for row in statuses]
        assert entry["failed"] == failed
        text = [list(row) for row in heat.data[0].text]
        hover = [list(row) for row in heat.data[0].customdata]
        for d, row in enumerate(failed):
            for bw, status in enumerate(row):
                p95 = entry["p95_ms"][d][bw]
                assert (p95 is None) == (status is not None)
                if status is None:
                    assert (text[d][bw], hover[d][bw]) == (f"{p95:.0f}", f"p95 {p95:.1f} ms")
                else:
                    assert (text[d][bw], hover[d][bw]) == ("out of memory", status)
    assert outcome.answer["per_batch"][0]["failed"][0] == [out_of_board(48, 2)] * 2
    assert outcome.answer["per_batch"][0]["failed"][1] == [None, None]
    assert outcome.answer["per_batch"][1]["lowest_p95"] is None
    assert describe(outcome.answer)[1] == (
        "batch 256, p95 <= 600 ms with prism cr 9.9: no swept fleet (2-4 devices, 100-1,000 "
        "Mbit/s) meets it: each failed, out of memory (sweep more devices or bandwidth in "
        f"axes, or ask less: question.target_p95_ms); one device (single): misses it "
        f"({out_of_board(256)})"
    )


def test_smallest_fleet_says_where_it_misses_above_its_least_bandwidth() -> None:
    """Noise over few repetitions: 3 devices meet 640 ms at 600 and 700 Mbit/s, not at 650
    or 800. The line said "from 600 Mbit/s", true of no bandwidth in between."""
    entry = {
        "batch": 16,
        "p95_ms": [[700.0, 630.0, 650.0, 620.0, 660.0], [600.0, 590.0, 580.0, 570.0, 560.0]],
        "smallest_split": {"devices": 3, "bandwidth_mbps": 600.0},
        "smallest_bandwidth": {"devices": 4, "bandwidth_mbps": 550.0},
    }
    result = {
        "kind": "smallest_fleet",
        "target_p95_ms": 640,
        "strategy": "prism cr 9.9",
        "devices": [3, 4],
        "bandwidths_mbps": [550.0, 600.0, 650.0, 700.0, 800.0],
        "per_batch": [entry],
    }
    assert describe(result) == [
        "batch 16, p95 <= 640 ms with prism cr 9.9: smallest fleet 3 devices (from 600 Mbit/s, "
        "but not at 650, 800 Mbit/s); smallest bandwidth 550 Mbit/s (with 4 devices)"
    ]
    entry["p95_ms"][0] = [700.0, 630.0, 620.0, 610.0, 600.0]  # meets from 600 on: said so
    assert "(from 600 Mbit/s); smallest bandwidth" in describe(result)[0]


def _floats(value: Any) -> list[float]:
    """Every float in a JSON value."""
    if isinstance(value, dict):
        return [f for v in value.values() for f in _floats(v)]
    if isinstance(value, list):
        return [f for v in value for f in _floats(v)]
    return [value] if isinstance(value, float) else []


def test_an_answer_holds_no_more_digits_than_its_table(tmp_path: Path) -> None:
    """answer.json said 785.6680200000001 ms (a p95 between two rows of 7 digits) and
    0.382934625 J per sample: its figures have the table's 7 significant digits, the
    figures its verdicts are made on."""
    fleet = {"kind": "smallest_fleet", "target_p95_ms": 600, "strategy": {"name": "voltage"}}
    for name, question in (("fleet", fleet), ("best", {"kind": "best_mode"})):
        (tmp_path / name).mkdir()
        path = question_file(tmp_path / name, question=question)
        run_plan(load_question(path), tmp_path / name / "out", SerialExecutor(), write_plan_report)
        answer = json.loads((tmp_path / name / "out" / "answer.json").read_text())
        figures = _floats(answer)
        assert len(figures) > 20
        assert [f for f in figures if float(f"{f:.7g}") != f] == []


def test_an_answer_prints_its_numbers_without_an_exponent() -> None:
    """A 1,000,000 ms target read ``p95 <= 1e+06 ms`` (printed with ``:g``), a 2,000,000
    Mbit/s bandwidth ``2e+06``, a crowd's 1,000,000 s interval ``a job every 1e+06 s``; a
    token count ``21694 tokens``."""
    fleet = {
        "kind": "smallest_fleet",
        "target_p95_ms": 1e6,
        "strategy": "prism cr 9.9",
        "devices": [2],
        "bandwidths_mbps": [1e5, 2e6],
        "per_batch": [
            {
                "batch": 16,
                "p95_ms": [[2e6, 1.5e6]],
                "failed": [[None, None]],
                "smallest_split": None,
                "smallest_bandwidth": None,
                "lowest_p95": {"devices": 2, "bandwidth_mbps": 2e6, "p95_ms": 1.5e6},
            }
        ],
    }
    assert describe(fleet) == [
        "batch 16, p95 <= 1,000,000 ms with prism cr 9.9: no swept fleet (2 devices, "
        "100,000-2,000,000 Mbit/s) meets it, the lowest p95 1,500,000 ms with 2 devices at "
        "2,000,000 Mbit/s (sweep more devices or bandwidth in axes, or ask less: "
        "question.target_p95_ms)"
    ]
    capacity = {
        "kind": "crowd_capacity",
        "interarrival_s": 1e6,
        "strategy": "crowdio_streaming",
        "scheduler": "affinity",
        "target_p95_s": 1234.5,
        "repetitions": 1,
        "by_bandwidth": [{"bandwidth_mbps": 50, "fleets": [], "smallest_fleet": 3}],
    }
    assert describe(capacity)[0].startswith(
        "a job every 1,000,000 s (crowdio_streaming, affinity), p95 <= 1,234.5 s, "
    )
    longest = {
        "kind": "longest_context",
        "candidates": [
            {"batch": 1, "output_tokens": 1024, "candidate": "single",
             "longest_prompt_tokens": 21694, "stopped_by": "out of memory on jetson-0"},
        ],
    }  # fmt: skip
    assert describe(longest) == [
        "batch 1, 1,024 output tokens, single: longest prompt 21,694 tokens (one more: out "
        "of memory on jetson-0)"
    ]


@pytest.mark.parametrize(
    "question",
    [
        {"kind": "smallest_fleet", "target_p95_ms": 600, "strategy": {"name": "prism", "cr": 9.9}},
        {"kind": "best_mode"},
    ],
    ids=["smallest_fleet", "best_mode"],
)
def test_an_answer_goes_up_each_axis_however_the_question_lists_it(
    tmp_path: Path, question: dict[str, Any]
) -> None:
    """The grids kept the axes' order: bandwidth_mbps [900, 100, 400] drew its heatmap's
    columns as 900, 100, 400 Mbit/s (the crossover alone sorted them)."""
    answers = []
    for name, batch, bandwidth_mbps in (
        ("up", [4, 16], [100, 400, 900]),
        ("mixed", [16, 4], [900, 100, 400]),
    ):
        (tmp_path / name).mkdir()
        axes = {"batch": batch, "bandwidth_mbps": bandwidth_mbps, "devices": [2, 4]}
        path = question_file(
            tmp_path / name, set=["devices.0.count=4"], axes=axes, question=question
        )
        outcome = run_plan(
            load_question(path), tmp_path / name / "out", SerialExecutor(), write_plan_report
        )
        answers.append(outcome.answer)
    assert answers[0] == answers[1]
    assert answers[0]["bandwidths_mbps"] == [100, 400, 900]


def test_best_mode_heatmap_and_pareto(tmp_path: Path) -> None:
    loaded = load_question(question_file(tmp_path, question={"kind": "best_mode"}))
    outcome = run_plan(loaded, tmp_path / "out", SerialExecutor(), write_plan_report)
    assert outcome.answer["best"][0][0] == "single"  # batch 4 at 100 Mbit/s
    front = outcome.answer["pareto"]
    energies = [p["energy_j_per_sample"] for p in front]
    assert energies == sorted(energies, reverse=True) and len(front) >= 2
    assert "Pareto front" in (tmp_path / "out" / "plan.html").read_text()


def test_a_distributed_run_beats_one_device_that_runs_out_of_memory(tmp_path: Path) -> None:
    """A batch one board cannot hold but Prism's boards can: the answer was 'prism does not
    beat one device', as if the failed run were the faster one."""
    question = question_file(
        tmp_path,
        set=["devices.0.count=4", f"devices.0.ram_mb={BOARD_RAM_MB}"],
        axes={"batch": [1, 32], "bandwidth_mbps": [100, 1000], "devices": [2, 4]},
        question={"kind": "crossover", "strategy": {"name": "prism", "cr": 9.9}},
    )
    loaded = load_question(question)
    outcome = run_plan(loaded, tmp_path / "out", SerialExecutor(), write_plan_report)
    status = {r.strategy: r.status for r in outcome.rows if r.batch == 32}
    assert status == {"single": out_of_board(32), "prism": "ok"}
    curves = {(c["batch"], c["devices"]): c["status"] for c in outcome.answer["curves"]}
    assert curves == {(1, 2): "never", (1, 4): "never", (32, 2): "always", (32, 4): "always"}
    assert "batch 32, 4 devices: prism beats one device at every" in describe(outcome.answer)[3]


def test_the_swept_scenario_of_a_local_one_says_twin(tmp_path: Path) -> None:
    """emu_smoke runs in mode local: the plan swept it in the twin (rows say twin) and wrote
    scenario.resolved.yaml with mode local, which runs the real code when run again."""
    question = question_file(
        tmp_path,
        scenario=str(REPO / "scenarios" / "emu_smoke.yaml"),
        set=[],
        axes={"batch": [1], "bandwidth_mbps": [100]},
        question={"kind": "best_mode"},
    )
    loaded = load_question(question)
    outcome = run_plan(loaded, tmp_path / "out", SerialExecutor(), write_plan_report)
    assert {row.mode for row in outcome.rows} == {"twin"}
    resolved = yaml.safe_load((tmp_path / "out" / "scenario.resolved.yaml").read_text())
    assert resolved["mode"] == "twin"


def test_a_plan_sweeps_without_the_scenario_s_reference(tmp_path: Path) -> None:
    """A plan compares nothing with measured rows: its scenario's reference was neither
    checked (a missing file passed --check) nor used, yet kept in the swept scenario."""
    question = question_file(tmp_path, set=["devices.0.count=4", "reference=missing.csv"])
    assert load_question(question).scenario.reference is None


def test_a_plan_warns_of_a_token_bucket_no_board_bursts_from(tmp_path: Path) -> None:
    """``edgetwin run`` warned that the Jetson has no stack rate to burst at; a plan of the
    same scenario said nothing."""
    question = question_file(
        tmp_path,
        set=["devices.0.count=4", "network.burst_kb=100"],
        axes={"batch": [1], "bandwidth_mbps": [100]},
        question={"kind": "best_mode"},
    )
    outcome = run_plan(
        load_question(question), tmp_path / "out", SerialExecutor(), write_plan_report
    )
    assert any("network.burst_kb is set" in w for w in outcome.warnings), outcome.warnings


def test_the_best_mode_line_gives_each_winner_s_cells_and_values(tmp_path: Path) -> None:
    """It said 'single 1' (the cells a candidate wins), not what it reaches there; then
    'single 2 (81.02 ms)', 'prism cr 4 x2 2': a count that read as devices."""
    question = question_file(
        tmp_path,
        axes={"batch": [1, 32], "bandwidth_mbps": [100, 1000]},
        question={"kind": "best_mode"},
    )
    outcome = run_plan(
        load_question(question), tmp_path / "out", SerialExecutor(), write_plan_report
    )
    grid = outcome.answer["grids"][0]
    line = describe(outcome.answer)[0]
    assert line.startswith("fastest per cell: ")
    for winner in {name for row in grid["best"] for name in row}:
        won = [
            v
            for names, values in zip(grid["best"], grid["best_value"], strict=True)
            for name, v in zip(names, values, strict=True)
            if name == winner
        ]
        low, high = (f"{v:,.0f}" if v >= 1000 else f"{v:.4g}" for v in (min(won), max(won)))
        span = f"{low} ms" if low == high else f"{low}-{high} ms"  # 1,793 ms; 79.82 ms
        cells = "1 cell" if len(won) == 1 else f"{len(won)} cells"
        assert f"{winner}: {cells} ({span})" in line, line


def test_best_mode_answers_the_lowest_energy_per_batch(tmp_path: Path) -> None:
    """A battery's budget: best_mode minimised latency, and energy only per token, a
    decoder's (``metrics: [energy_j]`` exited 2, "unknown metric"): an encoder's lowest
    energy per batch was no question. Its grid is each cell's lowest mean energy_j."""
    question = question_file(
        tmp_path,
        axes={"batch": [4, 16], "bandwidth_mbps": [100, 900], "devices": [2, 4]},
        question={"kind": "best_mode", "metrics": ["total_ms", "energy_j"]},
    )
    loaded = load_question(question)
    outcome = run_plan(loaded, tmp_path / "out", SerialExecutor(), write_plan_report)
    write_results(tmp_path / "direct.csv", direct_rows(loaded))
    direct = read_results(tmp_path / "direct.csv")  # an answer is its table's, to 7 digits
    grid = outcome.answer["grids"][1]
    assert grid["metric"] == "energy_j"
    for b, batch in enumerate((4, 16)):
        for w, bandwidth in enumerate((100, 900)):
            cell = [r for r in direct if (r.batch, r.bandwidth_mbps) == (batch, bandwidth)]
            means = {}
            for row in cell:
                name = f"{row.strategy}" if row.devices == 1 else f"{row.strategy} x{row.devices}"
                means.setdefault((name, row.cr), []).append(row.energy_j)
            (name, _), reps = min(means.items(), key=lambda item: np.mean(item[1]))
            assert grid["best_value"][b][w] == pytest.approx(float(np.mean(reps)), rel=1e-6)
            assert grid["best"][b][w].split(" ")[0] == name.split(" ")[0]
    line = describe(outcome.answer)[1]
    assert line.startswith("lowest energy_j per cell: single: 4 cells (") and line.endswith(" J)")
    heat = best_mode_figures(outcome.answer)[1]
    assert heat.layout.title.text == "Lowest energy per batch (J)"
    assert heat.data[0].hovertemplate.endswith("(%{customdata:,.4~r} J)<extra></extra>")


def test_a_best_mode_cell_where_nothing_ran_says_so(tmp_path: Path) -> None:
    """Every candidate out of memory: the answer printed 'fastest per cell: None 4'."""
    question = question_file(
        tmp_path,
        set=["devices.0.count=4", "devices.0.ram_mb=10"],
        axes={"batch": [1, 32], "bandwidth_mbps": [100, 1000], "devices": [2, 4]},
        question={"kind": "best_mode"},
    )
    loaded = load_question(question)
    outcome = run_plan(loaded, tmp_path / "out", SerialExecutor(), write_plan_report)
    assert outcome.answer["best"] == [[None, None], [None, None]]  # answer.json: null
    assert describe(outcome.answer)[0] == "fastest per cell: none ran: 4 cells"
    assert (tmp_path / "out" / "plan.html").read_text().count("none ran") == 5  # + 4 cells


def test_pool_and_serial_rows_are_identical(tmp_path: Path) -> None:
    loaded = load_question(question_file(tmp_path))
    serial, *_ = sweep_rows(loaded, journal_for(loaded, tmp_path / "s"), SerialExecutor())
    pooled, *_ = sweep_rows(loaded, journal_for(loaded, tmp_path / "p"), PoolExecutor(2))
    assert table_bytes(serial, tmp_path / "s.csv") == table_bytes(pooled, tmp_path / "p.csv")


def test_dask_rows_equal_local_rows(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed")
    from edgetwin.plan.executors import DaskExecutor

    loaded = load_question(question_file(tmp_path))
    serial, *_ = sweep_rows(loaded, journal_for(loaded, tmp_path / "s"), SerialExecutor())
    with (
        distributed.LocalCluster(n_workers=2, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        dask_rows, *_ = sweep_rows(
            loaded, journal_for(loaded, tmp_path / "d"), DaskExecutor(client)
        )
    assert table_bytes(serial, tmp_path / "s.csv") == table_bytes(dask_rows, tmp_path / "d.csv")


def test_tcp_scheduler_through_cli_equals_local_pool(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed")
    question = question_file(tmp_path)
    local, remote = tmp_path / "local", tmp_path / "remote"
    assert main(["plan", str(question), "--out", str(local), "--workers", "2", "--quiet"]) == 0
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tcp://")
        args = ["plan", str(question), "--out", str(remote), "--scheduler", address, "--quiet"]
        assert main(args) == 0
    for name in ("results.csv", "answer.json"):
        assert (remote / name).read_bytes() == (local / name).read_bytes(), name
    assert not (remote / "partial").exists()


def test_input_error_survives_pickling_to_and_from_workers() -> None:
    error = pickle.loads(pickle.dumps(InputError("q.yaml", "axes.batch", "bad")))
    assert isinstance(error, InputError)
    assert (error.path, error.field, error.message) == ("q.yaml", "axes.batch", str(error))


def test_resume_runs_only_missing_configurations(tmp_path: Path) -> None:
    loaded = load_question(question_file(tmp_path))
    whole = run_plan(loaded, tmp_path / "whole", SerialExecutor(), write_plan_report)
    out = tmp_path / "resumed"
    calls = [0]

    def interrupt_midway() -> None:
        calls[0] += 1
        if calls[0] == 7:  # progress counts configurations (all their repetitions)
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_plan(loaded, out, SerialExecutor(), write_plan_report, stepping(interrupt_midway))
    assert not (out / "results.csv").exists()
    rows_path = out / "partial" / "rows.jsonl"
    assert len(rows_path.read_text().splitlines()) == 7
    with rows_path.open("a") as handle:
        handle.write('{"index": 9, "rows": [')  # torn last line: killed mid-write
    resumed = run_plan(loaded, out, PoolExecutor(2), write_plan_report)
    assert resumed.ran_now == whole.configurations - 7
    assert (out / "results.csv").read_bytes() == (tmp_path / "whole" / "results.csv").read_bytes()
    assert (out / "answer.json").read_bytes() == (tmp_path / "whole" / "answer.json").read_bytes()


def test_a_second_plan_into_the_same_folder_is_refused_while_the_first_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both journaled into one folder and interleaved their rows; now the journal is
    held by one plan at a time, and the second neither writes nor removes anything."""
    loaded = load_question(question_file(tmp_path))
    out = tmp_path / "out"
    first = journal_for(loaded, out)  # the plan running now
    before = sorted(p.name for p in (out / "partial").iterdir())
    argv = ["plan", str(tmp_path / "q.plan.yaml"), "--out", str(out), "--quiet", "--workers=1"]
    assert main(argv) == 2
    assert "another plan is writing this folder" in capsys.readouterr().err
    assert sorted(p.name for p in (out / "partial").iterdir()) == before
    first.unlock()  # once it is gone, the folder is resumed
    assert main(argv) == 0 and (out / "results.csv").is_file()


def test_a_forced_plan_into_a_folder_another_plan_writes_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--force staged its sweep beside and replaced the folder the first plan was writing,
    which then wrote its own results over the forced one's (or among them)."""
    loaded = load_question(question_file(tmp_path))
    out = tmp_path / "out"
    first = journal_for(loaded, out)  # the plan running now
    before = sorted(p.name for p in (out / "partial").iterdir())
    argv = ["plan", str(tmp_path / "q.plan.yaml"), "--out", str(out), "--quiet", "--workers=1"]
    assert main([*argv, "--force"]) == 2
    assert "another plan is writing this folder" in capsys.readouterr().err
    assert sorted(p.name for p in (out / "partial").iterdir()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "q.plan.yaml"]  # no staging
    first.unlock()  # once it is gone, --force replaces the folder
    assert main([*argv, "--force"]) == 0 and not (out / "partial").exists()


def test_journal_of_another_sweep_is_refused(tmp_path: Path) -> None:
    loaded = load_question(question_file(tmp_path))
    journal_for(loaded, tmp_path / "out").unlock()
    other = load_question(question_file(tmp_path, set=["devices.0.count=4", "seed=1"]))
    with pytest.raises(InputError, match="different sweep"):
        journal_for(other, tmp_path / "out")


def test_a_profile_edited_between_a_sweep_and_its_rerun_is_another_sweep(tmp_path: Path) -> None:
    """The journal held only the scenario: a rerun after the profile file changed resumed,
    and results.csv mixed rows of the old profile with rows of the new one."""
    profile = tmp_path / "board.yaml"
    profile.write_text((PROFILE_DIR / "jetson_orin_nano.yaml").read_text())
    question = question_file(tmp_path, set=["devices.0.count=4", f"devices.0.profile={profile}"])
    journal_for(load_question(question), tmp_path / "out").unlock()
    journal_for(load_question(question), tmp_path / "out").unlock()  # unchanged: the same
    raw = yaml.safe_load(profile.read_text())
    raw["compute"]["throughput_gflops"] /= 10
    profile.write_text(yaml.safe_dump(raw))
    with pytest.raises(InputError, match="different sweep"):
        journal_for(load_question(question), tmp_path / "out")


def test_a_journal_other_code_wrote_is_refused(tmp_path: Path) -> None:
    """The journal's fingerprint held the sweep only: a rerun after edgetwin's code changed
    (an update, an edit) resumed, and results.csv mixed rows of the old code with the
    new's. The journal now holds the code's digest too; a journal written before that
    holds none, and counts as other code's."""
    loaded, out = load_question(question_file(tmp_path)), tmp_path / "out"
    journal_for(loaded, out).unlock()
    journal_for(loaded, out).unlock()  # the same code: it resumes
    marker = out / "partial" / "sweep.json"
    marked = json.loads(marker.read_text())
    assert marked["code"] == code_digest()
    for code in ("0" * 64, None):  # another digest; none (a journal of before)
        marker.write_text(json.dumps({"fingerprint": marked["fingerprint"], "code": code}))
        with pytest.raises(InputError, match="other edgetwin code ran"):
            journal_for(loaded, out)


def _interrupted_plan(tmp_path: Path) -> tuple[list[str], Path]:
    """A plan stopped after 3 configurations: the command that resumes it, and its folder."""
    question, out = question_file(tmp_path), tmp_path / "out"
    calls = [0]

    def stop_at_the_third() -> None:
        calls[0] += 1
        if calls[0] == 3:  # progress counts configurations
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        steps = stepping(stop_at_the_third)
        run_plan(load_question(question), out, SerialExecutor(), write_plan_report, steps)
    return ["plan", str(question), "--out", str(out), "--quiet", "--workers=1"], out


def test_a_journal_without_its_sweep_mark_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With partial/sweep.json gone, another sweep (here, 50 ms more latency) resumed the
    journal: it said '3 resumed' and its results held the first sweep's rows."""
    argv, out = _interrupted_plan(tmp_path)
    (out / "partial" / "sweep.json").unlink()
    other = ["--set", "set=[devices.0.count=4, repetitions=5, noise_cv=0.1, network.latency_ms=50]"]
    assert main([*argv, *other]) == 2
    err = capsys.readouterr().err
    assert f"{out / 'partial'}: holds finished configurations but no sweep.json" in err, err
    assert sorted(p.name for p in out.iterdir()) == ["partial"]


def _edit_first_journal_row(out: Path, **values: object) -> None:
    """Set ``values`` in the first row of the first line of ``out``'s journal."""
    rows_path = out / "partial" / "rows.jsonl"
    first, *rest = rows_path.read_text().splitlines(keepends=True)
    record = json.loads(first)
    record["rows"][0].update(values)
    rows_path.write_text(json.dumps(record) + "\n" + "".join(rest))


@pytest.mark.parametrize("compute_ms", [-81.1, float("nan"), "abc"])
def test_a_journal_line_whose_row_is_not_valid_runs_again(
    tmp_path: Path, compute_ms: object
) -> None:
    """The row went into results.csv, which the command then refused naming its own line 2,
    leaving results.csv, question.resolved.yaml and scenario.resolved.yaml behind: every
    rerun failed, and so did edgetwin report. The line is now not a journal line."""
    whole = tmp_path / "whole"
    whole.mkdir()
    whole_argv = ["plan", str(question_file(whole)), "--out", str(whole / "out")]
    assert main([*whole_argv, "--quiet", "--workers=1"]) == 0
    argv, out = _interrupted_plan(tmp_path)
    _edit_first_journal_row(out, compute_ms=compute_ms)
    assert main(argv) == 0
    for name in ("results.csv", "answer.json"):
        assert (out / name).read_bytes() == (whole / "out" / name).read_bytes()
    assert main(["report", str(out)]) == 0


def test_journal_rows_of_another_configuration_are_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An edited key went into results.csv, which was then refused naming its own line 2,
    with results.csv and the resolved question and scenario left in the folder."""
    argv, out = _interrupted_plan(tmp_path)
    _edit_first_journal_row(out, batch=16)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{out / 'partial' / 'rows.jsonl'}: not the rows of this sweep: row 1 is " in err, err
    assert sorted(p.name for p in out.iterdir()) == ["partial"]


@pytest.mark.parametrize("name", ["rows.jsonl", "lock"])
def test_a_folder_in_place_of_a_journal_file_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """A folder for partial/rows.jsonl was a crash (exit 1, 'Is a directory'); for
    partial/lock the error named --out ('cannot create the output folder'), not the lock."""
    argv, out = _interrupted_plan(tmp_path)
    path = out / "partial" / name
    path.unlink()
    path.mkdir()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{path}: cannot be used as the plan's journal: Is a directory" in err, err
    assert sorted(p.name for p in out.iterdir()) == ["partial"]


def test_the_modules_digest_changes_with_a_module_s_bytes_or_name(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("A = 1\n")
    (package / "sub" / "b.py").write_text("B = 2\n")
    (package / "notes.txt").write_text("not code")
    digests = [modules_digest(package)]
    (package / "notes.txt").write_text("still not code")
    digests.append(modules_digest(package))
    (package / "a.py").write_text("A = 3\n")
    digests.append(modules_digest(package))
    (package / "sub" / "b.py").rename(package / "sub" / "c.py")
    digests.append(modules_digest(package))
    assert digests[0] == digests[1]  # only Python modules count
    assert len(set(digests[1:])) == 3


def test_a_sweep_stopped_before_any_configuration_leaves_no_folder(tmp_path: Path) -> None:
    """A scheduler that could not be reached left a new DIR holding an empty journal; one
    stopped after a configuration finished keeps it for the rerun."""
    from edgetwin.plan.sweep import payload_for, run_chunk
    from edgetwin.workbench.planning import plan_folder

    loaded = load_question(question_file(tmp_path))
    for finished, kept in ((0, False), (1, True)):
        out = tmp_path / f"out{finished}"
        with pytest.raises(KeyboardInterrupt), plan_folder(out, force=False) as folder:
            journal = journal_for(loaded, folder)
            if finished:
                journal.append(run_chunk(payload_for(loaded), [0])[0])
            journal.close()
            raise KeyboardInterrupt
        assert out.exists() == kept


def _forever() -> None:
    time.sleep(3600)


def test_a_stopped_pool_does_not_wait_for_the_chunks_it_runs() -> None:
    """After ``stop_workers`` the pool's shutdown returns although a task would run for
    an hour (without it, this test runs into its time limit)."""
    pool = ProcessPoolExecutor(max_workers=1)
    future = pool.submit(_forever)
    while not future.running():
        time.sleep(0.01)
    stop_workers(pool)
    pool.shutdown(wait=True)
    assert isinstance(future.exception(), BrokenProcessPool)


def _stopped_when_journaled(argv: list[str], journals: Path) -> tuple[int, str]:
    """``edgetwin plan`` stopped by SIGTERM once a journal under ``journals`` holds a finished
    configuration: its exit status and stderr."""
    command = [sys.executable, "-m", "edgetwin", "plan", *argv, "--workers", "1", "--quiet"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    start = time.monotonic()
    while not any(p.stat().st_size for p in journals.glob("**/partial/rows.jsonl")):
        assert proc.poll() is None and time.monotonic() < start + 60, "nothing was journaled"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


@pytest.mark.timeout(180)
def test_a_stopped_plan_says_what_it_kept_for_a_rerun(tmp_path: Path) -> None:
    """A stopped --force run said 'finished configurations are kept for a rerun' while it
    keeps no journal (its staging folder goes, the old folder stays as it was)."""
    question = REPO / "scenarios" / "plan_crowd_capacity.plan.yaml"
    out = tmp_path / "out"
    code, err = _stopped_when_journaled([str(question), "--out", str(out)], tmp_path)
    assert code == 128 + signal.SIGTERM and f"kept in {out / 'partial'} for a rerun" in err, err
    (out / "partial").rename(tmp_path / "journal")  # out: a finished plan's, say
    (out / "answer.json").write_text("{}\n")
    (out / "provenance.json").write_text("{}\n")
    code, err = _stopped_when_journaled([str(question), "--out", str(out), "--force"], tmp_path)
    assert code == 128 + signal.SIGTERM and "interrupted; no output was published" in err, err
    assert "kept" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["journal", "out"]
    assert sorted(p.name for p in out.iterdir()) == ["answer.json", "provenance.json"]


def _ignores_ctrl_c(pid: int) -> bool:
    """Whether process ``pid`` ignores SIGINT (its SigIgn mask in /proc)."""
    status = Path(f"/proc/{pid}/status").read_text()
    ignored = next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:"))
    return bool(int(ignored, 16) >> (signal.SIGINT - 1) & 1)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):  # gone meanwhile
            after_name = stat_file.read_text().rsplit(")", 1)[1].split()
            if int(after_name[1]) == pid:
                found.append(int(stat_file.parent.name))
    return found


@pytest.mark.timeout(120)
def test_ctrl_c_at_a_terminal_stops_a_pooled_plan_in_one_line(tmp_path: Path) -> None:
    """A terminal sends Ctrl-C to every process of the command: a pool worker waiting for
    its next chunk printed 'Process ForkProcess-1:' and a traceback of its queue. The
    workers now leave Ctrl-C to the plan, which stops them; once two of the three units
    are journaled, one worker runs the last and the other waits."""
    question = REPO / "scenarios" / "plan_crowd_capacity.plan.yaml"
    out = tmp_path / "out"
    command = [sys.executable, "-m", "edgetwin", "plan", str(question), "--out", str(out)]
    command += ["--workers", "2", "--quiet", "--set", "axes.fleet_size=[8]"]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=ctrl_c_reaches,
    )
    rows = out / "partial" / "rows.jsonl"
    while not (rows.is_file() and rows.read_text().count("\n") >= 2):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    workers = _children(proc.pid)
    ignoring = [pid for pid in workers if _ignores_ctrl_c(pid)]
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert workers and ignoring == workers, (workers, ignoring)
    assert proc.returncode == 130, err
    assert err.count("\n") == 1 and "interrupted; no output was published" in err, err
