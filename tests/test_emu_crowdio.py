"""CROWDio in the emulator for real (root, Mininet): the shipped small scenario, host limits,
and no leftovers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import psutil
import pytest
from emu_checks import RecordedSteps, needs_emulator, teardown_checked

from edgetwin.emu.crowdio.launcher import WorkerSpec, run_pipeline
from edgetwin.emu.crowdio.model import (
    FULL,
    TINY,
    DistilBertConfig,
    distilbert_job,
    make_inputs,
    reference_logits,
)
from edgetwin.emu.crowdio.records import PipelineSummary
from edgetwin.emu.mininet import congestion
from edgetwin.emu.mininet.cgroups import leftover_groups, memory_parent
from edgetwin.emu.mininet.crowd import CrowdEmuRun, HostPlacement, crowd_topology, run_crowd_emu
from edgetwin.emu.mininet.lock import emulator_lock
from edgetwin.emu.mininet.net import (
    cleanup_leftovers,
    emulated_network,
    leftover_links,
    leftover_processes,
)
from edgetwin.emu.mininet.topology import (
    HostLimits,
    build_topology,
    class_show_command,
    parse_class_rate_mbps,
)
from edgetwin.links import TOLERANCE_PCT
from edgetwin.network_spec import NetworkSpec
from edgetwin.run_folders import EMU, leftover_folders
from edgetwin.scenario import Scenario, load_scenario

pytestmark = needs_emulator

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios/emu_crowdio.yaml"


def assert_exactly_once(summary: PipelineSummary, config: DistilBertConfig = TINY) -> None:
    """Every (input, stage) completed once, by the foreman's records, and the result is the
    whole model's."""
    done = Counter((e.input_index, e.stage_index) for e in summary.events if e.kind == "complete")
    expected = {(i, s): 1 for i in range(summary.inputs) for s in range(len(summary.stages))}
    assert done == Counter(expected)
    reference = reference_logits(config, 0, make_inputs(config, summary.inputs, 0))
    np.testing.assert_allclose(np.array(summary.logits), reference, atol=1e-4)


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return load_scenario(SCENARIO)


@pytest.fixture(scope="module")
def steps() -> RecordedSteps:
    return RecordedSteps()


@pytest.fixture(scope="module")
def run(scenario: Scenario, steps: RecordedSteps) -> CrowdEmuRun:
    with teardown_checked() as teardown:
        result = run_crowd_emu(scenario, SCENARIO, link_check_s=1, timeout_s=120, steps=steps)
    teardown.assert_clean()
    return result


def test_link_checks_show_their_progress(run: CrowdEmuRun, steps: RecordedSteps) -> None:
    """Both directions of each of the 3 phones' links, at each bandwidth, after the start-up."""
    assert steps.seen[1:] == [("link checks at 10 Mbps", 6, 6), ("link checks at 100 Mbps", 6, 6)]


def test_the_start_up_shows_its_steps(run: CrowdEmuRun, steps: RecordedSteps) -> None:
    """A crowd run said nothing for its first ~21 s at load 6-7 (the worker's interpreter
    measured, the stages exported to ONNX, the network built): each step is told as done,
    in order, before the first link check."""
    assert steps.seen[0] == ("emu start-up", 3, 3)
    assert steps.names["emu start-up"] == [
        "worker interpreter measured",
        "stages exported to ONNX",
        "network up",
    ]


def test_rows_are_the_crowd_rows_with_mode_emu(run: CrowdEmuRun) -> None:
    assert [(r.strategy, r.bandwidth_mbps, r.mode) for r in run.rows] == [
        ("crowdio_streaming", 10, "emu"),
        ("crowdio_barrier", 10, "emu"),
        ("crowdio_streaming", 100, "emu"),
        ("crowdio_barrier", 100, "emu"),
    ]
    for row, summary in zip(run.rows, run.summaries, strict=True):
        assert row.status == "ok" and (row.devices, row.batch, row.stages) == (3, 5, 3)
        assert row.total_ms == summary.pipeline_latency_ms and row.cold_loads >= 3
        assert row.energy_j is not None and row.energy_j > 0 and row.peak_session_mb is not None
        assert_exactly_once(summary)


def test_the_run_names_the_congestion_control_its_hosts_used(run: CrowdEmuRun) -> None:
    """The machine's (the scenario names none), as the resolved scenario records it."""
    assert run.congestion_control == Path(congestion.DEFAULT).read_text().strip()


