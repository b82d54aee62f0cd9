"""Provenance and hygiene of output folders: ``provenance.json`` in each, a
``scenario.resolved.yaml`` that re-runs to the same results, and ``--out`` into a
non-empty folder refused, or with ``--force`` replaced whole."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from edgetwin.cli import main
from edgetwin.errors import InputError
from edgetwin.provenance import FIELDS, read_provenance, source_commit
from edgetwin.scenario import load_scenario
from edgetwin.workbench.planning import plan_folder

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "scenarios"
RUNNABLE = sorted(
    p.name for p in SCENARIOS.glob("*.yaml") if not p.name.endswith((".eval.yaml", ".plan.yaml"))
)

TINY = """\
name: tiny
model: {tokens: 65, width: 192, blocks: 4, heads: 3}
devices: [{name: board, profile: profiles/board.yaml, count: 2}]
strategies: [{name: single}, {name: prism, segments: [4]}]
sweeps: [{batch: [1, 2]}]
"""

QUESTION = """\
name: q
scenario: in/tiny.yaml
question: {kind: best_mode}
axes: {batch: [1, 2], bandwidth_mbps: [400], devices: [2]}
"""

CROWD = """\
name: crowd_trace
crowd:
  fleet:
    - {name: low, profile: android_low, count: 1}
    - {name: high, profile: phones/high.yaml, count: 1}
  job:
    inputs: 2
    stages:
      - {name: cell_a, size_mb: 10, ram_mb: 8, gflops: 0.5}
      - {name: cell_b, size_mb: 10, ram_mb: 8, gflops: 0.5}
  availability_trace: traces/leave.csv
  horizon_s: 600
strategies: [{name: crowdio_streaming}]
"""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    """A scenario in its own folder, its profile a file beside it (a relative path)."""
    folder = tmp_path / "in"
    (folder / "profiles").mkdir(parents=True)
    profile = (REPO / "edgetwin/calibration/profiles/jetson_orin_nano.yaml").read_text()
    (folder / "profiles" / "board.yaml").write_text(profile)
    (folder / "tiny.yaml").write_text(TINY)
    return folder / "tiny.yaml"


def run(*argv: str) -> None:
    assert main([*argv, "--quiet"] if argv[0] in ("run", "plan") else list(argv)) == 0


@pytest.mark.timeout(60)
def test_run_records_version_commit_command_seed_and_input_hashes(
    tiny: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    run("run", str(tiny), "--out", str(out), "--seed", "7")
    record = read_provenance(out)
    assert read_provenance(str(out)) == record  # a str was a TypeError (the README's use)
    assert record is not None and list(record) == list(FIELDS)
    assert record["command"] == [
        "edgetwin",
        "run",
        str(tiny),
        "--out",
        str(out),
        "--seed",
        "7",
        "--quiet",
    ]
    assert record["seed"] == 7
    profile = tiny.parent / "profiles" / "board.yaml"
    assert record["inputs"] == {str(tiny): sha256(tiny), str(profile.resolve()): sha256(profile)}
    assert record["created_utc"].endswith("Z")
    assert record["edgetwin_version"] and record["edgetwin_version"] != "unknown"
    commit, dirty = source_commit()
    assert (record["git_commit"], record["git_dirty"]) == (commit, dirty)
    tree = Path(__file__).resolve().parents[1]
    if (tree / ".git").exists():  # run from a checkout: its HEAD
        head = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True
        )
        assert record["git_commit"] == head.stdout.strip()
        assert isinstance(record["git_dirty"], bool)


def test_no_commit_outside_a_checkout_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed package (not a git tree, or a folder inside another repository) has no
    commit of its own."""
    monkeypatch.setattr("edgetwin.provenance.SOURCE_TREE", tmp_path)
    assert source_commit() == (None, None)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    inner = tmp_path / "site-packages"
    inner.mkdir()
    monkeypatch.setattr("edgetwin.provenance.SOURCE_TREE", inner)
    assert source_commit() == (None, None)


def test_read_provenance_of_an_older_folder_and_of_a_bad_file(tmp_path: Path) -> None:
    assert read_provenance(tmp_path) is None
    with pytest.raises(InputError, match="not a folder"):  # a typo is not an older folder
        read_provenance(tmp_path / "typo")
    (tmp_path / "provenance.json").write_text(json.dumps({"edgetwin_version": "0"}))
    with pytest.raises(InputError, match="not a provenance record"):
        read_provenance(tmp_path)
    (tmp_path / "provenance.json").write_text("{")
    with pytest.raises(InputError, match="cannot read"):
        read_provenance(tmp_path)


