"""Protocol fuzz: thousands of bad frames at a live foreman, then a real job, done once.

A seeded generator makes every case (the same ones on every run): truncated frames,
huge declared lengths, zero lengths, random bytes, deep JSON, valid messages mutated
byte by byte and value by value, wrong tokens, messages before enrolment and out of
place after it. Each goes on its own connection, which the test half-closes; the
foreman must answer with frames of the protocol only (ERROR for what it refuses) and
close, log nothing and raise nothing. Then two real workers and a real client run the
TINY DistilBERT job on the same foreman, each task done exactly once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgetwin.emu.crowdio.foreman import Foreman, ForemanConfig
from edgetwin.emu.crowdio.framing import read_frame
from edgetwin.emu.crowdio.model import TINY, distilbert_job, reference_logits
from edgetwin.emu.crowdio.protocol import (
    ClientHello,
    ErrorMessage,
    Heartbeat,
    JobAccepted,
    JobEvent,
    JobFailed,
    JobRejected,
    ModelFailed,
    ModelLoaded,
    TaskFailed,
    TaskResult,
    Welcome,
    WorkerHello,
    encode_message,
    parse_message,
)
from edgetwin.emu.crowdio.records import Payload, TaskReport, WorkerStatus
from edgetwin.emu.crowdio.sdk import submit_job, submit_message
from edgetwin.emu.crowdio.worker import Worker, WorkerConfig

TOKEN = "fuzz-token"
SEED = 13
CASES = 4000
AT_ONCE = 24  # connections in flight together
MAX_MESSAGE_BYTES = 1 << 20
HELLO_MAX_BYTES = ForemanConfig.hello_max_bytes
STATUS = WorkerStatus(
    rss_mb=50, peak_session_mb=0, free_ram_mb=1000, battery_mah=0, energy_j=0, battery_pct=90
)
REPORT = TaskReport(
    load_kind="cold", load_ms=1, decode_ms=0, compute_ms=1, encode_ms=0, bytes_in=0, bytes_out=0
)
ANSWERS = (Welcome, Heartbeat, JobAccepted, JobRejected, JobEvent, JobFailed, ErrorMessage)
JOB = distilbert_job(TINY, inputs=2, stages=2)
SUBMIT = submit_message(JOB, "fuzzed", 0)
PAYLOAD = Payload(dtype="float32", shape=(1, 4), data_b64="eJxjYKAPAAAA//8=")
WORKER_HELLO = encode_message(
    WorkerHello(token=TOKEN, name="fuzz", cached=(), has_gpu=False, status=STATUS)
)
CLIENT_HELLO = encode_message(ClientHello(token=TOKEN))
AFTER_HELLO = [  # valid messages a peer may (or may not) send once enrolled
    encode_message(Heartbeat()),
    encode_message(
        TaskResult(
            job_id="fuzzed",
            input_index=0,
            stage_index=0,
            attempt=1,
            payload=PAYLOAD,
            report=REPORT,
            status=STATUS,
        )
    ),
    encode_message(
        TaskFailed(
            job_id="fuzzed", input_index=1, stage_index=0, attempt=1, error="x", status=STATUS
        )
    ),
    encode_message(
        ModelLoaded(stage="cell_a", sha256="0" * 64, load_kind="cold", load_ms=1.0, status=STATUS)
    ),
    encode_message(ModelFailed(stage="cell_a", sha256="0" * 64, error="x", status=STATUS)),
    encode_message(ErrorMessage(reason="hi")),
    CLIENT_HELLO,
]
ODD_VALUES: list[Any] = [
    None, -1, 0, 1, 2**63, -(2**70), 1e308, float("nan"), "", "ü", "\x00", "A" * 300,
    "../x", [], {}, [[[]]], {"type": "HELLO"}, True,
]  # fmt: skip


def framed(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def mutate_bytes(rng: random.Random, body: bytes) -> bytes:
    data = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(data))
        kind = rng.randrange(4)
        if kind == 0:
            data[at] = rng.randrange(256)
        elif kind == 1:
            del data[at : at + rng.randint(1, 16)]
        elif kind == 2:
            data[at:at] = rng.randbytes(rng.randint(1, 8))
        else:
            data[at:at] = data[at : at + rng.randint(1, 64)]
        if not data:
            data = bytearray(b"{")
    return bytes(data)


def mutate_value(rng: random.Random, body: bytes) -> bytes:
    """One field (at any depth) set to an odd value, or removed, or one added."""
    tree = json.loads(body)
    node = tree
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = rng.choice(keys)
        child = node[key]
        if isinstance(child, dict | list) and child and rng.random() < 0.6:
            node = child
            continue
        choice = rng.randrange(6)
        if choice == 0 and isinstance(node, dict):
            del node[key]
        elif choice == 1 and isinstance(node, dict):
            node[f"extra{rng.randrange(9)}"] = rng.choice(ODD_VALUES)
        else:
            node[key] = rng.choice(ODD_VALUES)
        break
    return json.dumps(tree).encode()


def make_case(rng: random.Random) -> tuple[str, bytes, str | None]:
    """(kind, the bytes to send, what the last ERROR must say or None: any answer)."""
    kind = rng.choice(
        [
            "truncated", "huge", "zero", "random", "deep", "bytes", "values",
            "token", "first", "enrolled", "client",
        ]
    )  # fmt: skip
    if kind == "truncated":
        body = rng.choice([WORKER_HELLO, CLIENT_HELLO])
        return kind, framed(body)[: rng.randrange(1, len(body) + 4)], None
    if kind == "huge":
        length = rng.choice([MAX_MESSAGE_BYTES + 1, 2**31, 2**32 - 1])
        length = rng.choice([length, rng.randrange(MAX_MESSAGE_BYTES + 1, 2**32)])
        hello = rng.random() < 0.5
        prefix = framed(WORKER_HELLO) if hello else b""
        return kind, prefix + length.to_bytes(4, "big"), "over the limit"
    if kind == "zero":
        return kind, bytes(4), "empty frame"
    if kind == "random":
        return kind, framed(rng.randbytes(rng.randint(1, 2048))), "malformed message"
    if kind == "deep":
        depth = rng.choice([1000, 20_000, 30_000])
        opener, closer = rng.choice([("[", "]"), ('{"a":', "}")])
        body = (opener * depth + "1" + closer * depth).encode()
        enrolled = rng.random() < 0.5
        prefix = framed(WORKER_HELLO) if enrolled else b""
        limit = MAX_MESSAGE_BYTES if enrolled else HELLO_MAX_BYTES
        problem = "malformed message" if len(body) <= limit else "over the limit"
        return kind, prefix + framed(body), problem
    if kind == "bytes":
        body = rng.choice([WORKER_HELLO, CLIENT_HELLO])
        return kind, framed(mutate_bytes(rng, body)), None
    if kind == "values":
        return kind, framed(mutate_value(rng, rng.choice([WORKER_HELLO, CLIENT_HELLO]))), None
    if kind == "token":
        bad = WORKER_HELLO.replace(TOKEN.encode(), rng.choice([b"guess", b"fuzz-toke", b"x" * 200]))
        return kind, framed(bad), "wrong token"
    if kind == "first":
        return kind, framed(rng.choice(AFTER_HELLO[:-1])), "the first message must be a hello"
    if kind == "enrolled":
        body = rng.choice(AFTER_HELLO)
        fuzzed = rng.choice([body, mutate_bytes(rng, body), mutate_value(rng, body)])
        return kind, framed(WORKER_HELLO) + framed(fuzzed), None
    body = encode_message(SUBMIT.model_copy(update={"job_id": f"fuzzed{rng.randrange(10**6)}"}))
    fuzzed = mutate_value(rng, body) if rng.random() < 0.7 else mutate_bytes(rng, body)
    return kind, framed(CLIENT_HELLO) + framed(fuzzed), None


async def attack(port: int, data: bytes) -> list[Any]:
    """Send ``data``, half-close, and read every answer until the foreman closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    answers: list[Any] = []
    try:
        writer.write(data)
        await writer.drain()
        writer.write_eof()
        while True:
            try:
                body = await asyncio.wait_for(read_frame(reader, 1 << 24), 30)
            except asyncio.IncompleteReadError as exc:
                assert exc.partial == b"", "the foreman sent a truncated frame"
                return answers
            answers.append(parse_message(body))
    except ConnectionResetError:
        return answers  # refused while the rest of what we sent was unread
    finally:
        writer.close()


