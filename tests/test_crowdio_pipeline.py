"""The CROWDio pipeline end to end: a foreman and worker processes on loopback.

Tiny DistilBERT; ``task_delay_ms`` makes workers slow enough for ordering to be
observable (and a kill to land mid-task). Every test checks that no process is
left behind.
"""

from __future__ import annotations

import base64
import itertools
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest

from edgetwin.calibration.readers.android import read_worker_log
from edgetwin.emu.crowdio.launcher import (
    KillPlan,
    LocalPlacement,
    Processes,
    WorkerSpec,
    run_pipeline,
    run_pipeline_local,
)
from edgetwin.emu.crowdio.liveness import LivenessRule
from edgetwin.emu.crowdio.model import (
    FULL,
    TINY,
    DistilBertConfig,
    distilbert_job,
    reference_logits,
)
from edgetwin.emu.crowdio.records import Event, PipelineSummary
from edgetwin.emu.crowdio.rows import summary_row
from edgetwin.emu.crowdio.sdk import JobError, PipelineJob, pipeline_job
from edgetwin.emu.crowdio.telemetry import LOG_COLUMNS
from edgetwin.result_cells import read_results
from edgetwin.results import write_results
from edgetwin.worker_log import COLUMNS

SLOW_WORKER = [0.0, 0.0, 600.0]  # worker-2 takes 0.6 s per task


