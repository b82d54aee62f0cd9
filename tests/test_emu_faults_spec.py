"""Faults, schedules and host limits as data (no root): the scenario section, its errors,
the timeline of actions, the CPU and memory rule, the warning when CPU quotas share cores."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

import edgetwin
from edgetwin import cli
from edgetwin.configuration import crowd_bandwidths
from edgetwin.emu import memory_check
from edgetwin.emu.crowd_jobs import crowd_phones, phones_bytes
from edgetwin.emu.crowdio.launcher import WORKER
from edgetwin.emu.crowdio.model import TINY, stage_weight_bytes
from edgetwin.emu.memory_check import interpreter
from edgetwin.emu.mininet import runner
from edgetwin.emu.mininet.crowd import phone_limits
from edgetwin.emu.mininet.faults import Action, FaultClock, timeline, unplayed_warnings
from edgetwin.emu.mininet.runner import check_emulatable, host_cpu_warning, vit_host_limits
from edgetwin.emu.mininet.topology import (
    MAX_HOSTS,
    HostLimits,
    build_topology,
    cpu_quota_warning,
    link_state_command,
)
from edgetwin.emulator_spec import EmulatorSpec
from edgetwin.errors import InputError
from edgetwin.network_spec import BandwidthStep, NetworkSpec
from edgetwin.scenario import load_scenario, validate_scenario
from tests.test_bad_input import assert_clean_failure

REPO = Path(__file__).resolve().parents[1]
CROWD = REPO / "scenarios/emu_crowdio.yaml"


def _crowd(**emulator: Any) -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(CROWD.read_text())
    raw["emulator"] = {**raw.get("emulator", {}), **emulator}
    return raw


def test_link_state_is_set_at_the_bridge_port() -> None:
    down = link_state_command(build_topology(3), 2, up=False)
    assert (down.node, " ".join(down.argv)) == ("etws0", "ip link set dev etws0-eth3 down")
    assert link_state_command(build_topology(3), 2, up=True).argv[-1] == "up"


def test_timeline_orders_faults_and_schedule_steps() -> None:
    topology = build_topology(3)
    network = NetworkSpec(
        schedule=(
            BandwidthStep(at_ms=1500, bandwidth_mbps=50),
            BandwidthStep(at_ms=0, bandwidth_mbps=5),
        )
    )
    spec = EmulatorSpec.model_validate(
        {"faults": [
            {"kind": "link_down", "host": 1, "at_s": 0.5, "for_s": 2},
            {"kind": "kill_worker", "host": 2, "at_s": 1.0},
        ]}
    )  # fmt: skip
    actions = timeline(topology, network, spec.faults)
    assert [(a.at_s, a.kind, a.host) for a in actions] == [
        (0.0, "bandwidth", None),
        (0.5, "link_down", 1),
        (1.0, "kill_worker", 2),
        (1.5, "bandwidth", None),
        (2.5, "link_up", 1),
    ]
    assert [" ".join(c.argv) for c in actions[1].commands] == ["ip link set dev etws0-eth2 down"]
    assert actions[2].commands == ()
    # a schedule step changes both ends of every link in place
    rates = [c.argv for c in actions[3].commands]
    assert len(rates) == 2 * 3 and all(a[:3] == ("tc", "class", "change") for a in rates)
    assert all("50mbit" in a for a in rates)


def test_a_clock_sets_the_rate_due_at_start_before_the_run_and_plays_the_rest() -> None:
    """A CROWDio job's clock started at its first event, while the foreman was already
    broadcasting: a 5 Mbit/s step at 0 ms came after part of the blobs crossed at 100."""
    network = NetworkSpec(schedule=(BandwidthStep(at_ms=0, bandwidth_mbps=5),))
    spec = EmulatorSpec.model_validate({"faults": [{"kind": "link_down", "host": 1, "at_s": 0}]})
    done: list[str] = []
    applied = threading.Event()

    def apply(action: Action) -> None:
        done.append(action.kind)
        if action.kind == "link_down":
            applied.set()

    clock = FaultClock("job", timeline(build_topology(2), network, spec.faults), apply)
    clock.apply_rates_at_start()
    assert done == ["bandwidth"] and not clock.started  # the link fault waits for the job
    clock.start()
    assert applied.wait(30)
    records = clock.stop()
    assert done == ["bandwidth", "link_down"]  # the rate once, not again at the start
    assert (records[0].kind, records[0].applied_s) == ("bandwidth", 0.0)


def test_a_fault_due_with_a_rate_change_is_not_queued_behind_it() -> None:
    """A schedule step and a link down both at 0.2 s: the step's tc commands on every link
    took ~100 ms, and the link went down only after them (0.301 s in ``faults.csv``). Here
    the step cannot finish until the link is down: played one after another, it waits."""
    network = NetworkSpec(schedule=(BandwidthStep(at_ms=200, bandwidth_mbps=5),))
    spec = EmulatorSpec.model_validate({"faults": [{"kind": "link_down", "host": 1, "at_s": 0.2}]})
    actions = timeline(build_topology(3), network, spec.faults)
    assert [a.kind for a in actions] == ["bandwidth", "link_down"]  # the step comes first
    link_down, rated = threading.Event(), threading.Event()
    down_while_rating: list[bool] = []

    def apply(action: Action) -> None:
        if action.kind == "bandwidth":  # a slow rate change, done once the link is down
            down_while_rating.append(link_down.wait(30))
            rated.set()
        else:
            link_down.set()

    clock = FaultClock("job", actions, apply)
    clock.start()
    assert rated.wait(60)
    records = clock.stop()
    assert down_while_rating == [True]
    step, down = records  # in timeline order, whichever was applied first
    assert (step.kind, down.kind) == ("bandwidth", "link_down")
    # each says when it started and when it was done: the link was down before the step
    assert down.applied_s <= step.applied_s
    assert all(0.2 <= r.started_s <= r.applied_s for r in records)  # never early


def test_actions_on_one_thing_play_in_order_however_slow() -> None:
    """Actions on different things start together, but a link's return never overtakes its
    going down, nor a later rate change an earlier one (the tc commands of two steps
    interleaved would leave some links at either rate)."""
    network = NetworkSpec(schedule=(BandwidthStep(at_ms=0, bandwidth_mbps=5),
                                    BandwidthStep(at_ms=10, bandwidth_mbps=50)))  # fmt: skip
    spec = EmulatorSpec.model_validate(
        {"faults": [{"kind": "link_down", "host": 1, "at_s": 0, "for_s": 0.01}]}
    )
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()
    all_done = threading.Event()

    def apply(action: Action) -> None:
        with lock:
            seen.append((f"{action.kind} {action.detail}".strip(), "starts"))
        if action.at_s == 0:  # slower than the 10 ms to the next action on the same thing
            threading.Event().wait(0.3)
        with lock:
            seen.append((f"{action.kind} {action.detail}".strip(), "done"))
            if len(seen) == 8:
                all_done.set()

    clock = FaultClock("job", timeline(build_topology(2), network, spec.faults), apply)
    clock.start()
    assert all_done.wait(60)
    clock.stop()
    for first, then in [("bandwidth 5 Mbps", "bandwidth 50 Mbps"),
                        ("link_down for 0.01 s", "link_up")]:  # fmt: skip
        assert seen.index((first, "done")) < seen.index((then, "starts"))


def test_what_a_run_ended_before_is_said() -> None:
    """A ViT's timed forward of a few seconds never reached a schedule step at 100 s: no
    faults.csv row and no word of it, as if the step had not been asked for. Each timed
    forward is a run, as each repetition is one of the twin's."""
    network = NetworkSpec(schedule=(BandwidthStep(at_ms=0, bandwidth_mbps=50),
                                    BandwidthStep(at_ms=100_000, bandwidth_mbps=20)))  # fmt: skip
    spec = EmulatorSpec.model_validate({"faults": [{"kind": "kill_worker", "host": 1, "at_s": 90}]})
    actions = timeline(build_topology(2), network, spec.faults)
    missed: list[list[Action]] = []
    for _ in range(3):
        played = threading.Event()
        clock = FaultClock("run", actions, lambda action, played=played: played.set())
        clock.start()
        assert played.wait(30)  # the step at 0 s, then the run ends
        clock.stop()
        missed.append(clock.unplayed())
    assert [[(a.kind, a.at_s) for a in run] for run in missed] == [
        [("kill_worker", 90.0), ("bandwidth", 100.0)]
    ] * 3
    assert unplayed_warnings([*missed, []], "run") == [  # a fourth run reached both
        "emulator.faults kill_worker on host 1 at 90 s did not play in 3 of 4 runs: each "
        "ended before it (times count from each run's start, its warm-ups left out)",
        "network.schedule step to 20 Mbps at 100 s did not play in 3 of 4 runs: each "
        "ended before it (times count from each run's start, its warm-ups left out)",
    ]
    assert unplayed_warnings([[]] * 4, "job") == []


