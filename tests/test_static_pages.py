"""``--static FORMAT`` on every command that writes a page: ``evaluate``,
``evaluate-affinity``, ``validate`` and ``compare`` write each figure of their page into
``--out``'s ``figures`` folder, drawn by headless Chromium, and ``run`` and ``plan`` the
files ``report --static`` draws from their folder; a figure the browser cannot draw is a
clean failure, not a missing file."""

from __future__ import annotations

import os
import shutil
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import plotly.graph_objects as go
import pytest

import edgetwin
from edgetwin.cli import main
from edgetwin.errors import InputError, RunFailed
from edgetwin.reports.static import DEADLINE_ENV, export_deadline_s, write_figures
from tests.conftest import REPO

SCENARIOS = REPO / "scenarios"
JETSON_SPEC = REPO / "edgetwin" / "calibration" / "specs" / "jetson_orin_nano.yaml"


def _needs_chromium() -> None:
    if shutil.which("chromium") is None:
        pytest.skip("chromium is not installed (CI installs it)")


def _compare_argv(tmp_path: Path) -> list[str]:
    runs = []
    for seed in (1, 2):
        run = tmp_path / f"run{seed}"
        scenario = str(SCENARIOS / "prism_jetson.yaml")
        argv = ["run", scenario, "--seed", str(seed), "--out", str(run), "--quiet"]
        assert main(argv) == 0
        runs.append(str(run))
    return ["compare", *runs]


COMMANDS = {
    "evaluate": (["evaluate", str(SCENARIOS / "adaptive_prism.eval.yaml"), "--quiet"], 3),
    "evaluate-affinity": (
        ["evaluate-affinity", str(SCENARIOS / "affinity_small.eval.yaml"), "--quiet"],
        1,
    ),
    "validate": (["validate", str(JETSON_SPEC)], 1),
}


@pytest.mark.browser
@pytest.mark.timeout(240)
@pytest.mark.parametrize("command", [*COMMANDS, "compare"])
def test_a_page_s_figures_are_written_as_static_files(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _needs_chromium()
    if command == "compare":
        argv, figures = _compare_argv(tmp_path), 1
    else:
        argv, figures = COMMANDS[command]
    out = tmp_path / "out"
    assert main([*argv, "--out", str(out), "--static", "svg"]) == 0
    files = sorted((out / "figures").glob("*.svg"))
    page_path = next(out.glob("*.html"))
    page = page_path.read_text(encoding="utf-8")
    assert len(files) == figures == page.count('class="plotly-graph-div"')
    for path in files:  # named as the page's figure it is (its div id)
        assert f'<div id="figure-{path.stem}" class="plotly-graph-div"' in page, path
        root = ET.parse(path).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg" and "".join(root.itertext())
    # report redraws runs and plans: on this folder it names the command that wrote it
    # (it said 'results.csv: file not found')
    capsys.readouterr()
    assert main(["report", str(out)]) == 2
    error = capsys.readouterr().err
    assert f"{out}: holds {page_path.name}, which edgetwin {command} writes" in error
    assert "run it again with --static (static= in Python)" in error


@pytest.mark.browser
@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "argv",
    [
        ["run", str(SCENARIOS / "llm_smoke.yaml"), "--quiet"],
        ["plan", str(SCENARIOS / "plan_fleet.plan.yaml"), "--set", "axes.devices=[2]", "--quiet"],
    ],
    ids=["run", "plan"],
)
def test_run_and_plan_write_the_figures_report_writes(tmp_path: Path, argv: list[str]) -> None:
    """``run --static`` and ``plan --static`` write the files ``report --static`` writes
    from their folder, byte for byte."""
    _needs_chromium()
    out = tmp_path / "out"
    assert main([*argv, "--out", str(out), "--static", "svg"]) == 0
    written = {p.name: p.read_bytes() for p in (out / "figures").iterdir()}
    assert (
        len(written)
        == (out / f"{argv[0]}.html".replace("run.", "report."))
        .read_text(encoding="utf-8")
        .count('class="plotly-graph-div"')
        >= 1
    )
    shutil.rmtree(out / "figures")
    assert main(["report", str(out), "--static", "svg"]) == 0
    assert {p.name: p.read_bytes() for p in (out / "figures").iterdir()} == written


