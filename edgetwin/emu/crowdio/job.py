"""One job's bookkeeping on the foreman: payloads, frames, statistics, events, summary.

The decisions are the core's (``edgetwin.models.crowd``, driven by ``crew``); a job
here keeps what its tasks carry (input payloads, results, logits), builds its
frames, counts its statistics and writes its events. Pure state, no I/O.

A result is checked when it arrives: one that does not decode (base64, zlib, store
reference) breaks the protocol (ProtocolError: its worker is dropped, its task
re-dispatched, its store entry deleted); one that decodes but is not what its stage
declares (dtype, shape) or, from the last stage, logits that are not finite, fails its
task (ResultRefused: the task is requeued and the job fails after MAX_TASK_FAILURES,
naming why).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from edgetwin.emu.crowdio.codec import (
    DEFAULT_LIMITS,
    Limits,
    PayloadError,
    compressed_bytes,
    decode_base64,
    decode_payload,
    raw_bytes,
    tensor_bytes,
)
from edgetwin.emu.crowdio.dag import Dag, GraphError, check_linear
from edgetwin.emu.crowdio.dispatch import JobStage, WorkerState
from edgetwin.emu.crowdio.filestore import FileStore, StoreError
from edgetwin.emu.crowdio.protocol import (
    LoadModel,
    ProtocolError,
    RunTask,
    SubmitPipelineJob,
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
    TaskReport,
    TaskTiming,
    TensorSpec,
    WorkerStatus,
    WorkerSummary,
)
from edgetwin.models.crowd import table
from edgetwin.models.crowd.aggregate import aggregate
from edgetwin.models.crowd.core import Load
from edgetwin.policies.scheduling import SCHEDULERS

Outbox = list[tuple[WorkerState, bytes]]
MAX_TASK_FAILURES = 3


class JobRejection(ValueError):
    """A submitted job the foreman will not run (the reason is the message)."""


class ResultRefused(Exception):
    """A result that decodes but is not what its stage declares: its task fails (the reason
    is the message)."""


@dataclass
class WorkerJobStats:
    """One worker's figures over the job."""

    device: str  # the name the worker enrolled under: one device may enrol more than once
    start: WorkerStatus
    latest: WorkerStatus
    peak_rss_mb: float
    peak_session_mb: float = 0.0  # what its reports during the job say (the start's is before)
    cold_loads: int = 0
    warm_loads: int = 0
    evictions: int = 0
    tasks_done: int = 0
    disconnected: bool = False

    def update(self, status: WorkerStatus) -> None:
        self.latest = status
        self.peak_rss_mb = max(self.peak_rss_mb, status.rss_mb)
        self.peak_session_mb = max(self.peak_session_mb, status.peak_session_mb)


def job_stages(submit: SubmitPipelineJob, limits: Limits = DEFAULT_LIMITS) -> list[JobStage]:
    """The submitted stages, checked: base64 blobs within the limits that match their SHA-256,
    a linear DAG, declared tensors within the limits that chain (each stage takes what the
    one before gives) and inputs that are what the first stage takes. JobRejection names
    the first problem.
    """
    if submit.scheduler not in SCHEDULERS:
        raise JobRejection(f"unknown scheduler {submit.scheduler!r}; known: {sorted(SCHEDULERS)}")
    stages = []
    for index, stage in enumerate(submit.stages):
        try:
            limits.check_blob("blob", stage.blob_b64)
            tensor_bytes(stage.input.dtype, stage.input.shape, limits)
            tensor_bytes(stage.output.dtype, stage.output.shape, limits)
        except PayloadError as exc:
            raise JobRejection(f"stage {stage.name}: {exc}") from None
        try:
            blob = decode_base64(stage.blob_b64)
        except PayloadError:
            raise JobRejection(f"stage {stage.name}: blob is not valid base64") from None
        if hashlib.sha256(blob).hexdigest() != stage.sha256:
            raise JobRejection(f"stage {stage.name}: checksum mismatch (SHA-256 of the blob)")
        stages.append(
            JobStage(
                index,
                stage.name,
                stage.sha256,
                stage.blob_b64,
                len(blob),
                stage.ram_mb,
                stage.input,
                stage.output,
            )
        )
    try:
        check_linear(Dag(submit.dag.nodes, submit.dag.edges), [s.name for s in stages])
    except GraphError as exc:
        raise JobRejection(f"dag: {exc}") from None
    for upstream, downstream in itertools.pairwise(stages):
        if upstream.output != downstream.input:
            raise JobRejection(
                f"stage {downstream.name} takes {downstream.input}, "
                f"but {upstream.name} gives {upstream.output}"
            )
    for index, payload in enumerate(submit.inputs):
        problem = _unlike(payload, stages[0].input)
        if problem is not None:
            raise JobRejection(f"input {index}: {problem} of stage {stages[0].name}")
        try:
            decode_payload(payload, None, limits)
        except (PayloadError, StoreError) as exc:
            raise JobRejection(f"input {index}: {exc}") from None
    return stages


