"""CROWDio limits, safe defaults and timeouts, on a real foreman and real workers over loopback.

Memory is measured with ``tracemalloc`` (every bytes object zlib makes is traced): the
mechanism, that nothing is inflated past a limit, rather than a wall-clock or RSS bound.
Timeouts are configured short (a fraction of a second) and the test waits for the
mechanism to act, not for a time to pass.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import os
import shutil
import signal
import subprocess
import sys
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgetwin.emu.crowdio.codec import Limits, PayloadError, decode_payload
from edgetwin.emu.crowdio.foreman import Foreman, ForemanConfig
from edgetwin.emu.crowdio.foreman import main as foreman_main
from edgetwin.emu.crowdio.framing import read_frame, write_frame
from edgetwin.emu.crowdio.liveness import LivenessRule
from edgetwin.emu.crowdio.model import TINY, distilbert_job, reference_logits
from edgetwin.emu.crowdio.protocol import (
    ClientHello,
    ErrorMessage,
    Heartbeat,
    JobRejected,
    LoadModel,
    Message,
    ModelFailed,
    RunTask,
    SubmitPipelineJob,
    Welcome,
    WorkerHello,
    encode_message,
    parse_message,
)
from edgetwin.emu.crowdio.records import Payload, TaskReport, TensorSpec, WorkerStatus
from edgetwin.emu.crowdio.sdk import PipelineJob, submit_job, submit_message
from edgetwin.emu.crowdio.worker import Worker, WorkerConfig
from edgetwin.emu.crowdio.worker import main as worker_main

TOKEN = "limits-token"
STATUS = WorkerStatus(
    rss_mb=50, peak_session_mb=0, free_ram_mb=1000, battery_mah=0, energy_j=0, battery_pct=90
)
REPORT = TaskReport(
    load_kind="cold", load_ms=1, decode_ms=0, compute_ms=1, encode_ms=0, bytes_in=0, bytes_out=0
)
MiB = 2**20
Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def zeros_stream(raw_bytes: int) -> str:
    """Base64 of a zlib stream of ``raw_bytes`` zeros, made without holding them (a bomb)."""
    packer = zlib.compressobj(9)
    chunk = bytes(16 * MiB)
    parts = [packer.compress(chunk[: min(len(chunk), raw_bytes - done)])
             for done in range(0, raw_bytes, len(chunk))]  # fmt: skip
    parts.append(packer.flush())
    return base64.b64encode(b"".join(parts)).decode()


@pytest.fixture(scope="module")
def bomb_512_mib() -> str:
    return zeros_stream(512 * MiB)  # about 700 kB of base64


@contextmanager
def traced_peak() -> Iterator[list[int]]:
    """The peak of traced allocations (bytes) over the block, in ``[0]`` once it ends."""
    peak = [0]
    tracemalloc.start()
    try:
        yield peak
    finally:
        peak[0] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


@asynccontextmanager
async def running_foreman(**overrides: Any) -> AsyncIterator[tuple[Foreman, int]]:
    foreman = Foreman(ForemanConfig(token=TOKEN, **overrides))
    port = await foreman.start()
    try:
        yield foreman, port
    finally:
        await foreman.close()


async def send(writer: asyncio.StreamWriter, message: Message) -> None:
    await write_frame(writer, encode_message(message))


async def receive(reader: asyncio.StreamReader, skip_heartbeats: bool = True) -> Message:
    while True:
        message = parse_message(await asyncio.wait_for(read_frame(reader, 1 << 26), 10))
        if not (skip_heartbeats and isinstance(message, Heartbeat)):
            return message


async def refused(reader: asyncio.StreamReader) -> str:
    """The ERROR a peer sends before it closes the connection."""
    message = await receive(reader)
    assert isinstance(message, ErrorMessage), message
    assert await asyncio.wait_for(reader.read(), 10) == b""
    return message.reason


async def client(port: int) -> Streams:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await send(writer, ClientHello(token=TOKEN))
    assert isinstance(await receive(reader), Welcome)
    return reader, writer


async def enrolled(port: int) -> Streams:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    hello = WorkerHello(token=TOKEN, name="fake", cached=(), has_gpu=False, status=STATUS)
    await send(writer, hello)
    assert isinstance(await receive(reader), Welcome)
    return reader, writer


# --- limits: checked before anything is decoded (defect 7) ---------------------------------


def _declaring(job: PipelineJob, job_id: str, **tensors: TensorSpec) -> SubmitPipelineJob:
    """The submission of ``job`` with its first stage declaring other tensors."""
    submit = submit_message(job, job_id, 0)
    first = submit.stages[0].model_copy(update=tensors)
    return submit.model_copy(update={"stages": (first, *submit.stages[1:])})


@pytest.mark.timeout(60)
def test_a_submitted_zlib_bomb_is_refused_without_inflating_it(bomb_512_mib: str) -> None:
    job = distilbert_job(TINY, inputs=1, stages=1)
    declared = TensorSpec(dtype="int64", shape=(1, 1 << 26))  # 512 MiB, as the bomb says
    bomb = Payload(dtype="int64", shape=(1, 1 << 26), data_b64=bomb_512_mib)
    submit = _declaring(job, "bomb", input=declared).model_copy(update={"inputs": (bomb,)})
    body = encode_message(submit)

    async def scenario() -> Message:
        async with running_foreman() as (_, port):
            reader, writer = await client(port)
            await write_frame(writer, body)
            return await receive(reader)

    with traced_peak() as peak:
        reply = asyncio.run(scenario())
    assert isinstance(reply, JobRejected), reply
    assert (
        reply.reason == f"stage cell_a: tensor of {1 << 26} elements is over the limit of {1 << 22}"
    )
    # the frame and its parse are held a few times over; the 512 MiB never are
    assert peak[0] < 8 * len(body) + Limits().max_tensor_bytes


def test_inflating_stops_at_the_declared_size(bomb_512_mib: str) -> None:
    declared = Payload(dtype="float32", shape=(1, 1 << 20), data_b64=bomb_512_mib)  # 4 MiB
    with traced_peak() as peak, pytest.raises(PayloadError, match="other than 4194304 bytes"):
        decode_payload(declared, None)
    assert peak[0] < 2 * 4 * MiB + 4 * len(bomb_512_mib)  # not the 512 MiB it inflates to


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({}, f"stage cell_a: tensor of {1 << 23} elements is over the limit of {1 << 22}"),
        (
            {"limits": Limits(max_tensor_elements=1 << 24)},
            f"stage cell_a: tensor of {32 * MiB} bytes is over the limit of {16 * MiB} bytes",
        ),
    ],
)
def test_a_stage_declaring_an_output_over_the_limits_is_refused(
    overrides: dict[str, Any], problem: str
) -> None:
    job = distilbert_job(TINY, inputs=1, stages=1)
    submit = _declaring(job, "wide", output=TensorSpec(dtype="float32", shape=(1, 1 << 23)))

    async def scenario() -> Message:
        async with running_foreman(**overrides) as (_, port):
            reader, writer = await client(port)
            await send(writer, submit)
            return await receive(reader)

    reply = asyncio.run(scenario())
    assert isinstance(reply, JobRejected) and reply.reason == problem, reply


def test_a_result_bomb_is_refused_undecoded(tmp_path: Path) -> None:
    job = distilbert_job(TINY, inputs=1, stages=1)  # the first task is the sink: logits
    zeros = zeros_stream(32 * MiB)
    payload = Payload(dtype="float32", shape=(1, 1 << 23), data_b64=zeros)

    async def act(streams: Streams, task: RunTask) -> None:
        reader, writer = streams
        result = task.result(payload, REPORT, STATUS)
        await send(writer, result)
        again = await receive(reader)  # the task failed, and is dispatched again
        assert isinstance(again, RunTask) and again.attempt == 2, again

    with traced_peak() as peak:
        asyncio.run(_first_task_to_fake_worker(job, act, store_dir=tmp_path))
    assert peak[0] < 16 * MiB  # 32 MiB were declared, and never made


async def _first_task_to_fake_worker(
    job: PipelineJob, act: Callable[[Streams, RunTask], Awaitable[None]], **overrides: Any
) -> None:
    async with running_foreman(**overrides) as (_, port):
        reader, writer = await enrolled(port)
        submitter = asyncio.create_task(
            submit_job("127.0.0.1", port, TOKEN, job, min_workers=1, timeout_s=30)
        )
        assert isinstance(await receive(reader), LoadModel)
        task = await receive(reader)
        assert isinstance(task, RunTask)
        await act((reader, writer), task)
        submitter.cancel()
        await asyncio.gather(submitter, return_exceptions=True)


def test_a_blob_over_the_limit_is_refused_by_foreman_and_worker(tmp_path: Path) -> None:
    job = distilbert_job(TINY, inputs=1, stages=2)
    small = Limits(max_blob_bytes=4096)
    blob = len(job.stages[0].blob)
    assert blob > 4096

    async def foreman_side() -> Message:
        async with running_foreman(limits=small) as (_, port):
            reader, writer = await client(port)
            await send(writer, submit_message(job, "big", 0))
            return await receive(reader)

    reply = asyncio.run(foreman_side())
    assert isinstance(reply, JobRejected), reply
    assert reply.reason.startswith("stage cell_a: blob of ")
    assert reply.reason.endswith("bytes is over the limit of 4096 bytes")

    async def worker_side() -> Message:
        connected: asyncio.Queue[Streams] = asyncio.Queue()

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await connected.put((reader, writer))

        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        config = WorkerConfig(
            "127.0.0.1", server.sockets[0].getsockname()[1], TOKEN, tmp_path, "w", limits=small
        )
        worker = asyncio.create_task(Worker(config).run())
        reader, writer = await asyncio.wait_for(connected.get(), 10)
        assert isinstance(await receive(reader), WorkerHello)
        welcome = Welcome(peer_id="w", store_dir=None, inline_max_bytes=0, heartbeat_s=1.0)
        await send(writer, welcome)
        stage = job.stages[0]
        blob_b64 = base64.b64encode(stage.blob).decode()
        await send(
            writer, LoadModel(job_id="j", stage="cell_a", sha256=stage.sha256, blob_b64=blob_b64)
        )
        reply = await receive(reader)
        writer.close()
        server.close()
        await asyncio.gather(worker, return_exceptions=True)
        return reply

    failed = asyncio.run(worker_side())
    assert isinstance(failed, ModelFailed) and "over the limit of 4096 bytes" in failed.error


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--max-blob-mb", "0"], "argument --max-blob-mb: must be greater than 0"),
        (["--max-blob-mb", "1e-9"], "max_blob_bytes must be positive"),  # 0 bytes
        (["--max-tensor-elements", "-1"], "argument --max-tensor-elements: must be at least 1"),
        (["--tls-cert", "cert.pem"], "--tls-cert and --tls-key go together"),
        (["--tls-cert", "no.pem", "--tls-key", "no.key"], "cannot load the certificate"),
        (["--read-timeout-s", "0"], "argument --read-timeout-s: must be greater than 0"),
        # once a traceback (inf, the port) or a foreman that ran with a NaN (the timeouts)
        (["--max-blob-mb", "inf"], "argument --max-blob-mb: must be a finite number"),
        (["--inline-max-kb", "nan"], "argument --inline-max-kb: must be a finite number"),
        (["--read-timeout-s", "nan"], "argument --read-timeout-s: must be a finite number"),
        (["--heartbeat-s", "nan"], "argument --heartbeat-s: must be a finite number"),
        (["--port", "99999"], "argument --port: must be a port, 0 to 65535"),
    ],
)
def test_foreman_command_line_refuses_bad_limits_and_tls_files(
    argv: list[str], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        foreman_main(["--token", "t", "--port", "0", *argv])
    assert exit_.value.code == 2
    assert problem in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--max-tensor-mb", "0"], "argument --max-tensor-mb: must be greater than 0"),
        (["--foreman-timeout-s", "0"], "argument --foreman-timeout-s: must be greater than 0"),
        # once a traceback (inf, the port, a zero voltage) or a worker that ran with a NaN
        (["--max-blob-mb", "inf"], "argument --max-blob-mb: must be a finite number"),
        (["--foreman-timeout-s", "nan"], "argument --foreman-timeout-s: must be a finite"),
        (["--rejoin-s", "nan"], "argument --rejoin-s: must be a finite number"),
        (["--foreman", "127.0.0.1:99999"], "--foreman must be HOST:PORT (port 1 to 65535)"),
        (["--power", "compute_w=nan"], "--power: compute_w must be a finite number"),
        (["--power", "voltage_v=0"], "--power: voltage_v must be greater than 0"),
        (["--tls-ca", "no-ca.pem"], "no-ca.pem: cannot load the CA certificate"),
    ],
)
def test_worker_command_line_refuses_bad_limits_timeouts_and_tls_files(
    argv: list[str], problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        worker_main(["--foreman", "127.0.0.1:1", "--token", "t", "--cache", "c", *argv])
    assert exit_.value.code == 2
    assert problem in capsys.readouterr().err


def test_a_foreman_that_cannot_start_says_why_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store that is a file (or an address it cannot bind): exit 1, no traceback."""
    not_a_folder = tmp_path / "store"
    not_a_folder.write_text("")
    assert foreman_main(["--token", "t", "--port", "0", "--store", str(not_a_folder)]) == 1
    assert capsys.readouterr().err == f"foreman: [Errno 17] File exists: '{not_a_folder}'\n"


