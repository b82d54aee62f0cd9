"""``edgetwin run scenarios/llm_smoke.yaml --mode local``: the real decoder, one launch
per configuration, rows the twin's can be joined with.

The default suite runs llm_smoke bounded (a 1024-token vocabulary, prompt 16, 4 output
tokens, batch 2, on 3 ranks so that the bytes convention is not the 2-rank coincidence);
the full scenario is behind ``slow``.
"""

from __future__ import annotations

import math
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from edgetwin.cli import main
from edgetwin.comparison import compare_to_reference
from edgetwin.emu.llm.launcher import launch_decoder
from edgetwin.emu.llm.local_rows import decoder_rows, decoder_run
from edgetwin.emu.llm.records import RankRecord
from edgetwin.emu.llm.runs import DecoderRun
from edgetwin.emu.local import check_runnable, run_local
from edgetwin.errors import InputError, LaunchError
from edgetwin.profile import PROFILE_DIR
from edgetwin.result_cells import read_results
from edgetwin.results import ResultRow, write_results
from edgetwin.row_keys import row_key
from edgetwin.scenario import load_scenario
from edgetwin.sweep_points import configurations
from edgetwin.table_files import read_table
from edgetwin.workbench import run

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "scenarios/llm_smoke.yaml"
BOUNDED = [
    *("model.vocab=1024", "workload.prompt_tokens=16", "workload.output_tokens=4"),
    *("sweeps.0.batch=[2]", "devices.0.count=3", "sweeps.0.devices=[3]"),
]
EXACT = ("pipeline", "tensor_parallel", "voltage")


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The bounded smoke scenario in the twin and as real local processes."""
    root = tmp_path_factory.mktemp("llm_local")
    for mode in ("twin", "local"):
        run(SMOKE, mode=mode, overrides=BOUNDED, out=root / mode)
    return {"twin": root / "twin", "local": root / "local"}


def _rows(folder: Path) -> list[ResultRow]:
    return read_results(folder / "results.csv")


def _check_exactness(rows: list[ResultRow]) -> None:
    for row in rows:
        assert row.mode == "local" and row.status == "ok", row
        if row.strategy == "single":
            assert row.prefix_agreement_vs_single is None and row.max_abs_diff_vs_single is None
        elif row.strategy in EXACT:
            assert row.prefix_agreement_vs_single == 1.0, row
            assert row.max_abs_diff_vs_single is not None
            assert row.max_abs_diff_vs_single <= 1e-4, row
        else:  # prism: agreement reported, not required
            assert (
                row.prefix_agreement_vs_single is not None
                and 0 <= row.prefix_agreement_vs_single <= 1
            )
            assert row.max_abs_diff_vs_single is not None and row.max_abs_diff_vs_single >= 0


@pytest.mark.timeout(600)
def test_local_rows_carry_the_decoder_columns_and_exactness(folders: dict[str, Path]) -> None:
    rows = _rows(folders["local"])
    scenario = load_scenario(SMOKE, BOUNDED)
    assert [(r.strategy, r.devices, r.batch) for r in rows] == [
        (c.strategy, c.devices, c.batch) for c in configurations(scenario)
    ]
    _check_exactness(rows)
    for row in rows:
        assert (row.prompt_tokens, row.output_tokens) == (16, 4)
        assert row.ttft_ms is not None and row.tpot_ms is not None
        assert 0 < row.ttft_ms < row.total_ms
        assert row.total_ms == pytest.approx(row.ttft_ms + 3 * row.tpot_ms, rel=1e-5)
        assert row.tokens_per_s == pytest.approx(2 * 4 / (row.total_ms / 1e3), rel=1e-5)
        assert row.weights_mb is not None and row.kv_cache_mb is not None
        assert (row.bytes_sent > 0) == (row.strategy != "single")
    # the split ones hold less than one device's weights: pipeline's layers, TP's heads
    weights = {r.strategy: r.weights_mb for r in rows}
    assert (
        weights["pipeline"] < weights["single"] and weights["tensor_parallel"] < weights["single"]
    )


@pytest.mark.timeout(600)
def test_twin_and_real_code_report_the_same_bytes(folders: dict[str, Path]) -> None:
    twin = {row_key(r.__dict__): r.bytes_sent for r in _rows(folders["twin"])}
    local = {row_key(r.__dict__): r.bytes_sent for r in _rows(folders["local"])}
    assert twin == local and len(twin) == 5


@pytest.mark.timeout(600)
def test_compare_joins_decoder_rows(
    folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "twin_vs_local"
    assert main(["compare", str(folders["twin"]), str(folders["local"]), "--out", str(out)]) == 0
    assert "total_ms: median |error|" in capsys.readouterr().out
    labels = {record["configuration"] for record in read_table(out / "comparison.csv")}
    assert all(label.endswith("prompt 16, 4 out") for label in labels), labels


def test_decoder_keys_of_two_prompt_lengths_do_not_collide(tmp_path: Path) -> None:
    """Twin rows of prompts 16 and 32 compared with themselves: every point exact (one
    key for both would mix them)."""
    overrides = ["workload.output_tokens=2", "sweeps.0.prompt_tokens=[16,32]", "sweeps.0.batch=[1]"]
    run(SMOKE, overrides=overrides, out=tmp_path / "twin")
    rows = _rows(tmp_path / "twin")
    comparison = compare_to_reference(rows, read_table(tmp_path / "twin" / "results.csv"))
    assert len({row_key(r.__dict__) for r in rows}) == len(rows) == 10
    totals = [p for p in comparison.points if p["metric"] == "total_ms"]
    assert len(totals) == 10 and all(p["error_pct"] == pytest.approx(0, abs=1e-4) for p in totals)


def test_compare_scores_ttft_and_tpot(tmp_path: Path) -> None:
    """A decoder's own metrics are compared, each point exact against itself (compare
    scored total, compute, staging and comm only: no error for TTFT or TPOT)."""
    overrides = ["workload.output_tokens=3", "sweeps.0.batch=[1]"]
    run(SMOKE, overrides=overrides, out=tmp_path / "twin")
    rows = _rows(tmp_path / "twin")
    comparison = compare_to_reference(rows, read_table(tmp_path / "twin" / "results.csv"))
    for metric in ("ttft_ms", "tpot_ms"):
        points = [p for p in comparison.points if p["metric"] == metric]
        assert len(points) == len(rows) == 5, metric
        assert all(p["error_pct"] == pytest.approx(0, abs=1e-4) for p in points), metric
    assert comparison.median_abs_error_pct["tpot_ms"] == pytest.approx(0, abs=1e-4)


def test_an_older_files_token_agreement_reads_where_it_means_the_same(tmp_path: Path) -> None:
    """``tokens_match_single`` (every token compared, those after a divergence too) is now
    ``prefix_agreement_vs_single``: an older file's 1 reads as 1, another share as empty."""
    base = ResultRow("s", "local", "voltage", 2, 1, 400.0, None, None, 0, 1, 0, 0, 1, 1, None)
    rows = [replace(base, rep=i, prefix_agreement_vs_single=v) for i, v in enumerate((1, 0.5))]
    write_results(tmp_path / "new.csv", rows)
    older = (tmp_path / "new.csv").read_text().replace("prefix_agreement_vs", "tokens_match")
    (tmp_path / "old.csv").write_text(older)
    assert "tokens_match_single" in older
    assert [r.prefix_agreement_vs_single for r in read_results(tmp_path / "old.csv")] == [1, None]


