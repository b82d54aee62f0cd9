"""The HTML report: comparison numbers, self-containment, and rendering in chromium."""

from __future__ import annotations

import csv
import html
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from edgetwin.comparison import compare_to_reference
from edgetwin.reports import write_report
from edgetwin.reports.figures import bandwidth_figure
from edgetwin.reports.plotly_js import FIGURE_SCRIPT
from edgetwin.reports.rows import average_reps
from edgetwin.result_cells import read_results
from edgetwin.results import ResultRow, write_results

PROBE_ID = "edgetwin-test-probe"
PROBE = """<script>
(function () {
  var errors = [];
  window.addEventListener("error", function (e) {
    errors.push("error: " + (e.message || (e.target && e.target.outerHTML) || String(e)));
  }, true);
  window.addEventListener("unhandledrejection", function (e) {
    errors.push("unhandled rejection: " + String(e.reason));
  });
  var consoleError = console.error;
  console.error = function () {
    errors.push("console.error: " + Array.prototype.map.call(arguments, String).join(" "));
    consoleError.apply(console, arguments);
  };
  function report() {
    var graphs = document.querySelectorAll(".plotly-graph-div");
    var rendered = Array.prototype.filter.call(graphs, function (g) {
      return g.classList.contains("js-plotly-plot") && g.querySelector(".main-svg") !== null;
    });
    var pre = document.getElementById("PROBE_ID");
    if (pre === null) {
      pre = document.createElement("pre");
      pre.id = "PROBE_ID";
      document.body.appendChild(pre);
    }
    pre.textContent = JSON.stringify(
      {graphs: graphs.length, rendered: rendered.length, errors: errors});
  }
  window.addEventListener("load", function () { report(); setTimeout(report, 2000); });
})();
</script>""".replace("PROBE_ID", PROBE_ID)


def _row(
    strategy: str, batch: int, bandwidth_mbps: float, total_ms: float, **kw: object
) -> ResultRow:
    devices = 1 if strategy == "single" else 2
    comm_ms = 0.0 if strategy == "single" else total_ms * 0.2
    staging_ms = 0.0 if strategy == "single" else total_ms * 0.1
    values: dict[str, object] = {
        "scenario": "report-test",
        "mode": "twin",
        "strategy": strategy,
        "devices": devices,
        "batch": batch,
        "bandwidth_mbps": bandwidth_mbps,
        "cr": 9.9 if strategy == "prism" else None,
        "segments": 10 if strategy == "prism" else None,
        "rep": 0,
        "compute_ms": total_ms - comm_ms - staging_ms,
        "staging_ms": staging_ms,
        "comm_ms": comm_ms,
        "total_ms": total_ms,
        "per_sample_ms": total_ms / batch,
        "energy_j": total_ms * 0.006,
    }
    values.update(kw)
    return ResultRow(**values)  # type: ignore[arg-type]


def _results() -> list[ResultRow]:
    rows = [
        # Two reps of single batch 1: mean total 110 ms, compute 110, energy 0.6 J.
        _row("single", 1, 400, 105.0, energy_j=0.5),
        _row("single", 1, 400, 115.0, rep=1, energy_j=0.7),
        # A failed rep that must not count.
        _row("single", 1, 400, 9999.0, rep=2, status="error"),
    ]
    for strategy, scale in (("single", 1.0), ("voltage", 2.0), ("prism", 1.5)):
        for batch in (1, 2, 4):
            if not (strategy == "single" and batch == 1):
                rows.append(_row(strategy, batch, 400, scale * 60.0 * batch**0.8))
            if strategy != "single":
                rows.append(_row(strategy, batch, 100, scale * 90.0 * batch**0.8))
    return rows


REFERENCE_CSV = """\
strategy,devices,batch,bandwidth_mbps,cr,segments,compute_ms,staging_ms,comm_ms,total_ms,energy_j
single,1,1,400,,,100,0.0,0.0,100,0.5
prism,2,2,400,9.9,10,,,,200,
voltage,2,32,400,,,1,1,1,3843,17.67
"""
REFERENCE = list(csv.DictReader(io.StringIO(REFERENCE_CSV)))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("run")
    write_results(path / "results.csv", _results())
    (path / "reference.csv").write_text(REFERENCE_CSV)
    return path


@pytest.fixture(scope="module")
def report(run_dir: Path) -> Path:
    return write_report(run_dir)


def test_comparison_errors_by_hand(run_dir: Path) -> None:
    comparison = compare_to_reference(read_results(run_dir / "results.csv"), REFERENCE)
    found = {(p["key"][0], p["metric"]): p for p in comparison.points}
    total = found[("single", "total_ms")]
    assert (total["measured"], total["predicted"]) == (100.0, 110.0)
    assert total["error_pct"] == pytest.approx(10.0)
    assert found[("single", "energy_j")]["error_pct"] == pytest.approx(20.0)
    assert found[("single", "staging_ms")]["error_pct"] is None  # measured 0
    prism_ms = 1.5 * 60.0 * 2**0.8
    assert found[("prism", "total_ms")]["error_pct"] == pytest.approx((prism_ms / 200 - 1) * 100)
    # Empty reference cells are skipped for that metric only.
    assert ("prism", "compute_ms") not in found and ("prism", "energy_j") not in found
    assert comparison.median_abs_error_pct["total_ms"] == pytest.approx(
        (10.0 + abs(prism_ms / 200 - 1) * 100) / 2
    )
    assert "staging_ms" not in comparison.median_abs_error_pct
    assert [key[:3] for key in comparison.unmatched_keys] == [("voltage", 2, 32)]
    # One key per ok result with no reference row: not the failed rep, not the two matched.
    unmeasured = [key[:4] for key in comparison.unmeasured_keys]
    assert len(unmeasured) == len(_results()) - 1 - 3
    assert ("single", 1, 1, 400) not in unmeasured and ("prism", 2, 2, 400) not in unmeasured
    assert ("voltage", 2, 4, 100) in unmeasured