def test_the_stages_cross_the_shaped_links(run: CrowdEmuRun) -> None:
    for slow, summary in zip(run.rows[:2], run.summaries[:2], strict=True):
        # every stage a worker loads crosses its phone's 10 Mbps link, and the phone that
        # loaded the most got at least its share: at least this long (other load only adds
        # to it); unshaped it would take a tenth
        share_bytes = summary.model_bytes_sent / len(summary.workers)
        assert slow.total_ms > 0.8 * share_bytes * 8 / 10e3
    hosts = {(c.bandwidth_mbps, c.sender, c.receiver) for c in run.links}
    assert len(hosts) == 2 * 3 * 2  # both bandwidths, every phone, both directions
    # the shaper holds every direction to its rate (below it, on a busy machine, is reported)
    assert all(c.shaped_mbps == c.bandwidth_mbps for c in run.links), run.links
    assert all(c.error_pct <= TOLERANCE_PCT for c in run.links), run.links
    for row in run.rows:
        errors = [c.error_pct for c in run.links if c.bandwidth_mbps == row.bandwidth_mbps]
        assert row.link_error_pct == max(errors, key=abs)


def test_the_foremans_broadcast_crosses_each_phones_link_alone() -> None:
    """The foreman is a server: its link is not shaped, so a job's first stage, sent to
    every phone as it starts, crosses each phone's link at once, as in the twin. With the
    foreman's link shaped like a phone's (until 2026-12-07) the three blobs shared it, and
    three phones took about three times as long as one to get theirs (at 0.5 Mbps, 3.2 s
    for one phone, 9.9 s for three; now 3.3 s: cell_a's 185 KB of base64 take 3.0 s). One
    network, two jobs: one phone, then three; and the live queues, the phones' shaped and
    the foreman's not."""
    job = distilbert_job(TINY, inputs=1, stages=3, seed=0)
    rate_mbps = 0.5

    def broadcast_ms(summary: PipelineSummary) -> float:
        """When the last phone had the first stage loaded, from the job's start."""
        return max(e.t_ms for e in summary.events if e.kind == "loaded" and e.stage_index == 0)

    with (
        teardown_checked() as teardown,
        emulated_network(crowd_topology(3), NetworkSpec(), rate_mbps) as net,
    ):
        queues = [
            net.output(class_show_command(node, iface))
            for host in net.topology.hosts
            for node, iface in ((host.name, host.iface), (net.topology.bridge, host.bridge_port))
        ]
        placement = HostPlacement(net)
        one = run_pipeline(job, [WorkerSpec("worker-0")], placement, timeout_s=120)
        workers = [WorkerSpec(f"worker-{i}") for i in range(3)]
        three = run_pipeline(job, workers, placement, timeout_s=120)
    teardown.assert_clean()
    assert len({e.worker for e in three.events if e.kind == "loaded" and e.stage_index == 0}) == 3
    assert broadcast_ms(three) < 2 * broadcast_ms(one), (broadcast_ms(three), broadcast_ms(one))
    assert queues[:2] == ["", ""]  # the foreman's interface and bridge port: no htb class
    assert all(parse_class_rate_mbps(listing) == rate_mbps for listing in queues[2:])


def test_payloads_by_reference_cross_the_phones_links_to_the_foremans_store() -> None:
    """The hosts share this machine's disk, phones do not: the workers get no store folder
    and fetch and put every payload (all by reference here) from the store the foreman
    serves on its host, over their links."""
    job = distilbert_job(TINY, inputs=3, stages=3, seed=0)
    workers = [WorkerSpec(f"worker-{i}") for i in range(2)]
    with (
        teardown_checked() as teardown,
        emulated_network(build_topology(3), NetworkSpec(), 10) as net,
    ):
        placement = HostPlacement(net)
        assert placement.store_over_network
        summary = run_pipeline(job, workers, placement, inline_max_bytes=0, timeout_s=90)
    teardown.assert_clean()
    reference = reference_logits(TINY, job.seed, job.inputs)
    np.testing.assert_allclose(np.array(summary.logits), reference, atol=1e-5)
    assert all(t.report.store_ms > 0 and t.report.bytes_out > 0 for t in summary.tasks)


