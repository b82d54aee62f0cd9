"""The foreman's file store served to its workers over the network.

Phones share no disk with their foreman: a payload too large to travel inline is
put into, and fetched from, the foreman's store over the phone's own link. With
``--serve-store`` the foreman serves its store folder over HTTP on a port of its
own address (``StoreServer``, in a thread of its process) and names the port in its
WELCOME; a worker started without a store folder then uses it (``NetStore``). Every
request carries the job's token; names and entries get the checks of ``FileStore``
(a plain file name inside the store, a regular file), and no body over ``max_bytes``
is sent or taken. With TLS the store speaks TLS with the foreman's certificate.
"""

from __future__ import annotations

import contextlib
import hmac
import http.client
import socket
import ssl
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

from edgetwin.emu.crowdio.filestore import FileStore, MissingEntry, StoreError
from edgetwin.errors import shown

TOKEN_HEADER = "X-Crowdio-Token"
TIMEOUT_S = 60.0  # a request whose peer sends nothing for this long fails
_Request = socket.socket | tuple[bytes, socket.socket]  # socketserver's (a datagram one's: a tuple)


class StoreServer:
    """HTTP on ``host`` (port 0: any free one) for the entries of ``store``."""

    def __init__(
        self,
        store: FileStore,
        host: str,
        token: str,
        max_bytes: int,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        handler = type(
            "BoundStoreHandler",
            (_StoreHandler,),
            {"store": store, "token": token.encode(), "max_bytes": max_bytes},
        )
        self._server = _server_on(host, handler)
        if tls is not None:  # the handshake in the request's thread, under its timeout
            self._server.socket = tls.wrap_socket(
                self._server.socket, server_side=True, do_handshake_on_connect=False
            )
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Stop serving: no new connection, and the open ones (a worker's kept one) ended."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.close_connections()
        self._server.server_close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._lock = threading.Lock()
        self._open: dict[_Request, threading.Thread] = {}  # connections being served

    def process_request(self, request: _Request, client_address: object) -> None:
        """Serve a connection in a thread of its own, known until the connection ends."""
        thread = threading.Thread(
            target=self.process_request_thread, args=(request, client_address), daemon=True
        )
        with self._lock:
            self._open[request] = thread
        thread.start()

    def shutdown_request(self, request: _Request) -> None:
        with self._lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """End every open connection, one waiting for its next request too, and its thread."""
        with self._lock:
            serving = dict(self._open)
        for request in serving:
            assert isinstance(request, socket.socket)  # a TCP server's always is
            with contextlib.suppress(OSError):  # the plain socket's: no TLS close_notify
                socket.socket.shutdown(request, socket.SHUT_RDWR)
        for thread in serving.values():
            thread.join()

    def handle_error(self, request: object, client_address: tuple[str, int]) -> None:
        """One line, not a traceback, for a client that broke off or did not speak TLS."""
        error = sys.exc_info()[1]
        print(f"file store: request from {client_address[0]}: {error}", file=sys.stderr)


class _Server6(_Server):
    address_family = socket.AF_INET6


class _DualStack(_Server6):
    """Every interface, IPv4 and IPv6 (an IPv4 client comes as a mapped address)."""

    def server_bind(self) -> None:
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()


def _server_on(host: str, handler: type[BaseHTTPRequestHandler]) -> _Server:
    """The server for a foreman's ``host``, on a free port: an IPv6 address's, an IPv4
    address's, or for ``""`` (every interface, as the foreman's own) both families."""
    if host == "" and socket.has_dualstack_ipv6():
        return _DualStack(("::", 0), handler)
    server_class = _Server6 if ":" in host else _Server
    return server_class((host, 0), handler)


class _StoreHandler(BaseHTTPRequestHandler):
    """GET, HEAD, PUT and DELETE of ``/<entry name>``; 403 without the token."""

    protocol_version = "HTTP/1.1"  # one connection for a worker's requests
    store: ClassVar[FileStore]
    token: ClassVar[bytes]
    max_bytes: ClassVar[int]
    timeout = TIMEOUT_S

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    def do_PUT(self) -> None:
        name = self._entry()
        if name is None:
            return
        length = self.headers.get("Content-Length", "")
        if not (length.isascii() and length.isdigit()):  # "²" is a digit to isdigit
            self._reply(HTTPStatus.LENGTH_REQUIRED, b"a PUT needs its Content-Length")
            return
        if int(length) > self.max_bytes:
            self.close_connection = True  # its body is not read
            too_large = _over(int(length), self.max_bytes).encode()
            self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, too_large)
            return
        data = self.rfile.read(int(length))
        if len(data) != int(length):
            self.close_connection = True
            return
        self.store.write(name, data)
        self._reply(HTTPStatus.CREATED, b"")

    def do_DELETE(self) -> None:
        name = self._entry()
        if name is not None:
            self.store.delete(name)
            self._reply(HTTPStatus.NO_CONTENT, b"")

    def _answer(self, send_body: bool) -> None:
        name = self._entry()
        if name is None:
            return
        try:
            data = self.store.get(name, self.max_bytes)
        except StoreError as exc:
            missing = isinstance(exc, MissingEntry)
            status = HTTPStatus.NOT_FOUND if missing else HTTPStatus.CONFLICT
            self._reply(status, str(exc).encode())
            return
        self._reply(HTTPStatus.OK, data, send_body)

    def _entry(self) -> str | None:
        """The entry the request names, once its token and name are good (else answered)."""
        given = self.headers.get(TOKEN_HEADER, "").encode()
        if not hmac.compare_digest(given, self.token):
            self.close_connection = True
            self._reply(HTTPStatus.FORBIDDEN, b"wrong or missing token")
            return None
        name = self.path.removeprefix("/")
        try:
            self.store.path(name)
        except StoreError as exc:
            self._reply(HTTPStatus.BAD_REQUEST, str(exc).encode())
            return None
        return name

    def _reply(self, status: HTTPStatus, body: bytes, send_body: bool = True) -> None:
        self.send_response(status)
        if self.close_connection:  # the client needs a new one for its next request
            self.send_header("Connection", "close")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: a request is not worth a line in the foreman's log."""


class NetStore:
    """A worker's view of a store served by its foreman: ``FileStore``'s calls over HTTP.

    New entries are named ``<prefix>-<counter>.z``. The size of an entry this worker
    just put or fetched is known without asking again. A failed request, or an
    answer other than the expected one, is a ``StoreError`` naming the store."""

    def __init__(
        self,
        host: str,
        port: int,
        token: str,
        prefix: str,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.where = f"the foreman's file store at {host}:{port}"
        self._host, self._port, self._tls = host, port, tls
        self._token = token
        self.prefix = prefix
        self._counter = 0
        self._sizes: dict[str, int] = {}  # of entries put or fetched here, until asked once
        self._connection: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()

    def put(self, data: bytes) -> str:
        self._counter += 1
        name = f"{self.prefix}-{self._counter}.z"
        self._request("PUT", name, HTTPStatus.CREATED, data)
        self._sizes[name] = len(data)
        return name

    def size(self, name: str) -> int:
        known = self._sizes.pop(name, None)
        if known is not None:
            return known
        status, headers, _ = self._exchange("HEAD", name, None)
        if status != HTTPStatus.OK:
            raise StoreError(f"file-store entry {name!r}: {self.where} answered {status}")
        length = self._content_length(name, headers)
        if length is None:
            raise StoreError(f"file-store entry {name!r}: {self.where} gave no size")
        return length

    def get(self, name: str, max_bytes: int) -> bytes:
        data = self._request("GET", name, HTTPStatus.OK, None, max_bytes)
        self._sizes[name] = len(data)
        return data

    def delete(self, name: str) -> None:
        self._sizes.pop(name, None)
        self._request("DELETE", name, HTTPStatus.NO_CONTENT, None)

    def _request(
        self,
        method: str,
        name: str,
        expected: HTTPStatus,
        body: bytes | None,
        max_bytes: int | None = None,
    ) -> bytes:
        status, _, data = self._exchange(method, name, body, max_bytes)
        if status != expected:
            reason = data.decode(errors="replace") or f"status {status}"
            raise StoreError(f"{method} of {name!r}: {self.where} answered: {reason}")
        return data

    def _exchange(
        self, method: str, name: str, body: bytes | None, max_bytes: int | None = None
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        """One request on the kept connection, on a new one if that had been closed."""
        with self._lock:
            try:
                try:
                    return self._once(method, name, body, max_bytes)
                except _STALE:
                    self._drop()
                    return self._once(method, name, body, max_bytes)
            except (OSError, http.client.HTTPException) as exc:
                self._drop()
                raise StoreError(f"{method} of {name!r}: {self.where}: {exc}") from None

    def _once(
        self, method: str, name: str, body: bytes | None, max_bytes: int | None
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        if self._connection is None:
            self._connection = self._open()
        try:
            self._connection.request(method, f"/{name}", body, {TOKEN_HEADER: self._token})
        except _BROKEN:
            if body is None:
                raise
            # a body the store refuses (over its limit) is not read: its answer comes first
        response = self._connection.getresponse()
        length = self._content_length(name, response.headers)
        if max_bytes is not None and length is not None and length > max_bytes:
            self._drop()
            raise StoreError(f"file-store entry {name!r}: {_over(length, max_bytes)}")
        # a HEAD's (empty) body too: till then the connection is busy; one without a length
        # is read to the limit, no further
        data = response.read() if max_bytes is None else response.read(max_bytes + 1)
        if max_bytes is not None and len(data) > max_bytes:
            self._drop()
            over = f"over the limit of {max_bytes} bytes (an answer without a length)"
            raise StoreError(f"file-store entry {name!r}: {over}")
        if response.will_close:
            self._drop()
        return response.status, response.headers, data

    def _content_length(self, name: str, headers: http.client.HTTPMessage) -> int | None:
        """An answer's Content-Length (None: it has none); StoreError when it is not a
        plain decimal number."""
        text = headers.get("Content-Length")
        if text is None:
            return None
        if not (text.isascii() and text.isdigit()):
            self._drop()
            raise StoreError(
                f"file-store entry {name!r}: {self.where} gave the length {shown(text)}"
            )
        return int(text)

    def _open(self) -> http.client.HTTPConnection:
        if self._tls is None:
            return http.client.HTTPConnection(self._host, self._port, timeout=TIMEOUT_S)
        return http.client.HTTPSConnection(
            self._host, self._port, timeout=TIMEOUT_S, context=self._tls
        )

    def close(self) -> None:
        """Close the kept connection (a worker that enrols again, or stops)."""
        with self._lock:
            self._drop()

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None


_BROKEN = (BrokenPipeError, ConnectionResetError, ssl.SSLEOFError)  # a send, once it closed
# a kept connection the server closed meanwhile (idle too long): worth one new one
_STALE = (http.client.RemoteDisconnected, *_BROKEN)


def _over(length: int, max_bytes: int) -> str:
    return f"{length} bytes is over the limit of {max_bytes} bytes"
