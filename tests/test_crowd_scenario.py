"""Crowd scenarios: validation with named fields, determinism, rows, timelines."""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest

from edgetwin.configuration import CrowdRun, in_turn
from edgetwin.errors import InputError
from edgetwin.phone_profile import load_phone_profile
from edgetwin.result_cells import read_results
from edgetwin.results import write_results
from edgetwin.scenario import Scenario, load_scenario, validate_scenario
from edgetwin.sim.crowd import crowd_runs, crowd_timelines, run_crowd
from edgetwin.sim.crowd.costs import warm_load_ms
from edgetwin.sim.crowd.foreman import Foreman
from edgetwin.sim.crowd.records import ACTIVITY_KINDS
from tests.conftest import REPO
from tests.test_crowd_events import toy_crowd, toy_phone_file

ANDROID = REPO / "scenarios/crowdio_android.yaml"


def _raw(tmp_path: Path, **crowd: Any) -> dict[str, Any]:
    raw = toy_crowd([{"name": "toy", "profile": toy_phone_file(tmp_path), "count": 3}])
    raw["crowd"].update(crowd)
    return raw


def _error(raw: dict[str, Any]) -> InputError:
    with pytest.raises(InputError) as caught:
        validate_scenario(raw, Path("crowd.yaml"))
    return caught.value


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (lambda r: r["crowd"]["fleet"][0].update(share=0.5), "crowd.fleet.0", "exactly one of"),
        (lambda r: r["crowd"]["fleet"][0].pop("count"), "crowd.fleet.0", "exactly one of"),
        (lambda r: r["crowd"]["fleet"][0].update(count=0), "crowd.fleet.0.count", "greater than 0"),
        (
            lambda r: r["crowd"]["fleet"][0].update(battery_start_pct=[90, 10]),
            "crowd.fleet.0",
            "low <= high",
        ),
        (lambda r: r["crowd"]["fleet"].append(dict(r["crowd"]["fleet"][0])), "crowd", "unique"),
        (
            lambda r: r["crowd"]["fleet"][0].update(count=None, share=0.5),
            "crowd",
            "needs crowd.fleet_size",
        ),
        (lambda r: r["crowd"].update(fleet_size=1000), "crowd", "none has one"),  # was ignored
        (lambda r: r["crowd"]["job"].update(inputs=0), "crowd.job.inputs", "greater than 0"),
        (
            lambda r: r["crowd"]["job"].update(stages=[]),
            "crowd.job.stages",
            "give at least one value",
        ),
        (
            lambda r: r["crowd"]["job"]["stages"].append(dict(r["crowd"]["job"]["stages"][0])),
            "crowd.job",
            "stage names must be unique",
        ),
        (
            lambda r: r["crowd"]["job"]["stages"][0].update(ram_mb=-1),
            "crowd.job.stages.0.ram_mb",
            "greater than 0",
        ),
        (
            lambda r: r["crowd"]["job"]["stages"][0].update(load_peak_mb=1),
            "crowd.job.stages.0",
            "at least ram_mb",
        ),
        (
            lambda r: r["crowd"]["job"]["stages"][-1].update(output_bytes=64),
            "crowd.job.stages.1.output_bytes",  # was crowd.job, the path in the problem
            "the last stage sends the job's result_bytes",
        ),
        (
            lambda r: r["crowd"]["job"].update(compression_saving_pct=100),
            "crowd.job.compression_saving_pct",
            "less than 100",
        ),
        (
            lambda r: r["crowd"]["job"].update(interarrival={"kind": "poisson"}),
            "crowd.job.interarrival",
            "",
        ),
        (
            lambda r: r["crowd"]["job"].update(interarrival={"kind": "constant", "value_s": 0}),
            "crowd.job",
            "more than 0 s",
        ),
        (  # toy's three phones are toy-0 .. toy-2: a class toy-1 would be a second toy-1
            lambda r: r["crowd"]["fleet"].append({**r["crowd"]["fleet"][0], "name": "toy-1"}),
            "crowd.fleet.1.name",
            "a phone named 'toy-1' is one of class 'toy''s phones too",
        ),
        (  # the phone left and came back at one instant forever: the run hung
            lambda r: r["crowd"]["fleet"][0].update(
                availability={
                    "up": {"kind": "constant", "value_s": 0},
                    "down": {"kind": "constant", "value_s": 0},
                }
            ),
            "crowd.fleet.0.availability",
            "up and down both last 0 s",
        ),
        (  # ran the one job of crowd.job.inputs, the swept batch nowhere
            lambda r: r.update(sweeps=[{"batch": [1, 8]}]),
            "sweeps.0.batch",
            "a crowd run takes no batch from a sweep: crowd.job.inputs says it",
        ),
        (
            lambda r: r.update(sweeps=[{"bandwidth_mbps": [5]}, {"devices": [4]}]),
            "sweeps.1.devices",
            "a crowd run takes no devices from a sweep: crowd.fleet says it",
        ),
        (lambda r: r["crowd"].update(cache="lukewarm"), "crowd.cache", "'cold' or 'warm'"),
        (lambda r: r["crowd"].update(colour=1), "crowd.colour", "unknown key"),
        (lambda r: r.pop("crowd"), None, "needs a 'crowd' section"),
        (
            lambda r: r.update(devices=[{"name": "j", "profile": "jetson_orin_nano"}]),
            None,
            "not 'devices'",
        ),
        (lambda r: r["strategies"].append({"name": "single"}), None, "runs only the strategies"),
    ],
)
def test_bad_crowd_specs_name_the_field(
    tmp_path: Path, change: Any, field: str | None, problem: str
) -> None:
    raw = _raw(tmp_path)
    change(raw)
    error = _error(raw)
    assert error.field == field
    assert problem in error.problem


