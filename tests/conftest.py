"""Shared fixtures: tiny hand-checkable profiles and scenarios."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, settings

from edgetwin.evaluate.adaptive_results import Evaluation
from edgetwin.profile import DeviceProfile
from edgetwin.scenario import Scenario

REPO = Path(__file__).resolve().parents[1]
# libyaml's emitter writes what PyYAML's pure-Python one writes (tests/test_loader_fuzz.py
# checks it on every shipped file), ~60x faster on the loader tests' 1 MB values
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
EMULATOR_GROUP = "emulator"


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Parallel runs (``-n``) hand a worker whole test files, so that a module's fixtures
    are built once, and every emulator test to one worker, one after another: they share
    the machine's interfaces, and some leave a killed run's leftovers on purpose for the
    next run to remove (a test on another worker would remove them first)."""
    from xdist.scheduler import LoadFileScheduling

    class FilesAndEmulator(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            return EMULATOR_GROUP if "emu" in Path(file).stem.split("_") else file

    return FilesAndEmulator(config, log)


def loopback_spec_with_exchanges_at_batch_8_only(tmp_path: Path) -> Path:
    """The H200 loopback trace spec on a copy of its traces whose staged exchanges are
    batch 8's alone: leaving batch 8 out leaves staging no record to refit from."""
    traces = tmp_path / "traces"
    shipped = REPO / "data/traces/h200-loopback-2026-11"
    shutil.copytree(shipped, traces)
    exchanges = traces / "gloo_staged_allgather.csv"
    header, *rows = exchanges.read_text().splitlines()
    batch = header.split(",").index("batch")
    exchanges.write_text("\n".join([header, *(r for r in rows if r.split(",")[batch] == "8")]))
    spec = tmp_path / "spec.yaml"
    text = (REPO / "edgetwin/calibration/specs/h200_loopback.yaml").read_text()
    spec.write_text(text.replace("../../../data/traces/h200-loopback-2026-11", str(traces)))
    return spec


def ctrl_c_reaches() -> None:
    """``preexec_fn`` of a command a test stops with Ctrl-C: its SIGINT back to the default.
    A shell starts a background job with SIGINT ignored, and every process under it
    inherits that (the suite run with ``&`` stopped nothing); a terminal's Ctrl-C reaches
    a foreground command, whose SIGINT is the default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def yaml_text(data: Any) -> str:
    """``data`` as YAML, keys in their order (what ``yaml.safe_dump(sort_keys=False)`` gives)."""
    return yaml.dump(data, Dumper=_DUMPER, sort_keys=False)


# Hypothesis's per-example deadline (200 ms) and its too-slow health check are wall-clock
# bounds: on a busy shared machine they fail by chance. Tests bound time with pytest-timeout.
settings.register_profile("edgetwin", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("edgetwin")

# Round numbers: 3840 FLOPs take 1 ms, every copy 0.5 ms, every message 1 ms.
TOY_PROFILE: dict[str, Any] = {
    "name": "toy",
    "ram_mb": 1000,
    "compute": {
        "throughput_gflops": 0.00384,
        "launch_floor_ms": 0.0,
        "sync_host_ms": 0.0,
        "sync_host_ms_per_mb": 0.0,
    },
    "staging": {"fixed_ms": 0.5, "ms_per_mb": 0.0, "size_exponent": 1.0},
    "network": {"message_overhead_ms": 1.0, "bandwidth_efficiency": 1.0},
    "power": {
        "idle_w": 1.0,
        "compute_w": 10.0,
        "host_w": 2.0,
        "staging_w": 3.0,
        "comm_w": 4.0,
    },
}

# Four tokens of width 8, one block, no patch embedding: a block on two
# devices is 3840 FLOPs for voltage (q = 2 rows, kv = 4 rows).
TOY_MODEL: dict[str, Any] = {
    "tokens": 4,
    "width": 8,
    "blocks": 1,
    "heads": 2,
    "patch_size": 0,
    "channels": 0,
    "classes": 2,
}


@pytest.fixture
def toy_profile_path(tmp_path: Path) -> Path:
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(TOY_PROFILE))
    return path


@pytest.fixture
def toy_profile() -> DeviceProfile:
    return DeviceProfile.model_validate(TOY_PROFILE)


def toy_scenario(profile_path: Path, **overrides: Any) -> Scenario:
    """Two toy devices, one block, 512 bits per partition exchanged at 0.512 Mbps (1 ms)."""
    raw: dict[str, Any] = {
        "name": "toy",
        "model": TOY_MODEL,
        "input_source": "replicated",
        "devices": [{"name": "dev", "profile": str(profile_path), "count": 2}],
        "network": {"bandwidth_mbps": 0.512},
        "strategies": [{"name": "voltage"}],
        "sweeps": [{"batch": [1], "devices": [2]}],
    }
    raw.update(overrides)
    return Scenario.model_validate(raw)


def piped_stderr(cwd: Path, *argv: str) -> str:
    """``python -m edgetwin ARGV`` in ``cwd`` with its output piped (no terminal): stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "edgetwin", *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


@dataclass(frozen=True)
class PipedRun:
    """A command run once for the tests that each check a different thing of it: the
    folder it ran in (its output lies there) and its stderr."""

    folder: Path
    stderr: str


def shared_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, run: Callable[[Path], str]
) -> PipedRun:
    """``run`` (in a folder ``name``, returning its stderr) once for the whole session, all
    xdist workers together: the first to get here runs it under a lock; the others wait
    for it and read what it left (a session fixture alone runs once per worker)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder, stderr_file = root / name, root / f"{name}.stderr"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not stderr_file.exists():  # not run yet, or a run that failed left a folder
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            stderr_file.write_text(run(folder))
    return PipedRun(folder, stderr_file.read_text())


@pytest.fixture(scope="session")
def quick_machine_calibration(tmp_path_factory: pytest.TempPathFactory) -> PipedRun:
    """``calibrate-machine --quick --out machine``, piped: its ViT, exchange and decoder
    launches take most of a minute, and one run serves its progress lines and its profile."""
    return shared_run(
        tmp_path_factory,
        "quick_machine",
        lambda folder: piped_stderr(folder, "calibrate-machine", "--quick", "--out", "machine"),
    )


@pytest.fixture(scope="session")
def jetson_table_calibration(tmp_path_factory: pytest.TempPathFactory) -> PipedRun:
    """The Jetson table spec (its paths made absolute) as ``spec.yaml`` and ``calibrate
    spec.yaml --out loud.yaml``, piped: its progress lines and the profile it wrote."""

    def calibrated(folder: Path) -> str:
        specs = REPO / "edgetwin/calibration/specs"
        spec = yaml.safe_load((specs / "jetson_orin_nano.yaml").read_text())
        for field in ("reference", "scenario"):
            spec[field] = str((specs / spec[field]).resolve())
        (folder / "spec.yaml").write_text(yaml.safe_dump(spec))
        return piped_stderr(folder, "calibrate", "spec.yaml", "--out", "loud.yaml")

    return shared_run(tmp_path_factory, "jetson_table", calibrated)


@pytest.fixture(scope="session")
def jetson_table_validation(
    tmp_path_factory: pytest.TempPathFactory, jetson_table_calibration: PipedRun
) -> PipedRun:
    """``validate spec.yaml --out held_out`` of the Jetson table spec, piped: its refit lines
    and the validation files it wrote."""
    spec = str(jetson_table_calibration.folder / "spec.yaml")
    return shared_run(
        tmp_path_factory,
        "jetson_table_validation",
        lambda folder: piped_stderr(folder, "validate", spec, "--out", "held_out"),
    )


@pytest.fixture(scope="session")
def netns_bandwidth_validation(tmp_path_factory: pytest.TempPathFactory) -> PipedRun:
    """``validate`` of the shaped-link trace spec (h200_netns) ``--by bandwidth --out v``,
    piped: its refits (a network fit a bandwidth) take most of half a minute, and one run
    serves its coverage and its points' labels."""
    argv = ("validate", str(REPO / "edgetwin/calibration/specs/h200_netns.yaml"))
    return shared_run(
        tmp_path_factory,
        "netns_bandwidth_validation",
        lambda folder: piped_stderr(folder, *argv, "--by", "bandwidth", "--out", "v"),
    )


@dataclass(frozen=True)
class SavedEvaluation:
    """An evaluation and the folder ``evaluate --out`` wrote for it."""

    folder: Path
    evaluation: Evaluation


@pytest.fixture(scope="session")
def adaptive_devices_evaluation(tmp_path_factory: pytest.TempPathFactory) -> SavedEvaluation:
    """``scenarios/adaptive_devices.eval.yaml`` evaluated with ``--out``: its twin sweeps
    take most of the evaluation, and one serves its scores and its page."""
    from edgetwin import evaluate_adaptive

    out = tmp_path_factory.mktemp("adaptive_devices") / "evaluate"
    evaluation = evaluate_adaptive(REPO / "scenarios/adaptive_devices.eval.yaml", out=out)
    return SavedEvaluation(out, evaluation)
