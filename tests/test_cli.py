"""``edgetwin run`` and ``edgetwin report`` end to end on a tiny scenario."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

from edgetwin.cli import main
from edgetwin.profile import PROFILE_DIR
from edgetwin.scenario import load_scenario

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"

OUTPUTS = (
    "results.csv",
    "scenario.resolved.yaml",
    "devices.yaml",
    "report.html",
    "provenance.json",
)

TINY = """\
name: tiny
model:
  preset: vit_b16
devices:
  - name: jetson
    profile: jetson_orin_nano
    count: 2
network:
  bandwidth_mbps: 400
strategies:
  - name: single
  - name: voltage
  - name: prism
    cr: 9.9
sweeps:
  - batch: [1, 2]
"""


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return path


def run(scenario: Path, out: Path, *args: str) -> None:
    """``edgetwin run`` in-process; it must succeed."""
    code = main(["run", str(scenario), "--out", str(out), "--quiet", *args])
    assert code == 0


def rows(out: Path) -> list[dict[str, str]]:
    with (out / "results.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_run_writes_results_scenario_and_report(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["run", str(tiny), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "6 runs (0 failed)" in captured.out
    assert "Traceback" not in captured.err
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUTS)
    (summary,) = [line for line in captured.out.splitlines() if "runs (0 failed)" in line]
    assert all(name in summary for name in OUTPUTS)  # it names what it wrote
    table = rows(out)
    got = {(r["strategy"], r["devices"], r["batch"], r["cr"]) for r in table}
    assert got == {
        ("single", "1", "1", ""),
        ("single", "1", "2", ""),
        ("voltage", "2", "1", ""),
        ("voltage", "2", "2", ""),
        ("prism", "2", "1", "9.85"),  # CR 9.9 asked: 10 segments, 197 / (10 x 2) used
        ("prism", "2", "2", "9.85"),
    }
    assert all(r["status"] == "ok" and r["scenario"] == "tiny" for r in table)
    assert all(float(r["total_ms"]) > 0 and r["bandwidth_mbps"] == "400" for r in table)
    report = (out / "report.html").read_text()
    assert report.lstrip().lower().startswith("<!doctype html")
    assert "tiny" in report
    # no staging folder or temp file left beside the output folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "tiny.yaml"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("sets", "summary"),
    [
        (["crowd.horizon_s=600"], "20 jobs in 1 run (0 failed)"),
        (
            ["crowd.horizon_s=60", "crowd.drain_s=0"],
            "2 jobs in 1 run (2 failed: not finished by horizon_s + drain_s 2)",
        ),
        (
            ["crowd.horizon_s=60", "crowd.drain_s=0", "crowd.schedulers=[affinity, random]"],
            "4 jobs in 2 runs (4 failed: not finished by horizon_s + drain_s 4)",
        ),
    ],
    ids=["finished", "unfinished", "two-runs"],
)
def test_a_crowd_runs_summary_counts_its_jobs_and_its_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sets: list[str], summary: str
) -> None:
    """A crowd scenario's rows are its jobs: the summary said "20 runs (0 failed)" after
    the progress "crowd crowd_city: 1/1"."""
    options = [arg for item in sets for arg in ("--set", item)]
    scenario = str(SCENARIOS / "crowd_city.yaml")
    assert main(["run", scenario, "--quiet", "--out", str(tmp_path / "out"), *options]) == 0
    assert f"{summary} -> " in capsys.readouterr().out


@pytest.mark.timeout(60)
def test_a_summary_of_thousands_of_jobs_separates_their_thousands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job a second for 1,100 s on five phones, most unfinished: every count of the
    summary is written as a reader reads it (it said "1100 jobs in 1 run (1071 failed: not
    finished by horizon_s + drain_s 1071)")."""
    sets = ["repetitions=1", "strategies=[{name: crowdio_streaming}]", "crowd.horizon_s=1100"]
    sets += ["crowd.drain_s=0", "crowd.job.interarrival={kind: constant, value_s: 1}"]
    options = [arg for item in sets for arg in ("--set", item)]
    scenario = str(SCENARIOS / "crowdio_android.yaml")
    assert main(["run", scenario, "--quiet", "--out", str(tmp_path / "out"), *options]) == 0
    summary = capsys.readouterr().out
    failed = re.search(r"^1,100 jobs in 1 run \(([0-9,]+) failed: [^)]* ([0-9,]+)\) -> ", summary)
    assert failed is not None, summary
    assert failed.group(1) == failed.group(2) and re.fullmatch(r"1,[0-9]{3}", failed.group(1))