@pytest.mark.timeout(180)
def test_an_export_in_another_format_keeps_the_first(tmp_path: Path) -> None:
    """``report --static svg`` then ``--static pdf`` left the PDFs alone (the folder was
    replaced whole), and a file of the user's in figures/ went with the SVGs."""
    _needs_chromium()
    out = tmp_path / "out"
    argv = ["run", str(SCENARIOS / "llm_smoke.yaml"), "--quiet", "--out", str(out)]
    assert main([*argv, "--static", "svg"]) == 0
    figures = out / "figures"
    svgs = {p.name: p.read_bytes() for p in figures.iterdir()}
    (figures / "notes.txt").write_text("mine\n")
    (figures / "99_gone.svg").write_text("<svg/>")  # an SVG the page no longer draws
    assert main(["report", str(out), "--static", "pdf"]) == 0
    kept = {p.name: p.read_bytes() for p in figures.iterdir() if p.suffix != ".pdf"}
    assert kept == {**svgs, "notes.txt": b"mine\n", "99_gone.svg": b"<svg/>"}
    assert len(list(figures.glob("*.pdf"))) == len(svgs)
    assert main(["report", str(out), "--static", "svg"]) == 0  # the SVGs are replaced
    assert not (figures / "99_gone.svg").exists() and (figures / "notes.txt").is_file()


def test_static_figures_need_an_output_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``compare`` writes nothing without ``--out``: its figures would have no folder."""
    argv = _compare_argv(tmp_path)
    capsys.readouterr()
    assert main([*argv, "--static", "svg"]) == 2
    error = capsys.readouterr().err
    assert "--static (static= in Python)" in error and "output folder" in error
    with pytest.raises(InputError, match="output folder"):
        edgetwin.compare(argv[1], argv[2], static="svg")
    with pytest.raises(InputError, match="one of svg, pdf, png"):
        edgetwin.compare(argv[1], argv[2], out=tmp_path / "cmp", static="jpeg")
    assert not (tmp_path / "cmp").exists()


@pytest.mark.browser
@pytest.mark.timeout(120)
def test_a_figure_the_browser_cannot_draw_is_a_clean_failure(tmp_path: Path) -> None:
    """A map needs its topojson from the plotly CDN, which an offline Chromium cannot
    fetch: kaleido reports the error and writes no file, which used to surface as a
    FileNotFoundError from reading the file back."""
    _needs_chromium()
    figures = [
        go.Figure(go.Scatter(x=[1, 2], y=[3, 4])),
        go.Figure(go.Scattergeo(lon=[0], lat=[0])),
    ]
    with pytest.raises(RunFailed, match=r"did not draw 02_figure\.svg: .*topojson"):
        write_figures(figures, tmp_path, "svg")


@pytest.mark.browser
@pytest.mark.timeout(120)
def test_the_tab_is_reloaded_between_figures_not_after_the_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kaleido reloads its tab after each figure, so that the next is drawn on a clean
    page; after the last one the reload only held the browser open (0.2-0.9 s)."""
    _needs_chromium()
    from kaleido._kaleido_tab._tab import _KaleidoTab

    reloads = []
    reload = _KaleidoTab.reload

    async def counted_reload(tab: _KaleidoTab) -> None:
        reloads.append(tab)
        await reload(tab)

    monkeypatch.setattr(_KaleidoTab, "reload", counted_reload)
    figures = [go.Figure(go.Scatter(x=[1, 2], y=[k, 4])) for k in range(3)]
    assert len(write_figures(figures, tmp_path, "svg")) == 3
    assert len(reloads) == 2