def test_unknown_scheduler_and_profile_are_named(tmp_path: Path) -> None:
    raw = _raw(tmp_path, schedulers=["affinity", "clever"])
    with pytest.raises(InputError) as caught:
        run_crowd(Scenario.model_validate(raw), tmp_path / "s.yaml")
    assert caught.value.field == "crowd.schedulers.1"
    assert "known" in caught.value.problem
    raw = _raw(tmp_path)
    raw["crowd"]["fleet"][0]["profile"] = "android_potato"
    with pytest.raises(InputError) as caught:
        run_crowd(Scenario.model_validate(raw), tmp_path / "s.yaml")
    assert caught.value.field == "crowd.fleet.0.profile"
    assert "android_low" in caught.value.problem
    assert "jetson_orin_nano" not in caught.value.problem  # a device's profile, not a phone's


def test_a_device_profile_for_a_phone_is_named(tmp_path: Path) -> None:
    """It blamed the shipped device profile: 'jetson_orin_nano.yaml: field 'os_reserved_mb':
    required key is missing'."""
    raw = _raw(tmp_path)
    raw["crowd"]["fleet"][0]["profile"] = "jetson_orin_nano"
    with pytest.raises(InputError) as caught:
        run_crowd(Scenario.model_validate(raw), tmp_path / "s.yaml")
    assert caught.value.path == str(tmp_path / "s.yaml")
    assert caught.value.field == "crowd.fleet.0.profile"
    assert "jetson_orin_nano.yaml is a device profile" in caught.value.problem


def test_a_fleet_of_no_phones_is_named(tmp_path: Path) -> None:
    raw = _raw(tmp_path, fleet_size=1)
    raw["crowd"]["fleet"][0].update(count=None, share=0.1)
    with pytest.raises(InputError) as caught:
        run_crowd(Scenario.model_validate(raw), tmp_path / "s.yaml")
    assert (caught.value.field, caught.value.problem) == ("crowd.fleet", "the fleet has no phones")


def test_non_crowd_scenarios_still_need_devices() -> None:
    raw = {"name": "x", "strategies": [{"name": "single"}]}
    assert "'devices' needs at least one device class" in _error(raw).problem


def test_same_seed_same_bytes_and_another_seed_differs(tmp_path: Path) -> None:
    def csv_bytes(seed: int) -> bytes:
        scenario = load_scenario(ANDROID, [f"seed={seed}", "repetitions=2"])
        out = tmp_path / f"results-{seed}-{len(list(tmp_path.iterdir()))}.csv"
        write_results(out, run_crowd(scenario, ANDROID))
        return out.read_bytes()

    assert csv_bytes(0) == csv_bytes(0)
    assert csv_bytes(0) != csv_bytes(1)
    # recording a timeline does not change what happens
    scenario = load_scenario(ANDROID, ["repetitions=1"])
    timeline = crowd_timelines(scenario, ANDROID, strategy="crowdio_barrier")
    rows = [r for r in run_crowd(scenario, ANDROID) if r.strategy == "crowdio_barrier"]
    assert timeline.rows == rows