def check(kind: str, problem: str | None, answers: list[Any]) -> None:
    assert all(isinstance(a, ANSWERS) for a in answers), (kind, answers)
    if problem is not None:
        assert answers and isinstance(answers[-1], ErrorMessage), (kind, answers)
        assert problem in answers[-1].reason, (kind, answers[-1].reason)


@pytest.mark.timeout(120)
def test_protocol_fuzz_leaves_the_foreman_serving(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(SEED)
    cases = [make_case(rng) for _ in range(CASES)]
    unhandled: list[dict[str, Any]] = []

    def worker(port: int, k: int) -> Worker:
        return Worker(WorkerConfig("127.0.0.1", port, TOKEN, tmp_path / f"cache-{k}", f"w{k}"))

    async def scenario() -> tuple[Any, dict[str, int], bool]:
        asyncio.get_running_loop().set_exception_handler(
            lambda _, context: unhandled.append(context)
        )
        config = ForemanConfig(
            token=TOKEN,
            store_dir=tmp_path / "store",
            max_message_bytes=MAX_MESSAGE_BYTES,
            hello_timeout_s=5.0,
            read_timeout_s=5.0,
        )
        foreman = Foreman(config)
        port = await foreman.start()
        kinds: dict[str, int] = {}
        try:
            for start in range(0, len(cases), AT_ONCE):
                batch = cases[start : start + AT_ONCE]
                answers = await asyncio.gather(*(attack(port, data) for _, data, _ in batch))
                for (kind, _, problem), got in zip(batch, answers, strict=True):
                    check(kind, problem, got)
                    kinds[kind] = kinds.get(kind, 0) + 1
            await asyncio.sleep(0.2)  # the last connections' clean-up
            idle = not foreman.workers and not foreman.pending
            workers = [asyncio.create_task(worker(port, k).run()) for k in range(2)]
            try:
                summary = await submit_job(
                    "127.0.0.1", port, TOKEN, JOB, job_id="real", min_workers=2, timeout_s=60
                )
            finally:
                for task in workers:
                    task.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
            return summary, kinds, idle
        finally:
            await foreman.close()

    with caplog.at_level(logging.WARNING):
        summary, kinds, idle = asyncio.run(scenario())
    assert len(kinds) == 11 and min(kinds.values()) > 100  # every kind, many times
    assert unhandled == []  # nothing raised in the foreman's tasks or callbacks
    assert [r.getMessage() for r in caplog.records] == []  # and nothing logged
    assert idle  # no fuzzing peer is left enrolled, no fuzzed job pending
    keys = [(t.input_index, t.stage_index) for t in summary.tasks]
    assert sorted(keys) == [(i, s) for i in range(2) for s in range(2)]  # each once
    assert summary.tasks_redispatched == 0 and all(t.attempts == 1 for t in summary.tasks)
    np.testing.assert_allclose(
        np.array(summary.logits), reference_logits(TINY, JOB.seed, JOB.inputs), atol=1e-5
    )