def _unlike(payload: Payload, declared: TensorSpec) -> str | None:
    """How a payload differs from a declared tensor (None: it does not)."""
    if payload.dtype != declared.dtype:
        return f"dtype {payload.dtype} is not the declared {declared.dtype}"
    if payload.shape != declared.shape:
        return f"shape {payload.shape} is not the declared {declared.shape}"
    return None


class Job:
    """A running job: what its tasks carry and what it measured (decisions: ``core``)."""

    core: table.Job  # set by the crew once the core has the job

    def __init__(
        self,
        submit: SubmitPipelineJob,
        stages: list[JobStage],
        store: FileStore | None,
        on_event: Callable[[Event], None],
        start_ms: float,
        limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self.job_id = submit.job_id
        self.mode = submit.mode
        self.scheduler = submit.scheduler
        self.stages = stages
        self.by_name = {stage.name: stage for stage in stages}
        self.by_key = {stage.key: stage for stage in stages}
        self.store = store
        self.limits = limits
        self.on_event = on_event
        self.start_ms = start_ms  # on the foreman's clock
        self.inputs: dict[tuple[int, int], Payload] = {
            (i, 0): payload for i, payload in enumerate(submit.inputs)
        }
        self.reports: dict[tuple[int, int], TaskReport] = {}
        self.events: list[Event] = []
        self.stats: dict[str, WorkerJobStats] = {}
        self.model_bytes_sent = 0
        self.wire_bytes = 0
        self.boundary_raw = [0] * len(stages)
        self.boundary_compressed = [0] * len(stages)
        self.boundary_shape: list[tuple[int, ...]] = [()] * len(stages)
        self.logits: dict[int, np.ndarray] = {}
        self.failure: str | None = None
        self._load_frames: dict[tuple[int, bool], bytes] = {}
        self.end_ms = 0.0

    @property
    def finished(self) -> bool:
        return self.core.all_done

    def core_stages(self) -> list[table.Stage]:
        return [table.Stage(s.key, s.name, s.ram_mb) for s in self.stages]

    def add_worker(self, worker: WorkerState) -> None:
        """Count a worker in the job's statistics (at the start, or when it joins later)."""
        status = worker.status
        device = worker.device or worker.worker_id
        self.stats[worker.worker_id] = WorkerJobStats(device, status, status, status.rss_mb)

    def on_status(self, worker: WorkerState, status: WorkerStatus) -> None:
        if worker.worker_id in self.stats:
            self.stats[worker.worker_id].update(status)

    def load_frames(self, worker: WorkerState, load: Load) -> list[bytes]:
        """UNLOAD of the held stage (named), then LOAD, with the blob unless it is cached."""
        frames = []
        if load.evicts is not None:
            unload = UnloadModel(job_id=self.job_id, stage=load.evicts.name)
            frames.append(encode_message(unload))
            worker.unload_jobs.append(self.core.job_id)
        stage = self.by_key[load.stage.key]
        with_blob = stage.sha256 not in worker.cached
        if (stage.index, with_blob) not in self._load_frames:
            message = LoadModel(
                job_id=self.job_id,
                stage=stage.name,
                sha256=stage.sha256,
                blob_b64=stage.blob_b64 if with_blob else None,
            )
            self._load_frames[(stage.index, with_blob)] = encode_message(message)
        frames.append(self._load_frames[(stage.index, with_blob)])
        worker.load_jobs.append(self.core.job_id)
        # the blob as LOAD_MODEL carries it, base64 text (the twin's blob_bytes counts it so)
        self.model_bytes_sent += len(stage.blob_b64) if with_blob else 0
        return frames

    def run_frame(self, task: table.Task) -> bytes:
        """RUN_TASK with the task's injected input."""
        stage = self.stages[task.stage_index]
        run = RunTask(
            job_id=self.job_id,
            input_index=task.item,
            stage_index=task.stage_index,
            stage=stage.name,
            sha256=stage.sha256,
            attempt=task.attempts,
            payload=self.inputs[(task.item, task.stage_index)],
        )
        return encode_message(run)

    def accept(self, message: TaskResult) -> None:
        """Take in a result: its bytes, the logits of a sink task, the input downstream.

        ResultRefused when it is not what its stage declares, or its logits are not finite;
        ProtocolError when it does not decode (every result is decoded here, so that a bad
        one goes no further than the worker that sent it)."""
        key = (message.input_index, message.stage_index)
        payload, index = message.payload, message.stage_index
        stage = self.stages[index]
        sink = index == len(self.stages) - 1
        problem = _unlike(payload, stage.output)
        if problem is not None:
            discard(self.store, payload)
            raise ResultRefused(f"result of stage {stage.name}: {problem}")
        try:
            raw, packed = raw_bytes(payload, self.limits), compressed_bytes(payload, self.store)
            array = decode_payload(payload, self.store, self.limits)
        except (PayloadError, StoreError) as exc:
            discard(self.store, payload)  # nothing reads it again
            raise ProtocolError(f"result of task {key}: {exc}") from None
        if sink and not np.isfinite(array).all():
            discard(self.store, payload)
            raise ResultRefused(f"result of stage {stage.name}: logits are not finite (NaN or inf)")
        self.boundary_raw[index] += raw
        self.boundary_compressed[index] += packed
        self.boundary_shape[index] = payload.shape
        if sink:
            self.logits[key[0]] = array.reshape(-1)
            discard(self.store, payload)
        else:
            self.inputs[(key[0], index + 1)] = payload
        discard(self.store, self.inputs.pop(key))  # the task is done: its input is not read again
        self.reports[key] = message.report

    def release(self) -> None:
        """Delete the store entries of inputs no task will read: those of a job dropped
        before it finished (a finished job has none left)."""
        for payload in self.inputs.values():
            discard(self.store, payload)
        self.inputs.clear()

    def summary(self) -> PipelineSummary:
        """The finished job's figures."""
        tasks = tuple(
            TaskTiming(
                input_index=t.item,
                stage_index=t.stage_index,
                stage=self.stages[t.stage_index].name,
                worker=str(t.worker),
                attempts=t.attempts,
                ready_ms=t.ready_ms - self.start_ms,
                dispatch_ms=t.dispatch_ms - self.start_ms,
                done_ms=t.done_ms - self.start_ms,
                report=self.reports[(t.item, t.stage_index)],
                waited_load_ms=t.load_ms,
            )
            for row in self.core.tasks
            for t in row
            if (t.item, t.stage_index) in self.reports
        )
        verdict = aggregate(self.logits)
        stats = self.stats.items()
        return PipelineSummary(
            job_id=self.job_id,
            mode=self.mode,
            scheduler=self.scheduler,
            inputs=len(self.logits),
            stages=tuple(stage.name for stage in self.stages),
            pipeline_latency_ms=self.end_ms,
            tasks=tasks,
            workers=tuple(
                WorkerSummary(
                    worker=worker_id,
                    device=s.device,
                    peak_rss_mb=s.peak_rss_mb,
                    peak_session_mb=s.peak_session_mb,
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
            tasks_redispatched=self.core.requeued,
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
            logits=tuple(tuple(float(x) for x in row) for row in verdict.logits),
            input_classes=verdict.classes,
            mean_logits=tuple(float(x) for x in verdict.mean),
            majority_class=verdict.majority,
            events=tuple(self.events),
        )

    def event(
        self,
        now_ms: float,
        kind: EventKind,
        worker: str | None = None,
        stage: JobStage | None = None,
        input_index: int | None = None,
        detail: str | None = None,
    ) -> None:
        """Record (and forward) an event ``now_ms`` on the foreman's clock."""
        event = Event(
            t_ms=now_ms - self.start_ms,
            kind=kind,
            worker=worker,
            stage=None if stage is None else stage.name,
            stage_index=None if stage is None else stage.index,
            input_index=input_index,
            detail=detail,
        )
        self.events.append(event)
        self.on_event(event)


def discard(store: FileStore | None, payload: Payload) -> None:
    """Delete a payload's store entry, if it has one and its reference is one of the
    store's (a refused or late result may name anything)."""
    if payload.ref is not None and store is not None:
        with contextlib.suppress(StoreError):
            store.delete(payload.ref)