def test_a_run_pauses_the_garbage_collector_and_leaves_it_as_it_was() -> None:
    scenario = load_scenario(ANDROID, ["repetitions=1"])
    seen: list[bool] = []
    with patch.object(Foreman, "submit", autospec=True, side_effect=_note(seen)):
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            try:
                run_crowd(scenario, ANDROID)
                assert gc.isenabled() is enabled
            finally:
                gc.enable()
    assert seen and not any(seen)  # off while the jobs ran


def _note(seen: list[bool]) -> Callable[..., object]:
    submit = Foreman.submit

    def noted(foreman: Foreman) -> object:
        seen.append(gc.isenabled())
        return submit(foreman)

    return noted


def test_a_real_run_plays_its_runs_repetition_by_repetition() -> None:
    """Each bandwidth's runs together, every strategy and scheduler once per repetition
    (a drift of the machine falls on all alike), the runs of one repetition in
    ``crowd_runs``' order."""
    modes, schedulers = ("crowdio_streaming", "crowdio_barrier"), ("affinity", "fifo")
    runs = [
        CrowdRun(strategy, scheduler, rep, bandwidth)
        for bandwidth in (20.0, 5.0)
        for strategy in modes
        for scheduler in schedulers
        for rep in range(3)
    ]
    played = in_turn(runs)
    assert sorted(played, key=runs.index) == runs  # each run once
    assert [(r.bandwidth_mbps, r.rep) for r in played] == [
        (bandwidth, rep) for bandwidth in (20.0, 5.0) for rep in range(3) for _ in range(4)
    ]
    first_turn = [(r.strategy, r.scheduler) for r in played[:4]]
    assert first_turn == [(strategy, scheduler) for strategy in modes for scheduler in schedulers]


def test_a_strategy_listed_twice_runs_once(tmp_path: Path) -> None:
    """As a configuration does: the crowd runner wrote the same rows twice."""
    raw = _raw(tmp_path)
    raw["strategies"] = [{"name": "crowdio_streaming"}, {"name": "crowdio_streaming"}]
    scenario = Scenario.model_validate(raw)
    assert crowd_runs(scenario) == [CrowdRun("crowdio_streaming", "affinity", 0, 0.08)]
    assert len(run_crowd(scenario, tmp_path / "s.yaml")) == 1


def test_progress_names_each_crowd_run_as_it_ends(tmp_path: Path) -> None:
    """The crowd twin's steps were only counted: nothing named the run."""
    raw = _raw(tmp_path, schedulers=["affinity", "fifo"])
    raw["repetitions"] = 2
    named: list[str] = []
    run_crowd(Scenario.model_validate(raw), tmp_path / "s.yaml", on_progress=named.append)
    assert named == [
        f"crowdio_streaming {scheduler} 0.08 Mbps rep {rep}"
        for scheduler in ("affinity", "fifo")
        for rep in (0, 1)
    ]


def test_rows_one_per_job_with_crowd_columns(tmp_path: Path) -> None:
    raw = _raw(tmp_path, schedulers=["affinity", "fifo"])
    raw["strategies"] = [{"name": "crowdio_streaming"}, {"name": "crowdio_barrier"}]
    raw["repetitions"] = 2
    raw["crowd"]["job"]["interarrival"] = {"kind": "constant", "value_s": 5}
    raw["crowd"]["horizon_s"] = 12
    scenario = Scenario.model_validate(raw)
    progress: list[None] = []
    rows = run_crowd(scenario, tmp_path / "s.yaml", on_progress=lambda: progress.append(None))
    assert len(progress) == len(crowd_runs(scenario)) == 2 * 2 * 2
    assert len(rows) == 8 * 3  # jobs at 0, 5 and 10 s
    assert {(r.strategy, r.scheduler) for r in rows} == {
        (s, k) for s in ("crowdio_streaming", "crowdio_barrier") for k in ("affinity", "fifo")
    }
    for row in rows:
        assert row.status == "ok" and row.mode == "twin"
        assert (row.inputs, row.stages, row.devices, row.batch) == (2, 2, 3, 2)
        assert row.total_ms >= row.compute_ms + row.comm_ms
        assert row.per_sample_ms == pytest.approx(row.total_ms / 2)
        assert row.peak_session_mb == 10 and (row.battery_mah or 0) > 0
        assert row.bytes_moved is not None and row.bytes_moved >= row.bytes_sent > 0
        assert row.staging_ms == 0 and row.load_ms is not None
    assert any((row.load_ms or 0) > 0 for row in rows)  # the first inputs wait for loads