def test_hosts_get_their_cpu_quota_and_memory_limit() -> None:
    limits = [HostLimits(), HostLimits(0.125, 300.0), HostLimits(0.25, None)]
    busy = "import os, time\nt = time.monotonic()\nwhile time.monotonic() - t < 1.5: pass\n"
    report = "print(os.times().user + os.times().system, open('/proc/self/cgroup').read())"
    with (
        teardown_checked() as teardown,
        emulated_network(build_topology(3), NetworkSpec(), 100, limits) as net,
    ):
        hosts = [net.popen(r, [sys.executable, "-c", busy + report], None) for r in (1, 2)]
        outputs = [host.communicate()[0].decode() for host in hosts]
        grab = "b = bytearray(500 * 2**20); b[::4096] = b'x' * len(b[::4096])"
        over = [net.popen(r, [sys.executable, "-c", grab], None) for r in (1, 2)]
        codes = [process.wait() for process in over]
        parent = memory_parent()
        assert parent is not None
        limit_bytes = int((parent / "etwh1" / "memory.limit_in_bytes").read_text())
        assert not (parent / "etwh2").exists()  # no memory limit asked for host 2
    teardown.assert_clean()
    assert limit_bytes == 300 * 2**20
    assert codes[0] != 0 and codes[1] == 0  # 500 MB: over host 1's 300, host 2 has no limit
    cores = os.cpu_count() or 1
    for limit, output in zip(limits[1:], outputs, strict=True):
        cpu_s = float(output.split()[0])
        assert limit.cpu_fraction is not None
        assert cpu_s < 1.5 * limit.cpu_fraction * cores * 1.2  # at most the quota (+ slack)
    low_groups = dict(line.split(":")[1:] for line in outputs[0].split()[1:] if ":" in line)
    assert low_groups["cpu"] == "/etwh1" and low_groups["memory"].endswith("/etwh1")


def test_torn_down_after_an_error_mid_run(scenario: Scenario) -> None:
    def fail() -> None:
        raise KeyboardInterrupt

    with teardown_checked() as teardown, pytest.raises(KeyboardInterrupt):
        run_crowd_emu(scenario, SCENARIO, on_progress=fail, link_check_s=0, timeout_s=60)
    teardown.assert_clean()


def test_leftovers_of_a_killed_run_are_removed_by_the_next(scenario: Scenario) -> None:
    code = (
        "from pathlib import Path\n"
        "from edgetwin.emu.mininet.crowd import run_crowd_emu\n"
        "from edgetwin.scenario import load_scenario\n"
        f"path = Path({str(SCENARIO)!r})\n"
        "run_crowd_emu(load_scenario(path), path, link_check_s=0, timeout_s=60)\n"
    )
    run = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 600  # another engineer's run may hold the lock first
        while len(psutil.Process(run.pid).children(recursive=True)) < 8:  # shells, workers
            assert run.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        time.sleep(1)
    finally:
        run.kill()  # SIGKILL: no teardown at all
        run.wait()
    with emulator_lock():
        left = [*leftover_links(), *leftover_processes(), *leftover_groups()]
        assert "etws0" in left and any(isinstance(g, Path) for g in left)
        # the killed run's folder, its job's folder inside (another killed run's may be there)
        (scratch,) = [
            f for f in leftover_folders(EMU) if f.name.startswith(f"edgetwin-emu-{run.pid}.")
        ]
        assert any(scratch.glob("crowdio-*/foreman.log"))
        cleanup_leftovers()  # what the next run does first
        assert not leftover_links() and not leftover_processes() and not leftover_groups()
        assert not leftover_folders(EMU) and not scratch.exists()


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_full_size_distilbert_on_five_emulated_phones() -> None:
    path = SCENARIO.with_name("emu_crowdio_full.yaml")
    run = run_crowd_emu(load_scenario(path), path, link_check_s=1, timeout_s=600)
    assert [r.strategy for r in run.rows] == ["crowdio_streaming", "crowdio_barrier"]
    for row, summary in zip(run.rows, run.summaries, strict=True):
        assert row.status == "ok" and row.devices == 5 and row.warm_loads > 0
        assert row.cold_loads == 0  # warm: every stage in every worker's cache first
        assert_exactly_once(summary, FULL)
        # beats went out while full-size stages loaded: no worker was taken for lost
        assert not any(w.disconnected for w in summary.workers) and row.tasks_redispatched == 0