def test_a_link_down_without_for_s_stays_down() -> None:
    spec = EmulatorSpec.model_validate({"faults": [{"kind": "link_down", "host": 2, "at_s": 1}]})
    (down,) = timeline(build_topology(3), NetworkSpec(), spec.faults)
    assert (down.at_s, down.kind, down.host, down.detail) == (1.0, "link_down", 2, "for good")


def test_a_silence_timeout_under_two_heartbeats_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_crowd(heartbeat_s=1.0, silence_timeout_s=1.5)))
    assert cli.main(["run", str(path), "--mode", "emu", "--out", str(tmp_path / "o")]) == 2
    message = capsys.readouterr().err
    assert str(path) in message and "field 'emulator.silence_timeout_s'" in message
    assert "2 x heartbeat_s" in message


_LINK_DOWN = {"kind": "link_down", "host": 1}
# (emulator settings, the field named, words of the problem): each passed --check
EMULATOR_TIMES = [
    ({"heartbeat_s": 1e-300}, "emulator.heartbeat_s", "greater than or equal to 0.01"),
    ({"task_delay_ms": 1e300}, "emulator.task_delay_ms", "never finishes within a job's 600 s"),
    ({"silence_timeout_s": 1e300}, "emulator.silence_timeout_s", "a job's 600 s deadline"),
    ({"faults": [{**_LINK_DOWN, "at_s": 1e300}]}, "emulator.faults.0.at_s", "600 s deadline"),
    (
        {"faults": [{"kind": "kill_worker", "host": 1, "at_s": 600}]},
        "emulator.faults.0.at_s",
        "600 s deadline",
    ),
    (
        {"faults": [{**_LINK_DOWN, "at_s": 100, "for_s": 500}]},
        "emulator.faults.0.for_s",
        "leave for_s out",
    ),
]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("emulator", "field", "words"),
    EMULATOR_TIMES,
    ids=["tiny-heartbeat", "huge-delay", "huge-silence", "huge-at", "at-deadline", "up-after"],
)
def test_emulator_times_a_job_cannot_play_exit_2(
    emulator: dict[str, Any],
    field: str,
    words: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A heartbeat below the scheduler's tick, a task delay, silence timeout or fault at or
    past the real pipeline's job deadline (JOB_TIMEOUT_S, 600 s) is refused by --check,
    naming the file and the field; one just inside the deadline is a scenario's own."""
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_crowd(**emulator)))
    argv = ["run", str(path), "--check"]
    assert_clean_failure(argv, capsys, tmp_path, str(path), f"field '{field}'", words)
    inside = {"task_delay_ms": 599_999, "heartbeat_s": 0.01, "silence_timeout_s": 599}
    validate_scenario(_crowd(**inside, faults=[{**_LINK_DOWN, "at_s": 1, "for_s": 598}]), path)


