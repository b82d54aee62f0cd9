"""Values carried inside CROWDio messages: payloads, worker status, task reports, summaries."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, model_validator

from edgetwin.models.crowd.table import Mode as Mode  # the core's, for the messages
from edgetwin.schema import Strict

Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Count = Annotated[int, Field(ge=0)]
Millis = Annotated[float, Field(ge=0)]
DType = Literal["float32", "float16", "int64", "int32"]
LoadKind = Literal["resident", "warm", "cold"]


class Record(Strict):
    """Base of every CROWDio value and message: strict, and every float finite (a NaN or an
    infinity is refused as malformed, so none can reach the core or a summary)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class TensorSpec(Record):
    """The dtype and fixed shape of a stage's input or output, as the stage declares them."""

    dtype: DType
    shape: Annotated[tuple[Annotated[int, Field(gt=0)], ...], Field(max_length=8)]

    def __str__(self) -> str:
        return f"{self.dtype} {self.shape}"


class Payload(Record):
    """A zlib-compressed array that says what it is: inline (base64) or a file-store name."""

    codec: Literal["zlib"] = "zlib"
    dtype: DType
    shape: Annotated[tuple[Count, ...], Field(max_length=8)]
    data_b64: str | None = None
    ref: str | None = None

    @model_validator(mode="after")
    def _inline_or_ref(self) -> Payload:
        if (self.data_b64 is None) == (self.ref is None):
            raise ValueError("a payload has exactly one of data_b64 and ref")
        return self


class WorkerStatus(Record):
    """A worker's resources as it reports them with every reply."""

    rss_mb: Annotated[float, Field(ge=0)]  # the worker process's, now
    # what its sessions and their work added to that RSS (above it before any session), at
    # their peak since the worker's previous report (telemetry.SessionMemory)
    peak_session_mb: Annotated[float, Field(ge=0)]
    free_ram_mb: Annotated[float, Field(ge=0)]  # what a session may take (Worker.free_ram_mb)
    battery_mah: Annotated[float, Field(ge=0)]  # drained since the worker started
    energy_j: Annotated[float, Field(ge=0)]  # the same drain as energy
    battery_pct: Annotated[float, Field(ge=0, le=100)] | None  # None: mains powered


class TaskReport(Record):
    """A worker's timings for one task; ``load_*`` is the load that made its stage resident."""

    load_kind: LoadKind
    load_ms: Millis
    decode_ms: Millis
    compute_ms: Millis
    encode_ms: Millis
    bytes_in: Count  # compressed input payload
    bytes_out: Count  # compressed output payload
    # fetching its input from and putting its result into the file store (over the phone's
    # link when the foreman serves the store); not in decode_ms or encode_ms
    store_ms: Millis = 0.0


EventKind = Literal[
    "job_start",
    "load",
    "loaded",
    "load_failed",
    "unload",
    "release",
    "dispatch",
    "complete",
    "task_failed",
    "disconnect",
    "requeue",
    "job_done",
]


class Event(Record):
    """Something the foreman did or saw during a job, ``t_ms`` after the job started."""

    t_ms: float
    kind: EventKind
    worker: str | None = None
    stage: str | None = None
    stage_index: int | None = None
    input_index: int | None = None
    detail: str | None = None


class TaskTiming(Record):
    """One task as it finished: where, when (foreman clock) and the worker's report."""

    input_index: Count
    stage_index: Count
    stage: str
    worker: str
    attempts: Annotated[int, Field(ge=1)]
    ready_ms: float
    dispatch_ms: float
    done_ms: float
    report: TaskReport
    # the part of the report's load after ready_ms (foreman clock); None in a summary
    # written before it was kept (2026-12-04): its row counts the whole load
    waited_load_ms: Millis | None = None

    @property
    def counted_load_ms(self) -> float:
        """The load this task's row counts (results' ``load_ms``)."""
        return self.report.load_ms if self.waited_load_ms is None else self.waited_load_ms

    @property
    def load_after_dispatch_ms(self) -> float:
        """The part of the counted load between dispatch and done (what the foreman's clock
        shows of it in the task's round trip). A load cut short by ``ready_ms`` ended
        ``counted_load_ms`` after it, so only its tail past dispatch counts; a whole load
        (or one of an older summary) is taken to have begun at dispatch, when the core
        gave the task to a worker without its stage resident."""
        counted = self.counted_load_ms
        if counted >= self.report.load_ms:
            return counted
        return max(0.0, counted - (self.dispatch_ms - self.ready_ms))


class WorkerSummary(Record):
    """One worker's part in a job."""

    worker: str
    # the name it enrolled under: a worker that enrolled again (``name.2``) is the same
    # device; None in a summary written before 2026-12-06: its worker id
    device: str | None = None
    peak_rss_mb: float  # the process's RSS, the largest of its reports during the job
    # what its sessions and their work added at their peak during the job (results'
    # peak_session_mb); None in a summary written before 2026-12-06
    peak_session_mb: float | None = None
    battery_mah: float  # drained during the job, up to the worker's last reply
    energy_j: float  # the same drain as energy
    cold_loads: Count
    warm_loads: Count
    evictions: Count
    tasks_done: Count
    disconnected: bool


class BoundaryBytes(Record):
    """Activations one stage produced over the job: raw and zlib-compressed bytes."""

    stage: str
    shape: tuple[int, ...]
    raw_bytes: Count
    compressed_bytes: Count


class PipelineSummary(Record):
    """What a finished job measured; built by the foreman, returned to the submitter."""

    job_id: str
    mode: Mode
    scheduler: str
    inputs: Count
    stages: tuple[str, ...]
    pipeline_latency_ms: float
    tasks: tuple[TaskTiming, ...]
    workers: tuple[WorkerSummary, ...]
    cold_loads: Count
    warm_loads: Count
    evictions: Count
    tasks_redispatched: Count
    model_bytes_sent: Count
    wire_bytes: Count  # every frame the foreman sent or received during the job
    boundaries: tuple[BoundaryBytes, ...]
    logits: tuple[tuple[float, ...], ...]
    input_classes: tuple[int, ...]
    mean_logits: tuple[float, ...]
    majority_class: int
    events: tuple[Event, ...]

    @property
    def activation_bytes(self) -> int:
        """Compressed activation bytes that moved between stages and back to the foreman."""
        return sum(b.compressed_bytes for b in self.boundaries)

    @property
    def bytes_moved(self) -> int:
        """Everything moved for the job: model blobs, task inputs and results (compressed)."""
        payloads = sum(t.report.bytes_in + t.report.bytes_out for t in self.tasks)
        return self.model_bytes_sent + payloads

    @property
    def hidden_state_compression_ratio(self) -> float:
        """Raw / zlib bytes over the hidden states (every boundary but the logits)."""
        hidden = self.boundaries[:-1]
        compressed = sum(b.compressed_bytes for b in hidden)
        return sum(b.raw_bytes for b in hidden) / compressed if compressed else float("nan")

    @property
    def battery_mah_by_device(self) -> dict[str, float]:
        """The battery (mAh) each device drained during the job, by its name: a worker that
        enrolled again after it was lost (``name.2``) is the device it was before."""
        drained: dict[str, float] = {}
        for w in self.workers:
            device = w.device or w.worker
            drained[device] = drained.get(device, 0.0) + w.battery_mah
        return drained

    @property
    def peak_session_mb(self) -> float | None:
        """The most any worker's sessions and their work held at once (None: a summary
        written before it was kept)."""
        peaks = [w.peak_session_mb for w in self.workers if w.peak_session_mb is not None]
        return max(peaks, default=0.0) if len(peaks) == len(self.workers) else None