def test_local_refuses_what_the_real_decoder_cannot_run() -> None:
    scenario = load_scenario(SMOKE, ["model.kv_dtype=fp16", "mode=local"])
    with pytest.raises(InputError, match=r"field 'model.kv_dtype': the real decoder runs fp32"):
        check_runnable(scenario, SMOKE)
    check_runnable(load_scenario(SMOKE, ["mode=local"]), SMOKE)


# a learned position table of 12 rows, 4 output tokens: prompts up to 12 - 4 + 1
EDGE = [
    *("model.layers=2", "model.width=32", "model.heads=2", "model.kv_heads=2"),
    *("model.ffn_size=64", "model.vocab=64", "model.max_positions=12"),
    *("workload.output_tokens=4", "sweeps.0.batch=[1]", "strategies=[{name: voltage}]"),
]


@pytest.mark.timeout(300)
def test_the_longest_prompt_runs_for_real_and_one_more_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A generation feeds prompt + output - 1 positions (the last token is never fed
    back): a 9-token prompt and 4 outputs fill a 12-row position table, which the real
    decoder runs (it was refused as 13 positions); 10 tokens are refused, naming the field."""

    def run_with_prompt(prompt: int) -> int:
        sets = [*EDGE, f"workload.prompt_tokens={prompt}"]
        out = ["--out", str(tmp_path / str(prompt)), "--quiet"]
        return main(["run", str(SMOKE), "--mode", "local", *out, *_set_flags(sets)])

    assert run_with_prompt(9) == 0
    (row,) = _rows(tmp_path / "9")
    assert (row.status, row.prompt_tokens, row.output_tokens) == ("ok", 9, 4)
    assert row.prefix_agreement_vs_single == 1.0
    assert run_with_prompt(10) == 2
    err = capsys.readouterr().err.strip()
    assert "field 'workload.prompt_tokens': 10 prompt and 4 output tokens feed 13" in err, err
    assert "at most 9 prompt tokens" in err and not (tmp_path / "10").exists()


def _set_flags(settings: list[str]) -> list[str]:
    return [flag for setting in settings for flag in ("--set", setting)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("warmups", [1, None])
def test_each_launch_runs_the_scenarios_warmup_generations(warmups: int | None) -> None:
    """``real_warmups`` untimed generations per configuration, 2 where the scenario leaves
    it out: every rank times each (its record's ``warmup_ms``) before its timed ones. The
    count was 2 whatever the scenario said."""
    sets = [*EDGE, "repetitions=1", *([] if warmups is None else [f"real_warmups={warmups}"])]
    scenario = load_scenario(SMOKE, [*sets, "workload.prompt_tokens=8"])
    launched: list[RankRecord] = []

    def launch(run: DecoderRun, *how: Any) -> list[RankRecord]:
        records = launch_decoder(run, *how)
        launched.extend(records)
        return records

    ((config, rows),) = decoder_rows(scenario, 1, launch=launch)
    assert len(rows) == 1 and len(launched) == config.devices == 2
    for record in launched:
        assert len(record.warmup_ms) == (2 if warmups is None else warmups)
        assert all(ms > 0 for ms in record.warmup_ms) and len(record.reps) == 1


@pytest.mark.timeout(60)
def test_a_launch_past_its_deadline_stops_every_rank(tmp_path: Path) -> None:
    scenario = load_scenario(SMOKE, [*BOUNDED, "mode=local"])
    with pytest.raises(LaunchError, match=r"still running after 0.5 s .* all ranks killed"):
        run_local(scenario, timeout_s=0.5)
    assert main(["run", str(SMOKE), "--mode", "local", "--set", "model.vocab=0",
                 "--out", str(tmp_path / "out"), "--quiet"]) == 2  # fmt: skip
    assert not (tmp_path / "out").exists()


UNEQUAL = [
    *("model.layers=6", "model.width=64", "model.heads=2", "model.kv_heads=2"),
    *("model.ffn_size=128", "model.vocab=1024", "workload.prompt_tokens=8"),
    *("workload.output_tokens=2", "repetitions=1", "real_warmups=0"),
    "devices=[{name: fast, profile: h200_loopback}, {name: slow, profile: jetson_orin_nano}]",
    *("strategies=[{name: pipeline}]", "sweeps=[{batch: [1], devices: [2]}]"),
]


@pytest.fixture(scope="module")
def unequal_local(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``edgetwin run --mode local`` of the unequal pipeline, run from another folder than
    its scenario's, the fast device's profile named relative to the scenario's folder (a
    copy of h200_loopback): the folder it wrote, for the tests that each check a
    different thing of it."""
    root = tmp_path_factory.mktemp("unequal")
    (root / "boards").mkdir()
    shutil.copy(PROFILE_DIR / "h200_loopback.yaml", root / "boards" / "fast.yaml")
    shutil.copy(SMOKE, root / "smoke.yaml")
    (root / "elsewhere").mkdir()
    devices = (
        "devices=[{name: fast, profile: boards/fast.yaml}, {name: slow, profile: jetson_orin_nano}]"
    )
    items = [
        item for given in UNEQUAL if not given.startswith("devices=") for item in ("--set", given)
    ]
    argv = ["run", "../smoke.yaml", "--mode", "local", "--out", "out", "--quiet"]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root / "elsewhere")
        assert main([*argv, *items, "--set", devices]) == 0
    return root / "elsewhere" / "out"