def _vit(**emulator: Any) -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load((REPO / "scenarios/emu_smoke.yaml").read_text())
    raw["emulator"] = emulator
    return raw


def test_vit_hosts_are_unlimited_unless_given_cores() -> None:
    assert vit_host_limits(validate_scenario(_vit(), Path("v.yaml")), machine_cores=2) == []
    limited = validate_scenario(_vit(host_cpu_cores=[1.0, 0.25]), Path("v.yaml"))
    fractions = [lim.cpu_fraction for lim in vit_host_limits(limited, machine_cores=2)]
    assert fractions == [0.5, 0.125]


@pytest.mark.parametrize(
    ("cores", "field", "words"),
    [
        ([1.0], "emulator.host_cpu_cores", "1 values for 2 hosts"),
        ([1.0, 0], "emulator.host_cpu_cores.1", "greater"),
        ([1.0, 1e-5], "emulator.host_cpu_cores.1", "greater than or equal to 0.01"),
        ([1.0, 999.0], "emulator.host_cpu_cores.1", "999 cores on a machine"),
    ],
)
def test_bad_host_cores_are_refused_naming_the_field(
    cores: list[float], field: str, words: str
) -> None:
    path = Path("vit.yaml")
    with pytest.raises(InputError) as error:
        check_emulatable(validate_scenario(_vit(host_cpu_cores=cores), path), path)
    assert field in str(error.value) and words in str(error.value)


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (0.5, "should be a whole number"),  # iperf3 reads whole seconds; 0.5 would be 0, no end
        (-1, "greater than or equal to 0"),
        (61, "less than or equal to 60"),
    ],
)
def test_a_link_check_time_iperf3_cannot_take_is_refused(seconds: float, words: str) -> None:
    with pytest.raises(InputError) as error:
        validate_scenario(_vit(link_check_s=seconds), Path("vit.yaml"))
    assert error.value.field == "emulator.link_check_s" and words in error.value.problem