def test_a_stage_hands_on_its_own_output_bytes(tmp_path: Path) -> None:
    """A stage's ``output_bytes`` is what it sends back and the next stage receives: every
    input moves the job's activation less that stage's twice (result and next input)."""
    raw = _raw(tmp_path)
    job = raw["crowd"]["job"]
    job["compression_saving_pct"] = 0  # bytes as given
    assert len(job["stages"]) == 2
    before = run_crowd(Scenario.model_validate(raw), tmp_path / "s.yaml")[0]
    job["stages"][0]["output_bytes"] = 100
    after = run_crowd(Scenario.model_validate(raw), tmp_path / "s.yaml")[0]
    assert before.bytes_moved is not None and after.bytes_moved is not None
    handed_on = 2 * job["inputs"] * (job["activation_bytes"] - 100)
    assert before.bytes_moved - after.bytes_moved == handed_on
    assert before.bytes_sent is not None and after.bytes_sent is not None
    assert before.bytes_sent - after.bytes_sent == handed_on // 2  # results of stage 0


def test_old_crowd_rows_with_loads_in_staging_ms_still_read(tmp_path: Path) -> None:
    scenario = Scenario.model_validate(_raw(tmp_path))
    (row,) = run_crowd(scenario, None)
    write_results(tmp_path / "new.csv", [row])
    lines = (tmp_path / "new.csv").read_text().splitlines()
    header = lines[0].split(",")
    cells = dict(zip(header, lines[1].split(","), strict=True))
    cells["staging_ms"] = cells.pop("load_ms")  # as a file written before load_ms
    old = tmp_path / "old.csv"
    old.write_text(",".join(cells) + "\n" + ",".join(cells.values()) + "\n")
    (again,) = read_results(old)
    assert again == read_results(tmp_path / "new.csv")[0]
    assert again.load_ms == row.load_ms == 2000 and again.staging_ms == 0


def test_an_older_files_peak_rss_reads_where_it_meant_the_sessions(tmp_path: Path) -> None:
    """``peak_rss_mb`` is now ``peak_session_mb``: a twin row's (its sessions' RAM) reads
    as it was; a real row's (its worker process's whole RSS) reads empty."""
    (row,) = run_crowd(Scenario.model_validate(_raw(tmp_path)), None)
    write_results(tmp_path / "new.csv", [row, replace(row, mode="local", peak_session_mb=85.0)])
    older = (tmp_path / "new.csv").read_text().replace("peak_session_mb", "peak_rss_mb")
    (tmp_path / "old.csv").write_text(older)
    assert [r.peak_session_mb for r in read_results(tmp_path / "old.csv")] == [10, None]


def test_timelines_cover_every_phone_without_overlap() -> None:
    scenario = load_scenario(ANDROID, ["repetitions=1"])
    timeline = crowd_timelines(scenario, ANDROID, strategy="crowdio_barrier")
    assert timeline.run.strategy == "crowdio_barrier"
    end_s = max(a.end_s for a in timeline.activities)
    for phone in timeline.phones:
        mine = [a for a in timeline.activities if a.phone == phone]
        assert {a.kind for a in mine} <= set(ACTIVITY_KINDS)
        assert mine[0].start_s == 0 and mine[-1].end_s == pytest.approx(end_s)
        for before, after in pairwise(mine):
            assert after.start_s == pytest.approx(before.end_s)
    records = timeline.records()
    assert set(records) == {"activities", "ram", "battery", "events", "rows", "phones"}
    levels = [b.level_pct for b in timeline.battery if b.phone == timeline.phones[0]]
    assert levels == sorted(levels, reverse=True) and levels[0] == 100


