"""The report of a crowd run: latency per mode and per-phone timelines, in a real browser."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import fmean
from typing import Any

import pytest

from edgetwin import run
from edgetwin.cli import main
from edgetwin.reports.crowd import (
    battery_figure,
    gantt_figure,
    job_breakdown_figure,
    latency_distribution_figure,
    ram_figure,
    read_timeline,
)
from tests.conftest import REPO
from tests.test_report import _probe
from tests.test_report_figures import _figure_specs

SCENARIO = REPO / "scenarios/crowdio_android.yaml"


def test_crowd_report_draws_latency_gantt_ram_and_battery(tmp_path: Path) -> None:
    out = tmp_path / "crowd"
    assert (
        main(
            [
                "run",
                str(SCENARIO),
                "--out",
                str(out),
                "--trace",
                "--quiet",
                "--set",
                "repetitions=2",
            ]
        )
        == 0
    )
    timeline = json.loads((out / "timeline.json").read_text())
    assert {"activities", "ram", "battery"} <= timeline.keys()
    page = (out / "report.html").read_text()
    for title in (
        "Pipeline latency per mode",
        "Where a job",
        "What each phone did",
        "Session memory per phone",
        "Battery per phone",
    ):
        assert title in page
    # which run the timelines are: the page shows two modes, --trace records the first
    titles = [figure["layout"]["title"]["text"] for figure in _figure_specs(page)]
    assert "What each phone did (first run: streaming / affinity, 300 Mbit/s)" in titles
    probe = _probe(out / "report.html", tmp_path)
    assert probe == {"graphs": 5, "rendered": 5, "errors": []}


def test_a_timeline_keys_its_ram_samples_by_what_they_hold_and_reads_older_ones(
    tmp_path: Path,
) -> None:
    """A RAM sample holds the phone's session RAM (what ``peak_session_mb`` is the largest
    of), but was keyed ``rss_mb`` and drawn on an "RSS (MB)" axis, a process's measure. A
    file written before reads as it did."""
    out = tmp_path / "crowd"
    assert main(["run", str(SCENARIO), "--out", str(out), "--trace", "--quiet"]) == 0
    text = (out / "timeline.json").read_text()
    samples = json.loads(text)["ram"]
    assert samples and all(set(s) == {"phone", "t_s", "session_mb"} for s in samples)
    peak = max(s["session_mb"] for s in samples)
    assert peak == max(p["peak_session_mb"] for p in json.loads(text)["phones"])
    records = read_timeline(out / "timeline.json")
    older = tmp_path / "older.json"
    older.write_text(text.replace('"session_mb"', '"rss_mb"'))
    assert '"rss_mb"' in older.read_text() and read_timeline(older) == records
    figure = ram_figure(records)
    assert figure is not None and figure.layout.yaxis.title.text == "Session memory (MB)"
    assert figure.layout.title.text.startswith("Session memory per phone (first run")


def test_crowd_report_without_trace_has_the_latency_figure(tmp_path: Path) -> None:
    out = tmp_path / "crowd"
    assert main(["run", str(SCENARIO), "--out", str(out), "--quiet"]) == 0
    page = (out / "report.html").read_text()
    assert "Pipeline latency per mode" in page and "What each phone did" not in page
    assert "Where a job" in page  # the rows' breakdown needs no trace


def test_a_crowd_run_whose_jobs_never_finish_says_why_it_draws_no_latency(
    tmp_path: Path,
) -> None:
    """Every job cut off by the horizon: the page drew the timelines alone, without a word
    on the job figures it left out."""
    out = tmp_path / "cut"
    cut = ["--set", "crowd.horizon_s=5", "--set", "crowd.drain_s=0"]
    assert main(["run", str(SCENARIO), "--out", str(out), "--trace", "--quiet", *cut]) == 0
    page = (out / "report.html").read_text()
    assert "No successful rows to plot." in page
    assert "20 (0 ok, 20 failed: not finished by horizon_s + drain_s 20)" in page
    assert "Pipeline latency per mode" not in page and "What each phone did" in page


def test_a_job_s_time_is_broken_down_into_parts_that_sum_to_its_mean() -> None:
    rows = run(SCENARIO).rows
    figure = job_breakdown_figure(rows)
    assert figure is not None
    parts = [bar.name for bar in figure.data]
    assert parts == ["model load", "compute", "communication", "waiting"]
    for at, mode in enumerate(figure.data[0].x):
        pipeline = mode.split(" / ")[0]
        jobs = [r for r in rows if r.ok and r.strategy == f"crowdio_{pipeline}"]
        stacked = sum(bar.y[at] for bar in figure.data)
        assert stacked == pytest.approx(fmean(r.total_ms for r in jobs) / 1e3)
        load = fmean(r.load_ms or 0.0 for r in jobs) / 1e3
        assert figure.data[0].y[at] == pytest.approx(load) and load > 0
    # a phone's loads, inferences and transfers in the Gantt have the parts' colours
    spans = [{"phone": "low-0", "kind": kind, "start_s": 0.0, "end_s": 1.0}
             for kind in ("load", "infer", "transfer")]  # fmt: skip
    gantt = gantt_figure({"activities": spans})
    assert gantt is not None
    bars = {bar.name: bar.marker.color for bar in gantt.data}
    parts = {bar.name: bar.marker.color for bar in figure.data}
    same = {"load": "model load", "infer": "compute", "transfer": "communication"}
    assert {kind: parts[part] for kind, part in same.items()} == bars


def test_crowd_latency_figure_keeps_swept_bandwidths_apart() -> None:
    """A crowd twin run of a file that sweeps bandwidth has rows at each; one box per mode
    and bandwidth, not one box mixing them."""
    rows = run(REPO / "scenarios/emu_crowdio.yaml", mode="twin").rows
    figure = latency_distribution_figure(rows)
    assert figure is not None
    assert [box.name for box in figure.data] == [
        "streaming / affinity / 10 Mbit/s",
        "barrier / affinity / 10 Mbit/s",
        "streaming / affinity / 100 Mbit/s",
        "barrier / affinity / 100 Mbit/s",
    ]
    # the x axis names the boxes (a legend said it again); a hover gives seconds
    assert figure.layout.showlegend is False
    assert all(box.hovertemplate.startswith("%{y:.2f} s<extra>") for box in figure.data)


def test_crowd_timelines_hover_with_units() -> None:
    """Hovers gave bare numbers: a bar's duration and start, a sample's time and value."""
    activity = {"phone": "low-0", "kind": "infer", "start_s": 1.0, "end_s": 2.5, "stage": "s1"}
    records = {
        "activities": [activity],
        "ram": [{"phone": "low-0", "t_s": 0.0, "session_mb": 29.5}],
        "battery": [{"phone": "low-0", "t_s": 0.0, "level_pct": 99.9}],
    }
    gantt, ram, battery = gantt_figure(records), ram_figure(records), battery_figure(records)
    assert gantt is not None and ram is not None and battery is not None
    (bar,) = gantt.data
    assert list(bar.customdata[0][:2]) == [1.0, 2.5] and " s<br>" in bar.hovertemplate
    assert ram.data[0].hovertemplate.startswith("%{x:.2f} s: %{y:,.4~r} MB")
    assert battery.data[0].hovertemplate.startswith("%{x:.2f} s: %{y:,.4~r} %")


def test_memory_and_battery_lines_last_to_the_end_of_the_run() -> None:
    """A run cut off while its phones loaded sampled each once, at 0 s: the battery figure
    was empty (a line of one point draws nothing) and the memory axis ran from -1 to 1 s."""
    idle = {"kind": "idle", "start_s": 0.0, "end_s": 5.0}
    records: dict[str, list[dict[str, Any]]] = {
        "activities": [{"phone": "low-0", **idle}, {"phone": "low-1", **idle}],
        "ram": [{"phone": "low-0", "t_s": 0.0, "session_mb": v} for v in (0.0, 43.0)],
        "battery": [{"phone": p, "t_s": 0.0, "level_pct": 100.0} for p in ("low-0", "low-1")],
    }
    ram, battery = ram_figure(records), battery_figure(records)
    assert ram is not None and battery is not None
    (memory,) = ram.data
    assert list(memory.x) == [0.0, 0.0, 5.0] and list(memory.y) == [0.0, 43.0, 43.0]
    assert [(list(t.x), list(t.y)) for t in battery.data] == [([0.0, 5.0], [100.0, 100.0])] * 2
    phones = [f"low-{k}" for k in range(11)]  # past ten phones: a mean line per class
    many = {
        "activities": [{"phone": phone, **idle} for phone in phones],
        "ram": [{"phone": phone, "t_s": 1.0, "session_mb": 20.0} for phone in phones],
        "phones": [{"phone": phone, "phone_class": "low"} for phone in phones],
    }
    by_class = ram_figure(many)
    assert by_class is not None and by_class.data[0].x[-1] == 5.0
    assert by_class.data[0].y[-1] == pytest.approx(20.0)


def test_a_large_crowd_draws_its_phones_by_class() -> None:
    """A hundred phones gave a legend of a hundred entries in ten recycled colours, and
    their memory lines (0 to 43 MB and back per task) a solid comb."""
    phones = [("low", k) for k in range(8)] + [("high", k) for k in range(4)]
    records: dict[str, list[dict[str, Any]]] = {
        "ram": [{"phone": f"{c}-{k}", "t_s": 0.0, "session_mb": 30.0 + k} for c, k in phones],
        "battery": [{"phone": f"{c}-{k}", "t_s": 0.0, "level_pct": 90.0} for c, k in phones],
        "phones": [{"phone": f"{c}-{k}", "phone_class": c} for c, k in phones],
    }
    records["ram"].append({"phone": "low-0", "t_s": 5.0, "session_mb": 0.0})  # a session ends
    ram = ram_figure(records)
    assert ram is not None and [t.name for t in ram.data] == ["low (8 phones)", "high (4 phones)"]
    low, high = ram.data
    assert low.y[-1] == pytest.approx((sum(30.0 + k for k in range(8)) - 30.0) / 8)
    assert low.x[-1] == 5.0 and high.y[-1] == pytest.approx(31.5)  # the mean of its phones
    battery = battery_figure(records)
    assert battery is not None and len(battery.data) == len(phones)  # a line per phone
    assert [t.name for t in battery.data if t.showlegend is not False] == ["low", "high"]
    colour_of: dict[str, set[str]] = {}
    for trace in battery.data:
        colour_of.setdefault(trace.legendgroup, set()).add(trace.line.color)
    assert all(len(seen) == 1 for seen in colour_of.values())
    assert colour_of["low"] != colour_of["high"]
    assert battery.layout.yaxis.range == (0, 100)  # not padded below 0 %
    few = ram_figure({**records, "ram": records["ram"][:3]})  # a line and a key per phone
    assert few is not None and [t.name for t in few.data] == ["low-0", "low-1", "low-2"]


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("{", "not a timeline: Expecting property name"),
        ("[]", "the top level must be a mapping of keys to values"),
        ('{"activities": 5}', "field 'activities': should be a list"),
        ('{"activities": [{"phone": "a"}]}', "field 'activities.0.kind': required key is missing"),
        (
            '{"activities": [{"phone": "a", "kind": "nap", "start_s": 0, "end_s": 1}]}',
            "field 'activities.0.kind': 'nap' is not one of load, infer, transfer, idle, away",
        ),
        ('{"ram": [{"phone": "a", "t_s": NaN, "session_mb": 1}]}', "field 'ram.0.t_s'"),
        ('{"ram": [{"phone": "a", "t_s": 0}]}', "field 'ram.0.session_mb': required key"),
        ('{"ram": [{"phone": "a", "t_s": 0, "rss_mb": "x"}]}', "field 'ram.0.session_mb'"),
    ],
    ids=[
        "malformed",
        "list",
        "not-a-list",
        "missing-key",
        "unknown-kind",
        "nan",
        "no-ram",
        "older-ram",
    ],
)
def test_report_names_a_broken_timeline(
    tmp_path: Path, text: str, expect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A broken timeline.json was a traceback (JSONDecodeError, KeyError, TypeError) from
    the figure that met it; now exit 2 naming the file and the field, the report kept."""
    out = tmp_path / "crowd"
    assert main(["run", str(SCENARIO), "--out", str(out), "--quiet", "--set", "repetitions=1"]) == 0
    page = (out / "report.html").read_bytes()
    (out / "timeline.json").write_text(text)
    capsys.readouterr()
    assert main(["report", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"edgetwin: error: {out / 'timeline.json'}: ")
    assert expect in error and len(error.splitlines()) == 1
    assert (out / "report.html").read_bytes() == page
