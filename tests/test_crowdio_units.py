"""CROWDio building blocks without processes: codec, file store, DAG, SDK, tasks, placement."""

from __future__ import annotations

import base64
import hashlib
import zlib
from pathlib import Path

import numpy as np
import pytest

from edgetwin.emu.crowdio.codec import (
    PayloadError,
    compressed_bytes,
    decode_payload,
    encode_array,
    raw_bytes,
)
from edgetwin.emu.crowdio.dag import Dag, GraphError, check_linear, linear_dag, topological_order
from edgetwin.emu.crowdio.filestore import FileStore, StoreError
from edgetwin.emu.crowdio.model import TINY, export_stages
from edgetwin.emu.crowdio.records import Payload, TaskReport, WorkerStatus
from edgetwin.emu.crowdio.sessions import ModelCache, ModelError, SessionSlot
from edgetwin.emu.crowdio.telemetry import BatteryMeter, PowerModel, SessionMemory
from edgetwin.emu.crowdio.worker import Worker, WorkerConfig

REPORT = TaskReport(
    load_kind="resident",
    load_ms=0,
    decode_ms=0,
    compute_ms=0,
    encode_ms=0,
    bytes_in=0,
    bytes_out=0,
)
STATUS = WorkerStatus(
    rss_mb=50, peak_session_mb=0, free_ram_mb=1000, battery_mah=0, energy_j=0, battery_pct=90
)


@pytest.fixture(scope="module")
def tiny_stages() -> list[bytes]:
    return [stage.blob for stage in export_stages(TINY, 3, seed=0)]


def _inline(value: float = 0.0) -> Payload:
    return encode_array(np.full((1, 4), value, dtype=np.float32), None, 0)


# --- payload codec and file store ---------------------------------------------------------


def test_payload_round_trips_inline_and_through_the_store(tmp_path: Path) -> None:
    store = FileStore(tmp_path, "w")
    hidden = np.random.default_rng(0).standard_normal((1, 16, 32)).astype(np.float32)
    inline = encode_array(hidden, store, inline_max_bytes=1 << 20)
    stored = encode_array(hidden, store, inline_max_bytes=16)
    assert inline.data_b64 is not None and inline.ref is None
    assert stored.ref == "w-1.z" and (tmp_path / "w-1.z").is_file()
    for payload in (inline, stored):
        assert payload.dtype == "float32" and payload.shape == (1, 16, 32)
        np.testing.assert_array_equal(decode_payload(payload, store), hidden)
        assert raw_bytes(payload) == hidden.nbytes
    assert compressed_bytes(inline, store) == compressed_bytes(stored, store)
    assert compressed_bytes(stored, store) == len(zlib.compress(hidden.tobytes(), 6))


def test_payload_that_inflates_beyond_its_shape_is_refused() -> None:
    bomb = base64.b64encode(zlib.compress(bytes(10_000_000))).decode()  # 10 MB in ~13 kB
    with pytest.raises(PayloadError, match="larger than its shape allows"):
        decode_payload(Payload(dtype="float32", shape=(1, 4), data_b64=bomb), None)
    with pytest.raises(PayloadError, match="other than 16384 bytes"):  # stops at 16 kB + 1
        decode_payload(Payload(dtype="float32", shape=(1, 4096), data_b64=bomb), None)
    short = Payload(
        dtype="float32", shape=(1, 4), data_b64=base64.b64encode(zlib.compress(bytes(8))).decode()
    )
    with pytest.raises(PayloadError, match="other than 16 bytes"):
        decode_payload(short, None)
    with pytest.raises(PayloadError, match="not valid base64"):
        decode_payload(Payload(dtype="int64", shape=(1,), data_b64="!!!"), None)
    with pytest.raises(PayloadError, match="elements"):
        raw_bytes(Payload(dtype="int64", shape=(1 << 20, 1 << 20), data_b64=""))


