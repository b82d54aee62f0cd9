"""The foreman: an asyncio TCP server that enrols workers and runs several jobs at once.

Every connection opens with a hello that carries the shared token (checked in
constant time; a wrong token is refused and the connection closed). Until then
frames are limited to ``hello_max_bytes``; after, to ``max_message_bytes``. A peer
that sends an oversized or malformed frame, or a reply that does not fit what it
was asked, gets an ERROR and is disconnected; a worker's tasks are re-dispatched.
A worker silent for longer than the liveness rule's timeout (``liveness.py``) is
declared lost: its connection is dropped and its tasks re-dispatched as on a
disconnect; whatever it sends later is never read. With a per-task deadline
(``--task-deadline-s``, the decision core's ``task_deadline_ms``; none by default) so is
a worker that beats but has not answered a task that long after its dispatch (a hung
inference): its task is queued again first (``requeue``, ``overdue``). The foreman beats
too: a HEARTBEAT to every worker each ``heartbeat_s``, so that a worker can tell a frozen
foreman from a quiet one. A client that sends nothing for ``read_timeout_s`` before its
submission is complete gets an ERROR and is disconnected. Blobs and tensors over the deployment's
``Limits`` (``codec.py``) are refused before they are decoded. With a certificate and
key it speaks TLS (``tls.py``). With ``--serve-store`` it serves its store folder over
HTTP to workers that share no disk with it (``netstore.py``). Worker ids are never reused, so a
worker that comes back enrols as a fresh one. The decisions are the crowd decision
core's, for every job in flight together (``crew``); a job starts once it has its
``min_workers``.

    python -m edgetwin.emu.crowdio.foreman [--host H] --port P --token T [--store DIR
        [--serve-store]]
        [--tls-cert PEM --tls-key PEM] [--max-blob-mb MB] [--max-tensor-mb MB] ...

It listens on loopback unless ``--host`` says otherwise, and warns when that is every
interface.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import os
import signal
import socket
import ssl
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from edgetwin.atomic import write_text_atomic
from edgetwin.emu.crowdio.codec import (
    DEFAULT_LIMITS,
    Limits,
    PayloadError,
    add_limit_arguments,
    limits_from_arguments,
    zlib_bound,
)
from edgetwin.emu.crowdio.crew import Crew
from edgetwin.emu.crowdio.dispatch import JobStage, WorkerState
from edgetwin.emu.crowdio.filestore import FileStore, StoreError
from edgetwin.emu.crowdio.framing import (
    HEADER_BYTES,
    FrameError,
    PeerSilent,
    read_frame,
    write_frame,
)
from edgetwin.emu.crowdio.job import Job, JobRejection, Outbox, job_stages
from edgetwin.emu.crowdio.liveness import LivenessRule, SilenceWatch
from edgetwin.emu.crowdio.netstore import StoreServer
from edgetwin.emu.crowdio.options import (
    non_negative_float,
    port_number,
    positive_float,
    positive_int,
)
from edgetwin.emu.crowdio.protocol import (
    INLINE_MAX_BYTES,
    MAX_MESSAGE_BYTES,
    TOKEN_ENV,
    ClientHello,
    ErrorMessage,
    Heartbeat,
    JobAccepted,
    JobEvent,
    JobFailed,
    JobRejected,
    JobResult,
    Message,
    ModelFailed,
    ModelLoaded,
    ModelUnloaded,
    ProtocolError,
    SubmitPipelineJob,
    TaskFailed,
    TaskResult,
    Welcome,
    WorkerHello,
    encode_message,
    parse_message,
)
from edgetwin.emu.crowdio.records import Event
from edgetwin.emu.crowdio.tls import TlsError, server_context
from edgetwin.errors import OneLineParser
from edgetwin.number_text import exact_text
from edgetwin.parent_watch import exit_with_parent

PEER_ERRORS = (ProtocolError, FrameError, StoreError, PayloadError)
CLOSE_GRACE_S = 2.0
ALL_INTERFACES = ("0.0.0.0", "::", "")
HEARTBEAT_FRAME = encode_message(Heartbeat())


@dataclass(frozen=True)
class ForemanConfig:
    """Where the foreman listens and what it accepts."""

    token: str
    host: str = "127.0.0.1"
    port: int = 0
    store_dir: Path | None = None  # shared file store; None: payloads travel inline
    serve_store: bool = False  # serve store_dir over HTTP to workers that share no disk
    inline_max_bytes: int = INLINE_MAX_BYTES
    max_message_bytes: int = MAX_MESSAGE_BYTES
    hello_max_bytes: int = 64 * 1024
    hello_timeout_s: float = 10.0
    read_timeout_s: float = 30.0  # a client silent this long before its submission is dropped
    liveness: LivenessRule = field(default_factory=LivenessRule)
    limits: Limits = DEFAULT_LIMITS
    tls_cert: Path | None = None  # with tls_key: speak TLS
    tls_key: Path | None = None

    def __post_init__(self) -> None:
        if self.serve_store and self.store_dir is None:
            raise ValueError("serving the file store needs a store folder (store_dir)")


class Peer:
    """One connection's outgoing frames, written in order by their own task."""

    def __init__(self, writer: asyncio.StreamWriter, on_sent: Callable[[int], None]) -> None:
        self.writer = writer
        self.on_sent = on_sent
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.task = asyncio.create_task(self._pump())

    def send(self, frame: bytes) -> None:
        self.queue.put_nowait(frame)

    def close(self, reason: str | None = None) -> None:
        """Send an ERROR first when there is a reason, then close once the queue is out."""
        if reason is not None:
            self.send(encode_message(ErrorMessage(reason=reason)))
        self.queue.put_nowait(None)

    async def _pump(self) -> None:
        try:
            while (frame := await self.queue.get()) is not None:
                await write_frame(self.writer, frame)
                self.on_sent(len(frame))
        except ConnectionError:
            pass
        finally:
            self.writer.close()


