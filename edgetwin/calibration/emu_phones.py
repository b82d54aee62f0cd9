"""The emulator's phones as phone profiles, fitted from the real foreman's job records.

An emulated phone is a Mininet host limited to a share of this machine's cores,
running the real worker; with every task it reports the load that made the stage
resident and its decode, inference and encode times, and the foreman records
when it dispatched the task and when the result came. From the jobs of one run
(``PipelineSummary`` records, ``summaries.jsonl``), per phone class:

- session: this machine's measured load model
  (``data/traces/onnx-session-load-2026-12``, the shape over the stages) times one
  factor, the median of the class's warm loads over the model's prediction (a host
  at a quarter of a core loads about four times slower); ``load_cv``: the spread of
  the loads of one stage on one class about their median, over every class and stage,
  weighted by the load's length (run-to-run noise: a stage's systematic difference is
  not noise, and the millisecond loads of the head, mostly messaging, say nothing);
- inference: ``floor + gflops / rate`` (non-negative least squares) on the median
  decode + inference + encode of each stage;
- message overhead: half the median of what a task's time on the foreman's clock
  (dispatch to done) has beyond the part of its load in that time and its work, less
  the bytes' time on the link;
- the link's share of its rate: median iperf3 goodput / set rate (``link_check.csv``);
- RAM, cache, battery and power: the class's profile in the scenario (the emulator
  gives each host that profile's budget and power model).

The pipeline latencies are never fitted: the twin predicts them from these.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from statistics import median

import numpy as np
from scipy.optimize import nnls

from edgetwin.calibration.fit_emu import goodput_share
from edgetwin.calibration.session_load import fit_session_load, read_session_loads
from edgetwin.configuration import crowd_runs
from edgetwin.crowd_fleet import PhoneClass, resolve_fleet
from edgetwin.crowd_spec import member_names
from edgetwin.emu.crowdio.records import PipelineSummary
from edgetwin.errors import InputError
from edgetwin.phone_profile import PhoneProfile
from edgetwin.scenario import Scenario
from edgetwin.sim.crowd.runner import CrowdSetup, simulate_crowd

SESSION_LOADS = (
    Path(__file__).resolve().parents[2] / "data/traces/onnx-session-load-2026-12/session_load.csv"
)


def read_summaries(folder: Path) -> list[PipelineSummary]:
    """``folder/summaries.jsonl``: one job summary a line."""
    path = folder / "summaries.jsonl"
    if not path.is_file():
        raise InputError(path, None, "file not found")
    return [PipelineSummary.model_validate_json(line) for line in path.read_text().splitlines()]


def fit_emulated_phones(
    scenario: Scenario,
    scenario_path: Path,
    summaries: Sequence[PipelineSummary],
    link_check: Path | None = None,
) -> list[PhoneProfile]:
    """One profile per fleet class (named ``emu_<class>``), from the jobs' task records."""
    assert scenario.crowd is not None
    classes = resolve_fleet(scenario.crowd, scenario_path)
    class_of = _class_of_worker(scenario)
    stages = {s.name: s for s in scenario.crowd.job.stages}
    machine = fit_session_load(read_session_loads(SESSION_LOADS))
    efficiency = 1.0 if link_check is None else goodput_share(link_check)
    loads: dict[tuple[str, str], list[float]] = defaultdict(list)
    work: dict[tuple[str, str], list[float]] = defaultdict(list)
    residual: list[float] = []
    rate_kbps = scenario.network.bandwidth_mbps * efficiency * 1e3
    for summary in summaries:
        for task in summary.tasks:
            report, kind = task.report, class_of[task.worker]
            if report.load_kind == "warm":
                loads[(kind, task.stage)].append(report.load_ms)
            busy_ms = report.decode_ms + report.compute_ms + report.encode_ms
            work[(kind, task.stage)].append(busy_ms)
            wire_ms = (report.bytes_in + report.bytes_out) * 8 / rate_kbps
            residual.append(
                task.done_ms - task.dispatch_ms - task.load_after_dispatch_ms - busy_ms - wire_ms
            )
    overhead_ms = max(0.0, median(residual) / 2 - scenario.network.latency_ms)
    ratios: dict[str, list[float]] = defaultdict(list)  # load / this machine's, by class
    for (kind, name), ms in loads.items():
        ratios[kind].extend(m / machine.predict_ms(stages[name].size_mb) for m in ms)
    slowdown = {kind: median(rs) for kind, rs in ratios.items()}
    deviation = sum((m - median(ms)) ** 2 for ms in loads.values() for m in ms)
    load_cv = float(np.sqrt(deviation / sum(median(ms) ** 2 for ms in loads.values() for _ in ms)))
    profiles = []
    for phone_class in classes:
        kind = phone_class.spec.name
        if kind not in slowdown:
            raise InputError(scenario_path, "crowd.fleet", f"no warm load of class {kind!r}")
        floor_ms, gflops = _inference(
            [(stages[name].gflops, median(ms)) for (k, name), ms in work.items() if k == kind]
        )
        base = phone_class.profile
        k = slowdown[kind]
        session = {
            "floor_s": machine.floor_ms * k / 1e3,
            "s_per_mb": machine.ms_per_mb * k / 1e3,
            "s_per_mapped_mb": machine.ms_per_mapped_mb * k / 1e3,
            "load_cv": min(load_cv, 1.0),
        }
        profiles.append(
            base.model_copy(
                update={
                    "name": f"emu_{kind}",
                    "description": f"emulated {kind} phone ({base.name}'s host share)",
                    "cpu_gflops": gflops,
                    "inference_floor_ms": floor_ms,
                    "session": base.session.model_validate(session),
                    "network": base.network.model_copy(
                        update={
                            "message_overhead_ms": overhead_ms,
                            "bandwidth_efficiency": efficiency,
                        }
                    ),
                    "fit": {
                        "slowdown_vs_machine": k,
                        "tasks": sum(len(s.tasks) for s in summaries),
                    },
                }
            )
        )
    return profiles