@pytest.mark.timeout(240)
def test_every_output_folder_records_its_provenance(tiny: Path, tmp_path: Path) -> None:
    evaluation = SCENARIOS / "adaptive_prism.eval.yaml"
    affinity = SCENARIOS / "affinity_small.eval.yaml"
    question = tmp_path / "q.plan.yaml"
    question.write_text(QUESTION)
    a, b = tmp_path / "a", tmp_path / "b"
    run("run", str(tiny), "--out", str(a))
    run("run", str(tiny), "--out", str(b), "--set", "noise_cv=0.1")
    commands = {
        "evaluate": ["evaluate", str(evaluation)],
        "evaluate-affinity": ["evaluate-affinity", str(affinity)],
        "plan": ["plan", str(question), "--workers", "1"],
        "compare": ["compare", str(a), str(b)],
    }
    for name, argv in commands.items():
        out = tmp_path / f"out-{name}"
        run(*argv, "--out", str(out))
        record = read_provenance(out)
        assert record is not None and list(record) == list(FIELDS), name
        assert record["command"][:2] == ["edgetwin", argv[0]], name
        first = Path(argv[1])
        read = first / "results.csv" if first.is_dir() else first
        assert record["inputs"][str(read)] == sha256(read), name
    plan = read_provenance(tmp_path / "out-plan")
    assert plan is not None and plan["seed"] == 0
    assert plan["inputs"][str(tiny.resolve())] == sha256(tiny)


