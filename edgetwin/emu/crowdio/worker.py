"""The worker: enrols with a foreman, loads the stage it is told to, runs tasks one at a time.

It handles messages in order: LOAD_MODEL (the blob, checked against its SHA-256
and cached on disk, or the cached copy: a warm load), UNLOAD_MODEL, RUN_TASK
(decode the payload, run the resident stage, encode the output inline or into the
file store). Each reply carries its RSS, its session memory (what its sessions and their
work added to its RSS at their peak since its previous reply), its free RAM (with a budget:
the budget less its RSS above its start with no session resident, as a twin phone gives a
session its whole budget) and simulated battery; each event goes to its telemetry log.
A bad blob, a payload that does not decode or a file-store reference outside the store
fails that load or task, not the worker.

While enrolled it sends a HEARTBEAT every ``heartbeat_s`` the foreman asks for; loads and
inference run in a thread, so beats go out while it works. The foreman beats too: a
foreman that sends nothing, not even a heartbeat, for ``--foreman-timeout-s`` while the
worker waits (frozen, or cut off) counts as a broken connection. When its connection breaks
(the foreman declared it lost and reset it, or the network failed) it enrols again as a
fresh worker (nothing resident, its cache kept), trying for ``--rejoin-s`` (0: it exits);
its first enrolment is tried as long (a foreman not reachable yet: a link just up whose
neighbour entry still reads unreachable).
Blobs and tensors over its ``Limits`` (``codec.py``) fail their load or task undecoded.
With ``--tls-ca`` it speaks TLS and checks the foreman's certificate.

The file store is the worker's own (``--store``, the folder it shares with the foreman);
the folder a foreman's WELCOME names is never created or written. A worker without one
uses the store its foreman serves over the network, if the WELCOME names its port
(``netstore.py``): payloads then cross the worker's link, as a phone's do.

    python -m edgetwin.emu.crowdio.worker --foreman H:P --token T --cache DIR [--store DIR]
        [--telemetry CSV]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import psutil

from edgetwin.emu.crowdio.codec import (
    DEFAULT_LIMITS,
    Limits,
    PayloadError,
    add_limit_arguments,
    compressed_bytes,
    decode_base64,
    decode_payload,
    encode_array,
    limits_from_arguments,
)
from edgetwin.emu.crowdio.filestore import FileStore, PayloadStore, StoreError
from edgetwin.emu.crowdio.framing import (
    FrameError,
    PeerSilent,
    read_exactly,
    read_frame_length,
    write_frame,
)
from edgetwin.emu.crowdio.netstore import NetStore
from edgetwin.emu.crowdio.options import (
    PORT_MAX,
    non_negative_float,
    positive_float,
    positive_int,
)
from edgetwin.emu.crowdio.protocol import (
    MAX_MESSAGE_BYTES,
    TOKEN_ENV,
    ErrorMessage,
    Heartbeat,
    LoadModel,
    Message,
    ModelFailed,
    ModelLoaded,
    ModelUnloaded,
    ProtocolError,
    RunTask,
    UnloadModel,
    Welcome,
    WorkerHello,
    encode_message,
    parse_message,
)
from edgetwin.emu.crowdio.records import LoadKind, TaskReport, WorkerStatus
from edgetwin.emu.crowdio.sessions import ModelCache, ModelError, Resident, SessionSlot
from edgetwin.emu.crowdio.telemetry import (
    BatteryMeter,
    PowerModel,
    SessionMemory,
    WorkerLog,
    rss_mb,
)
from edgetwin.emu.crowdio.tls import client_context
from edgetwin.emulator_spec import MIN_HEARTBEATS_PER_TIMEOUT
from edgetwin.errors import OneLineParser
from edgetwin.models.crowd.table import task_id
from edgetwin.number_text import exact_text
from edgetwin.parent_watch import exit_with_parent
from edgetwin.worker_log import Event as LogEvent

REJOIN_WAIT_S = 0.5
T = TypeVar("T")


class WorkerRefused(Exception):
    """The foreman refused this worker or broke the protocol (the reason is the message)."""


@dataclass(frozen=True)
class WorkerConfig:
    """How a worker reaches its foreman and what it reports about itself."""

    host: str
    port: int
    token: str
    cache_dir: Path
    name: str
    store_dir: Path | None = None  # the file store shared with the foreman; None: inline only
    telemetry_path: Path | None = None
    threads: int = 1  # ONNX Runtime intra-op threads
    ram_mb: float | None = None  # a phone's session budget (Worker.free_ram_mb); None: free RAM
    power: PowerModel = field(default_factory=PowerModel)
    task_delay_ms: float = 0.0  # added to every inference: a slower device
    max_message_bytes: int = MAX_MESSAGE_BYTES
    rejoin_s: float = 0.0  # how long to try to enrol again after the connection breaks
    foreman_timeout_s: float = 15.0  # a foreman silent this long is frozen or gone
    limits: Limits = DEFAULT_LIMITS
    tls_ca: Path | None = None  # speak TLS; the foreman's certificate must chain to this


class Worker:
    """One worker's state: model cache, session slot, battery, log."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self.cache = ModelCache(config.cache_dir)
        self.slot = SessionSlot(config.threads)
        self.meter = BatteryMeter(config.power)
        self.memory = SessionMemory()  # from here: before any session
        self.sessionless_mb = 0.0  # its RSS above the start with no session, last measured
        self.store: TimedStore | None = None
        self.inline_max_bytes = 0
        self.log: WorkerLog | None = None
        self.last_load: tuple[LoadKind, float] = ("resident", 0.0)  # not yet reported
        self.enrolled = False  # the current connection got its WELCOME
        self.foreman_timeout_s = config.foreman_timeout_s  # raised to two heartbeats if shorter

    def status(self) -> WorkerStatus:
        return WorkerStatus(
            rss_mb=rss_mb(),
            peak_session_mb=self.memory.peak_mb(),
            free_ram_mb=self.free_ram_mb(),
            battery_mah=self.meter.drained_mah(),
            energy_j=self.meter.drained_j(),
            battery_pct=self.meter.pct(),
        )

    def free_ram_mb(self) -> float:
        """What a session may take (MB): the budget less the worker's RSS above its start
        with no session resident (measured now when none is, else when none last was: a load
        unloads the resident session first). As the twin's phone, whose free RAM is its
        session budget, not less its interpreter and libraries. Without a budget, the
        machine's available memory."""
        if self.slot.resident is None:
            self.sessionless_mb = self.memory.held_mb()
        if self.config.ram_mb is None:
            return float(psutil.virtual_memory().available) / 2**20
        return max(self.config.ram_mb - self.sessionless_mb, 0.0)

    async def run(self) -> None:
        """Serve the foreman until it closes the connection; WorkerRefused when refused.

        The first enrolment, and a connection that breaks after enrolment, are tried
        every REJOIN_WAIT_S for ``rejoin_s`` (a foreman unreachable meanwhile, its link
        down, is tried again too); the OSError of the last try when that does not work."""
        try:
            await self._serve_until_closed()
        finally:
            self._close_store()
            if self.log is not None:
                self.log.close()

    async def _serve_until_closed(self) -> None:
        give_up_s = time.monotonic() + self.config.rejoin_s
        while True:
            self.enrolled = False
            try:
                await self._serve()
                return
            except OSError as exc:  # broken, refused, or (link down) host unreachable
                now = time.monotonic()
                if self.enrolled:
                    give_up_s = now + self.config.rejoin_s
                    print(f"worker {self.config.name}: {exc}; enrolling again", file=sys.stderr)
                if now >= give_up_s:
                    raise
            if self.slot.resident is not None:
                self.slot.unload()  # a fresh worker: the foreman will load what it wants
            await asyncio.sleep(REJOIN_WAIT_S)

    async def _serve(self) -> None:
        """One connection: enrol, then handle the foreman's messages until it closes."""
        config = self.config
        tls = None if config.tls_ca is None else client_context(config.tls_ca)
        handshake_s = None if tls is None else config.foreman_timeout_s
        reader, writer = await asyncio.open_connection(
            config.host, config.port, ssl=tls, ssl_handshake_timeout=handshake_s
        )
        beat: asyncio.Task[None] | None = None
        try:
            hello = WorkerHello(
                token=config.token,
                name=config.name,
                cached=tuple(self.cache.checksums()),
                has_gpu=False,  # sessions run on ONNX Runtime's CPU provider
                status=self.status(),
            )
            await self._send(writer, hello)
            welcome, _ = await self._receive(reader)
            if not isinstance(welcome, Welcome):
                raise WorkerRefused(_reason(welcome))
            self._enrol(welcome)
            beat = asyncio.create_task(_beat(writer, welcome.heartbeat_s))
            while True:
                message, receive_s = await self._receive(reader)
                await self._handle(message, receive_s, writer)
        except asyncio.IncompleteReadError:
            return  # the foreman closed the connection
        except PeerSilent as exc:
            raise ConnectionError(
                f"the foreman at {config.host}:{config.port} sent nothing, not even a "
                f"heartbeat, for {exact_text(exc.idle_timeout_s)} s: it is frozen or cut off"
            ) from None
        except (ProtocolError, FrameError) as exc:
            with contextlib.suppress(ConnectionError):
                await self._send(writer, ErrorMessage(reason=str(exc)))
            raise WorkerRefused(str(exc)) from None
        finally:
            if beat is not None:
                beat.cancel()
            writer.close()

    def _enrol(self, welcome: Welcome) -> None:
        self.enrolled = True
        self._close_store()
        config = self.config
        prefix = f"{welcome.peer_id}-{os.getpid()}"
        if welcome.store_dir is not None and config.store_dir is not None:
            self.store = TimedStore(FileStore(config.store_dir, prefix))
        elif welcome.store_port is not None:  # the foreman's store, over this worker's link
            tls = None if config.tls_ca is None else client_context(config.tls_ca)
            net = NetStore(config.host, welcome.store_port, config.token, prefix, tls)
            self.store = TimedStore(net)
        elif welcome.store_dir is not None:
            print(
                f"worker {config.name}: the foreman uses a file store and this worker"
                " has none (--store): payloads sent by reference will fail",
                file=sys.stderr,
            )
        self.inline_max_bytes = welcome.inline_max_bytes
        self.foreman_timeout_s = max(
            self.config.foreman_timeout_s, MIN_HEARTBEATS_PER_TIMEOUT * welcome.heartbeat_s
        )
        if self.config.telemetry_path is not None and self.log is None:
            self.log = WorkerLog(self.config.telemetry_path, welcome.peer_id, self.meter)

    async def _handle(
        self, message: Message, receive_s: float, writer: asyncio.StreamWriter
    ) -> None:
        if isinstance(message, Heartbeat):
            return
        if isinstance(message, LoadModel):
            await self._send(writer, await asyncio.to_thread(self._load, message, receive_s))
        elif isinstance(message, UnloadModel):
            await self._send(writer, self._unload(message))
        elif isinstance(message, RunTask):
            await self._run(message, writer)
        elif isinstance(message, ErrorMessage):
            raise WorkerRefused(message.reason)
        else:
            raise ProtocolError(f"unexpected {message.type} from the foreman")

    def _load(self, message: LoadModel, receive_s: float) -> ModelLoaded | ModelFailed:
        start = time.monotonic()
        kind: LoadKind = "warm" if message.blob_b64 is None else "cold"
        try:
            if message.blob_b64 is None:
                blob = self.cache.get(message.sha256)
            else:
                blob = _b64decode(message.blob_b64, self.config.limits)
                self.cache.put(message.sha256, blob)
            self.slot.load(message.stage, message.sha256, blob)
        except ModelError as exc:
            self.meter.spend("load", time.monotonic() - start)
            return ModelFailed(
                stage=message.stage, sha256=message.sha256, error=str(exc), status=self.status()
            )
        end = time.monotonic()
        self.meter.spend("load", end - start)
        if kind == "cold":  # a cold load includes the download
            start -= receive_s
        self.last_load = (kind, (end - start) * 1e3)
        if self.log is not None:
            size = len(blob) if kind == "cold" else None
            event: LogEvent = "load_cold" if kind == "cold" else "load_warm"
            self.log.write(event, message.job_id, message.stage, start, end, size_bytes=size)
        return ModelLoaded(
            stage=message.stage,
            sha256=message.sha256,
            load_kind=kind,
            load_ms=(end - start) * 1e3,
            status=self.status(),
        )

    def _unload(self, message: UnloadModel) -> ModelUnloaded:
        """Unload the stage if it is resident (it may not be, after a failed load)."""
        resident = self.slot.resident
        if resident is None or resident.stage != message.stage:
            return ModelUnloaded(stage=message.stage, status=self.status())
        start = time.monotonic()
        self.slot.unload()
        end = time.monotonic()
        self.meter.spend("load", end - start)
        if self.log is not None:
            self.log.write("unload", message.job_id, message.stage, start, end)
        return ModelUnloaded(stage=message.stage, status=self.status())

    async def _run(self, task: RunTask, writer: asyncio.StreamWriter) -> None:
        store, limits = self.store, self.config.limits
        start, moved_s = time.monotonic(), self._moved_s()
        try:
            if self.slot.resident != Resident(task.stage, task.sha256):
                raise ModelError(f"{task.stage} is not resident")
            array = await asyncio.to_thread(decode_payload, task.payload, store, limits)
            bytes_in = compressed_bytes(task.payload, store)
            decoded, fetch_s = time.monotonic(), self._moved_s() - moved_s
            output = await asyncio.to_thread(self.slot.run, array)
            if self.config.task_delay_ms > 0:
                await asyncio.sleep(self.config.task_delay_ms / 1e3)
            computed = time.monotonic()
            inline_max = self.inline_max_bytes
            payload = await asyncio.to_thread(encode_array, output, store, inline_max)
            encoded, put_s = time.monotonic(), self._moved_s() - moved_s - fetch_s
        except (ModelError, PayloadError, StoreError) as exc:
            self.meter.spend("compute", time.monotonic() - start)
            failed = task.failure(str(exc), self.status())
            await self._send(writer, failed)
            return
        self.meter.spend("compute", encoded - start - fetch_s - put_s)
        self.meter.spend("transmit", fetch_s + put_s)
        load_kind, load_ms = self.last_load
        self.last_load = ("resident", 0.0)
        bytes_out = compressed_bytes(payload, store)
        report = TaskReport(
            load_kind=load_kind,
            load_ms=load_ms,
            decode_ms=(decoded - start - fetch_s) * 1e3,
            compute_ms=(computed - decoded) * 1e3,
            encode_ms=(encoded - computed - put_s) * 1e3,
            bytes_in=bytes_in,
            bytes_out=bytes_out,
            store_ms=(fetch_s + put_s) * 1e3,
        )
        result = task.result(payload, report, self.status())
        send_s = await self._send(writer, result)
        if self.log is not None:
            name = task_id(task.job_id, task.input_index, task.stage)
            log, job, stage, index = self.log, task.job_id, task.stage, task.input_index
            log.write("infer", job, stage, start, computed, task=name, input_index=index)
            sent = encoded + send_s
            log.write(
                "transfer",
                job,
                stage,
                computed,
                sent,
                task=name,
                input_index=index,
                size_bytes=bytes_out,
            )

    def _close_store(self) -> None:
        """Let go of the store of the last enrolment (its connection to a served one)."""
        if self.store is not None:
            self.store.close()
            self.store = None

    def _moved_s(self) -> float:
        """Seconds spent moving payloads to and from the store so far."""
        return 0.0 if self.store is None else self.store.seconds

    async def _send(self, writer: asyncio.StreamWriter, message: Message) -> float:
        """Send a message; the seconds it took (charged as transmit)."""
        start = time.monotonic()
        await write_frame(writer, encode_message(message))
        seconds = time.monotonic() - start
        self.meter.spend("transmit", seconds)
        return seconds

    async def _receive(self, reader: asyncio.StreamReader) -> tuple[Message, float]:
        """The next message and the seconds its body took to arrive (charged as transmit)."""
        timeout_s = self.foreman_timeout_s
        length = await read_frame_length(reader, self.config.max_message_bytes, timeout_s)
        start = time.monotonic()
        body = await read_exactly(reader, length, timeout_s)
        seconds = time.monotonic() - start
        self.meter.spend("transmit", seconds)
        return parse_message(body), seconds


