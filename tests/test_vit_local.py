"""``run_local``: a scenario's configurations as real processes (mode local)."""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from edgetwin.cli import main
from edgetwin.configuration import resolve_segments
from edgetwin.emu.local import check_runnable, measure_local, run_local
from edgetwin.emu.vit.phases import ForwardTiming
from edgetwin.emu.vit.records import RunRecord
from edgetwin.emu.vit.worker import real_strategies, summary_line
from edgetwin.errors import InputError
from edgetwin.models import registry
from edgetwin.reports.html import LOCAL_NOTE, RunData, render_report
from edgetwin.results import ResultRow, write_results
from edgetwin.scenario import Scenario, load_scenario
from edgetwin.sim.fleet import build_fleet
from edgetwin.sim.runner import run_scenario
from edgetwin.sweep_points import configurations
from edgetwin.table_files import read_table
from edgetwin.workbench import compare
from edgetwin.workbench import run as run_scenario_folder

REPO = Path(__file__).resolve().parents[1]
SMOKE = REPO / "scenarios/emu_smoke.yaml"


@pytest.fixture(scope="module")
def smoke() -> Scenario:
    return load_scenario(SMOKE)


@pytest.fixture(scope="module")
def smoke_rows(smoke: Scenario) -> list[ResultRow]:
    progress: list[None] = []
    rows = run_local(smoke, on_progress=lambda: progress.append(None))
    assert len(progress) == len(rows)
    return rows


def test_smoke_scenario_is_vit_b16_cut_to_two_blocks(smoke: Scenario) -> None:
    model = smoke.model
    assert (model.tokens, model.width, model.heads, model.patch_size, model.blocks) == (
        197,
        768,
        12,
        16,
        2,
    )
    assert smoke.mode == "local"
    check_runnable(smoke, SMOKE)


def test_one_row_per_configuration_and_rep(smoke: Scenario, smoke_rows: list[ResultRow]) -> None:
    keys = [(r.strategy, r.devices, r.bandwidth_mbps, r.cr, r.rep) for r in smoke_rows]
    expected = [
        (c.strategy, c.devices, c.bandwidth_mbps, resolve_segments(smoke, c)[1], rep)
        for c in configurations(smoke)
        for rep in range(smoke.repetitions)
    ]
    assert keys == expected
    for row in smoke_rows:
        assert row.mode == "local" and row.status == "ok" and row.energy_j is None
        assert row.total_ms > 0 and row.per_sample_ms == row.total_ms / row.batch
        assert row.compute_ms + row.staging_ms + row.comm_ms <= row.total_ms
        segments = row.segments if row.strategy == "prism" else None
        work = registry.cost_plan(
            smoke.model, row.strategy, row.devices, segments, smoke.input_source
        )
        gflops = [work.flops_per_sample(r, smoke.model.blocks) / 1e9 for r in range(row.devices)]
        assert row.gflops_per_device == pytest.approx(statistics.fmean(gflops))


def test_bytes_sent_are_measured_per_strategy(smoke_rows: list[ResultRow]) -> None:
    row_bytes = 2 * 768 * 4  # batch 2, fp32
    scatter = 98 * row_bytes
    voltage = registry.layout("voltage", 197, 2).padded_rows  # 99 rows each, padded
    prism = registry.layout("prism", 197, 2, segments=10).padded_rows  # 10 means each
    expected = {
        "single": 0,
        "voltage": scatter + 2 * 2 * voltage * row_bytes,
        "prism": scatter + 2 * 2 * prism * row_bytes,
    }
    assert {row.strategy: row.bytes_sent for row in smoke_rows} == expected


def test_twin_bytes_sent_equal_the_local_runs(smoke: Scenario, smoke_rows: list[ResultRow]) -> None:
    """The twin's exchanges carry the rows of the one layout, padding included."""
    twin = [outcome.row for outcome in run_scenario(smoke, build_fleet(smoke, SMOKE))]

    def bytes_by_run(rows: list[ResultRow]) -> dict[tuple[object, ...], int]:
        return {(r.strategy, r.devices, r.bandwidth_mbps, r.cr, r.rep): r.bytes_sent for r in rows}

    assert bytes_by_run(twin) == bytes_by_run(smoke_rows)
    assert {r.strategy for r in twin} == {s.name for s in smoke.strategies}


