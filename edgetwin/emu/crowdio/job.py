"""One job's bookkeeping on the foreman: tasks, JIT loads, dispatch, statistics, summary.

Pure state: every handler updates the job and the workers' states and returns the
frames to send (an ``Outbox``); the foreman does the I/O. Handlers raise
ProtocolError when a worker's reply does not fit what it was asked to do.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from edgetwin.emu.crowdio.codec import PayloadError, compressed_bytes, decode_payload, raw_bytes
from edgetwin.emu.crowdio.dag import Dag, GraphError, check_linear
from edgetwin.emu.crowdio.dispatch import JobStage, WorkerState, assignments, prefetches
from edgetwin.emu.crowdio.filestore import FileStore, StoreError
from edgetwin.emu.crowdio.protocol import (
    LoadModel,
    ModelFailed,
    ModelLoaded,
    ModelUnloaded,
    ProtocolError,
    RunTask,
    SubmitPipelineJob,
    TaskFailed,
    TaskResult,
    UnloadModel,
    encode_message,
)
from edgetwin.emu.crowdio.records import (
    BoundaryBytes,
    Event,
    EventKind,
    Payload,
    PipelineSummary,
    TaskTiming,
    WorkerStatus,
    WorkerSummary,
)
from edgetwin.emu.crowdio.tasks import TaskKey, TaskTable
from edgetwin.policies.scheduling import SCHEDULERS, Scheduler, make_scheduler

Outbox = list[tuple[WorkerState, bytes]]
MAX_TASK_FAILURES = 3


class JobRejection(ValueError):
    """A submitted job the foreman will not run (the reason is the message)."""


@dataclass
class WorkerJobStats:
    """One worker's figures over the job."""

    start: WorkerStatus
    latest: WorkerStatus
    peak_rss_mb: float
    cold_loads: int = 0
    warm_loads: int = 0
    evictions: int = 0
    tasks_done: int = 0
    disconnected: bool = False

    def update(self, status: WorkerStatus) -> None:
        self.latest = status
        self.peak_rss_mb = max(self.peak_rss_mb, status.rss_mb)


def job_stages(submit: SubmitPipelineJob) -> list[JobStage]:
    """The submitted stages, checked: base64 blobs that match their SHA-256, a linear DAG.

    JobRejection names the first problem.
    """
    if submit.scheduler not in SCHEDULERS:
        raise JobRejection(f"unknown scheduler {submit.scheduler!r}; known: {sorted(SCHEDULERS)}")
    stages = []
    for index, stage in enumerate(submit.stages):
        try:
            blob = base64.b64decode(stage.blob_b64, validate=True)
        except binascii.Error:
            raise JobRejection(f"stage {stage.name}: blob is not valid base64") from None
        if hashlib.sha256(blob).hexdigest() != stage.sha256:
            raise JobRejection(f"stage {stage.name}: checksum mismatch (SHA-256 of the blob)")
        stages.append(
            JobStage(index, stage.name, stage.sha256, stage.blob_b64, len(blob), stage.ram_mb)
        )
    try:
        check_linear(Dag(submit.dag.nodes, submit.dag.edges), [s.name for s in stages])
    except GraphError as exc:
        raise JobRejection(f"dag: {exc}") from None
    for index, payload in enumerate(submit.inputs):
        try:
            decode_payload(payload, None)
        except (PayloadError, StoreError) as exc:
            raise JobRejection(f"input {index}: {exc}") from None
    return stages