class TimedStore:
    """A worker's store that adds up the seconds its calls take: moving payloads, which
    its task report keeps apart from decoding and encoding them."""

    def __init__(self, store: PayloadStore) -> None:
        self.store = store
        self.seconds = 0.0

    def put(self, data: bytes) -> str:
        return self._timed(self.store.put, data)

    def size(self, name: str) -> int:
        return self._timed(self.store.size, name)

    def get(self, name: str, max_bytes: int) -> bytes:
        return self._timed(self.store.get, name, max_bytes)

    def delete(self, name: str) -> None:
        self._timed(self.store.delete, name)

    def close(self) -> None:
        self.store.close()

    def _timed(self, call: Callable[..., T], *args: object) -> T:
        start = time.monotonic()
        try:
            return call(*args)
        finally:
            self.seconds += time.monotonic() - start


async def _beat(writer: asyncio.StreamWriter, period_s: float) -> None:
    """A HEARTBEAT every ``period_s`` until the connection breaks (or the task is cancelled)."""
    frame = encode_message(Heartbeat())
    with contextlib.suppress(ConnectionError):
        while True:
            await asyncio.sleep(period_s)
            await write_frame(writer, frame)


def _b64decode(text: str, limits: Limits) -> bytes:
    try:
        limits.check_blob("the model blob", text)
    except PayloadError as exc:
        raise ModelError(str(exc)) from None
    try:
        return decode_base64(text)
    except PayloadError:
        raise ModelError("the model blob is not valid base64") from None


