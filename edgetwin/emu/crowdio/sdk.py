"""The submitter's side: normalise ONNX stages, build the DAG, submit a job, await its summary.

Normalising a stage reads its blob (bytes or a file), names it (``cell_a``,
``cell_b``, ... unless named), checks it is one ONNX graph with one fixed-shape
input and one output of a dtype the codec carries, and takes its SHA-256. Consecutive
stages must fit: stage s's output is stage s+1's input, dtype and shape. Each stage's
input and output travel with the job: the foreman refuses a result that is not its
stage's declared output. Submitting waits at most ``timeout_s`` (``SUBMIT_TIMEOUT_S``
unless told) for the result; with a CA file it speaks TLS.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from edgetwin.crowd_spec import DEFAULT_SCHEDULER, MAX_JOB_INPUTS
from edgetwin.emu.crowdio.codec import SUPPORTED_DTYPES, encode_array
from edgetwin.emu.crowdio.dag import Dag, check_linear, linear_dag
from edgetwin.emu.crowdio.framing import FrameError, read_frame, write_frame
from edgetwin.emu.crowdio.protocol import (
    ClientHello,
    DagSpec,
    ErrorMessage,
    JobAccepted,
    JobEvent,
    JobFailed,
    JobRejected,
    JobResult,
    ProtocolError,
    StageBlob,
    SubmitPipelineJob,
    Welcome,
    encode_message,
    parse_message,
)
from edgetwin.emu.crowdio.records import Event, Mode, PipelineSummary, TensorSpec
from edgetwin.emu.crowdio.tls import client_context
from edgetwin.number_text import exact_text
from edgetwin.policies.scheduling import SCHEDULERS

StageSource = bytes | Path | tuple[str, bytes | Path]
STAGE_RAM_FACTOR = 2.0  # an ONNX Runtime session holds the weights plus its arena
_STAGE_NAME = re.compile(r"^[a-z0-9][a-z0-9_]{0,63}$")
RESULT_MAX_BYTES = 256 * 2**20
SUBMIT_TIMEOUT_S = 120.0


class StageError(ValueError):
    """A stage that is unreadable, not ONNX, or does not fit its neighbours."""


class JobError(Exception):
    """The foreman refused or failed a job (the reason is the message)."""


@dataclass(frozen=True)
class StageSpec:
    """One normalised pipeline stage."""

    name: str
    blob: bytes
    sha256: str
    input: TensorSpec
    output: TensorSpec

    @property
    def ram_mb(self) -> float:
        """Estimated RAM of the stage's session: its weights times STAGE_RAM_FACTOR."""
        return STAGE_RAM_FACTOR * len(self.blob) / 2**20


def default_stage_name(index: int) -> str:
    """``cell_a``, ``cell_b``, ... ``cell_z``, ``cell_aa``, ..."""
    letters = string.ascii_lowercase
    suffix = letters[index % 26]
    while index >= 26:
        index = index // 26 - 1
        suffix = letters[index % 26] + suffix
    return f"cell_{suffix}"


def normalise_stages(sources: Sequence[StageSource]) -> list[StageSpec]:
    """Stages in pipeline order, named, checksummed and checked to chain."""
    if not sources:
        raise StageError("a pipeline needs at least one stage")
    stages: list[StageSpec] = []
    for index, source in enumerate(sources):
        name, blob_source = source if isinstance(source, tuple) else (None, source)
        name = default_stage_name(index) if name is None else _normalise_name(name)
        blob = _read_blob(name, blob_source)
        graph_input, graph_output = _single_io(name, blob)
        stages.append(
            StageSpec(name, blob, hashlib.sha256(blob).hexdigest(), graph_input, graph_output)
        )
    names = [stage.name for stage in stages]
    if len(set(names)) != len(names):
        raise StageError(f"stage names repeat: {names}")
    for upstream, downstream in itertools.pairwise(stages):
        if upstream.output != downstream.input:
            raise StageError(
                f"{upstream.name} outputs {upstream.output} but {downstream.name} "
                f"takes {downstream.input}"
            )
    return stages


@dataclass(frozen=True)
class PipelineJob:
    """Everything a SUBMIT_PIPELINE_JOB carries, before encoding."""

    stages: tuple[StageSpec, ...]
    inputs: tuple[np.ndarray, ...]
    mode: Mode
    scheduler: str
    dag: Dag
    seed: int


def pipeline_job(
    stages: Sequence[StageSpec],
    inputs: Sequence[np.ndarray],
    *,
    mode: Mode = "streaming",
    scheduler: str = DEFAULT_SCHEDULER,
    edges: Sequence[tuple[str, str]] | None = None,
    seed: int = 0,
) -> PipelineJob:
    """A checked job: inputs fit stage 0, the scheduler exists, the graph is the stage chain.

    ``edges`` is an explicit graph; None means the linear one. GraphError when it is
    cyclic or not the chain of the stages.
    """
    if not stages or not inputs:
        raise ValueError("a job needs at least one stage and one input")
    names = [stage.name for stage in stages]
    dag = linear_dag(names) if edges is None else Dag(tuple(names), tuple(edges))
    check_linear(dag, names)
    if scheduler not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {scheduler!r}; known: {', '.join(sorted(SCHEDULERS))}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, not {seed}")
    if len(inputs) > MAX_JOB_INPUTS:
        raise ValueError(f"a job takes at most {MAX_JOB_INPUTS} inputs, not {len(inputs)}")
    expected = stages[0].input
    for index, array in enumerate(inputs):
        got = (array.dtype.name, tuple(array.shape))
        if got != (expected.dtype, expected.shape):
            raise StageError(
                f"input {index} is {' '.join(map(str, got))}; {stages[0].name} takes {expected}"
            )
    return PipelineJob(tuple(stages), tuple(inputs), mode, scheduler, dag, seed)