class Job:
    """A running job over the foreman's current workers (shared, updated in place)."""

    def __init__(
        self,
        submit: SubmitPipelineJob,
        stages: list[JobStage],
        workers: Mapping[str, WorkerState],
        store: FileStore | None,
        on_event: Callable[[Event], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.job_id = submit.job_id
        self.mode = submit.mode
        self.stages = stages
        self.workers = workers
        self.store = store
        self.on_event = on_event
        self.clock = clock
        self.scheduler: Scheduler = make_scheduler(submit.scheduler)
        self.rng = np.random.default_rng(submit.seed)
        self.table = TaskTable(submit.inputs, len(stages), submit.mode)
        self.released: set[int] = set()
        self.events: list[Event] = []
        self.stats: dict[str, WorkerJobStats] = {}
        self.redispatched = 0
        self.model_bytes_sent = 0
        self.wire_bytes = 0
        self.boundary_raw = [0] * len(stages)
        self.boundary_compressed = [0] * len(stages)
        self.boundary_shape: list[tuple[int, ...]] = [()] * len(stages)
        self.logits: dict[int, np.ndarray] = {}
        self.failure: str | None = None
        self._load_frames: dict[tuple[int, bool], bytes] = {}
        self._start_s = clock()
        self.end_ms = 0.0

    @property
    def finished(self) -> bool:
        return self.table.finished

    def now_ms(self) -> float:
        return (self.clock() - self._start_s) * 1e3

    def start(self) -> Outbox:
        """Broadcast stage 0's load to every worker at once, then dispatch."""
        self._start_s = self.clock()
        self._event("job_start", detail=f"{len(self.workers)} workers")
        self.released.add(0)
        outbox: Outbox = []
        for worker in self._by_join_order():
            self.add_worker(worker)
            outbox += self._load(worker, self.stages[0])
        return outbox + self.dispatch()

    def add_worker(self, worker: WorkerState) -> None:
        """Count a worker in the job's statistics (at the start, or when it joins later)."""
        status = worker.status
        self.stats[worker.worker_id] = WorkerJobStats(status, status, status.rss_mb)

    def dispatch(self) -> Outbox:
        """Assign ready tasks to idle workers, then send released loads to idle workers."""
        outbox: Outbox = []
        workers = self._by_join_order()
        for key, worker in assignments(
            self.job_id, self.table, self.stages, workers, self.scheduler, self.rng
        ):
            stage = self.stages[key[1]]
            outbox += self._load(worker, stage)
            record = self.table.assign(key, worker.worker_id, self.now_ms())
            worker.task = key
            worker.assigned += 1
            assert record.payload is not None  # injected before the task became ready
            run = RunTask(
                job_id=self.job_id,
                input_index=key[0],
                stage_index=key[1],
                stage=stage.name,
                sha256=stage.sha256,
                attempt=record.attempts,
                payload=record.payload,
            )
            outbox.append((worker, encode_message(run)))
            self._event("dispatch", worker, stage, key[0], detail=f"attempt {record.attempts}")
        for worker, index in prefetches(self.table, self.released, self.stages, workers):
            outbox += self._load(worker, self.stages[index])
        return outbox

    def on_status(self, worker: WorkerState, status: WorkerStatus) -> None:
        worker.status = status
        if worker.worker_id in self.stats:
            self.stats[worker.worker_id].update(status)

    def on_loaded(self, worker: WorkerState, message: ModelLoaded) -> None:
        stats = self.stats[worker.worker_id]
        if message.load_kind == "cold":
            stats.cold_loads += 1
        else:
            stats.warm_loads += 1
        self._event("loaded", worker, self._stage(message.sha256), detail=message.load_kind)

    def on_unloaded(self, worker: WorkerState, message: ModelUnloaded) -> None:
        self.stats[worker.worker_id].evictions += 1
        self._event("unload", worker, detail=message.stage)

    def on_load_failed(self, worker: WorkerState, message: ModelFailed) -> None:
        """A task queued behind the failed load will fail too, and be requeued."""
        self._event("load_failed", worker, self._stage(message.sha256), detail=message.error)

    def on_result(self, worker: WorkerState, message: TaskResult) -> Outbox:
        """Accept a result exactly once, inject it downstream and dispatch what became ready."""
        key = self._check_assigned(worker, message)
        payload = message.payload
        index = key[1]
        sink = index == len(self.stages) - 1
        try:
            raw, packed = raw_bytes(payload), compressed_bytes(payload, self.store)
            logits = decode_payload(payload, self.store).reshape(-1) if sink else None
        except (PayloadError, StoreError) as exc:
            raise ProtocolError(f"result of task {key}: {exc}") from None
        if logits is not None and any(x.shape != logits.shape for x in self.logits.values()):
            raise ProtocolError(f"result of task {key}: logits of another shape than before")
        self.boundary_raw[index] += raw
        self.boundary_compressed[index] += packed
        self.boundary_shape[index] = payload.shape
        if logits is not None:
            self.logits[key[0]] = logits
            self._discard(payload)
        upstream_input = self.table.records[key].payload
        self.table.complete(key, payload, message.report, self.now_ms())
        if index > 0 and upstream_input is not None:
            self._discard(upstream_input)
        worker.task = None
        worker.completed += 1
        self.stats[worker.worker_id].tasks_done += 1
        self._event("complete", worker, self.stages[index], key[0])
        if index + 1 < len(self.stages) and index + 1 not in self.released:
            self.released.add(index + 1)
            self._event("release", stage=self.stages[index + 1])
        if self.finished:
            self.end_ms = self.now_ms()
            self._event("job_done")
            return []
        return self.dispatch()

    def on_failed(self, worker: WorkerState, message: TaskFailed) -> Outbox:
        """Put a failed task back; the job fails after MAX_TASK_FAILURES on one task."""
        key = self._check_assigned(worker, message)
        self.table.take_back(key, failed=True)
        worker.task = None
        self._event("task_failed", worker, self.stages[key[1]], key[0], detail=message.error)
        if self.table.records[key].failures >= MAX_TASK_FAILURES:
            self.failure = f"task {key} failed {MAX_TASK_FAILURES} times: {message.error}"
            return []
        return self.dispatch()

    def on_worker_lost(self, worker: WorkerState, detail: str | None = None) -> Outbox:
        """Re-dispatch a lost worker's tasks (it disconnected, or ``detail`` says why it was
        declared lost); tasks running elsewhere carry on."""
        self._event("disconnect", worker, detail=detail)
        if worker.worker_id in self.stats:
            self.stats[worker.worker_id].disconnected = True
        for key in self.table.running_on(worker.worker_id):
            self.table.take_back(key, failed=False)
            self.redispatched += 1
            self._event("requeue", worker, self.stages[key[1]], key[0])
        return self.dispatch()

    def summary(self) -> PipelineSummary:
        """The finished job's figures."""
        records = sorted(self.table.records.values(), key=lambda r: (r.input_index, r.stage_index))
        tasks = tuple(
            TaskTiming(
                input_index=r.input_index,
                stage_index=r.stage_index,
                stage=self.stages[r.stage_index].name,
                worker=str(r.worker_id),
                attempts=r.attempts,
                ready_ms=r.ready_ms,
                dispatch_ms=r.dispatch_ms,
                done_ms=r.done_ms,
                report=r.report,
            )
            for r in records
            if r.report is not None
        )
        logits = np.stack([self.logits[i] for i in sorted(self.logits)]).astype(np.float64)
        classes = [int(c) for c in logits.argmax(axis=1)]
        mean = logits.mean(axis=0)
        counts = Counter(classes)
        majority = max(counts, key=lambda c: (counts[c], mean[c]))
        stats = self.stats.items()
        return PipelineSummary(
            job_id=self.job_id,
            mode=self.mode,
            scheduler=self.scheduler.name,
            inputs=len(self.logits),
            stages=tuple(stage.name for stage in self.stages),
            pipeline_latency_ms=self.end_ms,
            tasks=tasks,
            workers=tuple(
                WorkerSummary(
                    worker=worker_id,
                    peak_rss_mb=s.peak_rss_mb,
                    battery_mah=s.latest.battery_mah - s.start.battery_mah,
                    energy_j=s.latest.energy_j - s.start.energy_j,
                    cold_loads=s.cold_loads,
                    warm_loads=s.warm_loads,
                    evictions=s.evictions,
                    tasks_done=s.tasks_done,
                    disconnected=s.disconnected,
                )
                for worker_id, s in stats
            ),
            cold_loads=sum(s.cold_loads for _, s in stats),
            warm_loads=sum(s.warm_loads for _, s in stats),
            evictions=sum(s.evictions for _, s in stats),
            tasks_redispatched=self.redispatched,
            model_bytes_sent=self.model_bytes_sent,
            wire_bytes=self.wire_bytes,
            boundaries=tuple(
                BoundaryBytes(
                    stage=stage.name,
                    shape=self.boundary_shape[stage.index],
                    raw_bytes=self.boundary_raw[stage.index],
                    compressed_bytes=self.boundary_compressed[stage.index],
                )
                for stage in self.stages
            ),
            logits=tuple(tuple(float(x) for x in row) for row in logits),
            input_classes=tuple(classes),
            mean_logits=tuple(float(x) for x in mean),
            majority_class=majority,
            events=tuple(self.events),
        )

    def _load(self, worker: WorkerState, stage: JobStage) -> Outbox:
        """Frames that make ``stage`` resident on ``worker``: unload the old one, load the new."""
        if worker.resident_sha == stage.sha256:
            return []
        outbox: Outbox = []
        if worker.resident_name is not None:
            unload = UnloadModel(job_id=self.job_id, stage=worker.resident_name)
            outbox.append((worker, encode_message(unload)))
        with_blob = stage.sha256 not in worker.cached
        if (stage.index, with_blob) not in self._load_frames:
            load = LoadModel(
                job_id=self.job_id,
                stage=stage.name,
                sha256=stage.sha256,
                blob_b64=stage.blob_b64 if with_blob else None,
            )
            self._load_frames[(stage.index, with_blob)] = encode_message(load)
        outbox.append((worker, self._load_frames[(stage.index, with_blob)]))
        self.model_bytes_sent += stage.blob_bytes if with_blob else 0
        worker.resident_sha, worker.resident_name = stage.sha256, stage.name
        self._event("load", worker, stage, detail="blob sent" if with_blob else "from cache")
        return outbox

    def _check_assigned(self, worker: WorkerState, message: TaskResult | TaskFailed) -> TaskKey:
        key = (message.input_index, message.stage_index)
        record = self.table.records.get(key)
        if worker.task != key or record is None or record.attempts != message.attempt:
            raise ProtocolError(f"{message.type} for task {key}, which is not assigned to it")
        return key

    def _discard(self, payload: Payload) -> None:
        if payload.ref is not None and self.store is not None:
            self.store.delete(payload.ref)

    def _stage(self, sha256: str) -> JobStage | None:
        return next((stage for stage in self.stages if stage.sha256 == sha256), None)

    def _by_join_order(self) -> list[WorkerState]:
        return sorted(self.workers.values(), key=lambda w: w.joined_order)

    def _event(
        self,
        kind: EventKind,
        worker: WorkerState | None = None,
        stage: JobStage | None = None,
        input_index: int | None = None,
        detail: str | None = None,
    ) -> None:
        event = Event(
            t_ms=self.now_ms(),
            kind=kind,
            worker=None if worker is None else worker.worker_id,
            stage=None if stage is None else stage.name,
            stage_index=None if stage is None else stage.index,
            input_index=input_index,
            detail=detail,
        )
        self.events.append(event)
        self.on_event(event)
