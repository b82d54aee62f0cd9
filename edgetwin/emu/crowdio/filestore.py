"""A directory that foreman and workers share for payloads too large to send inline.

Entries are flat file names inside the store; a name that is not a plain file name,
or that resolves outside the store (``..``, an absolute path, a symlink), is refused.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_ENTRY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class StoreError(Exception):
    """A file-store name that is unsafe, or an entry that is missing or too large."""


class FileStore:
    """Payload files under ``root``; new names are ``<prefix>-<counter>.z``."""

    def __init__(self, root: Path, prefix: str) -> None:
        self.root = root.resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix
        self._counter = 0

    def path(self, name: str) -> Path:
        """The path of an entry; StoreError if the name could leave the store."""
        if not _ENTRY_NAME.fullmatch(name) or ".." in name:
            raise StoreError(f"file-store reference {name!r} is not a plain file name")
        path = (self.root / name).resolve()
        if path.parent != self.root:
            raise StoreError(f"file-store reference {name!r} escapes the store")
        return path

    def put(self, data: bytes) -> str:
        """Write a new entry atomically and return its name."""
        self._counter += 1
        name = f"{self.prefix}-{self._counter}.z"
        path = self.path(name)
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return name

    def size(self, name: str) -> int:
        """The size of an entry in bytes."""
        try:
            return self.path(name).stat().st_size
        except FileNotFoundError:
            raise StoreError(f"file-store entry {name!r} does not exist") from None

    def get(self, name: str, max_bytes: int) -> bytes:
        """An entry's bytes; StoreError if it is missing or larger than ``max_bytes``."""
        if self.size(name) > max_bytes:
            raise StoreError(f"file-store entry {name!r} is over {max_bytes} bytes")
        return self.path(name).read_bytes()

    def delete(self, name: str) -> None:
        """Remove an entry if it is there."""
        self.path(name).unlink(missing_ok=True)
