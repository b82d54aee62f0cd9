"""Length-prefixed frames over a stream: a 4-byte big-endian length, then that many bytes.

A frame's length is checked against the reader's limit before its body is read, so
an oversized frame is refused without buffering it. A reader may give an idle timeout:
a peer that sends nothing for that long (between frames or within one) is ``PeerSilent``.
"""

from __future__ import annotations

import asyncio

from edgetwin.number_text import exact_text

HEADER_BYTES = 4
MAX_FRAME_LIMIT_BYTES = 2 ** (8 * HEADER_BYTES) - 1
CHUNK_BYTES = 1 << 20  # a body is read in chunks this large when there is an idle timeout


class FrameError(Exception):
    """A frame that breaks the framing rules (empty or over the limit)."""


class PeerSilent(ConnectionError):
    """The peer sent nothing for longer than the reader's idle timeout."""

    def __init__(self, idle_timeout_s: float) -> None:
        super().__init__(f"nothing received for {exact_text(idle_timeout_s)} s")
        self.idle_timeout_s = idle_timeout_s


async def read_frame_length(
    reader: asyncio.StreamReader, max_bytes: int, idle_timeout_s: float | None = None
) -> int:
    """The length of the next frame; FrameError when it is zero or over ``max_bytes``.

    Raises ``asyncio.IncompleteReadError`` when the peer closes first, PeerSilent when
    it sends nothing for ``idle_timeout_s`` (None: wait for ever).
    """
    header = await read_exactly(reader, HEADER_BYTES, idle_timeout_s)
    length = int.from_bytes(header, "big")
    if length == 0:
        raise FrameError("empty frame")
    if length > max_bytes:
        raise FrameError(f"frame of {length} bytes is over the limit of {max_bytes} bytes")
    return length


async def read_exactly(
    reader: asyncio.StreamReader, length: int, idle_timeout_s: float | None = None
) -> bytes:
    """``length`` bytes; PeerSilent when no byte comes for ``idle_timeout_s`` (None: no limit)."""
    if idle_timeout_s is None:
        return await reader.readexactly(length)
    chunks: list[bytes] = []
    left = length
    while left > 0:
        try:
            chunk = await asyncio.wait_for(reader.read(min(left, CHUNK_BYTES)), idle_timeout_s)
        except TimeoutError:
            raise PeerSilent(idle_timeout_s) from None
        if not chunk:
            raise asyncio.IncompleteReadError(b"".join(chunks), length)
        chunks.append(chunk)
        left -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def read_frame(
    reader: asyncio.StreamReader, max_bytes: int, idle_timeout_s: float | None = None
) -> bytes:
    """The next frame's body (see ``read_frame_length`` for the errors)."""
    length = await read_frame_length(reader, max_bytes, idle_timeout_s)
    return await read_exactly(reader, length, idle_timeout_s)


async def write_frame(writer: asyncio.StreamWriter, body: bytes) -> None:
    """Send one frame and wait until the transport has taken it."""
    if not 0 < len(body) <= MAX_FRAME_LIMIT_BYTES:
        raise FrameError(f"cannot frame {len(body)} bytes")
    writer.write(len(body).to_bytes(HEADER_BYTES, "big"))
    writer.write(body)
    await writer.drain()
