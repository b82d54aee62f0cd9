"""The foreman's file store over the network: what a worker that shares no disk with its
foreman uses for payloads too large to send inline (a phone, an emulated host).

A real HTTP server in a thread and a real client; then a whole job on loopback whose
workers have no store folder, every payload going through the served store.
"""

from __future__ import annotations

import asyncio
import http.client
import re
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path

import numpy as np
import pytest
from test_crowdio_limits import _self_signed

from edgetwin.emu.crowdio.codec import decode_payload, encode_array
from edgetwin.emu.crowdio.filestore import FileStore, StoreError
from edgetwin.emu.crowdio.foreman import Foreman, ForemanConfig
from edgetwin.emu.crowdio.launcher import LocalPlacement, WorkerSpec, run_pipeline
from edgetwin.emu.crowdio.model import TINY, distilbert_job, reference_logits
from edgetwin.emu.crowdio.netstore import TOKEN_HEADER, NetStore, StoreServer, _StoreHandler
from edgetwin.emu.crowdio.tls import client_context, server_context

TOKEN = "t" * 32
MAX_BYTES = 1 << 16


def _client(server: StoreServer, prefix: str = "w") -> NetStore:
    """A worker's client of the store on loopback, with the job's token."""
    return NetStore("127.0.0.1", server.port, TOKEN, prefix)


@contextmanager
def serving(
    store: FileStore,
    host: str = "127.0.0.1",
    tls: ssl.SSLContext | None = None,
    max_bytes: int = MAX_BYTES,
) -> Iterator[StoreServer]:
    """``store`` served on ``host`` in a thread, as the foreman serves it; closed after."""
    server = StoreServer(store, host, TOKEN, max_bytes, tls)
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[FileStore, StoreServer]]:
    store = FileStore(tmp_path / "store", "foreman")
    with serving(store) as server:
        yield store, server


@pytest.mark.timeout(30)
def test_a_worker_puts_fetches_and_deletes_entries_of_the_foremans_store(
    served: tuple[FileStore, StoreServer],
) -> None:
    store, server = served
    client = _client(server, "w1-7")
    name = client.put(b"payload bytes")
    assert name == "w1-7-1.z"
    assert (store.root / name).read_bytes() == b"payload bytes"  # on the foreman's disk
    store.write("foreman-1.z", b"x" * 1000)
    assert client.get("foreman-1.z", MAX_BYTES) == b"x" * 1000
    assert client.size("foreman-1.z") == 1000
    assert _client(server, "w2").size("foreman-1.z") == 1000  # HEAD
    client.delete(name)
    assert not (store.root / name).exists()
    with pytest.raises(StoreError, match=r"'w1-7-1\.z' does not exist"):
        client.get(name, MAX_BYTES)


@pytest.mark.timeout(30)
def test_a_client_that_asked_an_entrys_size_carries_on_on_its_connection(
    served: tuple[FileStore, StoreServer],
) -> None:
    store, server = served
    store.write("foreman-1.z", b"x" * 1000)
    client = _client(server, "w")
    assert client.size("foreman-1.z") == 1000  # a HEAD
    assert client.get("foreman-1.z", MAX_BYTES) == b"x" * 1000


@pytest.mark.timeout(30)
def test_an_array_goes_through_the_served_store_and_comes_back_the_same(
    served: tuple[FileStore, StoreServer],
) -> None:
    _, server = served
    client = _client(server, "w1")
    array = np.arange(4096, dtype=np.float32).reshape(1, 64, 64)
    payload = encode_array(array, client, inline_max_bytes=0)
    assert payload.ref is not None and payload.data_b64 is None
    np.testing.assert_array_equal(decode_payload(payload, client), array)


@pytest.mark.timeout(30)
def test_the_store_refuses_a_wrong_token_an_unsafe_name_and_an_oversized_body(
    served: tuple[FileStore, StoreServer],
) -> None:
    store, server = served
    store.write("entry.z", b"secret")
    with pytest.raises(StoreError, match="wrong or missing token"):
        NetStore("127.0.0.1", server.port, "u" * 32, "w").get("entry.z", MAX_BYTES)
    client = _client(server, "w")
    with pytest.raises(StoreError, match="is not a plain file name"):
        client.get("..%2Fetc", MAX_BYTES)
    with pytest.raises(StoreError, match="over the limit of 65536 bytes"):
        client.put(b"x" * (MAX_BYTES + 1))
    assert sorted(p.name for p in store.root.iterdir()) == ["entry.z"]  # nothing written
    with pytest.raises(StoreError, match="over the limit of 3 bytes"):
        client.get("entry.z", 3)  # the client's own limit, from the size announced
    assert client.get("entry.z", MAX_BYTES) == b"secret"  # the client carries on


