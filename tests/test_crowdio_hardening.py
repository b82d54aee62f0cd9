"""CROWDio input that once wedged the foreman, killed honest workers or ended in a traceback.

As in ``test_crowdio_security``: the foreman and workers under test are the real ones,
in this process over loopback; a misbehaving peer is played by the test, speaking the
wire protocol. The jobs are real (tiny DistilBERT on ONNX Runtime).
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from edgetwin.crowd_spec import MAX_JOB_INPUTS
from edgetwin.emu.crowdio.codec import PayloadError, decode_payload, encode_array
from edgetwin.emu.crowdio.foreman import Foreman, ForemanConfig
from edgetwin.emu.crowdio.framing import read_frame, write_frame
from edgetwin.emu.crowdio.model import (
    TINY,
    distilbert_job,
    make_inputs,
    reference_logits,
)
from edgetwin.emu.crowdio.protocol import (
    ClientHello,
    ErrorMessage,
    JobRejected,
    LoadModel,
    Message,
    ModelFailed,
    ModelLoaded,
    RunTask,
    TaskFailed,
    TaskResult,
    Welcome,
    WorkerHello,
    encode_message,
    parse_message,
)
from edgetwin.emu.crowdio.records import Event, Payload, PipelineSummary, TaskReport, WorkerStatus
from edgetwin.emu.crowdio.sdk import (
    JobError,
    PipelineJob,
    StageError,
    normalise_stages,
    pipeline_job,
    submit_job,
    submit_message,
)
from edgetwin.emu.crowdio.worker import Worker, WorkerConfig

TOKEN = "hardening-token"
STATUS = WorkerStatus(
    rss_mb=50, peak_session_mb=0, free_ram_mb=1000, battery_mah=0, energy_j=0, battery_pct=90
)
REPORT = TaskReport(
    load_kind="cold", load_ms=1, decode_ms=0, compute_ms=1, encode_ms=0, bytes_in=0, bytes_out=0
)
NOT_BASE64 = "eJwDAAAAAAE=\u00e9"  # valid base64 but for one non-ASCII letter
Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
Answer = Callable[[RunTask], Payload]


@pytest.fixture(scope="module")
def job() -> PipelineJob:
    return distilbert_job(TINY, inputs=2, stages=2)


@asynccontextmanager
async def foreman_with_workers() -> AsyncIterator[tuple[int, list[asyncio.Task[None]]]]:
    """A real foreman on loopback; yields its port and a list for the worker tasks to stop."""
    foreman = Foreman(ForemanConfig(token=TOKEN, max_message_bytes=1 << 24))
    port = await foreman.start()
    tasks: list[asyncio.Task[None]] = []
    try:
        yield port, tasks
    finally:
        await foreman.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def start_worker(port: int, tmp_path: Path, name: str) -> asyncio.Task[None]:
    config = WorkerConfig("127.0.0.1", port, TOKEN, tmp_path / f"cache-{name}", name)
    return asyncio.create_task(Worker(config).run())


async def send(writer: asyncio.StreamWriter, message: Message) -> None:
    await write_frame(writer, encode_message(message))


async def receive(reader: asyncio.StreamReader) -> Message:
    return parse_message(await asyncio.wait_for(read_frame(reader, 1 << 24), 20))


async def enrolled(port: int, name: str = "fake") -> Streams:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    hello = WorkerHello(token=TOKEN, name=name, cached=(), has_gpu=False, status=STATUS)
    await send(writer, hello)
    assert isinstance(await receive(reader), Welcome)
    return reader, writer


async def answer_tasks(streams: Streams, answer: Answer) -> Message:
    """Play a worker: acknowledge loads, answer every task with ``answer``; return the message
    that stopped it (an ERROR) or raise IncompleteReadError when the foreman closes."""
    reader, writer = streams
    while True:
        message = await receive(reader)
        if isinstance(message, LoadModel):
            loaded = ModelLoaded(
                stage=message.stage,
                sha256=message.sha256,
                load_kind="cold",
                load_ms=1,
                status=STATUS,
            )
            await send(writer, loaded)
        elif isinstance(message, RunTask):
            result = message.result(answer(message), REPORT, STATUS)
            await send(writer, result)
        elif isinstance(message, ErrorMessage):
            return message


def _completed_once(summary: PipelineSummary, job: PipelineJob) -> None:
    """Every task completed exactly once, and the logits are the single-device reference."""
    completions = Counter(
        (e.input_index, e.stage_index) for e in summary.events if e.kind == "complete"
    )
    expected = {(i, s): 1 for i in range(len(job.inputs)) for s in range(len(job.stages))}
    assert dict(completions) == expected
    reference = reference_logits(TINY, job.seed, job.inputs)
    np.testing.assert_allclose(np.array(summary.logits), reference, atol=1e-5)


# --- defect 1 (and other fields): a bad submission is refused, the foreman carries on -----


def _raw_submission(job: PipelineJob, change: Callable[[dict[str, Any]], None]) -> bytes:
    body = json.loads(encode_message(submit_message(job, "bad-job", min_workers=0)))
    change(body)
    return json.dumps(body).encode()  # json writes inf as Infinity, as a peer could


def _set(path: tuple[str | int, ...], value: object) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        node: Any = body
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


BAD_SUBMISSIONS = {
    "seed": _set(("seed",), -1),
    "ram_mb": _set(("stages", 0, "ram_mb"), float("inf")),
    "not valid base64": _set(("stages", 1, "blob_b64"), NOT_BASE64),
    "input 0: inline payload is not valid base64": _set(("inputs", 0, "data_b64"), NOT_BASE64),
    "stage cell_b takes float32 (1, 5)": _set(("stages", 1, "input", "shape"), [1, 5]),
    "input 0: shape (1, 3) is not the declared": _set(("inputs", 0, "shape"), [1, 3]),
    # 100,000 tiny inputs took a foreman 250 MiB (16x the frame): the frame limit alone
    # let one submission take gigabytes
    f"at most {MAX_JOB_INPUTS:,} items": lambda body: body.update(
        inputs=body["inputs"][:1] * (MAX_JOB_INPUTS + 1)
    ),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("problem", BAD_SUBMISSIONS)
def test_a_bad_submission_is_refused_and_a_real_job_then_runs_exactly_once(
    job: PipelineJob, tmp_path: Path, problem: str
) -> None:
    async def scenario() -> PipelineSummary:
        async with foreman_with_workers() as (port, workers):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            await send(writer, ClientHello(token=TOKEN))
            assert isinstance(await receive(reader), Welcome)
            await write_frame(writer, _raw_submission(job, BAD_SUBMISSIONS[problem]))
            reply = await receive(reader)
            assert isinstance(reply, JobRejected | ErrorMessage), reply
            assert problem in reply.reason
            workers.append(start_worker(port, tmp_path, "late-worker"))  # served after it
            summary = await submit_job(
                "127.0.0.1", port, TOKEN, job, job_id="real", min_workers=1, timeout_s=60
            )
            assert not workers[0].done()
            return summary

    _completed_once(asyncio.run(scenario()), job)


def test_a_negative_seed_is_refused_by_the_sdk(job: PipelineJob) -> None:
    with pytest.raises(ValueError, match="seed"):
        pipeline_job(job.stages, job.inputs, seed=-1)


def test_more_inputs_than_a_job_takes_are_refused_by_the_sdk(job: PipelineJob) -> None:
    with pytest.raises(ValueError, match=f"at most {MAX_JOB_INPUTS} inputs"):
        pipeline_job(job.stages, job.inputs[:1] * (MAX_JOB_INPUTS + 1))


@pytest.mark.timeout(30)
def test_a_reply_the_sdk_cannot_read_is_a_job_error(job: PipelineJob) -> None:
    """A summary with a NaN logit arrives as JSON null: a JobError, not a ProtocolError."""

    async def foreman(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_frame(reader, 1 << 24)
        await send(writer, Welcome(peer_id="c", store_dir=None, inline_max_bytes=0, heartbeat_s=1))
        await read_frame(reader, 1 << 24)
        await write_frame(writer, b'{"type": "JOB_RESULT", "summary": {"logits": [[null]]}}')

    async def scenario() -> None:
        server = await asyncio.start_server(foreman, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            with pytest.raises(JobError, match="reply is not understood: malformed message"):
                await submit_job("127.0.0.1", port, TOKEN, job, timeout_s=20)
        finally:
            server.close()

    asyncio.run(scenario())


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("header", "problem"),
    [(bytes(4), "empty frame"), ((1 << 20).to_bytes(4, "big"), "over the limit")],
    ids=["empty", "oversized"],
)
def test_a_reply_frame_the_sdk_cannot_read_is_a_job_error(
    job: PipelineJob, header: bytes, problem: str
) -> None:
    """A frame that breaks the framing rules is a JobError too, not a FrameError."""

    async def foreman(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_frame(reader, 1 << 24)
        writer.write(header)
        await writer.drain()
        await reader.read()  # until the SDK closes

    async def scenario() -> None:
        server = await asyncio.start_server(foreman, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            with pytest.raises(JobError, match=f"reply is not understood: .*{problem}"):
                await submit_job("127.0.0.1", port, TOKEN, job, max_message_bytes=1000)
        finally:
            server.close()

    asyncio.run(scenario())


def test_a_stage_of_a_dtype_the_codec_cannot_carry_is_refused() -> None:
    with pytest.raises(StageError, match="x is float64"):
        normalise_stages([_identity_stage((1, 4), TensorProto.DOUBLE)])


# --- defect 2: non-ASCII base64 is a clean error everywhere ------------------------------


def test_non_ascii_base64_in_a_payload_is_a_payload_error() -> None:
    payload = Payload(dtype="int64", shape=(1,), data_b64=NOT_BASE64)
    with pytest.raises(PayloadError, match="not valid base64"):
        decode_payload(payload, None)


@pytest.mark.timeout(120)
def test_a_non_ascii_result_drops_its_worker_and_the_job_completes_on_the_honest_one(
    job: PipelineJob, tmp_path: Path
) -> None:
    """Once, the bad hidden state went on to the honest worker of the next stage, which
    died of it (and the job hung)."""

    async def scenario() -> tuple[PipelineSummary, Message]:
        async with foreman_with_workers() as (port, workers):
            fake = await enrolled(port, "liar")
            workers.append(start_worker(port, tmp_path, "honest"))
            client = asyncio.create_task(
                submit_job("127.0.0.1", port, TOKEN, job, min_workers=2, timeout_s=60)
            )
            bad = Payload(dtype="float32", shape=(1, TINY.dim), data_b64=NOT_BASE64)
            stopped = await answer_tasks(fake, lambda task: bad)
            summary = await client
            assert not workers[0].done()  # the honest worker is still serving
            return summary, stopped

    summary, stopped = asyncio.run(scenario())
    assert isinstance(stopped, ErrorMessage) and "not valid base64" in stopped.reason
    _completed_once(summary, job)
    assert {t.worker for t in summary.tasks} == {"honest"}


@pytest.mark.timeout(60)
def test_worker_fails_a_non_ascii_blob_or_payload_and_keeps_serving(
    job: PipelineJob, tmp_path: Path
) -> None:
    stage = job.stages[0]

    async def scenario() -> None:
        connected: asyncio.Queue[Streams] = asyncio.Queue()

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await connected.put((reader, writer))

        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        worker = start_worker(server.sockets[0].getsockname()[1], tmp_path, "under-test")
        reader, writer = await asyncio.wait_for(connected.get(), 10)
        try:
            assert isinstance(await receive(reader), WorkerHello)
            welcome = Welcome(peer_id="w", store_dir=None, inline_max_bytes=1 << 20, heartbeat_s=5)
            await send(writer, welcome)
            load = LoadModel(job_id="j", stage=stage.name, sha256=stage.sha256, blob_b64=None)
            await send(writer, load.model_copy(update={"blob_b64": NOT_BASE64}))
            failed = await receive(reader)
            assert isinstance(failed, ModelFailed) and "not valid base64" in failed.error
            blob = base64.b64encode(stage.blob).decode()
            await send(writer, load.model_copy(update={"blob_b64": blob}))
            assert isinstance(await receive(reader), ModelLoaded)
            run = RunTask(
                job_id="j",
                input_index=0,
                stage_index=0,
                stage=stage.name,
                sha256=stage.sha256,
                attempt=1,
                payload=Payload(dtype="int64", shape=(1, TINY.seq_len), data_b64=NOT_BASE64),
            )
            await send(writer, run)
            task_failed = await receive(reader)
            assert isinstance(task_failed, TaskFailed) and "not valid base64" in task_failed.error
            good = encode_array(make_inputs(TINY, 1, 0)[0], None, 1 << 20)
            await send(writer, run.model_copy(update={"payload": good}))
            assert isinstance(await receive(reader), TaskResult)
            assert not worker.done()
        finally:
            writer.close()
            server.close()
            await asyncio.gather(worker, return_exceptions=True)

    asyncio.run(scenario())


# --- defects 3, 4 and 8: results that do not fit the stage fail their task ---------------


def _zeros(job: PipelineJob) -> Answer:
    """Answers of the declared shape (zeros): what an honest worker's shapes look like."""
    return lambda task: encode_array(
        np.zeros(job.stages[task.stage_index].output.shape, np.float32), None, 1 << 20
    )


