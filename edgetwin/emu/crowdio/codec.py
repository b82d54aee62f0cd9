"""Activation payloads: an array, zlib-compressed, described by dtype and shape.

A payload goes inline (base64) when its compressed bytes fit ``inline_max_bytes``,
else into the file store. Decoding checks every claim: the dtype is known, the
shape is within the deployment's ``Limits`` (checked from the declared dtype and
shape, before anything is inflated), and the stream inflates to exactly dtype x shape
bytes (no more: zlib's ``max_length`` stops a bomb at the expected size).
"""

from __future__ import annotations

import argparse
import base64
import math
import zlib
from dataclasses import dataclass

import numpy as np

from edgetwin.emu.crowdio.filestore import PayloadStore, StoreError
from edgetwin.emu.crowdio.options import positive_float, positive_int
from edgetwin.emu.crowdio.records import DType, Payload

ZLIB_LEVEL = 6
SUPPORTED_DTYPES: tuple[DType, ...] = ("float32", "float16", "int64", "int32")


class PayloadError(Exception):
    """A payload that does not decode to the array it describes, or is over the limits."""


@dataclass(frozen=True)
class Limits:
    """The largest model blob and decoded tensor a peer accepts (a deployment sets them).

    The defaults hold DistilBERT cut in stages (the largest stage blob, 180 MB, and
    activations of a few MB) with room to spare.
    """

    max_blob_bytes: int = 256 * 2**20
    max_tensor_elements: int = 1 << 22
    max_tensor_bytes: int = 16 * 2**20

    def __post_init__(self) -> None:
        for name in ("max_blob_bytes", "max_tensor_elements", "max_tensor_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}")

    def check_blob(self, what: str, blob_b64: str) -> None:
        """PayloadError when a base64 blob would decode to more than ``max_blob_bytes``."""
        decoded = len(blob_b64) * 3 // 4
        if decoded > self.max_blob_bytes:
            raise PayloadError(
                f"{what} of {decoded} bytes is over the limit of {self.max_blob_bytes} bytes"
            )


DEFAULT_LIMITS = Limits()


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """The command-line options that set ``Limits`` (defaults: ``DEFAULT_LIMITS``)."""
    default = DEFAULT_LIMITS
    parser.add_argument(
        "--max-blob-mb",
        type=positive_float,
        default=default.max_blob_bytes / 2**20,
        help="the largest model blob accepted",
    )
    parser.add_argument(
        "--max-tensor-mb",
        type=positive_float,
        default=default.max_tensor_bytes / 2**20,
        help="the largest decoded tensor accepted",
    )
    parser.add_argument(
        "--max-tensor-elements",
        type=positive_int,
        default=default.max_tensor_elements,
        help="the most elements a decoded tensor may have",
    )


def limits_from_arguments(args: argparse.Namespace) -> Limits:
    """The ``Limits`` the options of ``add_limit_arguments`` set (ValueError when not positive)."""
    return Limits(
        max_blob_bytes=int(args.max_blob_mb * 2**20),
        max_tensor_elements=args.max_tensor_elements,
        max_tensor_bytes=int(args.max_tensor_mb * 2**20),
    )


def raw_bytes(payload: Payload, limits: Limits = DEFAULT_LIMITS) -> int:
    """Bytes of the array a payload describes (PayloadError when over the limits)."""
    return tensor_bytes(payload.dtype, payload.shape, limits)


def tensor_bytes(dtype: DType, shape: tuple[int, ...], limits: Limits = DEFAULT_LIMITS) -> int:
    """Bytes of a ``dtype`` array of ``shape`` (PayloadError when over the limits)."""
    elements = math.prod(shape)
    if elements > limits.max_tensor_elements:
        raise PayloadError(
            f"tensor of {elements} elements is over the limit of {limits.max_tensor_elements}"
        )
    size = elements * np.dtype(dtype).itemsize
    if size > limits.max_tensor_bytes:
        raise PayloadError(
            f"tensor of {size} bytes is over the limit of {limits.max_tensor_bytes} bytes"
        )
    return size


def compressed_bytes(payload: Payload, store: PayloadStore | None) -> int:
    """Bytes of a payload's zlib stream, without reading it."""
    if payload.data_b64 is not None:
        text = payload.data_b64
        return len(text) * 3 // 4 - text[-2:].count("=")
    return _store(store).size(str(payload.ref))


def encode_array(array: np.ndarray, store: PayloadStore | None, inline_max_bytes: int) -> Payload:
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


def decode_payload(
    payload: Payload, store: PayloadStore | None, limits: Limits = DEFAULT_LIMITS
) -> np.ndarray:
    """The array a payload describes (PayloadError or StoreError when it does not hold).

    The declared size is checked against ``limits`` first, and inflating stops one
    byte past it, so no payload makes more than ``limits.max_tensor_bytes`` + 1 bytes.
    """
    expected = raw_bytes(payload, limits)
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


def _packed(payload: Payload, store: PayloadStore | None, max_bytes: int) -> bytes:
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


def _store(store: PayloadStore | None) -> PayloadStore:
    if store is None:
        raise StoreError("payload refers to a file store, and none is configured")
    return store