def _processes_with(marker: str) -> list[tuple[int, bytes]]:
    """The live processes whose environment holds ``marker`` (Chromium inherits it), with
    their command lines."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker.encode() in (entry / "environ").read_bytes():
                found.append((int(entry.name), (entry / "cmdline").read_bytes()))
        except OSError:  # gone, or another user's
            continue
    return [(pid, command) for pid, command in found if pid != os.getpid()]


CRASH_HANDLER = b"chrome_crashpad_handler"
CRASH_HANDLER_EXIT_S = 10.0  # generous: it exits about 0.1 s after its browser


def _assert_browser_stopped(marker: str) -> None:
    """Every process of the browser with ``marker`` is gone at once (killed), but Chromium's
    crash handlers: they start in a session of their own, out of the killed process group,
    and exit as their browser is gone, which they get ``CRASH_HANDLER_EXIT_S`` to do."""
    assert [pid for pid, command in _processes_with(marker) if CRASH_HANDLER not in command] == []
    gives_up_at = time.monotonic() + CRASH_HANDLER_EXIT_S
    while _processes_with(marker) and time.monotonic() < gives_up_at:
        time.sleep(0.05)
    assert _processes_with(marker) == []


@pytest.mark.browser
@pytest.mark.timeout(60)
def test_an_export_past_its_deadline_stops_its_browser(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An export that could take many minutes on a loaded machine (two tries, 90 s a
    figure) has one deadline: past it every browser process is killed and the export is a
    RunFailed naming the limit and how to set it (a deadline of 1 ms always passes). Killed
    as it starts, the browser draws nothing (a browser let run draws every figure before
    its session ends, and its processes end with it)."""
    _needs_chromium()
    marker = f"EDGETWIN_TEST_EXPORT={uuid.uuid4().hex}"
    monkeypatch.setenv(*marker.split("="))
    figures = [go.Figure(go.Scatter(x=[1, 2], y=[3, k])) for k in range(3)]
    with pytest.raises(RunFailed, match=r"not drawn within 0\.001 s \(3 figures; "):
        write_figures(figures, tmp_path, "svg", deadline_s=0.001)
    _assert_browser_stopped(marker)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv(DEADLINE_ENV, "0.001")
    with pytest.raises(RunFailed, match=rf"{DEADLINE_ENV} sets the limit"):
        write_figures(figures, tmp_path, "svg")
    _assert_browser_stopped(marker)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv(DEADLINE_ENV, "soon")
    with pytest.raises(InputError, match=rf"{DEADLINE_ENV} \(environment\).*not 'soon'"):
        write_figures(figures, tmp_path, "svg")


def test_the_default_deadline_grows_with_the_figures_up_to_a_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(DEADLINE_ENV, raising=False)
    assert export_deadline_s(1) < export_deadline_s(7) < export_deadline_s(1000)
    assert export_deadline_s(1000) == export_deadline_s(2000)


