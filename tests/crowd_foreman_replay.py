"""The real foreman's crew (``edgetwin.emu.crowdio.crew``) driven by simulated workers.

The crew is the real foreman's code between its sockets and the decision core: it
is fed the workers' replies as ``Foreman._on_worker_message`` feeds them and its
frames are parsed back, on a virtual clock. Each worker handles the foreman's
frames in order, as ``edgetwin.emu.crowdio.worker`` does over its connection:
LOAD_MODEL takes ``load_ms`` (a warm load: every stage is on its storage),
UNLOAD_MODEL nothing, RUN_TASK ``task_ms[stage]``; a task's report gives the load
done since the worker's previous task. Workers may leave for good at
given times (their connection drops: what they were doing is lost), and several
jobs may be submitted at given times. The result is every decision the core took,
with its time, and each task's load as the foreman counts it, to be set against the
twin's for the same durations.
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
from edgetwin.emu.crowdio.crew import Crew
from edgetwin.emu.crowdio.dispatch import JobStage, WorkerState
from edgetwin.emu.crowdio.job import Outbox
from edgetwin.emu.crowdio.protocol import (
    DagSpec,
    LoadModel,
    Message,
    ModelLoaded,
    ModelUnloaded,
    RunTask,
    StageBlob,
    SubmitPipelineJob,
    UnloadModel,
    parse_message,
)
from edgetwin.emu.crowdio.records import Mode, TaskReport, TensorSpec, WorkerStatus
from edgetwin.models.crowd.events import Decision

REPORT = TaskReport(
    load_kind="resident", load_ms=0, decode_ms=0, compute_ms=0, encode_ms=0, bytes_in=0, bytes_out=0
)
HIDDEN = TensorSpec(dtype="float32", shape=(1, 4))  # every input and hidden state
LOGITS = TensorSpec(dtype="float32", shape=(1, 2))


@dataclass(frozen=True)
class ReplayWorker:
    """A worker's speed (ms), the free RAM it reports (its battery reads 100 %), and when
    it leaves for good (None: never)."""

    name: str
    load_ms: float
    task_ms: tuple[float, ...]  # per stage: input in, inference, result out
    free_ram_mb: float
    leave_ms: float | None = None


@dataclass
class _Inbox:
    frames: deque[Message] = field(default_factory=deque)
    busy: bool = False
    last_load_ms: float = 0.0  # reported with the next task, as the worker does


TaskKey = tuple[int, int, int]  # core job id, input, stage index


def replay_foreman(
    workers: Sequence[ReplayWorker],
    stages: int,
    inputs: int,
    mode: Mode,
    submit_ms: Sequence[float] = (0.0,),
) -> tuple[list[tuple[float, Decision]], dict[TaskKey, float]]:
    """(time ms, decision) of every decision the real foreman's core takes, in order, and
    the load each task waited for (``load_ms`` of the core's tasks: the crew sets it)."""
    names = [f"cell_{chr(ord('a') + s)}" for s in range(stages)]
    job_stages = [
        JobStage(
            s,
            n,
            hashlib.sha256(n.encode()).hexdigest(),
            base64.b64encode(n.encode()).decode(),
            1,
            1.0,
            HIDDEN,
            LOGITS if s == stages - 1 else HIDDEN,
        )
        for s, n in enumerate(names)
    ]
    speeds = {w.name: w for w in workers}
    clock = [0.0]
    crew = Crew(None, clock=lambda: clock[0] / 1e3)
    decisions: list[tuple[float, Decision]] = []
    record = crew.core.on_decision
    assert record is not None

    def tee(d: Decision) -> None:
        decisions.append((clock[0], d))
        record(d)

    crew.core.on_decision = tee
    inboxes = {w.name: _Inbox() for w in workers}
    states = {w.name: WorkerState(w.name, False, _status(w)) for w in workers}
    for state in states.values():
        state.cached.update(s.sha256 for s in job_stages)
        crew.add_worker(state)
    # (time, order, what, worker, reply): what is 0 a submission, 1 a departure, 2 a reply
    pending: list[tuple[float, int, int, str, Message | None]] = []
    order = itertools.count()
    for k, at_ms in enumerate(submit_ms):
        heapq.heappush(pending, (at_ms, next(order), 0, str(k), None))
    for w in workers:
        if w.leave_ms is not None:
            heapq.heappush(pending, (w.leave_ms, next(order), 1, w.name, None))
    gone: set[str] = set()
    jobs = []

    def deliver(outbox: Outbox) -> None:
        for worker, frame in outbox:
            inboxes[worker.worker_id].frames.append(parse_message(frame))
        for name, inbox in inboxes.items():
            if name not in gone and not inbox.busy and inbox.frames:
                start_next(name)

    def start_next(name: str) -> None:
        inbox, speed = inboxes[name], speeds[name]
        message = inbox.frames.popleft()
        inbox.busy = True
        status = _status(speed)
        reply: Message
        if isinstance(message, LoadModel):
            duration = inbox.last_load_ms = speed.load_ms
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
            shape = (LOGITS if message.stage_index == stages - 1 else HIDDEN).shape
            last_ms, inbox.last_load_ms = inbox.last_load_ms, 0.0
            load = {"load_kind": "warm", "load_ms": last_ms} if last_ms else {}
            reply = message.result(
                encode_array(np.zeros(shape, np.float32), None, 0),
                REPORT.model_copy(update=load),
                status,
            )
        heapq.heappush(pending, (clock[0] + duration, next(order), 2, name, reply))

    while pending:
        clock[0], _, what, name, reply = heapq.heappop(pending)
        if what == 0:
            submit = _submit(f"job-{name}", job_stages, inputs, mode, len(workers))
            job, outbox = crew.start(submit, job_stages, lambda _event: None)
            jobs.append(job.core)
            deliver(outbox)
        elif what == 1:
            gone.add(name)
            deliver(crew.lose_worker(states.pop(name)))
        elif name not in gone:
            assert reply is not None
            inboxes[name].busy = False
            deliver(crew.on_reply(states[name], reply))  # type: ignore[arg-type]
    assert not crew.core.in_flight, "every job finished"
    loads = {
        (job.job_id, t.item, t.stage_index): t.load_ms
        for job in jobs
        for row in job.tasks
        for t in row
    }
    return decisions, loads


def _submit(
    job_id: str, stages: Sequence[JobStage], inputs: int, mode: Mode, workers: int
) -> SubmitPipelineJob:
    names = [s.name for s in stages]
    return SubmitPipelineJob(
        job_id=job_id,
        mode=mode,
        scheduler="affinity",
        seed=0,
        min_workers=workers,
        stages=tuple(
            StageBlob(
                name=s.name,
                sha256=s.sha256,
                blob_b64=s.blob_b64,
                ram_mb=1.0,
                input=s.input,
                output=s.output,
            )
            for s in stages
        ),
        dag=DagSpec(nodes=tuple(names), edges=tuple(itertools.pairwise(names))),
        inputs=tuple(encode_array(np.full((1, 4), i, np.float32), None, 0) for i in range(inputs)),
    )


def _status(worker: ReplayWorker) -> WorkerStatus:
    return WorkerStatus(
        rss_mb=0,
        peak_session_mb=0,
        free_ram_mb=worker.free_ram_mb,
        battery_mah=0,
        energy_j=0,
        battery_pct=100,
    )
