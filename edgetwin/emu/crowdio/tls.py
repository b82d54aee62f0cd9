"""Optional TLS for CROWDio connections (the standard library's ``ssl``).

The foreman serves with a certificate and its key; workers and submitters check it
against a CA file (a self-signed certificate is its own CA) and the foreman's host
name or IP address. Without them, frames, the token included, travel in the clear.
"""

from __future__ import annotations

import ssl
from pathlib import Path


class TlsError(ValueError):
    """A certificate, key or CA file that cannot be used (the file is named)."""


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    """The foreman's context: TLS 1.2 or later with ``cert`` and ``key`` (PEM)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"{cert} / {key}: cannot load the certificate and key: {exc}") from None
    return context


def client_context(ca: Path) -> ssl.SSLContext:
    """A worker's or submitter's context: the foreman's certificate must chain to ``ca``."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_verify_locations(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise TlsError(f"{ca}: cannot load the CA certificate: {exc}") from None
    return context