def _hidden(folder: Path) -> list[str]:
    """What an export or a publish left behind in ``folder``: its hidden entries."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.mark.browser
@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("argv", "page"),
    [
        (
            # real_warmups 3: a warning (a twin run does not play it)
            ["run", str(SCENARIOS / "prism_jetson.yaml"), "--set", "real_warmups=3", "--quiet"],
            "report.html",
        ),
        (
            [
                "plan",
                str(SCENARIOS / "plan_fleet.plan.yaml"),
                "--set",
                "axes.devices=[2]",
                "--workers",
                "1",
                "--quiet",
            ],
            "plan.html",
        ),
    ],
    ids=["run", "plan"],
)
def test_a_failed_export_publishes_the_folder_without_figures(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    page: str,
) -> None:
    """An export past its deadline (1 ms, a real Chromium stopped) cost the command its
    whole folder (a 20-minute emulator run, a plan): now the folder is published without
    ``figures/``, and the command fails (exit 1) saying so and how to draw them later. A
    forced run over an earlier folder leaves none of that folder's figures beside the new
    results. The command first says what it would have said (run's warnings and summary
    line, plan's answer): it said only the error."""
    _needs_chromium()
    out = tmp_path / "out"
    capsys.readouterr()
    assert main([*argv, "--out", str(out)]) == 0
    drawn = capsys.readouterr()
    assert drawn.out and (argv[0] == "plan" or drawn.err.startswith("edgetwin: warning: "))
    (out / "figures").mkdir()
    (out / "figures" / "01_old.png").write_bytes(b"an earlier run's")
    monkeypatch.setenv(DEADLINE_ENV, "0.001")
    assert main([*argv, "--out", str(out), "--force", "--static", "png"]) == 1
    failed = capsys.readouterr()
    assert failed.out == drawn.out
    assert failed.err.startswith(drawn.err)
    (error,) = failed.err.removeprefix(drawn.err).splitlines()
    assert error.startswith("edgetwin: error: ")
    assert "static figures: not drawn within 0.001 s" in error
    assert f"({'5 figures' if argv[0] == 'run' else '1 figure'}; {DEADLINE_ENV}" in error
    assert f"{out} was written without figures/" in error
    assert f"edgetwin report {out} --static png" in error
    assert (out / "results.csv").is_file() and (out / page).is_file()
    assert (out / "provenance.json").is_file()
    assert not (out / "figures").exists()
    assert _hidden(out) == [] and _hidden(tmp_path) == []
    monkeypatch.delenv(DEADLINE_ENV)  # what the message says draws them
    assert main(["report", str(out), "--static", "png"]) == 0
    drawn = (out / page).read_text(encoding="utf-8").count('class="plotly-graph-div"')
    assert len(list((out / "figures").glob("*.png"))) == drawn >= 1


@pytest.mark.browser
@pytest.mark.timeout(120)
def test_a_failed_export_raises_in_python_after_publishing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In Python too the folder is published, then the export's failure raised (an
    ``edgetwin.FiguresNotDrawn``, a RunFailed whose ``folder`` is the output folder); for a
    page ``report`` cannot redraw (compare's) it says to run the command again."""
    _needs_chromium()
    argv = _compare_argv(tmp_path)
    monkeypatch.setenv(DEADLINE_ENV, "0.001")
    out = tmp_path / "api"
    with pytest.raises(edgetwin.FiguresNotDrawn, match=r"not drawn within 0\.001 s") as raised:
        edgetwin.run(SCENARIOS / "prism_jetson.yaml", out=out, static="svg")
    assert isinstance(raised.value, RunFailed) and raised.value.folder == out
    assert f"{out} was written without figures/" in str(raised.value)
    assert len(edgetwin.load_results(out).rows) == 65
    ran = raised.value.result  # what the call would have returned, its folder's
    assert isinstance(ran, edgetwin.Results) and len(ran.rows) == 65
    assert ran.provenance == edgetwin.load_results(out).provenance
    assert not (out / "figures").exists()
    out = tmp_path / "comparison"
    with pytest.raises(edgetwin.FiguresNotDrawn) as raised:
        edgetwin.compare(argv[1], argv[2], out=out, static="svg")
    message = str(raised.value)
    assert f"{out} was written without figures/" in message
    assert isinstance(raised.value.result, edgetwin.Comparison)
    assert raised.value.result.describe() == edgetwin.compare(argv[1], argv[2]).describe()
    assert "edgetwin report cannot draw them" in message
    assert "run edgetwin compare again with --force (force=True in Python)" in message
    assert (out / "comparison.csv").is_file() and (out / "comparison.html").is_file()
    assert not (out / "figures").exists()


def _png_size_px(path: Path) -> tuple[int, int]:
    """A PNG's width and height in pixels, from its IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _pdf_width_pt(path: Path) -> float:
    """A one-page PDF's width in points, from its MediaBox."""
    import re

    found = re.search(rb"/MediaBox\s*\[\s*0\s+0\s+([0-9.]+)\s+([0-9.]+)\s*\]", path.read_bytes())
    assert found is not None, path
    return float(found.group(1))


@pytest.mark.browser
@pytest.mark.timeout(240)
def test_report_draws_static_figures_a_paper_s_column_wide(tmp_path: Path) -> None:
    """A paper's figure is a column (3.5 in) or a page (7 in) wide; every static figure was
    1000 px, and scaling it down shrank its text. ``--width`` lays it out at the width:
    an SVG that many CSS pixels (96 an inch), a PDF that many points (72 an inch), a PNG at
    300 dpi, a narrow one with its legend under the plot."""
    _needs_chromium()
    out = tmp_path / "run"
    assert main(["run", str(SCENARIOS / "llm_smoke.yaml"), "--out", str(out), "--quiet"]) == 0
    assert main(["report", str(out), "--static", "svg", "--width", "3.5in"]) == 0
    svgs = sorted((out / "figures").glob("*.svg"))
    assert svgs
    for path in svgs:
        root = ET.parse(path).getroot()
        assert root.get("width") == "336"  # 3.5 x 96
        legend = root.find(".//{http://www.w3.org/2000/svg}g[@class='legend']")
        assert legend is not None  # under the plot, from its left edge (not beside it)
        x, y = (float(v) for v in str(legend.get("transform"))[10:-1].split(","))
        assert x < 100 and y > float(str(root.get("height"))) / 2
    assert main(["report", str(out), "--static", "pdf", "--width", "7in"]) == 0
    for path in sorted((out / "figures").glob("*.pdf")):
        assert _pdf_width_pt(path) == pytest.approx(7 * 72, abs=1)
    written = edgetwin.report(out, static="png", width="3.5in")
    assert written.figures
    for path in written.figures:
        assert _png_size_px(path)[0] == 3.5 * 300
    # the default is the width it was: 1000 px, the same bytes as without the option
    default = {p.name: p.read_bytes() for p in edgetwin.report(out, static="svg").figures}
    again = edgetwin.report(out, static="svg", width="1000px").figures
    assert {p.name: p.read_bytes() for p in again} == default
    assert all(ET.parse(p).getroot().get("width") == "1000" for p in again)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--width", "3.5in"], "sets the width of static figures: give --static (static="),
        (["--static", "svg", "--width", "3.5"], "a width with its unit"),
        (["--static", "svg", "--width", "0.5in"], "'0.5in' is 48 px wide; a figure is 150"),
    ],
)
def test_a_bad_width_is_named_before_anything_is_written(
    tmp_path: Path, args: list[str], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(["run", str(SCENARIOS / "llm_smoke.yaml"), "--out", str(out), "--quiet"]) == 0
    page = (out / "report.html").stat().st_mtime_ns
    capsys.readouterr()
    assert main(["report", str(out), *args]) == 2
    error = capsys.readouterr().err
    assert "field '--width (width= in Python)': " in error and problem in error, error
    assert (out / "report.html").stat().st_mtime_ns == page and not (out / "figures").exists()


@pytest.mark.browser
@pytest.mark.timeout(300)
def test_every_command_with_static_takes_a_width(tmp_path: Path) -> None:
    """``--width`` on ``report`` only left the pages ``report`` cannot redraw (evaluate,
    validate, compare ...) at 1000 px: every command that writes ``--static`` figures takes
    it, ``run``'s files those ``report`` writes at the width."""
    _needs_chromium()
    out = tmp_path / "run"
    run = ["run", str(SCENARIOS / "llm_smoke.yaml"), "--out", str(out), "--quiet"]
    assert main([*run, "--static", "svg", "--width", "3.5in"]) == 0
    written = {p.name: p.read_bytes() for p in (out / "figures").iterdir()}
    assert written and all(b'width="336"' in svg[:400] for svg in written.values())
    shutil.rmtree(out / "figures")
    assert main(["report", str(out), "--static", "svg", "--width", "3.5in"]) == 0
    assert {p.name: p.read_bytes() for p in (out / "figures").iterdir()} == written
    checked = edgetwin.validate(JETSON_SPEC, out=tmp_path / "validation", static="pdf", width="7in")
    assert checked is not None
    (pdf,) = (tmp_path / "validation" / "figures").glob("*.pdf")
    assert _pdf_width_pt(pdf) == pytest.approx(7 * 72, abs=1)


@pytest.mark.timeout(60)
def test_a_width_without_static_figures_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    run = ["run", str(SCENARIOS / "llm_smoke.yaml"), "--out", str(out), "--quiet"]
    assert main([*run, "--width", "7in"]) == 2
    error = capsys.readouterr().err
    assert "field '--width (width= in Python)': sets the width of static figures" in error
    assert not out.exists()


@pytest.mark.browser
@pytest.mark.timeout(120)
def test_a_failed_export_at_a_width_names_it_in_what_to_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command a failed export suggests draws the figures at the width asked for."""
    _needs_chromium()
    out = tmp_path / "out"
    monkeypatch.setenv(DEADLINE_ENV, "0.001")
    run = ["run", str(SCENARIOS / "llm_smoke.yaml"), "--out", str(out), "--quiet"]
    assert main([*run, "--static", "svg", "--width", "3.5in"]) == 1
    error = capsys.readouterr().err
    assert f"draw them with edgetwin report {out} --static svg --width 3.5in (" in error
    assert "edgetwin.report(folder, static='svg', width='3.5in') in Python" in error
