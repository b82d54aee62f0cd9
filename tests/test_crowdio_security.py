"""CROWDio rejections, on a real foreman and a real worker in this process over loopback.

Each peer under test is the real thing; the other side is played by the test,
speaking the wire protocol directly so that it can misbehave.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from edgetwin.emu.crowdio.codec import encode_array
from edgetwin.emu.crowdio.foreman import Foreman, ForemanConfig
from edgetwin.emu.crowdio.foreman import main as foreman_main
from edgetwin.emu.crowdio.framing import read_frame, write_frame
from edgetwin.emu.crowdio.model import TINY, distilbert_job, make_inputs
from edgetwin.emu.crowdio.protocol import (
    ClientHello,
    DagSpec,
    ErrorMessage,
    JobAccepted,
    JobRejected,
    LoadModel,
    Message,
    ModelFailed,
    ModelLoaded,
    ModelUnloaded,
    RunTask,
    TaskFailed,
    TaskResult,
    UnloadModel,
    Welcome,
    WorkerHello,
    encode_message,
    parse_message,
)
from edgetwin.emu.crowdio.records import Payload, TaskReport, WorkerStatus
from edgetwin.emu.crowdio.sdk import JobError, PipelineJob, submit_job, submit_message
from edgetwin.emu.crowdio.worker import Worker, WorkerConfig, WorkerRefused
from edgetwin.emu.crowdio.worker import main as worker_main

TOKEN = "s3cret-token"
LIMIT = 1 << 20
STATUS = WorkerStatus(
    rss_mb=50, peak_session_mb=0, free_ram_mb=1000, battery_mah=0, energy_j=0, battery_pct=90
)
REPORT = TaskReport(
    load_kind="cold", load_ms=1, decode_ms=0, compute_ms=1, encode_ms=0, bytes_in=0, bytes_out=0
)
Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


@pytest.fixture(scope="module")
def job() -> PipelineJob:
    return distilbert_job(TINY, inputs=2, stages=3)


@asynccontextmanager
async def running_foreman(store: Path | None = None, **overrides: Any) -> AsyncIterator[int]:
    config = ForemanConfig(token=TOKEN, store_dir=store, max_message_bytes=LIMIT, **overrides)
    foreman = Foreman(config)
    port = await foreman.start()
    try:
        yield port
    finally:
        await foreman.close()


async def send(writer: asyncio.StreamWriter, message: Message) -> None:
    await write_frame(writer, encode_message(message))


async def receive(reader: asyncio.StreamReader) -> Message:
    return parse_message(await asyncio.wait_for(read_frame(reader, 1 << 24), 10))


async def refused(reader: asyncio.StreamReader) -> str:
    """The ERROR a peer sends before it closes the connection."""
    message = await receive(reader)
    assert isinstance(message, ErrorMessage), message
    assert await asyncio.wait_for(reader.read(), 10) == b""  # then closed
    return message.reason


def worker_hello(token: str = TOKEN, name: str = "fake") -> WorkerHello:
    return WorkerHello(token=token, name=name, cached=(), has_gpu=False, status=STATUS)


async def enrolled(port: int, name: str = "fake") -> Streams:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await send(writer, worker_hello(name=name))
    assert isinstance(await receive(reader), Welcome)
    return reader, writer


# --- the foreman refuses -------------------------------------------------------------------


def test_wrong_token_is_refused_for_workers_and_clients(job: PipelineJob) -> None:
    async def scenario() -> None:
        async with running_foreman() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            await send(writer, worker_hello(token="guess"))
            assert "wrong token" in await refused(reader)
            with pytest.raises(JobError, match="wrong token"):
                await submit_job("127.0.0.1", port, "guess", job, timeout_s=10)

    asyncio.run(scenario())


def test_oversized_frames_are_refused_before_and_after_enrolment() -> None:
    async def scenario() -> None:
        async with running_foreman(hello_max_bytes=4096) as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write((4097).to_bytes(4, "big"))  # a hello over its limit; no body needed
            assert "over the limit of 4096 bytes" in await refused(reader)
            reader, writer = await enrolled(port)
            writer.write((LIMIT + 1).to_bytes(4, "big"))
            assert f"over the limit of {LIMIT} bytes" in await refused(reader)
            reader, writer = await enrolled(port, "still-served")  # the foreman carries on
            writer.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"\xff\xfe not json", "malformed message"),
        (b'{"type": "HELLO", "token": "s3cret-token"}', "malformed message: HELLO.name"),
        (b'{"type": "SHUTDOWN_EVERYTHING"}', "malformed message"),
        (b"[1, 2, 3]", "malformed message"),
        (encode_message(ErrorMessage(reason="hi")), "the first message must be a hello"),
    ],
)
def test_malformed_first_messages_are_refused(body: bytes, problem: str) -> None:
    async def scenario() -> None:
        async with running_foreman() as port:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            await write_frame(writer, body)
            assert problem in await refused(reader)

    asyncio.run(scenario())


def test_a_silent_connection_is_dropped() -> None:
    async def scenario() -> None:
        async with running_foreman(hello_timeout_s=0.2) as port:
            reader, _ = await asyncio.open_connection("127.0.0.1", port)
            assert await asyncio.wait_for(reader.read(), 5) == b""

    asyncio.run(scenario())


def _tampered(job: PipelineJob, **changes: Any) -> bytes:
    return encode_message(submit_message(job, "job-x", 0).model_copy(update=changes))


def test_submissions_with_a_bad_checksum_or_a_cyclic_graph_are_rejected(job: PipelineJob) -> None:
    stages = submit_message(job, "job-x", 0).stages
    wrong_sha = stages[1].model_copy(update={"sha256": hashlib.sha256(b"other").hexdigest()})
    cycle = DagSpec(
        nodes=job.dag.nodes, edges=(*job.dag.edges, (job.dag.nodes[-1], job.dag.nodes[0]))
    )
    bad_input = Payload(dtype="int64", shape=(1, TINY.seq_len), data_b64="eJwDAAAAAAE=")
    cases = {
        "stage cell_b: checksum mismatch": _tampered(job, stages=(stages[0], wrong_sha, stages[2])),
        "dag: the graph has a cycle": _tampered(job, dag=cycle),
        "unknown scheduler": _tampered(job, scheduler="fastest"),
        "input 0: payload inflates to other than": _tampered(job, inputs=(bad_input,)),
    }

    async def scenario() -> None:
        async with running_foreman() as port:
            for problem, body in cases.items():
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                await send(writer, ClientHello(token=TOKEN))
                assert isinstance(await receive(reader), Welcome)
                await write_frame(writer, body)
                reply = await receive(reader)
                assert isinstance(reply, JobRejected) and problem in reply.reason, reply

    asyncio.run(scenario())


async def _job_with_fake_worker(
    job: PipelineJob, store: Path, act: Callable[[Streams, RunTask], Awaitable[None]]
) -> None:
    """Run ``job`` on a foreman whose only worker is the test; ``act`` answers its first task."""
    async with running_foreman(store) as port:
        reader, writer = await enrolled(port)
        client = asyncio.create_task(
            submit_job("127.0.0.1", port, TOKEN, job, min_workers=1, timeout_s=20)
        )
        load = await receive(reader)
        assert isinstance(load, LoadModel) and load.stage == "cell_a" and load.blob_b64
        task = await receive(reader)
        assert isinstance(task, RunTask)
        await act((reader, writer), task)
        client.cancel()


def test_a_result_referring_outside_the_store_disconnects_the_worker(
    job: PipelineJob, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("foreman's private file")

    async def act(streams: Streams, task: RunTask) -> None:
        reader, writer = streams
        payload = Payload(dtype="float32", shape=(1, TINY.seq_len, TINY.dim), ref="../secret.txt")
        result = task.result(payload, REPORT, STATUS)
        await send(writer, result)
        assert "is not a plain file name" in await refused(reader)

    asyncio.run(_job_with_fake_worker(job, tmp_path / "store", act))


def test_a_result_for_a_task_not_assigned_is_refused(job: PipelineJob, tmp_path: Path) -> None:
    async def act(streams: Streams, task: RunTask) -> None:
        reader, writer = streams
        other = 1 - task.input_index
        fake = TaskFailed(
            job_id=task.job_id,
            input_index=other,
            stage_index=0,
            attempt=1,
            error="x",
            status=STATUS,
        )
        await send(writer, fake)
        assert "not assigned to it" in await refused(reader)

    asyncio.run(_job_with_fake_worker(job, tmp_path / "store", act))


# --- the worker refuses --------------------------------------------------------------------


@asynccontextmanager
async def worker_under_test(
    tmp_path: Path, welcome_store: Path | None = None, **overrides: Any
) -> AsyncIterator[tuple[Streams, asyncio.Task[None]]]:
    """A real Worker (its store ``tmp_path/store`` unless ``overrides`` say) connected to a
    server played by the test, whose WELCOME names ``welcome_store`` (default: the worker's
    own store); yields the worker's streams."""
    connected: asyncio.Queue[Streams] = asyncio.Queue()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await connected.put((reader, writer))

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    config = WorkerConfig(
        host="127.0.0.1",
        port=port,
        token=TOKEN,
        cache_dir=tmp_path / "cache",
        name="under-test",
        max_message_bytes=LIMIT * 8,
        **({"store_dir": tmp_path / "store"} | overrides),
    )
    worker = asyncio.create_task(Worker(config).run())
    reader, writer = await asyncio.wait_for(connected.get(), 10)
    hello = await receive(reader)
    assert isinstance(hello, WorkerHello) and hello.token == TOKEN
    named = welcome_store or tmp_path / "store"
    welcome = Welcome(
        peer_id="under-test", store_dir=str(named), inline_max_bytes=0, heartbeat_s=1.0
    )
    await send(writer, welcome)
    try:
        yield (reader, writer), worker
    finally:
        writer.close()
        server.close()
        await asyncio.gather(worker, return_exceptions=True)