@pytest.mark.parametrize(
    ("network", "sweep_mbps", "field", "words"),
    [
        ({}, [200, 5e-6], "sweeps.0.bandwidth_mbps.1", "0.000005 Mbps: tc sets"),  # 5 bit/s
        ({"medium": "shared"}, [1e-5], "sweeps.0.bandwidth_mbps.0", "0.000003333 Mbps each"),
        ({"schedule": [{"at_ms": 10, "bandwidth_mbps": 2e14}]}, [200],
         "network.schedule.0.bandwidth_mbps", "to 10,000,000,000,000 Mbps"),
    ],
)  # fmt: skip
def test_a_rate_tc_cannot_set_is_refused_naming_the_field(
    network: dict[str, Any], sweep_mbps: list[float], field: str, words: str
) -> None:
    """Below 8 bit/s (a shared medium's station share too) or past 1e13 Mbit/s: the run
    built its network, then tc refused the rate (exit 1, in tc's words)."""
    error = _emulation_refused(network, sweep_mbps)
    assert error.field == field and words in error.problem, error.message
    _emulatable({}, [8e-6, 1e13])  # the ends are fine


@pytest.mark.parametrize(
    ("network", "sweep_mbps", "words"),
    [
        ({"burst_kb": 4194304}, [200], "at most 4,194,303 kb"),  # 2**32 bytes: "Illegal burst"
        ({"burst_kb": 33555}, [200, 1], "takes 274.9 s at 1 Mbps"),  # read back as 581 b
        # .4g wrote the 1,024,000 s "1.024e+06"
        (
            {"burst_kb": 1000},
            [8e-6],
            "1,000 kb takes 1,024,000 s at 0.000008 Mbps: tc sets a"
            " burst of at most 274.9 s of its class's rate (a longer one wraps around)",
        ),
        # 3 stations share 1 Mbps: a leaf's burst at 0.333 Mbps
        ({"burst_kb": 11200, "medium": "shared"}, [1], "1 Mbps shared by 3 stations"),
    ],
)
@pytest.mark.timeout(30)
def test_a_burst_tc_cannot_set_is_refused_naming_the_field(
    network: dict[str, Any], sweep_mbps: list[float], words: str
) -> None:
    """tc holds a burst in 32 bits of bytes (past them the run failed mid-way, exit 1 with
    tc's usage) and of 64 ns ticks at the class's rate (past them tc wrapped the burst
    around: 33555 kb at 1 Mbit/s read back as 581 bytes, and the run went on)."""
    error = _emulation_refused(network, sweep_mbps)
    assert error.field == "network.burst_kb" and words in error.problem, error.message
    _emulatable({"burst_kb": 33554}, [1, 200])  # the longest burst tc keeps at 1 Mbit/s


def _emulatable(network: dict[str, Any], sweep_mbps: list[float]) -> None:
    """Check for the emulator the ViT scenario with ``network``'s fields and the sweep's
    bandwidths (an InputError where it cannot be emulated)."""
    raw = _vit()
    raw["network"].update(network)
    raw["sweeps"][0]["bandwidth_mbps"] = sweep_mbps
    path = Path("vit.yaml")
    check_emulatable(validate_scenario(raw, path), path, machine=False)


def _emulation_refused(network: dict[str, Any], sweep_mbps: list[float]) -> InputError:
    """The InputError ``_emulatable`` raises for these settings."""
    with pytest.raises(InputError) as error:
        _emulatable(network, sweep_mbps)
    return error.value


