"""A directory that foreman and workers share for payloads too large to send inline.

Entries are flat file names inside the store; a name that is not a plain file name,
or that resolves outside the store (``..``, an absolute path, a symlink), is refused.
An entry is read only if it is a regular file: it is opened without following a
symlink and without waiting for a writer (a FIFO), and the opened descriptor is
checked, so nothing can be swapped in between the check and the read.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import threading
from pathlib import Path
from typing import Protocol

_ENTRY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class StoreError(Exception):
    """A file-store name that is unsafe, or an entry that is missing, not a regular file or
    too large."""


class MissingEntry(StoreError):
    """A file-store entry that is not there (deleted, or never written)."""


class PayloadStore(Protocol):
    """Where large payloads go: a shared folder (``FileStore``) or the foreman's store over
    the network (``netstore.NetStore``)."""

    def put(self, data: bytes) -> str:
        """Keep ``data`` as a new entry; its name."""
        ...

    def size(self, name: str) -> int:
        """An entry's size in bytes."""
        ...

    def get(self, name: str, max_bytes: int) -> bytes:
        """An entry's bytes; StoreError when it is missing, not a file or over ``max_bytes``."""
        ...

    def delete(self, name: str) -> None:
        """Remove an entry if it is there."""
        ...

    def close(self) -> None:
        """Let go of what the store holds open (a connection); it is not used after."""
        ...


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
        self.write(name, data)
        return name

    def write(self, name: str, data: bytes) -> None:
        """Write the entry ``name`` atomically (a store served over the network takes its
        clients' entries so)."""
        path = self.path(name)
        tmp = path.with_name(f".{name}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def size(self, name: str) -> int:
        """The size of an entry in bytes."""
        descriptor = self._open(name)
        try:
            return os.fstat(descriptor).st_size
        finally:
            os.close(descriptor)

    def get(self, name: str, max_bytes: int) -> bytes:
        """An entry's bytes; StoreError if it is missing, not a regular file or larger than
        ``max_bytes``."""
        with os.fdopen(self._open(name), "rb") as entry:
            if os.fstat(entry.fileno()).st_size > max_bytes:
                raise StoreError(f"file-store entry {name!r} is over {max_bytes} bytes")
            data = entry.read(max_bytes + 1)
        if len(data) > max_bytes:  # it grew after the check
            raise StoreError(f"file-store entry {name!r} is over {max_bytes} bytes")
        return data

    def delete(self, name: str) -> None:
        """Remove an entry if it is there."""
        self.path(name).unlink(missing_ok=True)

    def close(self) -> None:
        """Nothing to let go of: a folder holds no connection."""

    def _open(self, name: str) -> int:
        """A read-only descriptor of the regular file ``name`` (StoreError otherwise)."""
        self.path(name)  # the name is safe
        try:
            descriptor = os.open(self.root / name, _OPEN_FLAGS)
        except FileNotFoundError:
            raise MissingEntry(f"file-store entry {name!r} does not exist") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise StoreError(f"file-store entry {name!r} is a symlink, not a file") from None
            raise StoreError(f"file-store entry {name!r} cannot be read: {exc.strerror}") from None
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            os.close(descriptor)
            kind = next((k for test, k in _KINDS if test(mode)), "of no known kind")
            raise StoreError(f"file-store entry {name!r} is {kind}, not a regular file")
        return descriptor
