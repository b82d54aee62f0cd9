"""The file store reads regular files only, and a worker's store is its own, not the foreman's.

A FIFO, directory, device or symlink in the store is refused without waiting for a writer;
a real worker fails that task and goes on. A WELCOME naming a store path makes no worker
create or write it: a worker uses the store it was started with (``--store``), or none.
"""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from test_crowdio_security import (
    REPORT,
    STATUS,
    TOKEN,
    _load,
    _run,
    receive,
    running_foreman,
    send,
    worker_hello,
    worker_under_test,
)

from edgetwin.emu.crowdio.codec import decode_payload, encode_array
from edgetwin.emu.crowdio.filestore import FileStore, StoreError
from edgetwin.emu.crowdio.launcher import LocalPlacement, WorkerSpec, run_pipeline
from edgetwin.emu.crowdio.model import TINY, distilbert_job, make_inputs
from edgetwin.emu.crowdio.protocol import (
    ClientHello,
    JobAccepted,
    ModelLoaded,
    RunTask,
    TaskFailed,
    TaskResult,
    Welcome,
)
from edgetwin.emu.crowdio.records import Payload
from edgetwin.emu.crowdio.sdk import PipelineJob, submit_message


@pytest.fixture(scope="module")
def job() -> PipelineJob:
    return distilbert_job(TINY, inputs=1, stages=3)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _directory(path: Path) -> None:
    path.mkdir()


def _symlink_in_store(path: Path) -> None:
    target = path.with_name("target.z")
    target.write_bytes(b"x")
    path.symlink_to(target)  # inside the store: only the no-follow open refuses it


def _char_device(path: Path) -> None:
    try:
        os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # like /dev/zero
    except PermissionError:
        pytest.skip("making a device needs root")


@pytest.mark.timeout(30)  # before the fix a FIFO blocked the reader for good
@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (_fifo, "a FIFO"),
        (_directory, "a directory"),
        (_symlink_in_store, "a symlink"),
        (_char_device, "a character device"),
    ],
)
def test_an_entry_that_is_not_a_regular_file_is_refused(
    tmp_path: Path, make: Callable[[Path], None], kind: str
) -> None:
    store = FileStore(tmp_path / "store", "w")
    make(store.root / "entry.z")
    with pytest.raises(StoreError, match=f"'entry.z' is {kind}"):
        store.get("entry.z", 1 << 20)
    with pytest.raises(StoreError, match=f"'entry.z' is {kind}"):
        store.size("entry.z")
    with pytest.raises(StoreError, match=kind):
        decode_payload(Payload(dtype="float32", shape=(1,), ref="entry.z"), store)


def test_a_regular_entry_is_read_within_its_limit(tmp_path: Path) -> None:
    store = FileStore(tmp_path, "w")
    name = store.put(b"0123456789")
    assert store.size(name) == 10 and store.get(name, 10) == b"0123456789"
    with pytest.raises(StoreError, match="over 9 bytes"):
        store.get(name, 9)


@pytest.mark.timeout(60)
def test_a_worker_fails_a_task_on_a_fifo_and_runs_the_next(
    job: PipelineJob, tmp_path: Path
) -> None:
    (tmp_path / "store").mkdir()  # the worker's own store
    os.mkfifo(tmp_path / "store" / "fifo.z")

    async def scenario() -> None:
        async with worker_under_test(tmp_path) as ((reader, writer), _):
            await send(writer, _load(job, 0))
            assert isinstance(await receive(reader), ModelLoaded)
            shape = (1, TINY.seq_len)
            await send(writer, _run(job, Payload(dtype="int64", shape=shape, ref="fifo.z")))
            failed = await receive(reader)
            assert isinstance(failed, TaskFailed) and "is a FIFO" in failed.error, failed
            await send(writer, _run(job, encode_array(make_inputs(TINY, 1, 0)[0], None, 0)))
            assert isinstance(await receive(reader), TaskResult)

    asyncio.run(scenario())


@pytest.mark.parametrize("own_store", [False, True])
def test_a_worker_never_makes_the_store_a_welcome_names(
    job: PipelineJob, tmp_path: Path, own_store: bool
) -> None:
    named = tmp_path / "the-foreman-says" / "here"
    mine = tmp_path / "mine"

    async def scenario() -> Payload:
        async with worker_under_test(
            tmp_path, welcome_store=named, store_dir=mine if own_store else None
        ) as ((reader, writer), _):
            await send(writer, _load(job, 0))
            assert isinstance(await receive(reader), ModelLoaded)
            await send(writer, _run(job, encode_array(make_inputs(TINY, 1, 0)[0], None, 0)))
            result = await receive(reader)
            assert isinstance(result, TaskResult), result
            return result.payload

    payload = asyncio.run(scenario())  # inline_max_bytes=0: through a store if it has one
    assert not (tmp_path / "the-foreman-says").exists()
    if own_store:
        assert payload.ref is not None and (mine / payload.ref).is_file()
    else:
        assert payload.ref is None and payload.data_b64 is not None


