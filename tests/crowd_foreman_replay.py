"""The real foreman's ``Job`` driven by simulated workers: its decisions, no sockets, no ONNX.

Each worker handles the foreman's frames in order, as ``edgetwin.emu.crowdio.worker``
does over its connection: LOAD_MODEL takes ``load_ms`` (a warm load: every stage is
on its storage), UNLOAD_MODEL nothing, RUN_TASK ``task_ms[stage]``. Replies reach
the foreman at once and are handled as ``Foreman._on_worker_message`` handles them.
The result says which worker ran each task and when it finished, to be set against
the twin's schedule for the same durations.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import itertools
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from edgetwin.emu.crowdio.codec import encode_array
from edgetwin.emu.crowdio.dispatch import JobStage, WorkerState
from edgetwin.emu.crowdio.job import Job, Outbox
from edgetwin.emu.crowdio.protocol import (
    DagSpec,
    LoadModel,
    Message,
    ModelLoaded,
    ModelUnloaded,
    RunTask,
    StageBlob,
    SubmitPipelineJob,
    TaskResult,
    UnloadModel,
    parse_message,
)
from edgetwin.emu.crowdio.records import Mode, TaskReport, WorkerStatus

REPORT = TaskReport(
    load_kind="resident", load_ms=0, decode_ms=0, compute_ms=0, encode_ms=0, bytes_in=0, bytes_out=0
)


@dataclass(frozen=True)
class ReplayWorker:
    """A worker's speed (ms) and the free RAM it reports (its battery reads 100 %)."""

    name: str
    load_ms: float
    task_ms: tuple[float, ...]  # per stage: input in, inference, result out
    free_ram_mb: float


@dataclass
class _Inbox:
    frames: deque[Message] = field(default_factory=deque)
    busy: bool = False


def replay_foreman(
    workers: Sequence[ReplayWorker], stages: int, inputs: int, mode: Mode
) -> dict[tuple[int, int], tuple[str, float]]:
    """(input, stage) -> (worker, done ms) as the real foreman schedules the job."""
    names = [f"cell_{chr(ord('a') + s)}" for s in range(stages)]
    blobs = [name.encode() for name in names]
    job_stages = [
        JobStage(s, names[s], hashlib.sha256(b).hexdigest(), base64.b64encode(b).decode(), 1, 1.0)
        for s, b in enumerate(blobs)
    ]
    submit = SubmitPipelineJob(
        job_id="replay",
        mode=mode,
        scheduler="affinity",
        seed=0,
        min_workers=len(workers),
        stages=tuple(
            StageBlob(name=s.name, sha256=s.sha256, blob_b64=s.blob_b64, ram_mb=1.0)
            for s in job_stages
        ),
        dag=DagSpec(nodes=tuple(names), edges=tuple(itertools.pairwise(names))),
        inputs=tuple(encode_array(np.full((1, 4), i, np.float32), None, 0) for i in range(inputs)),
    )
    speeds = {w.name: w for w in workers}
    states = {w.name: WorkerState(w.name, k, False, _status(w)) for k, w in enumerate(workers)}
    for state in states.values():
        state.cached.update(s.sha256 for s in job_stages)
    clock = [0.0]
    job = Job(submit, job_stages, states, None, lambda _event: None, clock=lambda: clock[0] / 1e3)
    inboxes = {name: _Inbox() for name in states}
    pending: list[tuple[float, int, str, Message]] = []  # (time, order, worker, reply)
    order = iter(range(1 << 30))

    def deliver(outbox: Outbox) -> None:
        for worker, frame in outbox:
            inboxes[worker.worker_id].frames.append(parse_message(frame))
        for name, inbox in inboxes.items():
            if not inbox.busy and inbox.frames:
                start_next(name)

    def start_next(name: str) -> None:
        inbox, speed = inboxes[name], speeds[name]
        message = inbox.frames.popleft()
        inbox.busy = True
        status = _status(speed)
        reply: Message
        if isinstance(message, LoadModel):
            duration = speed.load_ms
            reply = ModelLoaded(
                stage=message.stage,
                sha256=message.sha256,
                load_kind="warm",
                load_ms=duration,
                status=status,
            )
        elif isinstance(message, UnloadModel):
            duration, reply = 0.0, ModelUnloaded(stage=message.stage, status=status)
        else:
            assert isinstance(message, RunTask)
            duration = speed.task_ms[message.stage_index]
            shape = (1, 2) if message.stage_index == stages - 1 else (1, 4)
            reply = TaskResult(
                job_id=message.job_id,
                input_index=message.input_index,
                stage_index=message.stage_index,
                attempt=message.attempt,
                payload=encode_array(np.zeros(shape, np.float32), None, 0),
                report=REPORT,
                status=status,
            )
        heapq.heappush(pending, (clock[0] + duration, next(order), name, reply))

    deliver(job.start())
    while pending and not job.finished:
        clock[0], _, name, reply = heapq.heappop(pending)
        inboxes[name].busy = False
        deliver(_handle(job, states[name], reply))
    return {
        key: (str(record.worker_id), record.done_ms) for key, record in job.table.records.items()
    }


def _handle(job: Job, worker: WorkerState, reply: Message) -> Outbox:
    """What ``Foreman._on_worker_message`` does with a worker's reply."""
    if isinstance(reply, ModelLoaded):
        worker.cached.add(reply.sha256)
        job.on_loaded(worker, reply)
        return []
    if isinstance(reply, ModelUnloaded):
        job.on_unloaded(worker, reply)
        return []
    assert isinstance(reply, TaskResult)
    return job.on_result(worker, reply)


def _status(worker: ReplayWorker) -> WorkerStatus:
    return WorkerStatus(
        rss_mb=0, free_ram_mb=worker.free_ram_mb, battery_mah=0, energy_j=0, battery_pct=100
    )