def test_host_cores_are_for_vit_scenarios() -> None:
    """Refused when the scenario loads, in every mode (a twin run warned of it as the
    emulator's, and the emulator refused it)."""
    with pytest.raises(InputError) as error:
        validate_scenario(_crowd(host_cpu_cores=[1.0]), CROWD)
    assert error.value.field == "emulator.host_cpu_cores" and "phone" in error.value.problem


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("model", "full"),
        ("cpu_limits", False),
        ("cpu_cores_fastest", 0.25),
        ("memory_limits", False),
        ("task_delay_ms", 500),
        ("heartbeat_s", 0.5),
        ("silence_timeout_s", 30),
    ],
)
def test_crowd_settings_are_for_crowd_scenarios(field: str, value: Any) -> None:
    """Refused when a ViT (or decoder) scenario loads, in every mode: no mode reads them
    there, and a ViT run in the emulator ignored them unsaid (task_delay_ms 500 left its
    times as they were)."""
    with pytest.raises(InputError) as error:
        validate_scenario(_vit(**{field: value}), Path("vit.yaml"))
    assert error.value.field == f"emulator.{field}", error.value.message
    assert "only CROWDio runs read it" in error.value.problem
    validate_scenario(_crowd(**{field: value}), CROWD)  # a crowd scenario's own
    validate_scenario(_vit(link_check_s=1), Path("vit.yaml"))  # every run checks its links
    defaults = EmulatorSpec().model_dump()  # as a resolved scenario's file holds them
    validate_scenario(_vit(**defaults), Path("vit.yaml"))


def test_cpu_share_follows_the_class_speed_and_memory_the_session_budget() -> None:
    """A phone's host memory is its session budget for its sessions, plus what its worker
    process holds before any (``worker_mb``): the budget alone held the interpreter too,
    which the twin's phone has none of, and which a worker's free RAM no longer counts
    (``Worker.free_ram_mb``), so a stage dispatched as fitting could be killed there."""
    scenario = validate_scenario(_crowd(cpu_cores_fastest=1.0), CROWD)
    phones = crowd_phones(scenario, CROWD)
    assert [p.name for p in phones] == ["low", "mid", "high"]
    limits = phone_limits(phones, scenario.emulator, cores=2, worker_mb=70.0)
    assert limits[0].cpu_fraction is None and limits[0].memory_mb is None  # the foreman's host
    # android_low/mid/high: 4, 8, 16 GFLOPS -> 0.25, 0.5, 1 core of 2
    assert [lim.cpu_fraction for lim in limits[1:]] == [0.125, 0.25, 0.5]
    # RAM less what Android keeps: 3300 - 1536 for the low class; and the worker's 70 MB
    assert limits[1].memory_mb == pytest.approx(3300 - 1536 + 70.0)
    off = validate_scenario(_crowd(cpu_limits=False, memory_limits=False), CROWD).emulator
    assert all(lim == limits[0] for lim in phone_limits(phones, off, cores=2, worker_mb=70.0))
    assert crowd_bandwidths(scenario) == [10, 100]


@pytest.mark.parametrize(
    ("fractions", "machine_cores"),
    [
        ([0.25, 0.5], 2),  # under
        ([0.5, 0.5], 2),  # exactly the machine
        ([0.1 / 11] * 110, 11),  # exactly, though the fractions add up to a hair over 1
        ([None, None], 2),  # no quota (cpu limits off, or none given)
    ],
)
def test_cpu_quotas_that_fit_the_machine_are_not_warned_about(
    fractions: list[float | None], machine_cores: int
) -> None:
    limits = [HostLimits(cpu_fraction=f, memory_mb=100) for f in fractions]
    assert cpu_quota_warning(limits, machine_cores, "emulator.host_cpu_cores") is None


def test_cpu_quotas_over_the_machine_are_warned_about_naming_the_field() -> None:
    limits = [HostLimits(), HostLimits(cpu_fraction=0.5), HostLimits(cpu_fraction=0.75)]
    warning = cpu_quota_warning(limits, 2, "emulator.host_cpu_cores")
    assert warning is not None and warning.startswith("emulator.host_cpu_cores gives the hosts")
    assert "2.5 cores in all, more than this machine's 2: hosts busy at once share" in warning