@dataclass
class PendingJob:
    """A submitted job: waiting for workers, then running."""

    submit: SubmitPipelineJob
    stages: list[JobStage]
    client: Peer
    done: asyncio.Future[None]
    job: Job | None = None


class Foreman:
    """The server; ``start`` binds and returns the port, ``close`` stops it."""

    def __init__(self, config: ForemanConfig) -> None:
        self.config = config
        self.store = None if config.store_dir is None else FileStore(config.store_dir, "foreman")
        deadline_s = config.liveness.task_deadline_s
        self.crew = Crew(self.store, limits=config.limits, task_deadline_s=deadline_s)
        self.workers = self.crew.workers  # enrolled, by id
        self.peers: dict[str, Peer] = {}
        self.pending: dict[str, PendingJob] = {}  # submitted and not over, by job id
        self.job_ids: set[str] = set()  # every job id accepted so far; ids are not reused
        self.worker_ids: set[str] = set()  # every worker id given so far; ids are not reused
        self.silence = SilenceWatch(config.liveness)
        self._clients = itertools.count(1)
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        self._watchdogs: list[asyncio.Task[None]] = []
        self.store_server: StoreServer | None = None

    async def start(self) -> int:
        """Bind and listen; TlsError when the certificate or key cannot be loaded."""
        config = self.config
        tls = None
        if config.tls_cert is not None or config.tls_key is not None:
            if config.tls_cert is None or config.tls_key is None:
                raise TlsError("TLS needs both a certificate and its key")
            tls = server_context(config.tls_cert, config.tls_key)
        self._server = await asyncio.start_server(
            self._on_connection,
            config.host,
            config.port,
            ssl=tls,
            ssl_handshake_timeout=None if tls is None else config.hello_timeout_s,
        )
        if config.serve_store:
            self.store_server = self._serve_store(tls)
        self._watchdogs = [
            asyncio.create_task(self._watch_silence()),
            asyncio.create_task(self._beat()),
        ]
        return int(self._server.sockets[0].getsockname()[1])

    def _serve_store(self, tls: ssl.SSLContext | None) -> StoreServer:
        """The store over HTTP on the foreman's address (``netstore.py``)."""
        assert self.store is not None  # the config has a folder
        config = self.config
        max_bytes = zlib_bound(config.limits.max_tensor_bytes)
        server = StoreServer(self.store, config.host, config.token, max_bytes, tls)
        server.start()
        return server

    async def close(self) -> None:
        """Stop listening, let peers flush and close, then close what is left."""
        if self._server is not None:
            self._server.close()
        if self.store_server is not None:
            self.store_server.close()
        for watchdog in self._watchdogs:
            watchdog.cancel()
        for peer in list(self.peers.values()):
            peer.close()
        for pending in self.pending.values():
            pending.client.close()
        if self._connections:
            _, left = await asyncio.wait(self._connections, timeout=CLOSE_GRACE_S)
            for task in left:
                self._connections[task].close()
            if left:
                await asyncio.wait(left, timeout=CLOSE_GRACE_S)
        if self._server is not None:
            await self._server.wait_closed()

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = writer
        try:
            await self._serve(reader, writer)
        finally:
            del self._connections[task]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            body = await asyncio.wait_for(
                read_frame(reader, self.config.hello_max_bytes), self.config.hello_timeout_s
            )
            hello = parse_message(body)
            if not isinstance(hello, WorkerHello | ClientHello):
                raise ProtocolError(f"the first message must be a hello, not {hello.type}")
            if not hmac.compare_digest(hello.token.encode(), self.config.token.encode()):
                raise ProtocolError("wrong token: this peer is not enrolled")
        except PEER_ERRORS as exc:
            with contextlib.suppress(ConnectionError):
                await write_frame(writer, encode_message(ErrorMessage(reason=str(exc))))
            writer.close()
            return
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            writer.close()
            return
        if isinstance(hello, WorkerHello):
            await self._serve_worker(hello, reader, writer)
        else:
            await self._serve_client(reader, writer)

    async def _serve_worker(
        self, hello: WorkerHello, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        worker_id = hello.name
        for n in itertools.count(2):
            if worker_id not in self.worker_ids:
                break
            worker_id = f"{hello.name}.{n}"
        self.worker_ids.add(worker_id)
        self.silence.heard(worker_id)
        worker = WorkerState(worker_id, hello.has_gpu, hello.status, device=hello.name)
        worker.cached.update(hello.cached)
        peer = Peer(writer, self._count_wire)
        self.peers[worker_id] = peer
        store_dir = None if self.store is None else str(self.store.root)
        welcome = Welcome(
            peer_id=worker_id,
            store_dir=store_dir,
            store_port=None if self.store_server is None else self.store_server.port,
            inline_max_bytes=self.config.inline_max_bytes,
            heartbeat_s=self.config.liveness.heartbeat_s,
        )
        peer.send(encode_message(welcome))
        self._send(self.crew.add_worker(worker))
        self._start_when_ready()
        reason = None
        try:
            while True:
                body = await read_frame(reader, self.config.max_message_bytes)
                if self.workers.get(worker_id) is not worker:
                    break  # declared lost: what it sends now is not read
                self.silence.heard(worker_id)
                self._count_wire(len(body))
                self._on_worker_message(worker, parse_message(body))
        except PEER_ERRORS as exc:
            reason = str(exc)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            peer.close(reason)
            self._forget(worker)
            await peer.task

    def _forget(self, worker: WorkerState, detail: str | None = None) -> None:
        """Take a worker out (once); its tasks are re-dispatched."""
        worker_id = worker.worker_id
        if self.workers.get(worker_id) is not worker:
            return
        del self.peers[worker_id]
        self.silence.forget(worker_id)
        self._send(self.crew.lose_worker(worker, detail))
        self._settle()

    async def _watch_silence(self) -> None:
        """Declare workers lost that have been silent for longer than the timeout, or that
        have not answered a task within the per-task deadline (the rule's
        ``task_deadline_s``: a worker that beats but hangs in its inference)."""
        rule = self.config.liveness
        deadline = "" if rule.task_deadline_s is None else exact_text(rule.task_deadline_s)
        while True:
            await asyncio.sleep(rule.check_every_s)
            for worker_id, silence_s in self.silence.silent():
                self._cut_off(self.workers[worker_id], f"silent for {silence_s:.1f} s")
            for worker in self.crew.overdue():
                self._cut_off(worker, f"no answer to its task within {deadline} s")

    def _cut_off(self, worker: WorkerState, detail: str) -> None:
        """Declare ``worker`` lost (``detail``: why) and reset its connection."""
        peer = self.peers[worker.worker_id]
        self._forget(worker, detail)
        _reset(peer.writer)

    async def _beat(self) -> None:
        """A HEARTBEAT to every worker each ``heartbeat_s`` (to those with nothing queued:
        a worker receiving a frame knows the foreman is alive)."""
        while True:
            await asyncio.sleep(self.config.liveness.heartbeat_s)
            for peer in self.peers.values():
                if peer.queue.empty():
                    peer.send(HEARTBEAT_FRAME)

    def _on_worker_message(self, worker: WorkerState, message: Message) -> None:
        if isinstance(message, Heartbeat):
            return
        if not isinstance(
            message, ModelLoaded | ModelUnloaded | ModelFailed | TaskResult | TaskFailed
        ):
            raise ProtocolError(f"unexpected {message.type} from a worker")
        self._send(self.crew.on_reply(worker, message))
        self._settle()

    async def _serve_client(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        peer = Peer(writer, self._count_wire)
        welcome = Welcome(
            peer_id=f"client-{next(self._clients)}",
            store_dir=None,
            inline_max_bytes=0,
            heartbeat_s=self.config.liveness.heartbeat_s,
        )
        peer.send(encode_message(welcome))
        reason = None
        try:
            config = self.config
            body = await read_frame(reader, config.max_message_bytes, config.read_timeout_s)
            self._count_wire(len(body))
            submit = parse_message(body)
            if not isinstance(submit, SubmitPipelineJob):
                raise ProtocolError(f"a client sends SUBMIT_PIPELINE_JOB, not {submit.type}")
            await self._run_job(submit, peer, reader)
        except PEER_ERRORS as exc:
            reason = str(exc)
        except PeerSilent as exc:
            reason = f"no job submitted: {exc}"
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            peer.close(reason)
        await peer.task

    async def _run_job(
        self, submit: SubmitPipelineJob, peer: Peer, reader: asyncio.StreamReader
    ) -> None:
        try:
            if submit.job_id in self.job_ids:
                raise JobRejection(f"job id {submit.job_id} was used before")
            stages = job_stages(submit, self.config.limits)
        except JobRejection as exc:
            peer.send(encode_message(JobRejected(job_id=submit.job_id, reason=str(exc))))
            return
        self.job_ids.add(submit.job_id)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        pending = PendingJob(submit, stages, peer, done)
        self.pending[submit.job_id] = pending
        tasks = len(stages) * len(submit.inputs)
        peer.send(encode_message(JobAccepted(job_id=submit.job_id, tasks=tasks)))
        client_gone = asyncio.create_task(_until_closed(reader))
        try:  # from here on, whatever happens, the job is dropped when this ends
            self._start_when_ready()
            await asyncio.wait({client_gone, done}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            client_gone.cancel()
            self._drop(pending)
        job = pending.job
        if done.done() and job is not None:
            if job.failure is None:
                reply: Message = JobResult(summary=job.summary())
            else:
                reply = JobFailed(job_id=job.job_id, reason=job.failure)
            peer.send(encode_message(reply))

    def _start_when_ready(self) -> None:
        """Start, in the order they came, the jobs that now have their ``min_workers``."""
        for pending in list(self.pending.values()):
            if pending.job is None and len(self.workers) >= pending.submit.min_workers:
                pending.job, outbox = self.crew.start(
                    pending.submit, pending.stages, self._forward_event(pending)
                )
                self._send(outbox)

    def _forward_event(self, pending: PendingJob) -> Callable[[Event], None]:
        def forward(event: Event) -> None:
            pending.client.send(encode_message(JobEvent(event=event)))

        return forward

    def _settle(self) -> None:
        """Resolve the jobs that have finished or failed."""
        for pending in self.pending.values():
            job = pending.job
            over = job is not None and (job.finished or job.failure is not None)
            if over and not pending.done.done():
                pending.done.set_result(None)

    def _drop(self, pending: PendingJob) -> None:
        """Forget a job; workers still running its tasks are free (late results are ignored)."""
        if self.pending.get(pending.submit.job_id) is pending:
            del self.pending[pending.submit.job_id]
        if pending.job is not None:
            self._send(self.crew.drop(pending.job))

    def _send(self, outbox: Outbox) -> None:
        for worker, frame in outbox:
            peer = self.peers.get(worker.worker_id)
            if peer is not None:
                peer.send(frame)

    def _count_wire(self, body_bytes: int) -> None:
        for job in self.crew.jobs.values():  # every job in flight while the frame moved
            job.wire_bytes += HEADER_BYTES + body_bytes


def _reset(writer: asyncio.StreamWriter) -> None:
    """Drop a connection with a reset (not a close): the worker, if it ever hears of it,
    knows it was cut off rather than told to stop, and enrols again."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _until_closed(reader: asyncio.StreamReader) -> None:
    """Returns when the peer closes or sends anything (a client has nothing more to send)."""
    await reader.read(1)


async def serve(config: ForemanConfig, port_file: Path | None) -> None:
    """Run a foreman until SIGINT or SIGTERM."""
    foreman = Foreman(config)
    port = await foreman.start()
    tls = "" if config.tls_cert is None else " (TLS)"
    print(f"foreman listening on {config.host}:{port}{tls}", file=sys.stderr, flush=True)
    if port_file is not None:
        write_text_atomic(port_file, f"{port}\n")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await foreman.close()


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m edgetwin.emu.crowdio.foreman", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--host", default="127.0.0.1", help="0.0.0.0: every interface")
    parser.add_argument("--port", type=port_number, default=7070)
    parser.add_argument("--token", default=os.environ.get(TOKEN_ENV), help=f"or ${TOKEN_ENV}")
    parser.add_argument("--store", type=Path, help="shared file-store folder for large payloads")
    parser.add_argument(
        "--serve-store",
        action="store_true",
        help="serve --store over HTTP to workers that do not share the folder",
    )
    parser.add_argument("--inline-max-kb", type=non_negative_float, default=INLINE_MAX_BYTES / 1024)
    parser.add_argument("--max-message-mb", type=positive_float, default=MAX_MESSAGE_BYTES / 2**20)
    add_limit_arguments(parser)
    parser.add_argument("--port-file", type=Path, help="write the bound port here")
    parser.add_argument("--heartbeat-s", type=positive_float, default=LivenessRule.heartbeat_s)
    parser.add_argument(
        "--silence-timeout-s",
        type=positive_float,
        default=LivenessRule.silence_timeout_s,
        help="a worker silent for longer is declared lost",
    )
    parser.add_argument(
        "--task-deadline-s",
        type=positive_float,
        help="a worker that has not answered a task this long after its dispatch is "
        "declared lost and the task re-dispatched (default: no deadline)",
    )
    parser.add_argument(
        "--read-timeout-s",
        type=positive_float,
        default=ForemanConfig.read_timeout_s,
        help="a client silent for longer before its submission is complete is dropped",
    )
    parser.add_argument("--tls-cert", type=Path, help="serve TLS with this certificate (PEM)")
    parser.add_argument("--tls-key", type=Path, help="the certificate's private key (PEM)")
    parser.add_argument("--parent-pid", type=positive_int, help="exit when this process is gone")
    args = parser.parse_args(argv)
    if not args.token:
        parser.error(f"--token (or ${TOKEN_ENV}) is required")
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    if args.serve_store and args.store is None:
        parser.error("--serve-store serves the --store folder: give it too")
    try:
        liveness = LivenessRule(args.heartbeat_s, args.silence_timeout_s, args.task_deadline_s)
        limits = limits_from_arguments(args)
        if args.tls_cert is not None:
            server_context(args.tls_cert, args.tls_key)  # refuse bad files before listening
    except ValueError as exc:  # TlsError is one
        parser.error(str(exc))
    if args.host in ALL_INTERFACES:
        print(
            f"foreman: warning: --host {args.host!r} listens on every interface; "
            "anyone who can reach this machine can connect",
            file=sys.stderr,
            flush=True,
        )
    config = ForemanConfig(
        token=args.token,
        host=args.host,
        port=args.port,
        store_dir=args.store,
        serve_store=args.serve_store,
        inline_max_bytes=int(args.inline_max_kb * 1024),
        max_message_bytes=int(args.max_message_mb * 2**20),
        read_timeout_s=args.read_timeout_s,
        liveness=liveness,
        limits=limits,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
    )
    if args.parent_pid is not None:
        exit_with_parent(args.parent_pid, "foreman")
    try:
        asyncio.run(serve(config, args.port_file))
    except OSError as exc:  # the address is taken or not ours, the store is not a folder
        print(f"foreman: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
