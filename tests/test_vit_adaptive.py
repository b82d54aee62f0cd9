"""The real ViT code path decides at run time with the same adaptive policy object."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from edgetwin.emu.vit.launcher import (
    LOOPBACK_ADDR,
    LOOPBACK_IFACE,
    free_port,
    launch_local,
    stop_ranks,
    wait_ranks,
)
from edgetwin.emu.vit.records import read_record
from edgetwin.emu.vit.worker import main as worker_main
from edgetwin.emu.vit.worker import model_args
from edgetwin.evaluate.profiling import profile_twin
from edgetwin.model_spec import ModelSpec
from edgetwin.policies.adaptive import AdaptivePolicy
from edgetwin.policies.perf_map_io import write_map
from edgetwin.scenario import load_scenario
from tests.conftest import REPO

TINY = ModelSpec(tokens=65, width=32, blocks=1, heads=4, patch_size=2, classes=5)
SCENARIO = REPO / "scenarios/adaptive_prism.yaml"


@pytest.fixture(scope="module")
def policy_map(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("map") / "map.json"
    write_map(path, profile_twin(load_scenario(SCENARIO), SCENARIO))
    return path


def adaptive_args(policy_map: Path, batch: int) -> list[str]:
    return [
        "--strategy",
        "adaptive",
        "--policy-map",
        str(policy_map),
        "--bandwidth-mbps",
        "400",
        "--batch",
        str(batch),
        "--reps",
        "1",
        "--warmup",
        "0",
        *model_args(TINY),
    ]


def test_small_batch_runs_on_the_terminal_alone(
    policy_map: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert AdaptivePolicy.from_map(policy_map).choose(1, 400.0, 2, TINY.tokens).strategy == "single"
    args = adaptive_args(policy_map, 1)
    assert worker_main(["--rank", "1", "--world", "2", *args]) == 0
    assert "idle" in capsys.readouterr().out
    result = tmp_path / "rank0.json"
    assert worker_main(["--rank", "0", "--world", "2", "--result", str(result), *args]) == 0
    record = read_record(result)
    assert (record.strategy, record.world) == ("single", 1)


def test_large_batch_runs_the_policys_distributed_choice(policy_map: Path) -> None:
    decision = AdaptivePolicy.from_map(policy_map).choose(32, 400.0, 2, TINY.tokens)
    assert decision.strategy != "single"
    records = launch_local(adaptive_args(policy_map, 32), 2, 120)
    assert {r.strategy for r in records} == {decision.strategy}
    assert records[0].runs[0].segments == decision.segments


def test_adaptive_without_a_map_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        worker_main(["--rank", "0", "--world", "2", "--strategy", "adaptive", "--batch", "1"])
    assert stop.value.code == 2
    assert "--policy-map" in capsys.readouterr().err


def test_adaptive_at_batch_0_is_refused(
    policy_map: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was a 'math domain error' traceback from the map's log2 of the batch."""
    with pytest.raises(SystemExit) as stop:
        worker_main(["--rank", "0", "--world", "2", *adaptive_args(policy_map, 0)])
    assert stop.value.code == 2
    assert "the observed batch must be a positive number" in capsys.readouterr().err


def test_a_map_the_worker_cannot_read_is_one_line(
    policy_map: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A version-1 map's line (docs/adaptive.md) came after argparse's usage, 28 lines."""
    old = tmp_path / "v1.json"
    old.write_text(json.dumps(json.loads(policy_map.read_text()) | {"version": 1}))
    with pytest.raises(SystemExit) as stop:
        worker_main(["--rank", "0", "--world", "2", *adaptive_args(old, 1)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "usage" not in err, err
    assert f"{old}: field 'version': version 1 maps are not read" in err, err


def test_three_up_runs_on_the_two_the_map_profiled(policy_map: Path, tmp_path: Path) -> None:
    """Three ranks up, a map on two devices: ranks 0 and 1 run the policy's choice as a
    group of two, rank 2 stays idle."""
    decision = AdaptivePolicy.from_map(policy_map).choose(32, 400.0, 3, TINY.tokens)
    assert (decision.strategy, decision.devices) != ("single", 1)
    common = [
        *adaptive_args(policy_map, 32),
        *("--world", "3", "--master-addr", LOOPBACK_ADDR, "--master-port", str(free_port())),
        *("--iface", LOOPBACK_IFACE, "--timeout-s", "120", "--threads", "1"),
    ]
    ranks: list[subprocess.Popen[bytes]] = []
    try:
        for rank in range(3):
            with (tmp_path / f"rank{rank}.log").open("wb") as log:
                command = ["--rank", str(rank), "--result", str(tmp_path / f"rank{rank}.json")]
                ranks.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "edgetwin.emu.vit.worker", *command, *common],
                        stdout=log,
                        stderr=log,
                        stdin=subprocess.DEVNULL,
                        cwd=REPO,
                    )
                )
        wait_ranks(ranks, tmp_path, 120)
    finally:
        stop_ranks(ranks)
    records = [read_record(tmp_path / f"rank{rank}.json") for rank in (0, 1)]
    assert {(r.strategy, r.world) for r in records} == {(decision.strategy, decision.devices)}
    assert records[0].runs[0].segments == decision.segments
    assert not (tmp_path / "rank2.json").exists()
    assert "idle, the policy chose 2 device(s)" in (tmp_path / "rank2.log").read_text()