@pytest.fixture(autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """No process the test started outlives it (ones started before, such as an earlier
    pool's resource tracker, are not the test's)."""
    before = {child.pid for child in psutil.Process().children(recursive=True)}

    def new_children() -> list[psutil.Process]:
        return [c for c in psutil.Process().children(recursive=True) if c.pid not in before]

    yield
    deadline = time.monotonic() + 5
    while (children := new_children()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert children == [], f"processes left behind: {children}"


@pytest.fixture(scope="module")
def streaming_job() -> PipelineJob:
    return distilbert_job(TINY, inputs=3, stages=3, mode="streaming", seed=0)


@pytest.mark.parametrize("workers", [0, -1])
def test_no_workers_is_refused_before_anything_starts(
    streaming_job: PipelineJob, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """workers=0 started a foreman and failed the job with "every worker process exited"
    (there were none); -1 said "task_delay_ms has 0 values for -1 workers". No process
    may start: that was a wall-clock bound (under 1 s), which a busy machine can break."""
    started: list[object] = []

    def no_process(*args: object, **kwargs: object) -> None:
        started.append(args)
        raise AssertionError("a process was started")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    with pytest.raises(ValueError, match=rf"^workers must be >= 1 \(got {workers}\)$"):
        run_pipeline_local(streaming_job, workers=workers, timeout_s=20)
    assert started == []


def _barrier(job: PipelineJob) -> PipelineJob:
    return pipeline_job(job.stages, job.inputs, mode="barrier", seed=job.seed)


def _times(summary: PipelineSummary, kind: str, stage_index: int) -> list[float]:
    return [e.t_ms for e in summary.events if e.kind == kind and e.stage_index == stage_index]


def _positions(summary: PipelineSummary, kind: str, stage_index: int) -> list[int]:
    """Where events of a kind and stage are in the event log."""
    events = summary.events
    return [i for i, e in enumerate(events) if e.kind == kind and e.stage_index == stage_index]


def _completions(summary: PipelineSummary) -> Counter[tuple[int | None, int | None]]:
    return Counter((e.input_index, e.stage_index) for e in summary.events if e.kind == "complete")


def _assert_reference_result(summary: PipelineSummary, job: PipelineJob) -> None:
    reference = reference_logits(TINY, job.seed, job.inputs)
    np.testing.assert_allclose(np.array(summary.logits), reference, atol=1e-5)
    classes = reference.argmax(axis=1)
    counts = Counter(int(c) for c in classes)
    assert summary.input_classes == tuple(int(c) for c in classes)
    assert summary.majority_class == max(counts, key=lambda c: (counts[c], reference.mean(0)[c]))


def test_streaming_sends_a_fast_input_on_before_a_slow_one_ends_its_first_stage(
    streaming_job: PipelineJob, tmp_path: Path
) -> None:
    """Streaming releases (i, 1) when (i, 0) completes. The test asked that a fast input
    finish all three stages within the slow worker's 600 ms: two cold loads and two
    inferences, which load stretches (82-309 ms at a load average of 4; with a 40 ms lead
    it failed 3 runs in 4). The foreman's order shows the mechanism with one inference:
    a stage-1 task is dispatched before the slow stage-0 task completes."""
    summary = run_pipeline_local(
        streaming_job, workers=3, task_delay_ms=SLOW_WORKER, telemetry_dir=tmp_path
    )
    _assert_reference_result(summary, streaming_job)
    assert _completions(summary) == Counter({(i, s): 1 for i in range(3) for s in range(3)})
    assert min(_positions(summary, "dispatch", 1)) < max(_positions(summary, "complete", 0))
    assert summary.tasks_redispatched == 0 and len(summary.tasks) == 9

    # the workers' telemetry is the Android worker log, and reads back with its reader
    assert LOG_COLUMNS == COLUMNS
    logs = {w.worker: read_worker_log(tmp_path / f"{w.worker}.csv") for w in summary.workers}
    inferred = sorted(e.task_id or "" for log in logs.values() for e in log if e.event == "infer")
    assert inferred == sorted(f"job-1/i{t.input_index}/{t.stage}" for t in summary.tasks)
    for worker, log in logs.items():
        assert all(e.worker_id == worker and e.job_id == "job-1" for e in log)
        assert [e.start_s for e in log] == sorted(e.start_s for e in log)
        cold = [e for e in log if e.event == "load_cold"]
        assert len(cold) == next(w.cold_loads for w in summary.workers if w.worker == worker)
        assert all(e.size_bytes and e.size_bytes > 0 for e in cold)
        assert all(e.battery_mah is not None and e.battery_mah < 4000 for e in log)


def test_barrier_holds_each_stage_until_the_previous_one_is_done(
    streaming_job: PipelineJob,
) -> None:
    job = _barrier(streaming_job)
    summary = run_pipeline_local(job, workers=3, task_delay_ms=SLOW_WORKER)
    _assert_reference_result(summary, job)
    for stage in (1, 2):
        assert max(_times(summary, "complete", stage - 1)) < min(_times(summary, "dispatch", stage))


def test_loads_are_jit_and_a_worker_holds_one_stage_at_a_time(
    streaming_job: PipelineJob, tmp_path: Path
) -> None:
    job = _barrier(streaming_job)
    summary = run_pipeline_local(job, workers=3, task_delay_ms=SLOW_WORKER, telemetry_dir=tmp_path)
    events = summary.events
    first_dispatch = next(i for i, e in enumerate(events) if e.kind == "dispatch")
    # cell_a goes to every worker at once, before any task
    broadcast = [e for e in events[:first_dispatch] if e.kind == "load"]
    assert sorted(str(e.worker) for e in broadcast) == ["worker-0", "worker-1", "worker-2"]
    assert {e.stage for e in broadcast} == {"cell_a"}
    # a later stage's load waits for the first completion upstream ...
    for stage in (1, 2):
        released = _positions(summary, "release", stage)
        assert released == [min(_positions(summary, "complete", stage - 1)) + 1]
        assert min(_positions(summary, "load", stage)) > released[0]
    # ... and then goes to idle workers ahead of the barrier (the slow worker still on cell_a)
    assert min(_positions(summary, "load", 1)) < max(_positions(summary, "complete", 0))

    # each worker's own log: load, unload, load, ... (never a second stage beside the first)
    for worker in summary.workers:
        assert worker.evictions == worker.cold_loads + worker.warm_loads - 1
        logged = [e.event for e in read_worker_log(tmp_path / f"{worker.worker}.csv")]
        loads = [e for e in logged if e not in ("infer", "transfer")]
        assert loads[0].startswith("load_")
        assert all((a == "unload") != (b == "unload") for a, b in itertools.pairwise(loads))


def test_ended_is_told_as_the_summary_comes_before_any_process_is_stopped(
    streaming_job: PipelineJob,
) -> None:
    """An emulated job's fault clock stops there (``emu.mininet.crowd``): it stopped after
    the processes did, and faults due in between were played and recorded."""
    watched: list[Processes] = []
    alive_at_end: list[bool] = []

    def watch(processes: Processes) -> Callable[[Event], None]:
        watched.append(processes)
        return lambda _event: None

    def ended() -> None:
        alive_at_end.append(all(p.poll() is None for p in watched[0].values()))

    workers = [WorkerSpec("worker-0"), WorkerSpec("worker-1")]
    run_pipeline(streaming_job, workers, LocalPlacement(), watch=watch, ended=ended)
    assert alive_at_end == [True]  # told once, every worker still running
    assert all(p.poll() is not None for p in watched[0].values())  # and stopped after


def test_a_worker_killed_mid_task_loses_nothing(streaming_job: PipelineJob) -> None:
    job = distilbert_job(TINY, inputs=5, stages=3, mode="streaming", seed=3)
    summary = run_pipeline_local(
        job, workers=3, task_delay_ms=300.0, kill=KillPlan(stage_index=1, after_s=0.1)
    )
    _assert_reference_result(summary, job)
    assert _completions(summary) == Counter({(i, s): 1 for i in range(5) for s in range(3)})
    victim = _victim(summary)
    assert [w.worker for w in summary.workers if w.disconnected] == [victim]
    assert summary.tasks_redispatched >= 1
    lost = next(e for e in summary.events if e.kind == "disconnect")
    requeued = [(e.input_index, e.stage_index) for e in summary.events if e.kind == "requeue"]
    assert requeued and all(
        t.attempts == 2 and t.worker != victim
        for t in summary.tasks
        if (t.input_index, t.stage_index) in requeued
    )
    # tasks running on survivors when the victim left finished where they were
    in_flight = [
        t for t in summary.tasks if t.worker != victim and t.dispatch_ms < lost.t_ms < t.done_ms
    ]
    assert in_flight and all(t.attempts == 1 for t in in_flight)


def test_a_silent_worker_is_lost_and_comes_back_as_a_fresh_one() -> None:
    """SIGSTOPped mid-task: declared lost after the silence timeout; SIGCONTed, it enrols
    again under a fresh id and nothing it finished after it was lost counts."""
    inputs, stages = 10, 3
    job = distilbert_job(TINY, inputs=inputs, stages=stages, mode="streaming", seed=5)
    rule = LivenessRule(heartbeat_s=0.2, silence_timeout_s=1.0)
    stop = KillPlan(stage_index=1, after_s=0.1, signum=signal.SIGSTOP, cont_after_s=2.0)
    summary = run_pipeline_local(job, workers=3, task_delay_ms=300.0, kill=stop, liveness=rule)
    _assert_reference_result(summary, job)
    assert _completions(summary) == Counter(
        {(i, s): 1 for i in range(inputs) for s in range(stages)}
    )
    assert len(summary.tasks) == inputs * stages
    # the stopped worker: declared lost once silent for the timeout, its task re-dispatched
    first_stage_1 = next(e for e in summary.events if e.kind == "dispatch" and e.stage_index == 1)
    victim = _victim(summary)
    (lost,) = [e for e in summary.events if e.kind == "disconnect"]
    assert lost.worker == victim and lost.detail is not None and "silent for" in lost.detail
    # stopped after_s past that dispatch, its last beat at most a heartbeat earlier: lost no
    # sooner than the timeout after that beat (later on a busy machine, never sooner)
    earliest_s = stop.after_s - rule.heartbeat_s + rule.silence_timeout_s
    assert lost.t_ms - first_stage_1.t_ms > earliest_s * 1e3
    assert summary.tasks_redispatched >= 1
    requeued = {(e.input_index, e.stage_index) for e in summary.events if e.kind == "requeue"}
    assert (first_stage_1.input_index, 1) in requeued
    # nothing it finished after it was lost counts; it came back under a fresh id
    assert all(t.done_ms < lost.t_ms for t in summary.tasks if t.worker == victim)
    by_name = {w.worker: w for w in summary.workers}
    assert by_name[victim].disconnected
    assert not by_name[f"{victim}.2"].disconnected
    assert any(e.kind == "dispatch" and e.worker == f"{victim}.2" for e in summary.events)
    # one device under two ids: the row counts the three phones (it once counted four) and
    # its battery is the mean of their drains, the victim's two enrolments added up
    assert {w.device for w in summary.workers} == {"worker-0", "worker-1", "worker-2"}
    row = summary_row(summary, scenario="silent", bandwidth_mbps=0.0)
    assert row.devices == 3
    assert row.battery_mah == pytest.approx(sum(w.battery_mah for w in summary.workers) / 3)


def test_a_worker_that_beats_but_never_answers_loses_its_task_at_the_deadline() -> None:
    """worker-2 takes a minute per task but keeps beating (its inference runs in a thread):
    the silence rule never loses it, and a task given to it was held until the job's own
    timeout. With a 2 s per-task deadline the foreman declares it lost that long after the
    dispatch, queues the task again, and the job finishes on the other two; the hung
    worker enrols again under a fresh id and is cut off again each time it hangs."""
    inputs, stages = 6, 3
    job = distilbert_job(TINY, inputs=inputs, stages=stages, mode="streaming", seed=5)
    rule = LivenessRule(heartbeat_s=0.2, silence_timeout_s=1.0, task_deadline_s=2.0)
    delays_ms = [0.0, 0.0, 60_000.0]
    summary = run_pipeline_local(job, workers=3, task_delay_ms=delays_ms, liveness=rule)
    _assert_reference_result(summary, job)
    assert _completions(summary) == Counter(
        {(i, s): 1 for i in range(inputs) for s in range(stages)}
    )
    assert {t.worker for t in summary.tasks} <= {"worker-0", "worker-1"}
    lost = [e for e in summary.events if e.kind == "disconnect"]
    assert lost and all(str(e.worker).startswith("worker-2") for e in lost)
    assert all(e.detail == "no answer to its task within 2 s" for e in lost)
    overdue = [e for e in summary.events if e.kind == "requeue"]
    assert [e.worker for e in overdue] == [e.worker for e in lost]
    assert summary.tasks_redispatched == len(lost)
    for cut in lost:  # never sooner than the deadline after its task's dispatch
        given = [e for e in summary.events if e.kind == "dispatch" and e.worker == cut.worker]
        assert cut.t_ms - given[-1].t_ms >= 2000.0
    by_name = {w.worker: w for w in summary.workers}
    assert by_name["worker-2"].disconnected and by_name["worker-2"].tasks_done == 0


def _victim(summary: PipelineSummary) -> str:
    first: Event = next(e for e in summary.events if e.kind == "dispatch" and e.stage_index == 1)
    return str(first.worker)


def test_a_second_run_loads_from_the_workers_cache(
    streaming_job: PipelineJob, tmp_path: Path
) -> None:
    cold = run_pipeline_local(streaming_job, workers=2, cache_root=tmp_path)
    warm = run_pipeline_local(streaming_job, workers=2, cache_root=tmp_path)
    # the first run downloads each stage a worker loads (a reload after an eviction is warm)
    first_run = _loads(cold)
    assert {kinds[0] for kinds in first_run.values()} == {"cold"}
    # the second run loads those from disk, without their blobs; only stages new to a worker
    # (never held by it in the first run) come cold
    second_run = _loads(warm)
    assert all(set(second_run[key]) == {"warm"} for key in second_run.keys() & first_run.keys())
    assert all(second_run[key][0] == "cold" for key in second_run.keys() - first_run.keys())
    assert warm.warm_loads >= 2 and warm.model_bytes_sent < cold.model_bytes_sent
    assert warm.majority_class == cold.majority_class
    # each cold load's blob as LOAD_MODEL carries it, base64 (the raw blob was counted: the
    # twin's bytes_moved counts base64, so a cold run's moved 4/3 of the emulator's)
    as_sent = {s.name: len(base64.b64encode(s.blob)) for s in streaming_job.stages}
    cold_loads = [stage for (_w, stage), kinds in first_run.items() for k in kinds if k == "cold"]
    assert cold.model_bytes_sent == sum(as_sent[str(stage)] for stage in cold_loads)


def _loads(summary: PipelineSummary) -> dict[tuple[str | None, str | None], list[str | None]]:
    """Kinds (cold, warm) of every load of each (worker, stage), in order."""
    loads: dict[tuple[str | None, str | None], list[str | None]] = {}
    for e in summary.events:
        if e.kind == "loaded":
            loads.setdefault((e.worker, e.stage), []).append(e.detail)
    return loads


@pytest.mark.parametrize("scheduler", ["fifo", "random", "least_loaded"])
def test_every_scheduler_completes_the_job(streaming_job: PipelineJob, scheduler: str) -> None:
    job = pipeline_job(streaming_job.stages, streaming_job.inputs, scheduler=scheduler)
    summary = run_pipeline_local(job, workers=2, inline_max_bytes=0)  # payloads via the store
    assert summary.scheduler == scheduler
    _assert_reference_result(summary, job)


def test_summary_becomes_a_results_row(streaming_job: PipelineJob, tmp_path: Path) -> None:
    summary = run_pipeline_local(streaming_job, workers=2)
    row = summary_row(summary, scenario="crowdio_local", bandwidth_mbps=1000.0)
    assert (row.strategy, row.mode, row.devices, row.batch) == ("crowdio_streaming", "local", 2, 3)
    assert (row.inputs, row.stages, row.scheduler) == (3, 3, "affinity")
    assert row.total_ms == summary.pipeline_latency_ms
    assert row.load_ms is not None and row.staging_ms == 0  # loads have their own column
    assert 0 < row.compute_ms + row.load_ms + row.comm_ms <= row.total_ms  # + queueing
    for t in summary.tasks:  # a load counts from when its task was ready, never more
        assert t.waited_load_ms is not None
        assert t.waited_load_ms <= min(t.report.load_ms, t.done_ms - t.ready_ms)
    assert row.bytes_sent == sum(t.report.bytes_out for t in summary.tasks)
    assert row.cold_loads == summary.cold_loads and row.bytes_moved == summary.bytes_moved
    assert row.energy_j is not None and row.energy_j > 0
    assert row.peak_session_mb == summary.peak_session_mb
    assert summary.hidden_state_compression_ratio > 1.0
    write_results(tmp_path / "results.csv", [row])
    assert read_results(tmp_path / "results.csv")[0].tasks_redispatched == 0


# a one-stage DistilBERT of about 15 MB of weights (the tiny one's stages: 0.2 MB in all)
SMALL = DistilBertConfig(
    vocab_size=8192, dim=256, heads=4, hidden_dim=1024, layers=2, seq_len=16, max_positions=16
)


def test_a_jobs_session_memory_is_what_its_sessions_add_not_the_worker_process() -> None:
    """``peak_session_mb`` is what the job's sessions and their work add to a worker (its
    RSS above what it held before any session, at its peak), as the twin's session RAM:
    not the worker process (interpreter, numpy, ONNX Runtime), whose RSS it used to be. It
    is far below the process's RSS on the tiny model, and a larger stage adds at least its
    weights (its session holds them)."""
    peaks, process, blob = {}, {}, {}
    for name, config in (("tiny", TINY), ("small", SMALL)):
        job = distilbert_job(config, inputs=1, stages=1, seed=0)
        summary = run_pipeline_local(job, workers=1)
        (worker,) = summary.workers
        assert worker.peak_session_mb == summary.peak_session_mb
        peaks[name], process[name] = summary.peak_session_mb or 0.0, worker.peak_rss_mb
        blob[name] = len(job.stages[0].blob) / 2**20
    assert 0 < peaks["tiny"] < process["tiny"] / 4  # the interpreter and libraries are not in it
    assert peaks["small"] - peaks["tiny"] >= blob["small"] - blob["tiny"]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_full_size_distilbert_streaming_on_five_workers() -> None:
    job = distilbert_job(FULL, inputs=5, stages=3, mode="streaming")
    summary = run_pipeline_local(job, workers=5, timeout_s=600)
    reference = reference_logits(FULL, 0, job.inputs)
    np.testing.assert_allclose(np.array(summary.logits), reference, atol=1e-4)
    assert summary.boundaries[0].shape == (1, FULL.seq_len, FULL.dim)


def test_a_job_whose_every_worker_is_killed_fails_at_once() -> None:
    """No worker process left: the job fails saying how each ended (not after its
    timeout, which would have been a 120 s wait here)."""
    job = distilbert_job(TINY, inputs=3, stages=2, mode="streaming", seed=3)
    with pytest.raises(JobError) as error:
        run_pipeline_local(
            job, workers=1, task_delay_ms=300.0, kill=KillPlan(stage_index=0, after_s=0.1)
        )
    message = str(error.value)
    assert "every worker process exited: worker-0 was killed by SIGKILL" in message
    assert "out-of-memory" in message


@pytest.mark.timeout(120)
def test_a_worker_that_exits_before_the_job_starts_fails_it_at_once(tmp_path: Path) -> None:
    """The job waits for every worker to enrol: one that cannot start (its cache is a
    file) left it waiting out its whole timeout (600 s in a crowd scenario's run, without
    a word), though the other workers were alive."""
    (tmp_path / "worker-1").write_text("not a folder")
    job = distilbert_job(TINY, inputs=2, stages=2, mode="streaming", seed=3)
    with pytest.raises(JobError) as error:
        run_pipeline_local(job, workers=2, cache_root=tmp_path, timeout_s=90)
    message = str(error.value)
    assert "exited before the job started: worker-1 exited with" in message