# The three slowest shipped scenarios (8-9 s a run) rerun smaller by default (the
# resolved file then carries the change too); ``-m slow`` reruns them whole.
SMALLER = {
    "adaptive_llm.yaml": "sweeps=[{prompt_tokens: [128], output_tokens: [16], batch: [1, 2]}]",
    "crowd_city.yaml": "crowd.horizon_s=7200",
    "llm_jetson.yaml": "workload.output_tokens=8",  # its whole sweep, 8 tokens not 128
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", RUNNABLE)
def test_resolved_scenario_reruns_to_the_same_results(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every shipped scenario, in the twin (emu and local timings are this machine's, so
    not byte for byte the same twice); the re-run starts in another folder."""
    smaller = ["--set", SMALLER[name]] if name in SMALLER else []
    _rerun_resolved(name, smaller, tmp_path, monkeypatch)


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(SMALLER))
def test_resolved_scenario_reruns_whole_to_the_same_results(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _rerun_resolved(name, [], tmp_path, monkeypatch)


def _rerun_resolved(
    name: str, sets: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, again = tmp_path / "x", tmp_path / "elsewhere" / "y"
    run("run", str(SCENARIOS / name), "--mode", "twin", "--out", str(first), *sets)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    run("run", str(first / "scenario.resolved.yaml"), "--out", "y")
    assert (again / "results.csv").read_bytes() == (first / "results.csv").read_bytes()
    assert (again / "scenario.resolved.yaml").read_bytes() == (
        first / "scenario.resolved.yaml"
    ).read_bytes()


@pytest.mark.timeout(60)
def test_resolved_scenario_names_every_file_by_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Profile files, phone profiles, an availability trace: absolute in the resolved
    scenario; shipped profile names stay names."""
    folder = tmp_path / "in"
    for sub in ("phones", "traces"):
        (folder / sub).mkdir(parents=True)
    phone = (REPO / "edgetwin/calibration/profiles/android_high.yaml").read_text()
    (folder / "phones" / "high.yaml").write_text(phone)
    (folder / "traces" / "leave.csv").write_text("device,t_leave_s,t_return_s\nlow-0,100,200\n")
    (folder / "crowd.yaml").write_text(CROWD.replace("name: low,", "name: low-0,"))
    first = tmp_path / "x"
    monkeypatch.chdir(folder)
    run("run", "crowd.yaml", "--out", str(first))
    resolved = load_scenario(first / "scenario.resolved.yaml")
    assert resolved.crowd is not None
    profiles = [c.profile for c in resolved.crowd.fleet]
    assert profiles == ["android_low", str(folder / "phones" / "high.yaml")]
    assert resolved.crowd.availability_trace == str(folder / "traces" / "leave.csv")
    monkeypatch.chdir(tmp_path)
    run("run", str(first / "scenario.resolved.yaml"), "--out", "y")
    assert (tmp_path / "y/results.csv").read_bytes() == (first / "results.csv").read_bytes()
    record = read_provenance(first)
    assert record is not None
    assert record["inputs"][str(folder / "traces" / "leave.csv")] == sha256(
        folder / "traces" / "leave.csv"
    )


def _stale_folder(out: Path) -> dict[str, str]:
    """A folder an earlier run left: results, a trace and its provenance record."""
    out.mkdir(parents=True)
    files = {"results.csv": "scenario,old\n", "trace.json": "[]\n", "provenance.json": "{}\n"}
    for name, text in files.items():
        (out / name).write_text(text)
    return files


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", ["run", "evaluate", "evaluate-affinity", "plan", "compare"])
def test_non_empty_out_is_refused_without_force(
    command: str, tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = {
        "run": ["run", str(tiny)],
        "evaluate": ["evaluate", str(SCENARIOS / "adaptive_prism.eval.yaml")],
        "evaluate-affinity": ["evaluate-affinity", str(SCENARIOS / "affinity_small.eval.yaml")],
        "plan": ["plan", str(SCENARIOS / "plan_fleet.plan.yaml"), "--workers", "1"],
        "compare": ["compare", str(tmp_path / "a"), str(tmp_path / "a")],
    }[command]
    if command == "compare":
        run("run", str(tiny), "--out", str(tmp_path / "a"))
    out = tmp_path / "out"
    files = _stale_folder(out)
    capsys.readouterr()
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--force" in err[0] and str(out) in err[0], err
    assert {p.name: p.read_text() for p in out.iterdir()} == files
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.timeout(120)
def test_force_replaces_the_folder_whole(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    _stale_folder(out)
    run("run", str(tiny), "--out", str(out), "--force")
    names = {
        "results.csv",
        "scenario.resolved.yaml",
        "devices.yaml",
        "report.html",
        "provenance.json",
    }
    assert {p.name for p in out.iterdir()} == names
    assert (out / "results.csv").read_text().startswith("scenario,mode,strategy,")
    question = tmp_path / "q.plan.yaml"
    question.write_text(QUESTION)
    run("plan", str(question), "--out", str(out), "--force", "--workers", "1")
    assert "trace.json" not in {p.name for p in out.iterdir()}
    assert (out / "answer.json").is_file() and read_provenance(out) is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "out", "q.plan.yaml"]


def test_a_forced_plan_that_fails_leaves_the_old_folder(tmp_path: Path) -> None:
    out = tmp_path / "out"
    files = _stale_folder(out)
    with pytest.raises(RuntimeError), plan_folder(out, force=True) as folder:
        assert folder != out
        (folder / "results.csv").write_text("half\n")
        raise RuntimeError("the sweep failed")
    assert {p.name: p.read_text() for p in out.iterdir()} == files
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_plan_resumes_into_its_own_unfinished_folder(tmp_path: Path) -> None:
    """An unfinished sweep's journal (``partial/``) is resumed, not refused."""
    out = tmp_path / "out"
    (out / "partial").mkdir(parents=True)
    with plan_folder(out, force=False) as folder:
        assert folder == out
    (out / "notes.txt").write_text("mine\n")
    (out / "partial").rmdir()
    with pytest.raises(InputError, match="--force"), plan_folder(out, force=False):
        pass


def test_demo_script_replaces_its_own_output() -> None:
    """scripts/demo.sh may run twice: its run passes --force."""
    demo = (REPO / "scripts" / "demo.sh").read_text()
    line = next(x for x in demo.splitlines() if "edgetwin run" in x)
    assert "--out out/prism_jetson" in line and "--force" in line.split()


@pytest.mark.timeout(60)
def test_validate_records_every_trace_it_read(tmp_path: Path) -> None:
    spec = REPO / "edgetwin/calibration/specs/h200_loopback.yaml"
    out = tmp_path / "v"
    run("validate", str(spec), "--out", str(out))
    record = read_provenance(out)
    assert record is not None
    traces = (REPO / "data/traces/h200-loopback-2026-11").resolve()
    read = sorted(Path(p).name for p in record["inputs"] if Path(p).parent == traces)
    assert "vit_latency.csv" in read and "gloo_staged_allgather.csv" in read
    assert record["inputs"][str(spec)] == sha256(spec)
    for path, digest in record["inputs"].items():
        assert sha256(Path(path)) == digest, path