@dataclass
class RecordingPlacement:
    """Local processes, their command lines kept."""

    commands: list[list[str]] = field(default_factory=list)
    foreman_address: str = "127.0.0.1"
    store_over_network: bool = False

    def spawn(
        self, host: int, argv: list[str], env: dict[str, str], log: Path
    ) -> subprocess.Popen[bytes]:
        self.commands.append(argv)
        return LocalPlacement().spawn(host, argv, env, log)


def test_the_launcher_gives_every_worker_the_foremans_store(job: PipelineJob) -> None:
    placement = RecordingPlacement()
    workers = [WorkerSpec("w0"), WorkerSpec("w1")]
    summary = run_pipeline(job, workers, placement, inline_max_bytes=0)  # all via the store
    assert len(summary.logits) == len(job.inputs)
    stores = [argv[argv.index("--store") + 1] for argv in placement.commands]
    assert len(stores) == 3 and len(set(stores)) == 1  # the foreman's and each worker's
    assert not any("--serve-store" in argv for argv in placement.commands)


def test_workers_that_share_no_disk_get_the_store_the_foreman_serves(job: PipelineJob) -> None:
    placement = RecordingPlacement(store_over_network=True)
    workers = [WorkerSpec("w0"), WorkerSpec("w1")]
    summary = run_pipeline(job, workers, placement, inline_max_bytes=0)  # all via the store
    assert len(summary.logits) == len(job.inputs)
    foreman, *worker_commands = placement.commands
    assert "--store" in foreman and "--serve-store" in foreman
    assert not any("--store" in argv for argv in worker_commands)
    assert all(t.report.store_ms > 0 for t in summary.tasks)


async def _entries_become(store: Path, expected: list[str]) -> list[str]:
    """The store's entries once they are ``expected``, or after 5 s."""
    for _ in range(100):
        entries = sorted(p.name for p in store.iterdir())
        if entries == expected:
            break
        await asyncio.sleep(0.05)
    return entries


@dataclass
class _RawPeers:
    """A raw worker enrolled on a running foreman, and a raw client whose job it runs."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    own: FileStore  # the worker's names in the store
    client_writer: asyncio.StreamWriter


async def _enrol_and_submit(port: int, folder: Path, job: PipelineJob, job_id: str) -> _RawPeers:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await send(writer, worker_hello())
    welcome = await receive(reader)
    assert isinstance(welcome, Welcome)
    own = FileStore(folder, f"{welcome.peer_id}-1")
    client_reader, client_writer = await asyncio.open_connection("127.0.0.1", port)
    await send(client_writer, ClientHello(token=TOKEN))
    assert isinstance(await receive(client_reader), Welcome)
    await send(client_writer, submit_message(job, job_id, min_workers=1))
    assert isinstance(await receive(client_reader), JobAccepted)
    return _RawPeers(reader, writer, own, client_writer)


async def _next_task(reader: asyncio.StreamReader) -> RunTask:
    while not isinstance(message := await receive(reader), RunTask):
        pass  # the stage's LOAD (and UNLOAD) come first
    return message


def test_a_dropped_job_leaves_nothing_in_the_store(job: PipelineJob, tmp_path: Path) -> None:
    """The foreman deletes the stored inputs of a job whose client left, and the stored
    result a worker sends for it afterwards (before, both stayed for the foreman's life)."""
    folder = tmp_path / "store"
    hidden = np.zeros((1, TINY.seq_len, TINY.dim), np.float32)

    async def scenario() -> None:
        async with running_foreman(folder) as port:
            peers = await _enrol_and_submit(port, folder, job, "leaves")
            reader, writer, own = peers.reader, peers.writer, peers.own
            first = await _next_task(reader)
            handed_on = encode_array(hidden, own, 0)
            await send(writer, first.result(handed_on, REPORT, STATUS))
            second = await _next_task(reader)  # stage 1 reads stage 0's result from the store
            assert second.payload.ref == handed_on.ref
            assert [p.name for p in folder.iterdir()] == [handed_on.ref]
            peers.client_writer.close()  # the client leaves; its job is dropped
            assert await _entries_become(folder, []) == []
            late = encode_array(hidden, own, 0)
            assert [p.name for p in folder.iterdir()] == [late.ref]
            await send(writer, second.result(late, REPORT, STATUS))
            assert await _entries_become(folder, []) == []
            writer.close()

    asyncio.run(scenario())


def test_a_stored_result_that_does_not_decode_leaves_nothing_in_the_store(
    job: PipelineJob, tmp_path: Path
) -> None:
    """A result whose store entry does not inflate disconnects its worker and is deleted:
    nothing reads it again (before, it stayed in the store until the foreman stopped)."""
    folder = tmp_path / "store"
    hidden = np.zeros((1, TINY.seq_len, TINY.dim), np.float32)

    async def scenario() -> None:
        async with running_foreman(folder) as port:
            peers = await _enrol_and_submit(port, folder, job, "garbled")
            task = await _next_task(peers.reader)
            garbled = encode_array(hidden, peers.own, 0)
            assert garbled.ref is not None
            (folder / garbled.ref).write_bytes(b"not zlib")
            await send(peers.writer, task.result(garbled, REPORT, STATUS))
            last_words = await peers.reader.read()  # the foreman says why and closes
            assert b"does not inflate" in last_words
            assert await _entries_become(folder, []) == []
            peers.writer.close()
            peers.client_writer.close()

    asyncio.run(scenario())