def twin_latencies(
    scenario: Scenario, scenario_path: Path, phones: Sequence[PhoneProfile]
) -> dict[str, list[float]]:
    """The twin's pipeline latency (s) of every run of the scenario, by strategy, on
    ``phones`` (one per fleet class, in fleet order)."""
    assert scenario.crowd is not None
    classes = resolve_fleet(scenario.crowd, scenario_path)
    setup = CrowdSetup(
        [PhoneClass(c.spec, phone) for c, phone in zip(classes, phones, strict=True)], {}
    )
    twin = scenario.model_copy(update={"mode": "twin"})
    latencies: dict[str, list[float]] = defaultdict(list)
    for run in crowd_runs(twin):
        row = simulate_crowd(twin, setup, run).rows[0]
        latencies[run.strategy].append((row.total_ms or 0.0) / 1e3)
    return dict(latencies)


def _class_of_worker(scenario: Scenario) -> dict[str, str]:
    """Worker name (``low-0``, ``high``) -> its fleet class name, as the fleet names them
    (a prefix match gave class ``a``'s name to the phone of a class named ``a-b``)."""
    crowd = scenario.crowd
    assert crowd is not None
    counts = crowd.class_counts()
    return {
        member: spec.name
        for spec, count in zip(crowd.fleet, counts, strict=True)
        for member in member_names(spec.name, count)
    }


def _inference(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(floor ms, GFLOP/s) of ``ms = floor + gflops * 1e3 / rate`` on (gflops, ms) points."""
    a = np.array([[1.0, g * 1e3] for g, _ in points])
    y = np.array([ms for _, ms in points])
    (floor_ms, per_gflop), _ = nnls(a / y[:, None], np.ones_like(y))
    return float(floor_ms), float(1.0 / per_gflop) if per_gflop > 0 else float("inf")