def submit_message(job: PipelineJob, job_id: str, min_workers: int) -> SubmitPipelineJob:
    """The SUBMIT_PIPELINE_JOB message: base64 blobs with SHA-256, inputs inline."""
    return SubmitPipelineJob(
        job_id=job_id,
        mode=job.mode,
        scheduler=job.scheduler,
        seed=job.seed,
        min_workers=min_workers,
        stages=tuple(
            StageBlob(
                name=stage.name,
                sha256=stage.sha256,
                blob_b64=base64.b64encode(stage.blob).decode("ascii"),
                ram_mb=stage.ram_mb,
                input=stage.input,
                output=stage.output,
            )
            for stage in job.stages
        ),
        dag=DagSpec(nodes=job.dag.nodes, edges=job.dag.edges),
        inputs=tuple(encode_array(array, None, 0) for array in job.inputs),
    )


async def submit_job(
    host: str,
    port: int,
    token: str,
    job: PipelineJob,
    *,
    job_id: str = "job-1",
    min_workers: int = 0,
    timeout_s: float = SUBMIT_TIMEOUT_S,
    on_event: Callable[[Event], None] | None = None,
    tls_ca: Path | None = None,
    max_message_bytes: int = RESULT_MAX_BYTES,
) -> PipelineSummary:
    """Submit ``job`` to the foreman at host:port and return its summary.

    ``on_event`` sees the job's events as they happen. JobError when the foreman
    refuses the token or the job, the job fails, or a reply is malformed, empty or over
    ``max_message_bytes``; TimeoutError, saying so, when there is no result ``timeout_s``
    after connecting. ``tls_ca``: speak TLS, the foreman's certificate checked against
    this CA file.
    """
    tls = None if tls_ca is None else client_context(tls_ca)
    submit = submit_message(job, job_id, min_workers)
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(host, port, ssl=tls)
            try:
                return await _exchange(reader, writer, token, submit, on_event, max_message_bytes)
            finally:
                writer.close()
    except TimeoutError:
        raise TimeoutError(
            f"job {job_id}: no result from the foreman at {host}:{port} within "
            f"{exact_text(timeout_s)} s (submit_job's timeout_s)"
        ) from None


async def _exchange(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    token: str,
    submit: SubmitPipelineJob,
    on_event: Callable[[Event], None] | None,
    max_message_bytes: int,
) -> PipelineSummary:
    """Hello, submission, then events until the result."""
    try:
        await write_frame(writer, encode_message(ClientHello(token=token)))
        reply = parse_message(await read_frame(reader, max_message_bytes))
        if not isinstance(reply, Welcome):
            raise JobError(_reason(reply))
        await write_frame(writer, encode_message(submit))
        while True:
            message = parse_message(await read_frame(reader, max_message_bytes))
            if isinstance(message, JobResult):
                return message.summary
            if isinstance(message, JobEvent):
                if on_event is not None:
                    on_event(message.event)
            elif not isinstance(message, JobAccepted):
                raise JobError(_reason(message))
    except asyncio.IncompleteReadError:
        raise JobError("the foreman closed the connection") from None
    except (ProtocolError, FrameError) as exc:
        raise JobError(f"the foreman's reply is not understood: {exc}") from None


def _reason(message: object) -> str:
    if isinstance(message, JobRejected | JobFailed | ErrorMessage):
        return message.reason
    return f"unexpected reply {type(message).__name__}"


def _normalise_name(name: str) -> str:
    normal = re.sub(r"[\s-]+", "_", name.strip().lower())
    if not _STAGE_NAME.fullmatch(normal):
        raise StageError(f"stage name {name!r} is not letters, digits and underscores")
    return normal


def _read_blob(name: str, source: bytes | Path) -> bytes:
    if isinstance(source, bytes):
        return source
    try:
        return source.read_bytes()
    except OSError as exc:
        raise StageError(f"{name}: cannot read {source}: {exc.strerror}") from None


def _single_io(name: str, blob: bytes) -> tuple[TensorSpec, TensorSpec]:
    try:
        model = onnx.load_model_from_string(blob)
    except Exception as exc:  # protobuf raises its own DecodeError family
        raise StageError(f"{name}: not an ONNX model ({exc})") from None
    initialisers = {init.name for init in model.graph.initializer}
    inputs = [value for value in model.graph.input if value.name not in initialisers]
    outputs = list(model.graph.output)
    if len(inputs) != 1 or len(outputs) != 1:
        raise StageError(f"{name}: a stage has one input and one output")
    return _tensor_spec(name, inputs[0]), _tensor_spec(name, outputs[0])


def _tensor_spec(name: str, value: onnx.ValueInfoProto) -> TensorSpec:
    tensor = value.type.tensor_type
    dims = tuple(dim.dim_value for dim in tensor.shape.dim)
    if not tensor.HasField("shape") or any(dim <= 0 for dim in dims) or len(dims) > 8:
        raise StageError(f"{name}: {value.name} must have a fixed shape of at most 8 dimensions")
    try:
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type).name
    except KeyError:
        dtype = f"ONNX type {tensor.elem_type}"
    if dtype not in SUPPORTED_DTYPES:
        raise StageError(f"{name}: {value.name} is {dtype}; a stage sends {SUPPORTED_DTYPES}")
    return TensorSpec(dtype=dtype, shape=dims)