def test_the_full_crowd_scenario_is_warned_that_its_phones_share_two_cores() -> None:
    """emu_crowdio_full: 2 low, 2 mid, 1 high phone at 0.25, 0.5 and 1 core: 2.5 cores."""
    path = REPO / "scenarios/emu_crowdio_full.yaml"
    scenario = load_scenario(path)
    assert host_cpu_warning(scenario, path, machine_cores=2) == (
        "emulator.cpu_cores_fastest gives the hosts CPU quotas of 2.5 cores in all, more than "
        "this machine's 2: hosts busy at once share its cores, so compute and load times come "
        "out longer than on devices with a CPU each"
    )
    assert host_cpu_warning(scenario, path, machine_cores=3) is None
    off = load_scenario(path, ["emulator.cpu_limits=false"])
    assert host_cpu_warning(off, path, machine_cores=2) is None


def test_an_emu_run_reports_the_cpu_quota_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's warnings carry it (the network and its checks stubbed: no root)."""
    monkeypatch.setattr(runner, "check_emulatable", lambda scenario, path: None)
    monkeypatch.setattr(runner, "run_emu", lambda *args, **kwargs: runner.EmuRun([], []))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    path = REPO / "scenarios/emu_crowdio_full.yaml"
    expected = host_cpu_warning(load_scenario(path), path, machine_cores=2)
    assert expected is not None
    assert [w for w in edgetwin.run(path, mode="emu").warnings if "CPU quotas" in w] == [expected]


def test_vit_hosts_cpu_cores_over_the_machine_are_warned_about() -> None:
    path = Path("v.yaml")
    over = host_cpu_warning(validate_scenario(_vit(host_cpu_cores=[2, 1]), path), path, 2)
    assert over is not None and "emulator.host_cpu_cores" in over and "3 cores in all" in over
    assert host_cpu_warning(validate_scenario(_vit(), path), path, machine_cores=2) is None


@pytest.mark.parametrize(
    ("faults", "field", "words"),
    [
        ([{"kind": "unplug", "host": 1, "at_s": 1}], "emulator.faults.0", "kind"),
        (
            [{"kind": "link_down", "host": 1, "at_s": 1, "for_s": 0}],
            "emulator.faults.0.for_s",
            "greater",
        ),
        ([{"kind": "kill_worker", "host": 0, "at_s": 1}], "emulator.faults.0.host", "greater"),
        ([{"kind": "kill_worker", "host": 1, "at_s": -1}], "emulator.faults.0.at_s", "greater"),
        ([{"kind": "kill_worker", "host": 9, "at_s": 1}], "emulator.faults.0.host", "no host 9"),
    ],
)
def test_bad_faults_exit_2_naming_file_and_field(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    faults: list[dict[str, Any]],
    field: str,
    words: str,
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_crowd(faults=faults)))
    out = tmp_path / "out"
    code = cli.main(["run", str(path), "--mode", "emu", "--out", str(out), "--quiet"])
    message = capsys.readouterr().err
    assert code == 2 and "Traceback" not in message
    assert str(path) in message and f"field '{field}'" in message and words in message
    assert not out.exists()


def test_faults_need_a_crowd_scenario() -> None:
    """Refused when the scenario loads, in every mode (a twin or local run warned of them
    as the emulator's, and the emulator refused them)."""
    raw: dict[str, Any] = yaml.safe_load((REPO / "scenarios/emu_smoke.yaml").read_text())
    raw["emulator"] = {"faults": [{"kind": "kill_worker", "host": 1, "at_s": 1}]}
    with pytest.raises(InputError) as error:
        validate_scenario(raw, Path("vit.yaml"))
    assert error.value.field == "emulator.faults" and "crowd" in error.value.problem


