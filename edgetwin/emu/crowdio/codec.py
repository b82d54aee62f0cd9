"""Activation payloads: an array, zlib-compressed, described by dtype and shape.

A payload goes inline (base64) when its compressed bytes fit ``inline_max_bytes``,
else into the file store. Decoding checks every claim: the dtype is known, the
shape is bounded, and the stream inflates to exactly dtype x shape bytes (no more:
a zlib bomb stops at the expected size).
"""

from __future__ import annotations

import base64
import math
import zlib

import numpy as np

from edgetwin.emu.crowdio.filestore import FileStore, StoreError
from edgetwin.emu.crowdio.records import DType, Payload

MAX_ELEMENTS = 1 << 28
ZLIB_LEVEL = 6
SUPPORTED_DTYPES: tuple[DType, ...] = ("float32", "float16", "int64", "int32")


class PayloadError(Exception):
    """A payload that does not decode to the array it describes."""


def raw_bytes(payload: Payload) -> int:
    """Bytes of the array a payload describes (PayloadError when it is too large)."""
    elements = math.prod(payload.shape)
    if elements > MAX_ELEMENTS:
        raise PayloadError(f"payload of {elements} elements is over {MAX_ELEMENTS}")
    return elements * np.dtype(payload.dtype).itemsize


def compressed_bytes(payload: Payload, store: FileStore | None) -> int:
    """Bytes of a payload's zlib stream, without reading it."""
    if payload.data_b64 is not None:
        text = payload.data_b64
        return len(text) * 3 // 4 - text[-2:].count("=")
    return _store(store).size(str(payload.ref))


def encode_array(array: np.ndarray, store: FileStore | None, inline_max_bytes: int) -> Payload:
    """An array as a payload: inline when small enough or when there is no store."""
    dtype = next((d for d in SUPPORTED_DTYPES if d == array.dtype.name), None)
    if dtype is None:
        raise PayloadError(f"cannot send arrays of dtype {array.dtype.name}")
    packed = zlib.compress(np.ascontiguousarray(array).tobytes(), ZLIB_LEVEL)
    shape = tuple(int(n) for n in array.shape)
    if store is None or len(packed) <= inline_max_bytes:
        inline = base64.b64encode(packed).decode("ascii")
        return Payload(dtype=dtype, shape=shape, data_b64=inline)
    return Payload(dtype=dtype, shape=shape, ref=store.put(packed))


def decode_payload(payload: Payload, store: FileStore | None) -> np.ndarray:
    """The array a payload describes (PayloadError or StoreError when it does not hold)."""
    expected = raw_bytes(payload)
    packed = _packed(payload, store, zlib_bound(expected))
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(packed, expected + 1)
    except zlib.error as exc:
        raise PayloadError(f"payload does not inflate: {exc}") from None
    if len(data) != expected or not inflater.eof or inflater.unconsumed_tail:
        raise PayloadError(f"payload inflates to other than {expected} bytes of {payload.dtype}")
    return np.frombuffer(data, dtype=payload.dtype).reshape(payload.shape)


def zlib_bound(raw: int) -> int:
    """The most bytes zlib can take to store ``raw`` bytes (stored blocks, header, checksum)."""
    return raw + raw // 1000 + 5 * (raw // 16000 + 1) + 64


def _packed(payload: Payload, store: FileStore | None, max_bytes: int) -> bytes:
    if payload.data_b64 is None:
        return _store(store).get(str(payload.ref), max_bytes)
    if len(payload.data_b64) > 4 * (max_bytes // 3 + 1):
        raise PayloadError("inline payload is larger than its shape allows")
    try:
        return decode_base64(payload.data_b64)
    except PayloadError:
        raise PayloadError("inline payload is not valid base64") from None


def decode_base64(text: str) -> bytes:
    """Strict base64 text as bytes; PayloadError when it is not (a non-ASCII letter too)."""
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error, or the ValueError of a non-ASCII letter
        raise PayloadError("not valid base64") from None


def _store(store: FileStore | None) -> FileStore:
    if store is None:
        raise StoreError("payload refers to a file store, and none is configured")
    return store