@pytest.mark.timeout(30)
def test_a_body_far_over_the_limit_is_refused_with_the_stores_reason(
    served: tuple[FileStore, StoreServer],
) -> None:
    store, server = served
    client = _client(server, "w")
    with pytest.raises(StoreError, match="8388608 bytes is over the limit of 65536 bytes"):
        client.put(b"x" * (8 << 20))  # the store stops reading it: the client's send breaks
    assert list(store.root.iterdir()) == []
    assert client.get(client.put(b"small"), MAX_BYTES) == b"small"


@pytest.mark.timeout(60)
def test_a_tls_client_carries_on_after_a_body_far_over_the_limit(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    store = FileStore(tmp_path / "store", "foreman")
    with serving(store, tls=server_context(cert, key)) as server:
        client = NetStore("127.0.0.1", server.port, TOKEN, "w", client_context(cert))
        with pytest.raises(StoreError, match="over the limit of 65536 bytes"):
            client.put(b"x" * (8 << 20))  # its send broke off: that connection is done
        assert client.get(client.put(b"y" * 60000), MAX_BYTES) == b"y" * 60000


@pytest.mark.timeout(30)
def test_a_request_without_the_token_is_forbidden(served: tuple[FileStore, StoreServer]) -> None:
    store, server = served
    store.write("entry.z", b"secret")
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("GET", "/entry.z")
    response = connection.getresponse()
    assert response.status == 403 and b"secret" not in response.read()
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("GET", "/entry.z", headers={TOKEN_HEADER: TOKEN})
    assert connection.getresponse().read() == b"secret"


@pytest.mark.timeout(60)
def test_the_store_speaks_tls_with_the_foremans_certificate(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    cert, key = _self_signed(tmp_path)
    store = FileStore(tmp_path / "store", "foreman")
    with serving(store, tls=server_context(cert, key)) as server:
        with socket.create_connection(("127.0.0.1", server.port)):  # says nothing at all
            client = NetStore("127.0.0.1", server.port, TOKEN, "w", client_context(cert))
            # served meanwhile: a handshake waits in its own request's thread, not in accept
            assert client.get(client.put(b"over tls"), MAX_BYTES) == b"over tls"
        with pytest.raises(StoreError, match=r"the foreman's file store at 127\.0\.0\.1"):
            _client(server, "w").put(b"plain")  # not spoken
    logged = capfd.readouterr().err
    assert "file store: request from 127.0.0.1" in logged and "Traceback" not in logged


@pytest.mark.timeout(30)
def test_a_tls_connection_the_store_closed_when_idle_is_opened_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_StoreHandler, "timeout", 0.2)  # the store drops an idle connection
    cert, key = _self_signed(tmp_path)
    store = FileStore(tmp_path / "store", "foreman")
    with serving(store, tls=server_context(cert, key), max_bytes=1 << 20) as server:
        threads = threading.active_count()
        client = NetStore("127.0.0.1", server.port, TOKEN, "w", client_context(cert))
        client.put(b"first")
        while threading.active_count() > threads:  # until the store has dropped it
            time.sleep(0.05)
        data = bytes(range(256)) * 1000
        assert client.get(client.put(data), 1 << 20) == data


@pytest.mark.timeout(120)
def test_workers_without_a_store_folder_move_every_payload_through_the_served_store() -> None:
    job = distilbert_job(TINY, inputs=3, stages=3, seed=0)
    workers = [WorkerSpec(f"worker-{i}") for i in range(2)]
    placement = LocalPlacement(store_over_network=True)
    summary = run_pipeline(job, workers, placement, inline_max_bytes=0, timeout_s=60)
    np.testing.assert_allclose(
        np.array(summary.logits), reference_logits(TINY, job.seed, job.inputs), atol=1e-5
    )
    # every input and result went by reference, over HTTP: its time is the store's
    assert all(t.report.store_ms > 0 for t in summary.tasks)
    assert all(t.report.bytes_in > 0 and t.report.bytes_out > 0 for t in summary.tasks)


@pytest.mark.timeout(30)
def test_a_foreman_on_an_ipv6_address_serves_its_store_there(tmp_path: Path) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    store = FileStore(tmp_path / "store", "foreman")
    with ExitStack() as stack:
        try:
            server = stack.enter_context(serving(store, "::1"))
        except OSError as exc:
            pytest.skip(f"no IPv6 loopback: {exc}")
        client = NetStore("::1", server.port, TOKEN, "w")
        assert client.get(client.put(b"over v6"), MAX_BYTES) == b"over v6"


@pytest.mark.timeout(30)
def test_a_foreman_on_every_interface_serves_its_store_over_ipv4_and_ipv6(tmp_path: Path) -> None:
    """--host "": the foreman listens on both families, and so does its store (it served
    IPv4 alone)."""
    if not socket.has_dualstack_ipv6():
        pytest.skip("no dual-stack IPv6 here")
    with serving(FileStore(tmp_path / "store", "foreman"), "") as server:
        for address in ("127.0.0.1", "::1"):
            client = NetStore(address, server.port, TOKEN, "w")
            assert client.get(client.put(address.encode()), MAX_BYTES) == address.encode()


@pytest.mark.timeout(30)
def test_a_closed_foreman_leaves_no_store_thread_and_serves_no_kept_connection(
    tmp_path: Path,
) -> None:
    before = set(threading.enumerate())

    async def scenario() -> NetStore:
        config = ForemanConfig(token=TOKEN, store_dir=tmp_path / "store", serve_store=True)
        foreman = Foreman(config)
        await foreman.start()
        assert foreman.store_server is not None
        client = NetStore("127.0.0.1", foreman.store_server.port, TOKEN, "w")
        await asyncio.to_thread(client.put, b"payload")  # its connection is kept
        await foreman.close()
        return client

    client = asyncio.run(scenario())
    assert set(threading.enumerate()) == before  # the kept connection's thread ended too
    with pytest.raises(StoreError, match="refused"):
        client.get("w-1.z", MAX_BYTES)  # not served on the connection it had kept


@pytest.mark.timeout(30)
def test_a_client_that_closes_ends_its_connection_to_the_store(
    served: tuple[FileStore, StoreServer],
) -> None:
    """A worker that enrols again or stops closes its store connection: the store's thread
    for it ends then, not after its idle timeout (60 s)."""
    _, server = served
    serving = threading.active_count()
    client = _client(server, "w")
    client.put(b"kept")
    assert threading.active_count() == serving + 1  # the store serves the kept connection
    client.close()
    while threading.active_count() > serving:  # within the test's limit, not 60 s
        time.sleep(0.05)


@pytest.mark.timeout(30)
def test_a_content_length_that_is_not_ascii_digits_is_refused(
    served: tuple[FileStore, StoreServer],
) -> None:
    store, server = served
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.putrequest("PUT", "/entry.z")
    connection.putheader(TOKEN_HEADER, TOKEN)
    connection.putheader("Content-Length", "\N{SUPERSCRIPT TWO}")  # a digit to str.isdigit
    connection.endheaders()
    assert connection.getresponse().status == 411
    assert not (store.root / "entry.z").exists()


def _answering(answer: bytes) -> int:
    """The port of a fake store that reads one request, sends ``answer`` and closes."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with listener, listener.accept()[0] as connection, suppress(OSError):
            connection.recv(1 << 16)
            connection.sendall(answer)  # a client that read enough may have closed

    threading.Thread(target=serve, daemon=True).start()
    return int(listener.getsockname()[1])


OK = b"HTTP/1.1 200 OK\r\n"


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("call", "answer", "problem"),
    [
        ("get", OK + b"Content-Length: abc\r\n\r\nxx", "gave the length 'abc'"),
        ("size", OK + b"Content-Length: -7\r\n\r\n", "gave the length '-7'"),
        ("size", OK + b"Connection: close\r\n\r\n", "gave no size"),
        (  # read to the limit, not to the end: 8 MiB for a 1 KiB limit
            "get",
            OK + b"Connection: close\r\n\r\n" + bytes(8 << 20),
            "over the limit of 1024 bytes (an answer without a length)",
        ),
    ],
    ids=["get-not-a-number", "size-negative", "size-none", "get-without-length"],
)
def test_a_worker_refuses_a_store_answer_of_no_plain_length(
    call: str, answer: bytes, problem: str
) -> None:
    """A store (a fake foreman's) that answers with a bad or no Content-Length is a StoreError:
    the task fails, the worker carries on; it was a ValueError (the worker died) or a body
    read whole past the worker's limit."""
    store = NetStore("127.0.0.1", _answering(answer), TOKEN, "w")
    with pytest.raises(StoreError, match=re.escape(problem)):
        store.get("a.z", 1024) if call == "get" else store.size("a.z")
    store.close()
