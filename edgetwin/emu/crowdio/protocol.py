"""The CROWDio messages: JSON objects tagged by ``type``, one per frame.

Every connection opens with a hello carrying the shared token: ``HELLO`` from a
worker, ``CLIENT_HELLO`` from a submitter. Unknown types, unknown or missing fields
and wrong types are refused as malformed.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter, ValidationError, field_validator

from edgetwin.crowd_spec import MAX_JOB_INPUTS
from edgetwin.emu.crowdio.records import (
    Count,
    Event,
    Millis,
    Mode,
    Name,
    Payload,
    PipelineSummary,
    Record,
    Sha256,
    TaskReport,
    TensorSpec,
    WorkerStatus,
)

Token = Annotated[str, Field(min_length=1, max_length=256)]
TOKEN_ENV = "CROWDIO_TOKEN"  # where the foreman and workers look for the token
MAX_MESSAGE_BYTES = 512 * 2**20  # the largest frame the foreman or a worker reads
INLINE_MAX_BYTES = 64 * 1024  # a payload larger than this goes through the file store


class ProtocolError(Exception):
    """A message that is malformed, out of place or from a peer that is not enrolled."""


class WorkerHello(Record):
    type: Literal["HELLO"] = "HELLO"
    token: Token
    name: Name
    cached: Annotated[tuple[Sha256, ...], Field(max_length=4096)]  # stage blobs on disk
    has_gpu: bool
    status: WorkerStatus


class ClientHello(Record):
    type: Literal["CLIENT_HELLO"] = "CLIENT_HELLO"
    token: Token


class Welcome(Record):
    type: Literal["WELCOME"] = "WELCOME"
    peer_id: str  # the worker id (or client id) the foreman knows this connection by
    store_dir: str | None  # the shared file store; None: payloads travel inline
    # the foreman serves its store over HTTP on this port of its address (a worker without
    # a store folder of its own uses it: netstore.py); None: it does not
    store_port: Annotated[int, Field(gt=0, lt=65536)] | None = None
    inline_max_bytes: Count  # payloads larger than this go through the store
    heartbeat_s: Annotated[float, Field(gt=0)]  # a worker sends HEARTBEAT this often


class LoadModel(Record):
    type: Literal["LOAD_MODEL"] = "LOAD_MODEL"
    job_id: Name
    stage: Name
    sha256: Sha256
    blob_b64: str | None  # None: the worker has the blob in its cache


class UnloadModel(Record):
    type: Literal["UNLOAD_MODEL"] = "UNLOAD_MODEL"
    job_id: Name
    stage: Name


class RunTask(Record):
    type: Literal["RUN_TASK"] = "RUN_TASK"
    job_id: Name
    input_index: Count
    stage_index: Count
    stage: Name
    sha256: Sha256
    attempt: Annotated[int, Field(ge=1)]
    payload: Payload

    def _reply_key(self) -> dict[str, str | int]:
        """What a reply names the task by: its job, input, stage and attempt."""
        keys = ("job_id", "input_index", "stage_index", "attempt")
        return {key: getattr(self, key) for key in keys}

    def result(self, payload: Payload, report: TaskReport, status: WorkerStatus) -> TaskResult:
        """The reply that this attempt of this task succeeded with ``payload``."""
        return TaskResult(**self._reply_key(), payload=payload, report=report, status=status)

    def failure(self, error: str, status: WorkerStatus) -> TaskFailed:
        """The reply that this attempt of this task failed with ``error``."""
        return TaskFailed(**self._reply_key(), error=error, status=status)


class ModelLoaded(Record):
    type: Literal["MODEL_LOADED"] = "MODEL_LOADED"
    stage: Name
    sha256: Sha256
    load_kind: Literal["warm", "cold"]
    load_ms: Millis
    status: WorkerStatus


class ModelUnloaded(Record):
    type: Literal["MODEL_UNLOADED"] = "MODEL_UNLOADED"
    stage: Name
    status: WorkerStatus


class ModelFailed(Record):
    type: Literal["MODEL_FAILED"] = "MODEL_FAILED"
    stage: Name
    sha256: Sha256
    error: str
    status: WorkerStatus


class TaskResult(Record):
    type: Literal["TASK_RESULT"] = "TASK_RESULT"
    job_id: Name
    input_index: Count
    stage_index: Count
    attempt: Annotated[int, Field(ge=1)]
    payload: Payload
    report: TaskReport
    status: WorkerStatus


class TaskFailed(Record):
    type: Literal["TASK_FAILED"] = "TASK_FAILED"
    job_id: Name
    input_index: Count
    stage_index: Count
    attempt: Annotated[int, Field(ge=1)]
    error: str
    status: WorkerStatus


class Heartbeat(Record):
    """A worker is alive (sent every ``heartbeat_s``, whatever it is doing)."""

    type: Literal["HEARTBEAT"] = "HEARTBEAT"


class StageBlob(Record):
    name: Name
    sha256: Sha256
    blob_b64: str
    ram_mb: Annotated[float, Field(ge=0)]
    input: TensorSpec  # what the stage takes ...
    output: TensorSpec  # ... and gives: a result of another dtype or shape fails its task


class DagSpec(Record):
    nodes: tuple[Name, ...]
    edges: tuple[tuple[Name, Name], ...]


class SubmitPipelineJob(Record):
    type: Literal["SUBMIT_PIPELINE_JOB"] = "SUBMIT_PIPELINE_JOB"
    job_id: Name
    mode: Mode
    scheduler: str
    seed: Annotated[int, Field(ge=0)]  # the scheduler's random stream (NumPy's seeds are >= 0)
    min_workers: Count  # the job starts once this many workers are enrolled
    stages: Annotated[tuple[StageBlob, ...], Field(min_length=1, max_length=64)]
    dag: DagSpec
    # at most as many as a crowd scenario's job: each input is tasks and rows of the table
    inputs: Annotated[tuple[Payload, ...], Field(min_length=1, max_length=MAX_JOB_INPUTS)]

    @field_validator("inputs", mode="before")
    @classmethod
    def _counted_before_read(cls, inputs: object) -> object:
        """Too many inputs are refused before any is read (``max_length`` counts them after
        every payload's validation: 100,001 tiny ones took a foreman 9 s to refuse)."""
        if isinstance(inputs, list | tuple) and len(inputs) > MAX_JOB_INPUTS:
            raise ValueError(f"at most {MAX_JOB_INPUTS:,} items, not {len(inputs):,}")
        return inputs


class JobAccepted(Record):
    type: Literal["JOB_ACCEPTED"] = "JOB_ACCEPTED"
    job_id: str
    tasks: Count


class JobRejected(Record):
    type: Literal["JOB_REJECTED"] = "JOB_REJECTED"
    job_id: str
    reason: str


class JobEvent(Record):
    type: Literal["JOB_EVENT"] = "JOB_EVENT"
    event: Event


class JobResult(Record):
    type: Literal["JOB_RESULT"] = "JOB_RESULT"
    summary: PipelineSummary


class JobFailed(Record):
    type: Literal["JOB_FAILED"] = "JOB_FAILED"
    job_id: str
    reason: str


class ErrorMessage(Record):
    type: Literal["ERROR"] = "ERROR"
    reason: str


Message = Annotated[
    WorkerHello
    | ClientHello
    | Welcome
    | LoadModel
    | UnloadModel
    | RunTask
    | ModelLoaded
    | ModelUnloaded
    | ModelFailed
    | TaskResult
    | TaskFailed
    | Heartbeat
    | SubmitPipelineJob
    | JobAccepted
    | JobRejected
    | JobEvent
    | JobResult
    | JobFailed
    | ErrorMessage,
    Field(discriminator="type"),
]
_MESSAGE: TypeAdapter[Message] = TypeAdapter(Message)


def parse_message(body: bytes) -> Message:
    """A frame body as a message; ProtocolError names what is malformed."""
    try:
        return _MESSAGE.validate_json(body)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "message"
        raise ProtocolError(f"malformed message: {where}: {error['msg']}") from None


def encode_message(message: Message) -> bytes:
    """A message as a frame body (UTF-8 JSON)."""
    return message.model_dump_json().encode()