def test_payload_needs_exactly_one_of_inline_and_reference() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Payload(dtype="float32", shape=(1,), data_b64="AA==", ref="x")
    with pytest.raises(ValueError, match="exactly one"):
        Payload(dtype="float32", shape=(1,))


@pytest.mark.parametrize(
    "name", ["../outside.z", "..", "/etc/passwd", "sub/entry.z", "a..b", ".hidden", "", "x\x00"]
)
def test_file_store_refuses_names_that_could_leave_it(tmp_path: Path, name: str) -> None:
    store = FileStore(tmp_path / "store", "w")
    with pytest.raises(StoreError):
        store.get(name, 1 << 20)


def test_file_store_refuses_a_symlink_out_of_the_store(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("not for workers")
    store = FileStore(tmp_path / "store", "w")
    (store.root / "link.z").symlink_to(secret)
    with pytest.raises(StoreError, match="escapes"):
        store.get("link.z", 1 << 20)
    payload = Payload(dtype="float32", shape=(1,), ref="link.z")
    with pytest.raises(StoreError):
        decode_payload(payload, store)


def test_file_store_refuses_entries_over_the_size_a_payload_may_have(tmp_path: Path) -> None:
    store = FileStore(tmp_path, "w")
    name = store.put(zlib.compress(np.random.default_rng(0).bytes(1 << 16), 0))
    with pytest.raises(StoreError, match="over"):
        decode_payload(Payload(dtype="float32", shape=(4,), ref=name), store)
    with pytest.raises(StoreError, match="does not exist"):
        store.get("w-99.z", 100)


# --- the pipeline graph and the SDK ---------------------------------------------------------


def test_linear_dag_roles() -> None:
    dag = linear_dag(["cell_a", "cell_b", "cell_c"])
    assert dag.edges == (("cell_a", "cell_b"), ("cell_b", "cell_c"))
    assert dag.roles() == {"cell_a": "source", "cell_b": "intermediate", "cell_c": "sink"}
    assert linear_dag(["only"]).roles() == {"only": "source_sink"}
    assert topological_order(dag) == ["cell_a", "cell_b", "cell_c"]


def test_explicit_graphs_must_be_acyclic_and_the_stage_chain() -> None:
    names = ["cell_a", "cell_b", "cell_c"]
    cyclic = Dag(tuple(names), (("cell_a", "cell_b"), ("cell_b", "cell_c"), ("cell_c", "cell_a")))
    with pytest.raises(GraphError, match="cycle"):
        check_linear(cyclic, names)
    with pytest.raises(GraphError, match="cycle"):
        topological_order(Dag(("x",), (("x", "x"),)))
    skipping = Dag(tuple(names), (("cell_a", "cell_c"), ("cell_c", "cell_b")))
    with pytest.raises(GraphError, match="not the linear pipeline"):
        check_linear(skipping, names)
    with pytest.raises(GraphError, match="not in the graph"):
        check_linear(Dag(tuple(names), (("cell_a", "cell_z"),)), names)
    check_linear(Dag(tuple(names), (("cell_b", "cell_c"), ("cell_a", "cell_b"))), names)


# --- task records and the dependency manager ------------------------------------------------


def test_model_cache_checks_blobs_on_the_way_in_and_out(tmp_path: Path) -> None:
    cache = ModelCache(tmp_path)
    blob = b"not really onnx"
    sha = hashlib.sha256(blob).hexdigest()
    with pytest.raises(ModelError, match="checksum mismatch"):
        cache.put("0" * 64, blob)
    cache.put(sha, blob)
    assert cache.checksums() == [sha] and cache.get(sha) == blob
    (tmp_path / f"{sha}.onnx").write_bytes(b"tampered")
    with pytest.raises(ModelError, match="corrupt"):
        cache.get(sha)
    assert cache.checksums() == []
    with pytest.raises(ModelError, match="not a SHA-256"):
        cache.get("../../etc/passwd")


def test_session_slot_holds_one_stage(tiny_stages: list[bytes]) -> None:
    slot = SessionSlot(threads=1)
    slot.load("cell_a", "a" * 64, tiny_stages[0])
    with pytest.raises(ModelError, match="cell_a is resident: unload it first"):
        slot.load("cell_b", "b" * 64, tiny_stages[1])
    assert slot.unload().stage == "cell_a" and slot.resident is None
    slot.load("cell_b", "b" * 64, tiny_stages[1])
    assert slot.resident is not None and slot.resident.stage == "cell_b"
    with pytest.raises(ModelError, match="cannot load"):
        SessionSlot(1).load("junk", "c" * 64, b"junk")


BLOCK_MB = 64


def _touched_block() -> np.ndarray:
    """A 64 MB array with every page written (resident)."""
    return np.ones(BLOCK_MB * 2**20 // 8)


def test_session_memory_is_the_peak_above_the_process_before_any_session() -> None:
    """What a worker's sessions add: its RSS above what it held at the start (not this
    interpreter's hundreds of MB), at its peak since the previous reading: a block
    allocated and freed between two readings counts once, then no more."""
    memory = SessionMemory()
    assert memory.peak_mb() < BLOCK_MB / 2 < memory.baseline_mb
    block = _touched_block()
    del block
    assert memory.peak_mb() >= 0.9 * BLOCK_MB  # gone, but it was there
    assert memory.peak_mb() < BLOCK_MB / 2  # the peak is counted again from each reading


def test_without_a_peak_counter_session_memory_is_read_when_reported(tmp_path: Path) -> None:
    """Where /proc/self/status cannot be read (no high-water mark to reset), the reading is
    the RSS above the start at the moment it is taken."""
    memory = SessionMemory(proc=tmp_path)
    block = _touched_block()
    assert memory.peak_mb() >= 0.9 * BLOCK_MB
    del block
    assert memory.peak_mb() < BLOCK_MB / 2


def test_a_workers_free_ram_is_its_budget_less_what_it_holds_with_no_session(
    tmp_path: Path,
) -> None:
    """The free RAM a worker reports, which the core dispatches a stage by, was its budget
    less its whole RSS (this interpreter's hundreds of MB: 0 here), where the twin's phone
    gives a session its whole budget. It is now its budget less its RSS above its start
    with no session resident (``SessionMemory``, as ``peak_session_mb``): memory held
    outside a session counts; a resident session does not (a load unloads it first, as
    the twin's phone does)."""
    budget_mb = 4.0 * BLOCK_MB
    config = WorkerConfig("127.0.0.1", 1, "token", tmp_path / "cache", "w", ram_mb=budget_mb)
    worker = Worker(config)
    assert budget_mb - BLOCK_MB / 2 < worker.status().free_ram_mb <= budget_mb
    held = _touched_block()  # outside any session: the worker holds it
    without = worker.status().free_ram_mb
    assert budget_mb - 1.5 * BLOCK_MB < without < budget_mb - 0.9 * BLOCK_MB
    stage = export_stages(TINY, 1, seed=0)[0]
    worker.slot.load(stage.name, stage.sha256, stage.blob)
    work = _touched_block()  # while a session is resident: the session's
    assert worker.status().free_ram_mb == without
    del held, work
    worker.slot.unload()
    assert worker.status().free_ram_mb > budget_mb - BLOCK_MB / 2


def test_battery_drains_by_state() -> None:
    now = [0.0]
    power = PowerModel.parse("idle_w=1, compute_w=4, voltage_v=4, capacity_mah=10")
    meter = BatteryMeter(power, clock=lambda: now[0])
    now[0] = 10.0
    meter.spend("compute", 3.6)  # 3.6 s at 4 W and 6.4 s idle at 1 W: 20.8 J
    assert meter.drained_j() == pytest.approx(20.8)
    assert meter.drained_mah() == pytest.approx(20.8 / (4 * 3.6))
    assert meter.pct() == pytest.approx(100 * (1 - 20.8 / 14.4 / 10))
    with pytest.raises(ValueError, match="unknown power-model field"):
        PowerModel.parse("turbo_w=9")