# --- safe defaults: loopback, and TLS (defect 9) -------------------------------------------


def _foreman_process(tmp_path: Path, *argv: str) -> tuple[subprocess.Popen[str], int]:
    port_file = tmp_path / "port"
    port_file.unlink(missing_ok=True)
    command = [sys.executable, "-m", "edgetwin.emu.crowdio.foreman", "--token", TOKEN]
    command += ["--port", "0", "--port-file", str(port_file), *argv]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    while not port_file.exists():
        assert process.poll() is None, process.stderr.read()
        with suppress(subprocess.TimeoutExpired):
            process.wait(0.05)
    return process, int(port_file.read_text())


def _stop(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGCONT)
    process.terminate()
    _, err = process.communicate(timeout=30)
    return err


@pytest.mark.timeout(60)
def test_the_foreman_listens_on_loopback_unless_told_and_warns_for_every_interface(
    tmp_path: Path,
) -> None:
    process, port = _foreman_process(tmp_path)
    assert _stop(process).splitlines()[0] == f"foreman listening on 127.0.0.1:{port}"
    process, port = _foreman_process(tmp_path, "--host", "0.0.0.0")
    warning, listening, *_ = _stop(process).splitlines()
    assert warning.startswith("foreman: warning: --host '0.0.0.0' listens on every interface")
    assert listening == f"foreman listening on 0.0.0.0:{port}"


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made by the ``openssl`` command."""
    if shutil.which("openssl") is None:
        pytest.skip("neither the cryptography package nor the openssl command is installed")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.mark.timeout(120)
def test_a_job_runs_over_tls_and_a_plain_peer_is_not_served(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    job = distilbert_job(TINY, inputs=2, stages=2)

    async def scenario() -> tuple[Any, bytes]:
        async with running_foreman(tls_cert=cert, tls_key=key) as (_, port):
            plain_reader, plain_writer = await asyncio.open_connection("127.0.0.1", port)
            await send(plain_writer, ClientHello(token=TOKEN))
            plain_reply = await asyncio.wait_for(plain_reader.read(), 10)  # no WELCOME
            workers = [
                asyncio.create_task(
                    Worker(
                        WorkerConfig(
                            "127.0.0.1", port, TOKEN, tmp_path / f"c{k}", f"w{k}", tls_ca=cert
                        )
                    ).run()
                )
                for k in range(2)
            ]
            try:
                summary = await submit_job(
                    "127.0.0.1", port, TOKEN, job, min_workers=2, timeout_s=60, tls_ca=cert
                )
            finally:
                for worker in workers:
                    worker.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
            return summary, plain_reply

    summary, plain_reply = asyncio.run(scenario())
    assert b"WELCOME" not in plain_reply
    np.testing.assert_allclose(
        np.array(summary.logits), reference_logits(TINY, job.seed, job.inputs), atol=1e-5
    )
    assert {w.worker for w in summary.workers} == {"w0", "w1"}


# --- timeouts and heartbeats (defect 11) ---------------------------------------------------


@pytest.mark.parametrize("sent", [b"", (1000).to_bytes(4, "big") + b'{"type": "SUB'])
def test_a_client_silent_after_its_hello_is_dropped(sent: bytes) -> None:
    async def scenario() -> str:
        async with running_foreman(read_timeout_s=0.2) as (_, port):
            reader, writer = await client(port)
            writer.write(sent)  # nothing, or a submission cut short
            return await refused(reader)

    assert asyncio.run(scenario()) == "no job submitted: nothing received for 0.2 s"


def test_a_worker_silent_mid_frame_is_dropped() -> None:
    async def scenario() -> bool:
        rule = LivenessRule(heartbeat_s=0.05, silence_timeout_s=0.2)
        async with running_foreman(liveness=rule) as (foreman, port):
            reader, writer = await enrolled(port)
            writer.write((1000).to_bytes(4, "big") + b'{"type": "HEARTBEAT"')  # then nothing
            with pytest.raises(ConnectionResetError):
                while await asyncio.wait_for(reader.read(1 << 16), 10):
                    pass  # the foreman's heartbeats, until it resets the connection
            return "fake" in foreman.workers

    assert asyncio.run(scenario()) is False


def test_the_foreman_beats_to_its_workers() -> None:
    async def scenario() -> list[Message]:
        rule = LivenessRule(heartbeat_s=0.05, silence_timeout_s=5.0)
        async with running_foreman(liveness=rule) as (_, port):
            reader, writer = await enrolled(port)
            beats = [await receive(reader, skip_heartbeats=False) for _ in range(3)]
            writer.close()
            return beats

    assert all(isinstance(beat, Heartbeat) for beat in asyncio.run(scenario()))


@pytest.mark.timeout(60)
def test_a_worker_notices_a_frozen_foreman(tmp_path: Path) -> None:
    process, port = _foreman_process(tmp_path, "--heartbeat-s", "0.05")
    config = WorkerConfig("127.0.0.1", port, TOKEN, tmp_path / "cache", "w", foreman_timeout_s=0.5)
    worker = Worker(config)

    async def scenario() -> None:
        run = asyncio.create_task(worker.run())
        while not worker.enrolled:
            await asyncio.sleep(0.01)
        os.kill(process.pid, signal.SIGSTOP)
        await asyncio.wait_for(run, 20)

    try:
        with pytest.raises(ConnectionError) as error:
            asyncio.run(scenario())
    finally:
        _stop(process)
    assert str(error.value) == (
        f"the foreman at 127.0.0.1:{port} sent nothing, not even a heartbeat, for 0.5 s: "
        "it is frozen or cut off"
    )


def test_the_sdk_waits_a_bounded_time_and_says_so() -> None:
    default_s = inspect.signature(submit_job).parameters["timeout_s"].default
    assert default_s <= 120
    job = distilbert_job(TINY, inputs=1, stages=1)

    async def scenario() -> None:
        async with running_foreman() as (_, port):  # no worker: the job never starts
            with pytest.raises(TimeoutError) as error:
                await submit_job("127.0.0.1", port, TOKEN, job, min_workers=1, timeout_s=0.3)
            assert str(error.value) == (
                f"job job-1: no result from the foreman at 127.0.0.1:{port} within 0.3 s "
                "(submit_job's timeout_s)"
            )

    asyncio.run(scenario())
