"""``edgetwin report`` on a plan's folder: the answer and the page again from the folder's
own table and the question as swept (``question.resolved.yaml``), the same bytes as
``plan`` wrote; an edited table answered as edited, or refused naming its first line
that is not the sweep's; the plan's figures as static files."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

import edgetwin
from edgetwin.cli import main
from edgetwin.plan.answer_text import describe
from edgetwin.plan.folder import QUESTION_FILE, swept_question, write_swept_question
from edgetwin.plan.question_file import load_question
from edgetwin.plan.sweep import payload_for
from edgetwin.reports.plan import plan_figures
from tests.conftest import REPO

SCENARIOS = REPO / "scenarios"
PLAN_FILES = ("answer.json", "plan.html")
# small sweeps of the shipped questions, every kind of answer among them
SMALL = {
    "plan_fleet": ["axes.bandwidth_mbps=[200, 600]", "axes.devices=[2, 4]"],
    "plan_crossover": ["axes.batch=[8]", "axes.bandwidth_mbps=[100, 900]"],
    "plan_llm": ["axes.batch=[1]", "axes.bandwidth_mbps=[400]", "axes.devices=[2]"],
    "plan_crowd_capacity": [
        "axes.fleet_size=[3, 5]",
        "set=[repetitions=2, crowd.horizon_s=1800]",
    ],
}


def _plan(tmp_path: Path, name: str) -> Path:
    out = tmp_path / name
    sets = [a for item in SMALL[name] for a in ("--set", item)]
    argv = ["plan", str(SCENARIOS / f"{name}.plan.yaml"), "--out", str(out), "--quiet", *sets]
    assert main([*argv, "--workers", "1"]) == 0
    return out


def _written(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in PLAN_FILES}


def _rewrite_table(table: Path, edit: object) -> None:
    """``table`` with ``edit(rows)`` applied to its rows (dicts), header kept."""
    with table.open(newline="") as handle:
        reader = csv.DictReader(handle)
        columns, rows = reader.fieldnames, list(reader)
    assert columns is not None
    rows = edit(rows)  # type: ignore[operator]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    table.write_text(buffer.getvalue())


@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", list(SMALL))
def test_report_answers_a_plan_folder_again_with_the_bytes_plan_wrote(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _plan(tmp_path, name)
    before = _written(out)
    for path in (out / n for n in PLAN_FILES):
        path.unlink()
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {out / 'answer.json'} and {out / 'plan.html'}\n"
    assert _written(out) == before
    assert not (out / "report.html").exists()  # a plan's page, not a run's


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", [p.name for p in sorted(SCENARIOS.glob("*.plan.yaml"))])
def test_the_question_as_swept_sweeps_the_same_scenario(tmp_path: Path, name: str) -> None:
    """The folder's question, loaded from the folder, is the sweep the plan ran (its
    payload, which fixes every row): so the folder is answered as the plan answered it."""
    loaded = load_question(SCENARIOS / name)
    write_swept_question(loaded, tmp_path)
    again = swept_question(tmp_path)
    assert again.question == loaded.question.model_copy(
        update={"scenario": "scenario.resolved.yaml", "set": ()}
    )
    assert payload_for(again).identity == payload_for(loaded).identity


@pytest.mark.timeout(120)
def test_the_question_as_swept_runs_the_same_sweep_again(tmp_path: Path) -> None:
    """A plan's folder is enough to run its sweep again: ``edgetwin plan`` on its
    ``question.resolved.yaml`` writes the same table, answer and page."""
    out = _plan(tmp_path, "plan_crossover")
    again = tmp_path / "again"
    argv = ["plan", str(out / QUESTION_FILE), "--out", str(again), "--quiet", "--workers", "1"]
    assert main(argv) == 0
    for name in ("results.csv", *PLAN_FILES, QUESTION_FILE):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name


@pytest.mark.timeout(120)
def test_an_edited_table_is_answered_as_edited(tmp_path: Path) -> None:
    out = _plan(tmp_path, "plan_fleet")
    answer = json.loads((out / "answer.json").read_text())
    slowest = max(answer["per_batch"][0]["p95_ms"][0])

    def slower(rows: list[dict[str, str]]) -> list[dict[str, str]]:
        for row in rows:
            if row["devices"] == "2":
                row["total_ms"] = str(10 * slowest)
        return rows

    _rewrite_table(out / "results.csv", slower)
    outcome = edgetwin.report(out)
    assert outcome.answer == out / "answer.json" and outcome.page == out / "plan.html"
    edited = json.loads((out / "answer.json").read_text())
    assert edited["per_batch"][0]["p95_ms"][0] == pytest.approx([10 * slowest] * 2, rel=1e-6)
    assert edited["per_batch"][0]["smallest_fleet"] != 2


@pytest.mark.timeout(120)
def test_a_fleet_folder_swept_before_the_question_ran_one_device_still_reports(
    tmp_path: Path,
) -> None:
    """A smallest_fleet folder from before the question ran single beside its strategy: its
    table has no single rows. Refused as not the sweep, it is answered as swept then: the
    answer's fields as they were, without one device's."""
    out = _plan(tmp_path, "plan_fleet")
    new = json.loads((out / "answer.json").read_text())
    _rewrite_table(out / "results.csv", lambda rows: [r for r in rows if r["strategy"] != "single"])
    resolved = out / "scenario.resolved.yaml"
    scenario = yaml.safe_load(resolved.read_text())
    scenario["strategies"] = [s for s in scenario["strategies"] if s["name"] != "single"]
    resolved.write_text(yaml.safe_dump(scenario))  # as the old plan wrote it
    for path in (out / n for n in PLAN_FILES):
        path.unlink()
    assert main(["report", str(out)]) == 0
    old = json.loads((out / "answer.json").read_text())
    assert old == new | {"per_batch": [_without_baseline(e) for e in new["per_batch"]]}
    line = describe(old)[0]
    assert line.startswith("batch 16, p95 <= 600 ms with prism cr 9.9: ")
    assert "one device" not in line and "one device" not in (out / "plan.html").read_text()


def _without_baseline(entry: dict[str, object]) -> dict[str, object]:
    return {key: value for key, value in entry.items() if key != "baseline"}


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "name, edit, expect",
    [
        ("plan_fleet", lambda rows: rows[:3] + rows[4:], "line 5 is strategy single"),
        ("plan_fleet", lambda rows: rows[:-1], "119 rows where the sweep has 120"),
        ("plan_fleet", lambda rows: [*rows, rows[0]], "121 rows where the sweep has 120"),
        (
            "plan_crowd_capacity",
            lambda rows: [r for r in rows if (r["devices"], r["rep"]) != ("3", "1")],
            "devices 5, bandwidth_mbps 50, rep 0; the sweep has strategy crowdio_streaming, "
            "scheduler affinity, devices 3, bandwidth_mbps 50, rep 1 there",
        ),
    ],
    ids=["row-missing", "last-row-missing", "row-added", "crowd-run-missing"],
)
def test_a_table_that_is_not_the_sweep_is_refused_naming_the_line(
    tmp_path: Path, name: str, edit: object, expect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _plan(tmp_path, name)
    before = _written(out)
    table = out / "results.csv"
    _rewrite_table(table, edit)
    capsys.readouterr()
    assert main(["report", str(out)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"edgetwin: error: {table}: not the sweep of {QUESTION_FILE}: ")
    assert expect in error and len(error.splitlines()) == 1
    assert _written(out) == before  # nothing written


@pytest.mark.timeout(120)
def test_a_plan_folder_without_its_question_or_unfinished_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _plan(tmp_path, "plan_crossover")
    (out / QUESTION_FILE).unlink()
    capsys.readouterr()
    assert main(["report", str(out)]) == 2
    error = capsys.readouterr().err
    assert f"{out / QUESTION_FILE}: file not found" in error and "edgetwin plan" in error
    unfinished = tmp_path / "unfinished"
    (unfinished / "partial").mkdir(parents=True)
    assert main(["report", str(unfinished)]) == 2
    assert "unfinished sweep" in capsys.readouterr().err


@pytest.mark.timeout(180)
def test_a_plans_figure_names_are_distinct_but_for_their_number(tmp_path: Path) -> None:
    """plan_llm's heatmaps for prompt 128 and 2048 were ``01_lowest_time_to_first_token_ms``
    and ``03_lowest_time_to_first_token_ms``, its two Pareto fronts alike: a name came from
    the title's first line only. Names are the page's ids and its static files'."""
    out = _plan(tmp_path, "plan_llm")
    ids = re.findall(r'<div id="figure-([^"]*)"', (out / "plan.html").read_text())
    assert ids == [
        "01_lowest_time_to_first_token_ms_prompt_128",
        "02_lowest_time_per_output_token_ms_prompt_128",
        "03_lowest_time_to_first_token_ms_prompt_2048",
        "04_lowest_time_per_output_token_ms_prompt_2048",
        "05_pareto_front_latency_per_batch_against_energy_per_sample_prompt_128",
        "06_pareto_front_latency_per_batch_against_energy_per_sample_prompt_2048",
        "07_longest_prompt_that_fits",
    ]


@pytest.mark.browser
@pytest.mark.timeout(240)
def test_report_static_svg_of_a_plan_writes_its_figures(tmp_path: Path) -> None:
    if shutil.which("chromium") is None:
        pytest.skip("chromium is not installed (CI installs it)")
    out = _plan(tmp_path, "plan_llm")
    assert main(["report", str(out), "--static", "svg"]) == 0
    files = sorted((out / "figures").glob("*.svg"))
    answer = json.loads((out / "answer.json").read_text())
    titles = [fig.layout.title.text.split("<br>")[0] for fig in plan_figures(answer)]
    assert len(files) == len(titles) == (out / "plan.html").read_text().count("plotly-graph-div")
    for path, title in zip(files, titles, strict=True):
        root = ET.parse(path).getroot()
        assert title in "".join(root.itertext())
