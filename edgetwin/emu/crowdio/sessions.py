"""The worker's model cache on disk and its single ONNX Runtime session.

The cache keeps stage blobs by SHA-256, checked when written and when read back
(a corrupt file is deleted, not loaded). The session slot holds at most one stage:
loading another while one is resident is refused, so the foreman must send
UNLOAD_MODEL first (single-partition residency).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from edgetwin.errors import shown

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class ModelError(Exception):
    """A stage that cannot be cached or loaded (checksum, missing blob, residency)."""


class ModelCache:
    """Stage blobs under ``root`` as ``<sha256>.onnx``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def checksums(self) -> list[str]:
        """SHA-256 of every blob on disk."""
        return sorted(p.stem for p in self.root.glob("*.onnx") if _SHA256.fullmatch(p.stem))

    def put(self, sha256: str, blob: bytes) -> None:
        """Store a downloaded blob; ModelError when it does not match its checksum."""
        if hashlib.sha256(blob).hexdigest() != sha256:
            raise ModelError("checksum mismatch: the blob's SHA-256 is not the one announced")
        path = self._path(sha256)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_bytes(blob)
        os.replace(tmp, path)

    def get(self, sha256: str) -> bytes:
        """A cached blob, checked; ModelError when missing or corrupt (then deleted)."""
        path = self._path(sha256)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            raise ModelError(f"stage {sha256[:12]} is not in the cache") from None
        if hashlib.sha256(blob).hexdigest() != sha256:
            path.unlink(missing_ok=True)
            raise ModelError(f"cached stage {sha256[:12]} is corrupt; deleted")
        return blob

    def _path(self, sha256: str) -> Path:
        if not _SHA256.fullmatch(sha256):
            raise ModelError(f"{shown(sha256)} is not a SHA-256")
        return self.root / f"{sha256}.onnx"


@dataclass(frozen=True)
class Resident:
    """The stage in the session slot."""

    stage: str
    sha256: str


class SessionSlot:
    """At most one ONNX Runtime session, on the CPU provider."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.resident: Resident | None = None
        self._session: Any = None

    def load(self, stage: str, sha256: str, blob: bytes) -> None:
        """Make ``stage`` resident; ModelError if another stage still is."""
        if self.resident is not None:
            raise ModelError(f"{self.resident.stage} is resident: unload it first")
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        try:
            session = ort.InferenceSession(blob, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # ONNX Runtime raises its own exception types
            raise ModelError(f"cannot load {stage}: {exc}") from None
        self._session = session
        self.resident = Resident(stage, sha256)

    def unload(self) -> Resident:
        """Drop the session (its memory goes with it); ModelError when the slot is empty."""
        if self.resident is None:
            raise ModelError("no stage is resident")
        resident, self.resident, self._session = self.resident, None, None
        return resident

    def run(self, array: np.ndarray) -> np.ndarray:
        """The resident stage's output for one input."""
        if self._session is None:
            raise ModelError("no stage is resident")
        name = self._session.get_inputs()[0].name
        try:
            (output,) = self._session.run(None, {name: array})
        except Exception as exc:  # a wrong dtype or shape surfaces here
            raise ModelError(f"inference failed: {exc}") from None
        return np.asarray(output)
