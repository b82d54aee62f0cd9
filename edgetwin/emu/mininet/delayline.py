"""A delay line in userspace: hold every packet of an NFQUEUE queue for a fixed time.

``python -m edgetwin.emu.mininet.delayline --queue N --delay-ms D`` runs in a host's
network namespace, next to an iptables rule that sends the host's outgoing packets to
queue N (``edgetwin.emu.mininet.delay``). It binds the queue over raw netfilter netlink
(no binding library), asks for the packets' metadata only (no payload is copied) and
whole GSO packets (one message per TCP super-packet, not per wire packet), notes when
each arrives, and accepts every packet that has waited ``D`` ms with one batch verdict
(the kernel accepts every queued packet up to that id: the queue is FIFO and every
packet waits the same, so they leave in order). Prints ``ready`` once bound; exits when
its parent (``--parent-pid``) is gone or on SIGTERM. Imports the standard library only.
"""

from __future__ import annotations

import argparse
import errno
import os
import select
import socket
import struct
import sys
import time
from collections import deque

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_CONFIG, NFQNL_MSG_VERDICT_BATCH = 0, 2, 3
NLMSG_ERROR = 2
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_CFG_F_GSO = 4
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NF_ACCEPT = 1
QUEUE_MAXLEN = 65536  # packets the kernel may hold for us (the default, 1024, drops sooner)
RCVBUF_BYTES = 32 << 20
_PARENT_CHECK_S = 0.5
_NLMSG = struct.Struct("=IHHII")
_NLATTR = struct.Struct("=HH")


def _attr(kind: int, payload: bytes) -> bytes:
    length = _NLATTR.size + len(payload)
    return _NLATTR.pack(length, kind) + payload + b"\0" * (-length % 4)


def _message(kind: int, queue: int, attrs: bytes, flags: int, seq: int) -> bytes:
    """A netfilter-queue netlink message: header, nfgenmsg (AF_UNSPEC, v0, queue), attrs."""
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    kind = (NFNL_SUBSYS_QUEUE << 8) | kind
    return _NLMSG.pack(_NLMSG.size + len(body), kind, NLM_F_REQUEST | flags, seq, 0) + body


def config_messages(queue: int) -> list[bytes]:
    """Bind ``queue``, copy metadata only, let it hold ``QUEUE_MAXLEN``, keep GSO whole."""
    return [
        _message(NFQNL_MSG_CONFIG, queue, _attr(NFQA_CFG_CMD, bytes([NFQNL_CFG_CMD_BIND, 0, 0, 0])),
                 NLM_F_ACK, 1),
        _message(NFQNL_MSG_CONFIG, queue,
                 _attr(NFQA_CFG_PARAMS, struct.pack(">IB", 0, NFQNL_COPY_META))
                 + _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack(">I", QUEUE_MAXLEN))
                 + _attr(NFQA_CFG_MASK, struct.pack(">I", NFQA_CFG_F_GSO))
                 + _attr(NFQA_CFG_FLAGS, struct.pack(">I", NFQA_CFG_F_GSO)), NLM_F_ACK, 2),
    ]  # fmt: skip


def batch_verdict(queue: int, packet_id: int) -> bytes:
    """Accept every packet of ``queue`` up to ``packet_id``."""
    attrs = _attr(NFQA_VERDICT_HDR, struct.pack(">II", NF_ACCEPT, packet_id))
    return _message(NFQNL_MSG_VERDICT_BATCH, queue, attrs, 0, 0)


def packet_ids(datagram: bytes) -> list[int]:
    """The packet ids of the queue's packet messages in one netlink datagram; ``OSError``
    for an error message (an ack with error 0 is skipped)."""
    ids, offset = [], 0
    while offset + _NLMSG.size <= len(datagram):
        length, kind, _, _, _ = _NLMSG.unpack_from(datagram, offset)
        if length < _NLMSG.size:
            break
        if kind == NLMSG_ERROR:
            code = struct.unpack_from("=i", datagram, offset + _NLMSG.size)[0]
            if code != 0:
                raise OSError(-code, os.strerror(-code))
        elif kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            at = offset + _NLMSG.size + 4  # past nfgenmsg
            while at + _NLATTR.size <= offset + length:
                attr_len, attr_kind = _NLATTR.unpack_from(datagram, at)
                if attr_len < _NLATTR.size:
                    break
                if attr_kind & 0x3FFF == NFQA_PACKET_HDR:
                    ids.append(struct.unpack_from(">I", datagram, at + _NLATTR.size)[0])
                at += attr_len + (-attr_len % 4)
        offset += length + (-length % 4)
    return ids


def _open(queue: int) -> socket.socket:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, 33, RCVBUF_BYTES)  # SO_RCVBUFFORCE (root)
    sock.bind((0, 0))
    for message in config_messages(queue):
        sock.send(message)
        packet_ids(sock.recv(65536))  # the ack; raises on an error
    sock.setblocking(False)
    return sock


def run(queue: int, delay_s: float, parent_pid: int | None) -> None:
    """Hold every packet of ``queue`` for ``delay_s``, until the parent is gone."""
    sock = _open(queue)
    print("ready", flush=True)
    waiting: deque[tuple[float, int]] = deque()  # (due, id), in arrival order
    next_parent_check = time.monotonic() + _PARENT_CHECK_S
    while True:
        now = time.monotonic()
        if parent_pid is not None and now >= next_parent_check:
            if not _alive(parent_pid):
                return
            next_parent_check = now + _PARENT_CHECK_S
        due = waiting[0][0] if waiting else next_parent_check
        readable, _, _ = select.select([sock], [], [], max(0.0, min(due, next_parent_check) - now))
        if readable:
            _drain(sock, waiting, delay_s)
        now = time.monotonic()
        last = None
        while waiting and waiting[0][0] <= now:
            last = waiting.popleft()[1]
        if last is not None:
            sock.send(batch_verdict(queue, last))


def _drain(sock: socket.socket, waiting: deque[tuple[float, int]], delay_s: float) -> None:
    """Note every packet the kernel has queued for us, each due ``delay_s`` from now."""
    while True:
        try:
            datagram = sock.recv(65536)
        except BlockingIOError:
            return
        except OSError as exc:
            if exc.errno == errno.ENOBUFS:  # the kernel dropped messages: nothing to hold
                continue
            raise
        due = time.monotonic() + delay_s
        waiting.extend((due, packet_id) for packet_id in packet_ids(datagram))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgetwin.emu.mininet.delayline")
    parser.add_argument("--queue", type=int, required=True)
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--parent-pid", type=int)
    args = parser.parse_args(argv)
    try:
        run(args.queue, args.delay_ms / 1e3, args.parent_pid)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        print(f"delayline: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