@pytest.mark.timeout(300)
def test_a_local_pipeline_runs_the_split_the_twin_runs(tmp_path: Path, unequal_local: Path) -> None:
    """An unsized pipeline over devices of different speeds: the twin balanced it on
    their profiles, a local run split it equally, and compare warned that the two ran
    other splits. Now the launcher gives the ranks the twin's split."""
    import edgetwin

    run(SMOKE, mode="twin", overrides=UNEQUAL, out=tmp_path / "twin")
    warnings = edgetwin.compare(tmp_path / "twin", unequal_local).warnings
    assert not any("layer splits" in w for w in warnings), warnings
    twin, local = _rows(tmp_path / "twin"), _rows(unequal_local)
    assert [r.layer_split for r in twin] == ["5+1"]  # the H200 is the faster: not 3+3
    assert [(r.mode, r.status, r.layer_split) for r in local] == [("local", "ok", "5+1")]
    assert local[0].prefix_agreement_vs_single == 1.0


def test_a_local_pipeline_finds_a_profile_named_relative_to_its_scenario(
    unequal_local: Path,
) -> None:
    """The launcher reads the devices' profiles for the split; a profile named relative to
    the scenario's folder, run from another folder, was 'does not exist' (exit 2)."""
    assert [(r.status, r.layer_split) for r in _rows(unequal_local)] == [("ok", "5+1")]


def test_a_pipelines_given_layers_still_run_for_real() -> None:
    """The scenario's ``layers`` take precedence over the twin's split."""
    scenario = load_scenario(SMOKE, [*UNEQUAL, "strategies=[{name: pipeline, layers: [2, 4]}]"])
    (config,) = configurations(scenario)
    assert decoder_run(scenario, config).stage_layers == (2, 4)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_full_smoke_scenario_is_exact_and_agrees_on_bytes(tmp_path: Path) -> None:
    run(SMOKE, mode="local", out=tmp_path / "local")
    run(SMOKE, out=tmp_path / "twin")
    rows = _rows(tmp_path / "local")
    assert len(rows) == 10 and not any(math.isnan(r.total_ms) for r in rows)
    _check_exactness(rows)
    twin = {row_key(r.__dict__): r.bytes_sent for r in _rows(tmp_path / "twin")}
    assert twin == {row_key(r.__dict__): r.bytes_sent for r in rows}