def test_compare_reports_the_bytes_of_twin_and_real_run_equal_and_a_tampered_side_not(
    smoke_rows: list[ResultRow], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``compare`` of the twin with the local run: every configuration's ``bytes_sent``
    equal, single's 0 too; a local table whose voltage rows say 100 bytes more is reported
    as differing there by that much (compare scored times only: bytes were not compared)."""
    twin, local, tampered = tmp_path / "twin", tmp_path / "local", tmp_path / "tampered"
    run_scenario_folder(SMOKE, mode="twin", out=twin)
    for folder, rows in (
        (local, smoke_rows),
        (
            tampered,
            [
                replace(r, bytes_sent=r.bytes_sent + 100 * (r.strategy == "voltage"))
                for r in smoke_rows
            ],
        ),
    ):
        folder.mkdir()
        write_results(folder / "results.csv", rows)
    same = compare(twin, local, out=tmp_path / "same")
    assert len(same.bytes_points) == 6  # 3 strategies x 2 bandwidths
    assert all(p["measured"] == p["predicted"] for p in same.bytes_points)
    assert {p["key"][0] for p in same.bytes_points if p["measured"] == 0} == {"single"}
    written = [
        r for r in read_table(tmp_path / "same" / "comparison.csv") if r["metric"] == "bytes_sent"
    ]
    assert len(written) == 6 and {r["measured"] == r["predicted"] for r in written} == {True}
    page = (tmp_path / "same" / "comparison.html").read_text()
    assert "bytes_sent: equal in 6 configurations" in page
    assert main(["compare", str(twin), str(tampered), "--out", str(tmp_path / "differ")]) == 0
    printed = capsys.readouterr().out
    assert "bytes_sent: differ in 2 of 6 configurations" in printed
    differ = compare(twin, tampered)
    off = {p["key"]: p["predicted"] - p["measured"] for p in differ.bytes_points}
    assert {key[0] for key, by in off.items() if by} == {"voltage"}
    assert set(off.values()) == {0, -100}
    assert (
        "bytes_sent: differ in 2 of 6 configurations"
        in (tmp_path / "differ" / "comparison.html").read_text()
    )


def test_comparison_with_single_device(smoke_rows: list[ResultRow]) -> None:
    """Voltage is exact; prism at CR 9.9 is reported as measured (random weights)."""
    by_strategy = {row.strategy: row for row in smoke_rows}
    assert by_strategy["single"].max_abs_diff_vs_single is None
    voltage = by_strategy["voltage"]
    assert voltage.max_abs_diff_vs_single is not None and voltage.max_abs_diff_vs_single < 1e-4
    assert voltage.top1_agreement_vs_single == 1.0
    prism = by_strategy["prism"]
    assert prism.segments == 10 and prism.cr == 9.85  # the CR 10 segments give
    assert prism.max_abs_diff_vs_single is not None and prism.max_abs_diff_vs_single >= 0
    assert prism.top1_agreement_vs_single is not None
    assert 0 <= prism.top1_agreement_vs_single <= 1
    print(
        f"prism CR 9.9 vs single (ViT-B/16 width, 2 blocks, batch 2): max |logit diff| "
        f"{prism.max_abs_diff_vs_single:.3g}, top-1 agreement {prism.top1_agreement_vs_single}"
    )


def test_rank_0s_line_writes_a_small_logit_difference_without_an_exponent() -> None:
    """``.3g`` printed Voltage's max |logit diff| of 3.05e-06 so; rank 0's line writes it as
    the reports write a figure (an exponent only under READABLE_MAGNITUDES' 1e-9)."""
    rep = ForwardTiming(total_ms=12.5, steps_ms={"block0": {"compute": 10.0, "comm": 2.5}})
    record = RunRecord(2, None, (rep,), 1024, max_abs_diff_vs_single=3.0517578125e-06)
    line = summary_line("voltage", 2, replace(record, top1_agreement_vs_single=1.0))
    assert line == (
        "voltage P=2 batch 2: total 12.5 ms (compute 10.0, staging 0.0, comm 2.5; median of 1)"
        "; vs single: max |logit diff| 0.000003052, top-1 agreement 1.00"
    )


def test_the_report_says_a_local_runs_bandwidth_is_nominal(smoke_rows: list[ResultRow]) -> None:
    """The bandwidth figure of a local run plots nominal bandwidths; the page says so."""
    local = render_report(RunData(smoke_rows, None, None, []), "local")
    twin = [replace(row, mode="twin") for row in smoke_rows]
    assert LOCAL_NOTE in local
    assert LOCAL_NOTE not in render_report(RunData(twin, None, None, []), "twin")


@pytest.mark.parametrize(
    ("override", "field", "problem"),
    [
        ({"model": {"preset": "bert_base"}}, "model", "runs in the twin: use --mode twin"),
        (
            {"model": {"preset": "vit_b16", "bytes_per_element": 2}},
            "model.bytes_per_element",
            "fp32",
        ),
    ],
)
def test_what_local_mode_cannot_run_is_named(
    smoke: Scenario, override: dict[str, object], field: str, problem: str
) -> None:
    scenario = Scenario.model_validate({**smoke.model_dump(), **override})
    with pytest.raises(InputError) as caught:
        check_runnable(scenario, SMOKE)
    assert caught.value.field == field and problem in caught.value.problem
    assert caught.value.path == str(SMOKE)


@pytest.mark.timeout(240)
def test_three_ranks_send_the_layouts_rows_and_the_twin_counts_the_same(smoke: Scenario) -> None:
    """17 tokens over 3 ranks (6, 6, 5 rows), batch 3: Voltage (the 5 rows padded to 6)
    and Prism at L 4 (segments of 2, 2, 1, 1 rows and 2, 1, 1, 1). The real ranks send the
    terminal's scatter and one padded piece per rank and block, as the layout says; the
    twin counts the same pieces, though its ring all-gather forwards each P - 1 times
    (docs/real_vit.md, "What is measured"). Tensor parallel: the terminal sends every row
    to each other rank, and each rank its two partial sums of every row a block."""
    model = {"tokens": 17, "width": 32, "blocks": 2, "heads": 4, "patch_size": 2, "classes": 5}
    split = [registry.strategy(name) for name in real_strategies()]
    strategies = [
        {"name": s.name, **({"segments": [4]} if s.params else {})}
        for s in split
        if not s.one_device
    ]
    tiny = Scenario.model_validate(
        {
            **smoke.model_dump(),
            "model": model,
            "repetitions": 1,
            "real_warmups": 0,
            "devices": [{"name": "board", "profile": "jetson_orin_nano", "count": 3}],
            "strategies": strategies,
            "sweeps": [{"batch": [3], "devices": [3]}],
        }
    )
    local = {row.strategy: row for row in run_local(tiny)}
    twin = {o.row.strategy: o.row for o in run_scenario(tiny, build_fleet(tiny, SMOKE))}
    row_bytes = 3 * 32 * 4  # batch 3, fp32
    scatter = (6 + 5) * row_bytes
    assert {"voltage", "prism", "tensor_parallel"} <= set(local)
    for strategy in local:
        definition = registry.strategy(strategy)
        if definition.layout is None:  # tensor_parallel
            sent = 2 * 17 * row_bytes + 2 * 2 * 3 * 17 * row_bytes
        else:
            segments = 4 if definition.params else None
            piece = registry.layout(strategy, 17, 3, segments).padded_rows * row_bytes
            sent = scatter + 2 * 3 * piece
        assert local[strategy].bytes_sent == sent, strategy
        assert twin[strategy].bytes_sent == local[strategy].bytes_sent, strategy
    for exact in ("voltage", "tensor_parallel"):
        difference = local[exact].max_abs_diff_vs_single
        assert difference is not None and difference < 1e-5, exact


def test_progress_is_told_each_repetition_as_rank_0_ends_it(smoke: Scenario) -> None:
    """One launch runs both batches; rank 0 reports each timed repetition as it ends it,
    in run order, before the launch's measurements come back (they came in one burst
    when the launch ended)."""
    model = {"tokens": 17, "width": 32, "blocks": 1, "heads": 4, "patch_size": 2, "classes": 5}
    tiny = Scenario.model_validate(
        {
            **smoke.model_dump(),
            "model": model,
            "real_warmups": 0,
            "strategies": [{"name": "voltage"}],
            "sweeps": [{"batch": [1, 2], "devices": [2]}],
        }
    )
    events: list[tuple[int, int | str]] = []
    for run in measure_local(tiny, on_rep=lambda config, rep: events.append((config.batch, rep))):
        events.append((run.config.batch, "measured"))
    assert events == [(1, 0), (1, 1), (2, 0), (2, 1), (1, "measured"), (2, "measured")]
    named: list[str] = []
    run_local(tiny, on_progress=named.append)
    assert named == [f"voltage x2, batch {b}, 400 Mbps, rep {r}" for b in (1, 2) for r in (0, 1)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("warmups", [0, 3, None])
def test_each_configuration_runs_the_scenarios_warmups(
    smoke: Scenario, warmups: int | None
) -> None:
    """``real_warmups`` untimed forwards per configuration, 2 where the scenario leaves it
    out: every rank times each (its record's ``warmup_ms``) before its timed ones. The
    count was 2 whatever the scenario said (only ``run_local(..., warmup=)`` changed it).
    One launch of one strategy: every launch is given the scenario's count alike, and a
    rank warms up each run the same way whatever its strategy (``emu/vit/worker.py``)."""
    model = {"tokens": 17, "width": 32, "blocks": 1, "heads": 4, "patch_size": 2, "classes": 5}
    raw = {
        **smoke.model_dump(exclude={"real_warmups"}),
        "model": model,
        "repetitions": 1,
        "strategies": [{"name": "prism", "segments": [2]}],
        "sweeps": [{"batch": [1, 2], "devices": [2]}],
    }
    tiny = Scenario.model_validate(raw if warmups is None else {**raw, "real_warmups": warmups})
    runs = list(measure_local(tiny))
    assert len(runs) == 2
    for run in runs:
        for rank in run.ranks:
            assert len(rank.warmup_ms) == (2 if warmups is None else warmups), run.config
            assert all(ms > 0 for ms in rank.warmup_ms)
            assert len(rank.reps) == 1