@pytest.mark.parametrize(
    ("scenario", "mode", "items", "field"),
    [
        ("emu_smoke", "emu", ["emulator.faults=[{kind: kill_worker, host: 1, at_s: 1}]"],
         "emulator.faults"),
        ("emu_smoke", "emu", ["emulator.host_cpu_cores=[1, 1, 1]"], "emulator.host_cpu_cores"),
        ("emu_smoke", "local", ["model.bytes_per_element=2"], "model.bytes_per_element"),
        ("emu_crowdio", "emu", ["emulator.faults=[{kind: kill_worker, host: 9, at_s: 1}]"],
         "emulator.faults.0.host"),
        ("emu_crowdio", "emu", ["crowd.fleet.0.count=300"], "crowd.fleet"),
        ("llm_smoke", "emu", ["devices.0.count=300", "sweeps.0.devices=[251]",
                              "strategies=[{name: voltage}]", "workload.prompt_tokens=512"],
         "sweeps.0.devices"),
    ],
)  # fmt: skip
def test_check_refuses_what_the_mode_cannot_run(
    capsys: pytest.CaptureFixture[str], scenario: str, mode: str, items: list[str], field: str
) -> None:
    """``--check`` runs the checks of the scenario's mode its run would start with (not
    those of this machine): each of these used to pass ``--check`` and fail the run."""
    path = REPO / "scenarios" / f"{scenario}.yaml"
    sets = [arg for item in items for arg in ("--set", item)]
    code = cli.main(["run", str(path), "--mode", mode, "--out", "unused", "--check", *sets])
    message = capsys.readouterr().err
    assert code == 2 and "Traceback" not in message
    assert f"field '{field}'" in message


def test_check_passes_a_runnable_scenario_without_the_machine(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scenario checks alone: an emulator run is checked on a machine without root."""
    monkeypatch.setattr(runner, "missing_requirements", lambda: ["root (run with sudo)"])
    scenarios = REPO / "scenarios"
    for name in ("emu_smoke", "emu_crowdio_faults"):
        path = scenarios / f"{name}.yaml"
        assert cli.main(["run", str(path), "--mode", "emu", "--out", "x", "--check"]) == 0
    evaluation = str(scenarios / "affinity_emu.eval.yaml")
    assert cli.main(["evaluate-affinity", evaluation, "--out", "x", "--check"]) == 0
    assert capsys.readouterr().out.count(": ok") == 3
    assert cli.main(["run", str(path), "--mode", "emu", "--out", "x"]) == 2  # the run needs it
    assert "needs root" in capsys.readouterr().err


def test_a_topology_is_bounded_by_its_subnet() -> None:
    hosts = build_topology(MAX_HOSTS).hosts
    assert len({h.ip for h in hosts}) == MAX_HOSTS and hosts[-1].ip.endswith(f".{MAX_HOSTS}")
    with pytest.raises(ValueError, match="hosts"):
        build_topology(MAX_HOSTS + 1)


def test_a_crowd_the_broadcast_cannot_fit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every phone's worker is an interpreter with ONNX Runtime, and loads the first
    stage: what the machine must have free before any host starts."""
    scenario = validate_scenario(_crowd(), CROWD)
    need = phones_bytes(scenario, CROWD)
    worker = interpreter(WORKER)
    assert worker.own_bytes > 10 * 2**20 and worker.files_bytes > 0  # measured
    # every budget holds the stage; the libraries' files are counted once
    assert need == 3 * (stage_weight_bytes(TINY, 3)[0] + worker.own_bytes) + worker.files_bytes
    monkeypatch.setattr(memory_check, "available_bytes", lambda: int(need) - 1)
    with pytest.raises(InputError) as error:
        check_emulatable(scenario, CROWD)
    assert error.value.field == "crowd.fleet" and "broadcast" in error.value.problem
    check_emulatable(scenario, CROWD, machine=False)  # the scenario alone is fine


def test_the_broadcast_counts_the_phones_whose_budget_holds_the_stage_s_session() -> None:
    """The core broadcasts a stage to a worker whose free RAM holds its session (twice its
    weights, in MiB as the worker's budget): a budget of 1.5 x the weights holds the
    weights but not the session, so that phone loads nothing. (It was counted: the weights
    were compared with the budget in decimal megabytes.)"""
    weights = stage_weight_bytes(TINY, 3)[0]
    raw = _crowd()
    raw["crowd"]["job"]["stages"][0]["ram_mb"] = 0.1  # the twin's figure, under every budget
    low = crowd_phones(validate_scenario(raw, CROWD), CROWD)[0].phone_class.profile
    raw["crowd"]["fleet"][0]["ram_mb"] = low.os_reserved_mb + 1.5 * weights / 2**20
    worker = interpreter(WORKER)
    need = phones_bytes(validate_scenario(raw, CROWD), CROWD)
    assert need == 2 * weights + 3 * worker.own_bytes + worker.files_bytes
