"""Length-prefixed frames over a stream: a 4-byte big-endian length, then that many bytes.

A frame's length is checked against the reader's limit before its body is read, so
an oversized frame is refused without buffering it.
"""

from __future__ import annotations

import asyncio

HEADER_BYTES = 4
MAX_FRAME_LIMIT_BYTES = 2 ** (8 * HEADER_BYTES) - 1


class FrameError(Exception):
    """A frame that breaks the framing rules (empty or over the limit)."""


async def read_frame_length(reader: asyncio.StreamReader, max_bytes: int) -> int:
    """The length of the next frame; FrameError when it is zero or over ``max_bytes``.

    Raises ``asyncio.IncompleteReadError`` when the peer closes first.
    """
    length = int.from_bytes(await reader.readexactly(HEADER_BYTES), "big")
    if length == 0:
        raise FrameError("empty frame")
    if length > max_bytes:
        raise FrameError(f"frame of {length} bytes is over the limit of {max_bytes} bytes")
    return length


async def read_frame(reader: asyncio.StreamReader, max_bytes: int) -> bytes:
    """The next frame's body (see ``read_frame_length`` for the errors)."""
    length = await read_frame_length(reader, max_bytes)
    return await reader.readexactly(length)


async def write_frame(writer: asyncio.StreamWriter, body: bytes) -> None:
    """Send one frame and wait until the transport has taken it."""
    if not 0 < len(body) <= MAX_FRAME_LIMIT_BYTES:
        raise FrameError(f"cannot frame {len(body)} bytes")
    writer.write(len(body).to_bytes(HEADER_BYTES, "big"))
    writer.write(body)
    await writer.drain()