def test_run_report_keeps_its_reference_wording(report: Path) -> None:
    text = report.read_text(encoding="utf-8")
    assert "<h2>Error against reference</h2>" in text
    assert "Reference rows with no successful result: voltage, 2 dev, batch 32" in text
    assert "measured run" not in text and "Predicted rows" not in text  # compare's wording


def test_a_run_that_meets_no_reference_row_says_so(tmp_path: Path) -> None:
    """A what-if away from every measured configuration showed empty tables and a list of
    'reference rows with no successful result': it read as a failed run."""
    write_results(tmp_path / "results.csv", [r for r in _results() if r.bandwidth_mbps == 100])
    (tmp_path / "reference.csv").write_text(REFERENCE_CSV)
    text = write_report(tmp_path).read_text(encoding="utf-8")
    assert "<h2>Error against reference</h2>" in text
    measured = len(REFERENCE_CSV.strip().splitlines()) - 1
    assert f"No configuration of this run is in the reference table ({measured} measured)" in text
    assert "no successful result" not in text and "Median |error|" not in text


def test_report_is_self_contained(report: Path) -> None:
    assert report == report.parent / "report.html" and report.is_file()
    text = report.read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]*\bsrc\s*=", text, re.IGNORECASE)
    assert text.count("id='plotly-js-gzip'") == 1  # plotly.js once, compressed
    figure_scripts = text.count(f'<script type="{FIGURE_SCRIPT}">')
    assert figure_scripts == text.count("Plotly.newPlot(") == 5
    assert len(text.encode()) < 2_500_000  # plotly.js alone is 4.8 MB uncompressed
    assert text.count('class="plotly-graph-div"') == 5
    assert "report-test" in text and "+10.0" in text
    assert not list(report.parent.glob(".report-*"))


def test_bandwidth_figure_needs_two_bandwidths(run_dir: Path) -> None:
    rows = [r for r in read_results(run_dir / "results.csv") if r.bandwidth_mbps == 400]
    assert bandwidth_figure(average_reps(rows)) is None


def test_report_without_reference(tmp_path: Path) -> None:
    write_results(tmp_path / "results.csv", _results()[:3])
    text = write_report(tmp_path, title="Only <single>").read_text(encoding="utf-8")
    assert "<h1>Only &lt;single&gt;</h1>" in text
    assert "Error against reference" not in text
    assert text.count('class="plotly-graph-div"') == 3  # no bandwidth, no comparison


def test_report_of_empty_run(tmp_path: Path) -> None:
    write_results(tmp_path / "results.csv", [])
    text = write_report(tmp_path).read_text(encoding="utf-8")
    assert "No successful rows to plot." in text and "plotly-graph-div" not in text


def _probe(report: Path, tmp_path: Path, extra_script: str = "") -> dict[str, object]:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed (CI installs it)")
    page = report.read_text(encoding="utf-8").replace("<head>", "<head>" + PROBE, 1)
    page = page.replace("</body>", extra_script + "</body>", 1)
    copy = tmp_path / "probed.html"
    copy.write_text(page, encoding="utf-8")
    profile = tmp_path / "profile"
    profile.mkdir()
    command = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=15000",
        "--dump-dom",
        copy.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    found = re.search(f'<pre id="{PROBE_ID}">(.*?)</pre>', done.stdout, re.DOTALL)
    assert found, f"no probe in the DOM (rc {done.returncode}): {done.stderr[-2000:]}"
    probe: dict[str, object] = json.loads(html.unescape(found.group(1)))
    return probe


def test_report_renders_in_chromium(report: Path, tmp_path: Path) -> None:
    probe = _probe(report, tmp_path)
    assert probe == {"graphs": 5, "rendered": 5, "errors": []}


def test_probe_catches_script_errors(report: Path, tmp_path: Path) -> None:
    probe = _probe(report, tmp_path, '<script>throw new Error("probe self-test");</script>')
    assert probe["rendered"] == 5
    assert probe["errors"] == ["error: Uncaught Error: probe self-test"]


def test_a_failed_measured_row_is_no_measurement(run_dir: Path) -> None:
    """A reference row with every metric empty (its run failed) measured nothing: a
    prediction for it is one with no measurement, and it is no row with no prediction."""
    failed = "strategy,devices,batch,bandwidth_mbps,total_ms\nvoltage,2,4,100,\nvoltage,2,64,400,\n"
    reference = [*REFERENCE, *csv.DictReader(io.StringIO(failed))]
    comparison = compare_to_reference(read_results(run_dir / "results.csv"), reference)
    assert [key[:3] for key in comparison.unmatched_keys] == [("voltage", 2, 32)]
    assert ("voltage", 2, 4, 100) in [key[:4] for key in comparison.unmeasured_keys]