def _reason(message: Message) -> str:
    if isinstance(message, ErrorMessage):
        return message.reason
    return f"expected WELCOME, got {message.type}"


def default_name() -> str:
    """``<hostname>-<pid>``, reduced to the characters a worker name may have."""
    host = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname())[:40].strip("-.") or "worker"
    return f"{host}-{os.getpid()}"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m edgetwin.emu.crowdio.worker", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--foreman", required=True, metavar="HOST:PORT")
    parser.add_argument("--token", default=os.environ.get(TOKEN_ENV), help=f"or ${TOKEN_ENV}")
    parser.add_argument("--cache", type=Path, required=True, help="model cache folder")
    parser.add_argument("--name", default=default_name())
    parser.add_argument("--store", type=Path, help="file-store folder shared with the foreman")
    parser.add_argument("--telemetry", type=Path, help="write the worker log (CSV) here")
    parser.add_argument("--threads", type=positive_int, default=1)
    parser.add_argument("--ram-mb", type=positive_float)
    parser.add_argument("--power", default="", help="e.g. compute_w=2.5,capacity_mah=4500")
    parser.add_argument("--task-delay-ms", type=non_negative_float, default=0.0)
    parser.add_argument("--max-message-mb", type=positive_float, default=MAX_MESSAGE_BYTES / 2**20)
    add_limit_arguments(parser)
    parser.add_argument(
        "--rejoin-s",
        type=non_negative_float,
        default=0.0,
        help="try this long to enrol again when cut off",
    )
    parser.add_argument(
        "--foreman-timeout-s",
        type=positive_float,
        default=WorkerConfig.foreman_timeout_s,
        help="a foreman that sends nothing (not even a heartbeat) for this long is frozen or gone",
    )
    parser.add_argument("--tls-ca", type=Path, help="speak TLS; the foreman's CA certificate")
    parser.add_argument("--parent-pid", type=positive_int, help="exit when this process is gone")
    args = parser.parse_args(argv)
    host, _, port = args.foreman.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) <= PORT_MAX:
        parser.error(f"--foreman must be HOST:PORT (port 1 to {PORT_MAX}), got {args.foreman!r}")
    if not args.token:
        parser.error(f"--token (or ${TOKEN_ENV}) is required")
    try:
        power = PowerModel.parse(args.power)
    except ValueError as exc:
        parser.error(f"--power: {exc}")
    try:
        limits = limits_from_arguments(args)
        if args.tls_ca is not None:
            client_context(args.tls_ca)  # refuse a bad file before connecting
    except ValueError as exc:  # TlsError is one
        parser.error(str(exc))
    config = WorkerConfig(
        host=host,
        port=int(port),
        token=args.token,
        cache_dir=args.cache,
        name=args.name,
        store_dir=args.store,
        telemetry_path=args.telemetry,
        threads=args.threads,
        ram_mb=args.ram_mb,
        power=power,
        task_delay_ms=args.task_delay_ms,
        max_message_bytes=int(args.max_message_mb * 2**20),
        rejoin_s=args.rejoin_s,
        foreman_timeout_s=args.foreman_timeout_s,
        limits=limits,
        tls_ca=args.tls_ca,
    )
    if args.parent_pid is not None:
        exit_with_parent(args.parent_pid, "worker")
    try:
        asyncio.run(Worker(config).run())
    except (WorkerRefused, OSError) as exc:
        print(f"worker {config.name}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