def test_six_stage_what_if_loads_the_same_bytes_in_smaller_sessions() -> None:
    """The 6-stage scenario is the reference's fleet and job with DistilBERT cut finer:
    smaller sessions, and a load takes its stage's bytes: six loads of a chain read the
    same 268 MB as three, and cost less (five of the six files are under the allocator's
    mapping ceiling); with smaller stages the fast phones take over more of the slow
    ones' work."""
    six = REPO / "scenarios/crowdio_6stage.yaml"
    scenario = load_scenario(six, ["repetitions=2"])
    three = load_scenario(ANDROID, ["repetitions=2"])
    assert scenario.crowd is not None and three.crowd is not None
    assert scenario.crowd.fleet == three.crowd.fleet and scenario.network == three.network
    rows = run_crowd(scenario, six)
    assert all(r.status == "ok" and r.stages == 6 for r in rows)
    assert {r.peak_session_mb for r in rows} == {29.5}  # s1, the embeddings and layer 0
    fastest = load_phone_profile("android_high")
    six_chain_ms = sum(warm_load_ms(fastest, s) for s in scenario.crowd.job.stages)
    three_chain_ms = sum(warm_load_ms(fastest, s) for s in three.crowd.job.stages)
    assert 0.6 * three_chain_ms < six_chain_ms < three_chain_ms
    assert all(r.total_ms > 0.8 * six_chain_ms for r in rows)
    streaming = [r.total_ms for r in rows if r.strategy == "crowdio_streaming"]
    three_streaming = [
        r.total_ms for r in run_crowd(three, ANDROID) if r.strategy == "crowdio_streaming"
    ]
    assert max(streaming) < max(three_streaming)


@pytest.mark.parametrize(
    ("name", "overrides"),
    [("crowdio_6stage", []), ("crowd_city", ["crowd.fleet_size=40", "crowd.horizon_s=900"])],
)
def test_a_jobs_breakdown_fits_in_its_latency(name: str, overrides: list[str]) -> None:
    """compute_ms + load_ms + comm_ms of the critical input never exceed total_ms: a
    load begun before its task was ready (a JIT load during the previous stage, a
    broadcast for an earlier job) counts from then. Whole loads made 3 of the 20
    six-stage rows, and jobs of crowd_city, add up to more than their latency."""
    path = REPO / f"scenarios/{name}.yaml"
    rows = [r for r in run_crowd(load_scenario(path, overrides), path) if r.status == "ok"]
    assert rows
    for row in rows:
        assert row.compute_ms + (row.load_ms or 0) + row.comm_ms <= row.total_ms + 1e-6


def test_what_ifs_by_override_more_phones_more_inputs_a_2_gb_phone() -> None:
    scenario = load_scenario(
        ANDROID,
        [
            "repetitions=1",
            "crowd.fleet.0.count=20",
            "crowd.job.inputs=20",
            "crowd.fleet.2.ram_mb=2048",
        ],
    )
    rows = run_crowd(scenario, ANDROID)
    assert {r.devices for r in rows} == {20 + 2 + 1} and {r.inputs for r in rows} == {20}
    assert all(r.status == "ok" for r in rows)
    assert {r.peak_session_mb for r in rows} == {43.0}  # a 2 GB phone still holds cell_a


@pytest.mark.parametrize("medium", ["shared", "dedicated"])
def test_more_bandwidth_never_lengthens_a_crowd_job(medium: str) -> None:
    """The same phones, job and cold caches on a faster link: each mode's mean makespan
    falls as the bandwidth rises (the broadcast's downloads, then every transfer)."""
    scenario = load_scenario(
        ANDROID,
        [
            "repetitions=2",
            "crowd.cache=cold",
            f"network.medium={medium}",
            "sweeps=[{bandwidth_mbps: [20, 50, 100, 300, 1000]}]",
        ],
    )
    rows = run_crowd(scenario, ANDROID)
    assert all(r.status == "ok" for r in rows)
    for strategy in ("crowdio_streaming", "crowdio_barrier"):
        means = [
            sum(r.total_ms for r in at) / len(at)
            for bandwidth in (20, 50, 100, 300, 1000)
            if (at := [r for r in rows if (r.strategy, r.bandwidth_mbps) == (strategy, bandwidth)])
        ]
        assert len(means) == 5
        assert all(slower > faster for slower, faster in pairwise(means)), (strategy, means)