def _sink_gives(job: PipelineJob, array: np.ndarray) -> Answer:
    honest = _zeros(job)
    last = len(job.stages) - 1
    return lambda task: (
        encode_array(array, None, 1 << 20) if task.stage_index == last else honest(task)
    )


async def _job_on_fake_worker(job: PipelineJob, answer: Answer, events: list[Event]) -> None:
    """Run ``job`` with the test as its only worker (the client's events go to ``events``)."""
    async with foreman_with_workers() as (port, _):
        fake = await enrolled(port)
        client = asyncio.create_task(
            submit_job(
                "127.0.0.1", port, TOKEN, job, min_workers=1, timeout_s=60, on_event=events.append
            )
        )
        playing = asyncio.create_task(answer_tasks(fake, answer))
        try:
            await client
        finally:
            playing.cancel()
            await asyncio.gather(playing, return_exceptions=True)


def _task_failures(events: list[Event]) -> list[tuple[int | None, int | None, str | None]]:
    return [(e.input_index, e.stage_index, e.detail) for e in events if e.kind == "task_failed"]


@pytest.mark.timeout(60)
def test_an_empty_final_output_fails_the_job_with_a_clear_error(job: PipelineJob) -> None:
    answer = _sink_gives(job, np.zeros((0,), np.float32))
    with pytest.raises(JobError, match=r"shape \(0,\) is not the declared"):
        asyncio.run(_job_on_fake_worker(job, answer, []))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_logits_fail_the_job_with_a_clear_error(job: PipelineJob, value: float) -> None:
    logits = np.zeros(job.stages[-1].output.shape, np.float32)
    logits.flat[0] = value
    with pytest.raises(JobError, match="logits are not finite"):
        asyncio.run(_job_on_fake_worker(job, _sink_gives(job, logits), []))


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("array", "problem"),
    [
        (np.zeros((1, 3), np.float32), r"shape \(1, 3\) is not the declared \(1, 32\)"),
        (np.zeros((1, TINY.dim), np.float16), "dtype float16 is not the declared float32"),
    ],
)
def test_a_result_of_the_wrong_shape_fails_its_task_when_it_arrives(
    job: PipelineJob, array: np.ndarray, problem: str
) -> None:
    """Once, the wrong hidden state was accepted and sent on to the next stage."""
    events: list[Event] = []
    wrong = encode_array(array, None, 1 << 20)
    with pytest.raises(JobError, match=f"failed 3 times: result of stage cell_a: {problem}"):
        asyncio.run(_job_on_fake_worker(job, lambda task: wrong, events))
    failures = _task_failures(events)
    assert [(i, s) for i, s, _ in failures] == [(failures[0][0], 0)] * 3
    assert all(detail is not None and "is not the declared" in detail for *_, detail in failures)
    assert not any(e.kind == "disconnect" for e in events)  # a failed task, not a dropped worker
    assert not any(e.kind == "dispatch" and e.stage_index == 1 for e in events)