def test_run_as_a_subprocess(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "edgetwin", "run", str(tiny), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert all((out / name).is_file() for name in OUTPUTS)


@pytest.mark.timeout(120)
def test_a_reader_that_leaves_ends_the_command_quietly(tiny: Path, tmp_path: Path) -> None:
    """``edgetwin run ... | head -0``: the summary line hit a closed pipe after the folder
    was published, a BrokenPipeError traceback and exit 1; now the exit a command that
    SIGPIPE ends has (141), without a word."""
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "edgetwin", "run", str(tiny), "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and "Exception ignored" not in err
    assert all((out / name).is_file() for name in OUTPUTS)


@pytest.mark.timeout(120)
def test_a_path_an_ascii_output_cannot_print_is_escaped(tiny: Path, tmp_path: Path) -> None:
    """The summary's folder name in a locale that cannot encode it was a
    UnicodeEncodeError traceback, exit 1, after the folder was published."""
    out = tmp_path / "ü out"
    argv = [sys.executable, "-m", "edgetwin", "run", str(tiny), "--out", str(out), "--quiet"]
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    proc = subprocess.run(argv, capture_output=True, timeout=120, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert b"\\xfc out" in proc.stdout


@pytest.mark.timeout(120)
def test_a_full_disk_is_one_line(tiny: Path, tmp_path: Path) -> None:
    """Output to a full device was an OSError traceback; now one line, exit 1."""
    out = tmp_path / "o"
    argv = [sys.executable, "-m", "edgetwin", "run", str(tiny), "--out", str(out), "--quiet"]
    with open("/dev/full", "w") as full:
        proc = subprocess.run(argv, stdout=full, stderr=subprocess.PIPE, timeout=120, check=False)
    assert proc.returncode == 1
    assert proc.stderr.decode() == "edgetwin: error: No space left on device\n"


@pytest.mark.parametrize("args", [("--set", "seed=3"), ("--seed", "3")], ids=["set", "seed"])
def test_seed_override_is_in_the_resolved_scenario(
    tiny: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    run(tiny, tmp_path / "out", *args)
    resolved = yaml.safe_load((tmp_path / "out" / "scenario.resolved.yaml").read_text())
    assert resolved["seed"] == 3


def test_set_overrides_reach_the_results(tiny: Path, tmp_path: Path) -> None:
    run(tiny, tmp_path / "out", "--set", "network.bandwidth_mbps=200", "--set", "sweeps.0.batch=4")
    table = rows(tmp_path / "out")
    assert {r["bandwidth_mbps"] for r in table} == {"200"}
    assert {r["batch"] for r in table} == {"4"}
    resolved = yaml.safe_load((tmp_path / "out" / "scenario.resolved.yaml").read_text())
    assert resolved["network"]["bandwidth_mbps"] == 200
    assert resolved["sweeps"] == [{"batch": [4], "devices": [2]}]  # no bandwidths: left out


def test_resolved_scenario_reloads_and_reproduces(tiny: Path, tmp_path: Path) -> None:
    first, again, replay = tmp_path / "first", tmp_path / "again", tmp_path / "replay"
    run(tiny, first)
    run(tiny, again)
    resolved = first / "scenario.resolved.yaml"
    assert load_scenario(resolved) == load_scenario(tiny)
    run(resolved, replay)
    results = (first / "results.csv").read_bytes()
    assert (again / "results.csv").read_bytes() == results
    assert (replay / "results.csv").read_bytes() == results
    assert (replay / "scenario.resolved.yaml").read_bytes() == resolved.read_bytes()


def test_noisy_runs_are_reproducible_per_seed(tiny: Path, tmp_path: Path) -> None:
    noisy = ("--set", "noise_cv=0.2", "--set", "repetitions=2")
    run(tiny, tmp_path / "a", *noisy, "--seed", "7")
    run(tiny, tmp_path / "b", *noisy, "--seed", "7")
    run(tiny, tmp_path / "c", *noisy, "--seed", "8")
    a, b, c = ((tmp_path / d / "results.csv").read_bytes() for d in "abc")
    assert a == b
    assert a != c
    table = rows(tmp_path / "a")
    assert len(table) == 12
    assert {r["rep"] for r in table} == {"0", "1"}


def test_trace_has_one_thread_per_device(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(tiny, out, "--trace")
    trace = json.loads((out / "trace.json").read_text())
    events = trace["traceEvents"]
    table = rows(out)
    thread_names: dict[tuple[int, int], str] = {}
    for e in events:
        if e["ph"] == "M" and e["name"] == "thread_name":
            thread_names[(e["pid"], e["tid"])] = e["args"]["name"]
    busy: dict[int, set[int]] = defaultdict(set)
    for e in events:
        if e["ph"] == "X":
            assert e["dur"] >= 0 and e["ts"] >= 0
            assert (e["pid"], e["tid"]) in thread_names
            busy[e["pid"]].add(e["tid"])
    assert sorted(busy) == list(range(len(table)))  # one process per results row
    for pid, row in enumerate(table):
        names = [thread_names[(pid, tid)] for tid in sorted(busy[pid])]
        assert len(names) == int(row["devices"]) == len(set(names))
        assert set(names) <= {"jetson-0", "jetson-1"}
    # without --trace there is no trace
    run(tiny, tmp_path / "plain")
    assert not (tmp_path / "plain" / "trace.json").exists()


def test_report_rewrites_report_html(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run(tiny, out)
    fresh = (out / "report.html").read_bytes()
    results = (out / "results.csv").read_bytes()
    (out / "report.html").write_text("stale")
    assert main(["report", str(out)]) == 0
    rewritten = (out / "report.html").read_bytes()
    assert rewritten != b"stale"
    assert rewritten.lstrip().lower().startswith(b"<!doctype html")
    assert len(rewritten) > len(fresh) // 2
    assert (out / "results.csv").read_bytes() == results


@pytest.mark.parametrize("exists", [True, False], ids=["empty-folder", "no-folder"])
def test_report_without_results_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], exists: bool
) -> None:
    folder = tmp_path / "empty"
    if exists:
        folder.mkdir()
    assert main(["report", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert "results.csv" in err and "file not found" in err
    assert folder.exists() == exists
    if exists:
        assert list(folder.iterdir()) == []


def test_existing_out_dir_is_refused_then_replaced_whole_with_force(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    (out / "results.csv").write_text("stale\n")
    assert main(["run", str(tiny), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--force" in err and str(out) in err
    assert (out / "results.csv").read_text() == "stale\n"
    # --force replaces an edgetwin output only (its provenance record says it is one)
    assert main(["run", str(tiny), "--out", str(out), "--quiet", "--force"]) == 2
    err = capsys.readouterr().err.strip()
    assert "is no edgetwin output (it holds " in err and "no provenance.json" in err, err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "results.csv"]
    (out / "provenance.json").write_text("{}\n")  # an earlier run's, notes added beside
    run(tiny, out, "--force", "--trace")
    assert sorted(p.name for p in out.iterdir()) == sorted([*OUTPUTS, "trace.json"])
    assert (out / "results.csv").read_text().startswith("scenario,")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "tiny.yaml"]
    # a second forced run replaces the folder whole: the earlier trace does not survive
    run(tiny, out, "--force")
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUTS)


def test_out_dir_parents_are_created(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "out"
    run(tiny, out)
    assert all((out / name).is_file() for name in OUTPUTS)


def test_profile_file_is_found_beside_the_scenario(tiny: Path, tmp_path: Path) -> None:
    """A profile given as a path is read relative to the scenario file, not the cwd."""
    folder = tmp_path / "scenarios"
    folder.mkdir()
    (folder / "board.yaml").write_text((PROFILE_DIR / "jetson_orin_nano.yaml").read_text())
    (folder / "s.yaml").write_text(TINY.replace("profile: jetson_orin_nano", "profile: board.yaml"))
    run(folder / "s.yaml", tmp_path / "by_file")
    run(tiny, tmp_path / "by_name")
    by_file = (tmp_path / "by_file" / "results.csv").read_bytes()
    assert by_file == (tmp_path / "by_name" / "results.csv").read_bytes()


def test_failed_configurations_are_reported_not_crashed(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    run(tiny, out, "--set", "devices.0.ram_mb=1")
    assert all((out / name).is_file() for name in OUTPUTS)
    assert all(r["status"].startswith("out of memory") for r in rows(out))
    assert "6 runs (6 failed: out of memory 6) -> " in capsys.readouterr().out


def test_the_summary_says_why_runs_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The last line said "10 runs (10 failed)": nothing of why. Batch 32 does not fit
    400 MB; at batch 1 the tiny battery empties first."""
    sets = ["devices.0.ram_mb=400", "devices.0.battery_wh=0.00001", "sweeps=[{batch: [1, 32]}]"]
    options = [arg for item in sets for arg in ("--set", item)]
    scenario = str(SCENARIOS / "prism_jetson.yaml")
    assert main(["run", scenario, "--quiet", "--out", str(tmp_path / "out"), *options]) == 0
    summary = "10 runs (10 failed: device lost (battery empty) 5, out of memory 5) -> "
    assert summary in capsys.readouterr().out
    page = (tmp_path / "out" / "report.html").read_text()  # it listed every status whole
    assert "<b>Rows:</b> 10 (0 ok, 10 failed: device lost (battery empty) 5, out of" in page


def test_inline_profile_runs_like_the_same_profile_from_a_file(tmp_path: Path) -> None:
    from edgetwin.profile import load_profile

    profile = load_profile("jetson_orin_nano").model_dump(mode="json")
    profile["compute"]["throughput_gflops"] = 300.0
    text = yaml.safe_dump(
        {
            "name": "inline",
            "devices": [{"name": "board", "count": 2, "profile": profile}],
            "strategies": [{"name": "single"}, {"name": "voltage"}],
            "sweeps": [{"batch": [4]}],
        }
    )
    scenario = tmp_path / "inline.yaml"
    scenario.write_text(text)
    (tmp_path / "slow.yaml").write_text(yaml.safe_dump(profile))
    by_file = tmp_path / "by_file.yaml"
    devices = [{"name": "board", "count": 2, "profile": "slow.yaml"}]
    by_file.write_text(yaml.safe_dump({**yaml.safe_load(text), "devices": devices}))
    assert main(["run", str(scenario), "--out", str(tmp_path / "a"), "--quiet"]) == 0
    assert main(["run", str(by_file), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    a = (tmp_path / "a" / "results.csv").read_text().replace("inline", "X")
    b = (tmp_path / "b" / "results.csv").read_text().replace("inline", "X")
    assert a == b


def test_inline_profile_with_a_bad_field_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = {"name": "p", "ram_mb": -1}
    scenario = tmp_path / "bad.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "name": "bad",
                "devices": [{"name": "d", "profile": profile}],
                "strategies": [{"name": "single"}],
            }
        )
    )
    assert main(["run", str(scenario), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "devices.0.profile.ram_mb" in err and "bad.yaml" in err


def test_evaluate_writes_the_policy_scores(tmp_path: Path) -> None:
    evaluation = Path(__file__).resolve().parents[1] / "scenarios/adaptive_prism.eval.yaml"
    out = tmp_path / "adaptive"
    assert main(["evaluate", str(evaluation), "--out", str(out)]) == 0
    result = json.loads((out / "evaluation.json").read_text())
    assert result["decision_accuracy"] >= 0.95 and result["mean_regret_pct"] < 2.0
    assert (out / "performance_map.json").is_file() and (out / "evaluation.html").is_file()
    assert (
        main(["evaluate", str(evaluation), "--out", str(tmp_path / "x"), "--set", "objective=fast"])
        == 2
    )
    assert not (tmp_path / "x").exists()


def test_plan_subcommand_reports_bad_input(tmp_path: Path) -> None:
    assert main(["plan", str(tmp_path / "missing.plan.yaml"), "--out", str(tmp_path / "p")]) == 2
    assert not (tmp_path / "p").exists()


def test_compare_joins_two_runs_point_by_point(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(tiny, tmp_path / "a")
    run(tiny, tmp_path / "b", "--set", "noise_cv=0.1")
    capsys.readouterr()
    assert (
        main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "c")])
        == 0
    )
    assert "total_ms: median |error|" in capsys.readouterr().out
    lines = (tmp_path / "c" / "comparison.csv").read_text().splitlines()
    assert lines[0] == "configuration,metric,measured,predicted,error_pct" and len(lines) > 6
    assert (tmp_path / "c" / "comparison.html").is_file()
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "nope")]) == 2


def test_compare_counts_and_names_the_rows_of_each_side_left_unmatched(
    tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(tiny, tmp_path / "a")  # batch 1, 2: 3 configurations each
    run(tiny, tmp_path / "b", "--set", "sweeps=[{batch: [2, 4, 8]}]", "--set", "noise_cv=0.1")
    capsys.readouterr()
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert main(["compare", a, b, "--out", str(tmp_path / "ab")]) == 0
    out = capsys.readouterr().out
    assert "total_ms: median |error|" in out and "over 3 points" in out
    assert "6 measured rows with no prediction, 3 predicted rows with no measured row" in out
    page = (tmp_path / "ab" / "comparison.html").read_text()
    assert "Error of the prediction against the measured run" in page
    assert "Error against reference" not in page and "no successful result" not in page
    measured_only = re.search(r"Measured rows with no prediction: ([^<]*)\.</p>", page)
    predicted_only = re.search(r"Predicted rows with no measured row: ([^<]*)\.</p>", page)
    assert measured_only is not None and predicted_only is not None
    assert {"batch 4", "batch 8"} == set(re.findall(r"batch \d+", measured_only[1]))
    assert measured_only[1].count(";") == 5
    assert set(re.findall(r"batch \d+", predicted_only[1])) == {"batch 1"}
    assert main(["compare", b, a]) == 0  # the other way round
    out = capsys.readouterr().out
    assert "3 measured rows with no prediction, 6 predicted rows with no measured row" in out
    assert main(["compare", a, a]) == 0
    assert "no prediction" not in capsys.readouterr().out


@pytest.mark.timeout(120)
def test_compare_keeps_a_crowd_runs_schedulers_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Crowd rows were joined without their scheduler: each point's prediction was the
    mean over every scheduler's rows, so a run compared with itself had errors. Their
    model loads are ``load_ms`` (compared); their ``staging_ms`` is always 0 (not)."""
    scenario = str(SCENARIOS / "emu_crowdio.yaml")
    sets = ["--mode", "twin", "--set", "crowd.schedulers=[affinity, random]"]
    assert main(["run", scenario, "--out", str(tmp_path / "a"), "--quiet", *sets]) == 0
    a = str(tmp_path / "a")
    assert main(["compare", a, a, "--out", str(tmp_path / "c")]) == 0
    assert "warning" not in capsys.readouterr().err
    with (tmp_path / "c" / "comparison.csv").open() as handle:
        points = list(csv.DictReader(handle))
    assert {p["metric"] for p in points} == {
        "total_ms",
        "compute_ms",
        "load_ms",
        "comm_ms",
        "energy_j",
    }
    labels = {p["configuration"] for p in points}
    assert "crowdio_streaming, 3 phones, 5 inputs, 10 Mbit/s, random" in labels
    assert len(labels) == 2 * 2 * 2  # strategies x bandwidths x schedulers
    errors = [float(p["error_pct"]) for p in points if p["error_pct"]]  # one row each
    assert errors and all(abs(error) < 1e-9 for error in errors)


@pytest.mark.timeout(120)
def test_compare_says_when_one_side_runs_a_stream_of_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A twin run with an interarrival has several jobs a run, a real one has one: each
    point averaged a stream of jobs (warm caches, a queue) against one, without a word."""
    scenario = str(SCENARIOS / "emu_crowdio.yaml")
    stream = ["--set", "crowd.job.interarrival={kind: constant, value_s: 5}"]
    one, many = str(tmp_path / "one"), str(tmp_path / "many")
    assert main(["run", scenario, "--mode", "twin", "--out", one, "--quiet"]) == 0
    argv = ["run", scenario, "--mode", "twin", "--out", many, "--quiet", *stream]
    assert main([*argv, "--set", "crowd.horizon_s=20"]) == 0
    capsys.readouterr()
    assert main(["compare", many, one]) == 0
    assert f"{many} has up to 4 jobs a run and {one} 1" in capsys.readouterr().err
    assert main(["compare", one, one]) == 0
    assert "jobs a run" not in capsys.readouterr().err
    assert main(["compare", many, many]) == 0  # each job was a point against their mean
    assert "total_ms: median |error| 0.0 % over 4 points" in capsys.readouterr().out


def test_version_names_the_installed_package(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out.strip() == f"edgetwin {version('edgetwin')}"


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["run", str(SCENARIOS / "prism_jetson.yaml")], "edgetwin run: error: the following"),
        (["plan", str(SCENARIOS / "plan_fleet.plan.yaml")], "arguments are required: --out"),
        (["run", "s.yaml", "--out", "o", "--mode", "emulator"], "invalid choice: 'emulator'"),
        (["runn", "s.yaml"], "invalid choice: 'runn'"),
        (["run", "s.yaml", "--out", "o", "--seed", "1" * 5000], "invalid int value: '111"),
        (  # the shell split the value at its spaces
            ["run", "s.yaml", "--out", "o", "--set", "sweeps=[{batch:", "[1]}]"],
            'unrecognized arguments: [1]}]; a --set value with spaces needs quotes: --set "',
        ),
        (  # --out "$OUT", OUT unset: it said '.: --out is the current folder or holds it'
            ["run", str(SCENARIOS / "prism_jetson.yaml"), "--out", ""],
            "argument --out: an empty path (a shell variable not set?)",
        ),
        (["run", "", "--out", "o"], "argument scenario: an empty path"),  # 'a folder'
        (["plan", " ", "--out", "o"], "argument question: an empty path"),
        (["report", ""], "argument dir: an empty path"),
    ],
)
def test_a_usage_error_is_one_line(
    argv: list[str], expect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing --out printed argparse's usage (three lines for run) before its error."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expect in err and err.endswith("--help)\n"), err
    assert len(err) < 400  # a value of 5,000 digits was quoted whole


@pytest.mark.parametrize(
    ("extra", "expect"),
    [
        (["--sett", "a=1"], "unrecognized arguments: --sett a=1; did you mean --set? (see"),
        (["--forse"], "unrecognized arguments: --forse; did you mean --force? (see"),
        (["--workers", "2"], "unrecognized arguments: --workers 2 (see"),  # plan's, not run's
        (["extra.yaml"], "unrecognized arguments: extra.yaml (see"),
    ],
)
def test_a_misspelt_option_is_named_not_taken_for_a_split_set_value(
    extra: list[str], expect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every unrecognized argument got the hint to quote a --set value (the message's own
    colon matched), '--sett a=1' too; a misspelt option now gets the option it likely means."""
    with pytest.raises(SystemExit) as stopped:
        main(["run", "s.yaml", "--out", "o", *extra])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expect in err and "needs quotes" not in err, err