def _load(job: PipelineJob, index: int, *, blob: bytes | None = None) -> LoadModel:
    stage = job.stages[index]
    data = stage.blob if blob is None else blob
    return LoadModel(
        job_id="job-1",
        stage=stage.name,
        sha256=stage.sha256,
        blob_b64=base64.b64encode(data).decode(),
    )


def _run(job: PipelineJob, payload: Payload) -> RunTask:
    stage = job.stages[0]
    return RunTask(
        job_id="job-1",
        input_index=0,
        stage_index=0,
        stage=stage.name,
        sha256=stage.sha256,
        attempt=1,
        payload=payload,
    )


def test_worker_refuses_bad_blobs_bad_payloads_and_a_second_resident(
    job: PipelineJob, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.z"
    secret.write_bytes(b"x")

    async def scenario() -> None:
        async with worker_under_test(tmp_path) as ((reader, writer), _):
            await send(writer, UnloadModel(job_id="job-1", stage="cell_b"))  # not resident: no-op
            assert isinstance(await receive(reader), ModelUnloaded)
            await send(writer, _load(job, 0, blob=job.stages[0].blob + b"tampered"))
            failed = await receive(reader)
            assert isinstance(failed, ModelFailed) and "checksum mismatch" in failed.error
            await send(writer, _load(job, 0))
            loaded = await receive(reader)
            assert isinstance(loaded, ModelLoaded) and loaded.load_kind == "cold"
            await send(writer, _load(job, 1))
            second = await receive(reader)
            assert isinstance(second, ModelFailed) and "unload it first" in second.error

            shape = (1, TINY.seq_len)
            for payload, problem in [
                (Payload(dtype="int64", shape=shape, ref="../secret.z"), "plain file name"),
                (Payload(dtype="int64", shape=shape, ref="missing.z"), "does not exist"),
                (Payload(dtype="int64", shape=(1, 3), data_b64="eJwDAAAAAAE="), "other than"),
                (encode_array(make_inputs(TINY, 1, 0)[0][:, :3], None, 0), "inference failed"),
            ]:
                await send(writer, _run(job, payload))
                reply = await receive(reader)
                assert isinstance(reply, TaskFailed) and problem in reply.error, reply

            good = encode_array(make_inputs(TINY, 1, 0)[0], None, 0)
            await send(writer, _run(job, good))
            result = await receive(reader)
            assert isinstance(result, TaskResult) and result.report.load_kind == "cold"
            assert result.payload.ref is not None  # inline_max_bytes=0: through the store

            await send(writer, UnloadModel(job_id="job-1", stage="cell_a"))
            assert isinstance(await receive(reader), ModelUnloaded)
            await send(writer, _load(job, 0).model_copy(update={"blob_b64": None}))
            warm = await receive(reader)
            assert isinstance(warm, ModelLoaded) and warm.load_kind == "warm"

    asyncio.run(scenario())


def _framed(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


@pytest.mark.parametrize(
    ("frame", "problem"),
    [
        ((LIMIT * 8 + 1).to_bytes(4, "big"), "over the limit"),
        (_framed(b"garbage"), "malformed message"),
        (
            _framed(
                encode_message(
                    Welcome(peer_id="x", store_dir=None, inline_max_bytes=0, heartbeat_s=1.0)
                )
            ),
            "unexpected WELCOME",
        ),
        (_framed(encode_message(ErrorMessage(reason="go away"))), "go away"),
    ],
)
def test_worker_stops_on_oversized_malformed_or_refusing_foreman(
    tmp_path: Path, frame: bytes, problem: str
) -> None:
    async def scenario() -> None:
        async with worker_under_test(tmp_path) as ((_, writer), worker):
            writer.write(frame)
            with pytest.raises(WorkerRefused, match=problem):
                await asyncio.wait_for(worker, 10)

    asyncio.run(scenario())


def test_a_task_that_keeps_failing_fails_the_job(job: PipelineJob, tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_foreman(tmp_path / "store") as port:
            reader, writer = await enrolled(port)
            client = asyncio.create_task(
                submit_job("127.0.0.1", port, TOKEN, job, min_workers=1, timeout_s=20)
            )
            assert isinstance(await receive(reader), LoadModel)
            for attempt in (1, 2, 3):
                task = await receive(reader)
                assert isinstance(task, RunTask) and task.attempt == attempt
                failed = task.failure("out of memory", STATUS)
                await send(writer, failed)  # the task goes back first in the queue
            with pytest.raises(JobError, match="failed 3 times: out of memory"):
                await client

    asyncio.run(scenario())


def test_jobs_run_side_by_side_and_one_whose_client_leaves_is_dropped(
    job: PipelineJob, tmp_path: Path
) -> None:
    async def submit_raw(port: int, job_id: str) -> Streams:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        await send(writer, ClientHello(token=TOKEN))
        assert isinstance(await receive(reader), Welcome)
        await send(writer, submit_message(job, job_id, min_workers=1))
        return reader, writer

    async def scenario() -> None:
        async with running_foreman(tmp_path / "store") as port:
            reader, writer = await submit_raw(port, "first")
            assert isinstance(await receive(reader), JobAccepted)
            second_reader, second_writer = await submit_raw(port, "second")
            assert isinstance(await receive(second_reader), JobAccepted)  # both in flight
            writer.close()  # the first client leaves; its job goes with it
            second_writer.close()
            await asyncio.sleep(0.2)
            again_reader, again_writer = await submit_raw(port, "third")
            assert isinstance(await receive(again_reader), JobAccepted)
            again_writer.close()
            await asyncio.sleep(0.2)
            reused_reader, _ = await submit_raw(port, "first")
            reused = await receive(reused_reader)
            assert isinstance(reused, JobRejected) and "job id first was used" in reused.reason

    asyncio.run(scenario())


def test_a_worker_with_the_wrong_token_is_not_enrolled(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_foreman() as port:
            config = WorkerConfig(
                host="127.0.0.1", port=port, token="guess", cache_dir=tmp_path, name="intruder"
            )
            with pytest.raises(WorkerRefused, match="wrong token"):
                await asyncio.wait_for(Worker(config).run(), 10)

    asyncio.run(scenario())


@pytest.mark.parametrize(
    "argv",
    [
        ["--foreman", "no-port", "--token", "t", "--cache", "c"],
        ["--foreman", "h:1", "--cache", "c"],
        ["--foreman", "h:1", "--token", "t", "--cache", "c", "--power", "turbo_w=1"],
    ],
)
def test_worker_command_line_errors_exit_2(
    argv: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CROWDIO_TOKEN", raising=False)
    with pytest.raises(SystemExit) as exit_:
        worker_main(argv)
    assert exit_.value.code == 2


def test_foreman_needs_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CROWDIO_TOKEN", raising=False)
    with pytest.raises(SystemExit) as exit_:
        foreman_main(["--port", "0"])
    assert exit_.value.code == 2