# --- defect 5: byte-identical stages under two names -------------------------------------


def _identity_stage(shape: tuple[int, ...], dtype: int = TensorProto.FLOAT) -> bytes:
    """An ONNX stage that passes its input through unchanged."""
    x = helper.make_tensor_value_info("x", dtype, shape)
    y = helper.make_tensor_value_info("y", dtype, shape)
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return onnx.shape_inference.infer_shapes(model).SerializeToString()


@pytest.mark.timeout(120)
def test_two_byte_identical_stages_with_different_names_both_run(
    job: PipelineJob, tmp_path: Path
) -> None:
    head, tail = job.stages
    same = _identity_stage(head.output.shape)
    stages = normalise_stages(
        [(head.name, head.blob), ("pass_1", same), ("pass_2", same), (tail.name, tail.blob)]
    )
    assert stages[1].sha256 == stages[2].sha256
    twice = pipeline_job(stages, job.inputs, seed=job.seed)

    async def scenario() -> PipelineSummary:
        async with foreman_with_workers() as (port, workers):
            workers.extend(start_worker(port, tmp_path, f"w{k}") for k in range(2))
            return await submit_job("127.0.0.1", port, TOKEN, twice, min_workers=2, timeout_s=60)

    _completed_once(asyncio.run(scenario()), twice)
