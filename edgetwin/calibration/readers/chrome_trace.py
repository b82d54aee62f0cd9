"""PyTorch profiler Chrome traces (``.json`` or ``.json.gz``), each event put in a phase.

The file is what ``torch.profiler``'s ``export_chrome_trace`` writes: a JSON object
with a ``traceEvents`` list (a bare list of events is accepted too), gzip-compressed or
not (detected from the content). Complete events (``"ph": "X"``, ``ts`` and ``dur`` in
microseconds) of these categories are read; flows, metadata, instants, profiler
overhead and GPU-side copies of user annotations are ignored:

=====================================================  =========
``cat``                                                kind
=====================================================  =========
``cpu_op``, ``user_annotation``, ``python_function``   host
``cuda_runtime``, ``cuda_driver``                      runtime
``kernel`` / ``gpu_memcpy`` / ``gpu_memset``           kernel / memcpy / memset
=====================================================  =========

Phases (the first rule that applies wins):

1. communication: a name starting with ``gloo:``, ``nccl``, ``c10d::``,
   ``record_param_comms`` or ``ProcessGroup``, and every host event nested in one.
2. a host event nested in a staging event is staging.
3. staging: a ``Memcpy HtoD``/``DtoH`` on the GPU; the runtime call that launched it and
   its enclosing chain of transfer ops (``aten::to``, ``aten::_to_copy``, ``aten::copy_``,
   ``aten::cpu``, ``aten::cuda``, ``aten::pin_memory``, ``aten::item``, ...).
4. staging: host-side data movement (``aten::cat``, ``aten::stack``, ``aten::copy_``,
   ``aten::clone``) that launches no GPU work, in a trace that has GPU events
   (e.g. concatenating received tensors on the host before copying them back).
5. compute: everything else (kernels, device-to-device copies, memsets, the ops
   launching them, synchronisation waits).
"""

from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from edgetwin.csv_rows import read_bytes
from edgetwin.errors import InputError, shown_text
from edgetwin.number_text import exact_text


class Phase(StrEnum):
    """What a piece of time is spent on."""

    COMPUTE = "compute"
    STAGING = "staging"
    COMMUNICATION = "communication"


class EventKind(StrEnum):
    """Where an event runs: host threads (ops, runtime calls) or a GPU stream."""

    HOST = "host"
    RUNTIME = "runtime"
    KERNEL = "kernel"
    MEMCPY = "memcpy"
    MEMSET = "memset"

    @property
    def on_device(self) -> bool:
        return self in (EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET)


CATEGORY_KINDS: dict[str, EventKind] = {
    "cpu_op": EventKind.HOST,
    "user_annotation": EventKind.HOST,
    "python_function": EventKind.HOST,
    "cuda_runtime": EventKind.RUNTIME,
    "cuda_driver": EventKind.RUNTIME,
    "kernel": EventKind.KERNEL,
    "gpu_memcpy": EventKind.MEMCPY,
    "gpu_memset": EventKind.MEMSET,
}
COMMUNICATION_NAME = re.compile(r"^(gloo:|nccl|c10d::|record_param_comms|ProcessGroup)")
HOST_DEVICE_COPY = re.compile(r"\b(HtoD|DtoH)\b")
TRANSFER_OPS = frozenset(
    {
        "aten::to",
        "aten::_to_copy",
        "aten::copy_",
        "aten::cpu",
        "aten::cuda",
        "aten::pin_memory",
        "aten::_pin_memory",
        "aten::item",
        "aten::_local_scalar_dense",
    }
)
HOST_MOVE_OPS = frozenset({"aten::cat", "aten::stack", "aten::copy_", "aten::clone"})
_NEST_TOLERANCE_US = 0.01  # timestamps carry 3 decimals of a microsecond


@dataclass(frozen=True)
class TraceEvent:
    """One complete event; times in µs from the trace's first event.

    ``parent`` is the index (in ``ChromeTrace.events``) of the innermost host or runtime
    event enclosing it on the same thread; ``launcher`` that of the runtime call that
    launched a GPU event (matched by ``correlation``), or None.
    """

    name: str
    category: str
    kind: EventKind
    phase: Phase
    start_us: float
    duration_us: float
    thread: str
    parent: int | None
    launcher: int | None

    @property
    def end_us(self) -> float:
        return self.start_us + self.duration_us


@dataclass(frozen=True)
class ChromeTrace:
    """The classified events of one profiler trace, ordered by start time."""

    path: Path
    events: tuple[TraceEvent, ...]
    backend: str | None  # distributedInfo.backend, e.g. "gloo"; None when absent


@dataclass
class _Raw:
    name: str
    category: str
    kind: EventKind
    start: float
    end: float
    thread: str
    correlation: int | None


def read_chrome_trace(path: str | Path) -> ChromeTrace:
    """Read and classify a profiler trace; a malformed file is an InputError."""
    path = Path(path)
    document = _load_json(path)
    raw = _complete_events(path, document)
    if not raw:
        raise InputError(path, "traceEvents", "no profiler events (cpu_op, kernel, ...)")
    origin = min(event.start for event in raw)
    order = sorted(range(len(raw)), key=lambda i: (raw[i].start, -raw[i].end, i))
    position = {old: new for new, old in enumerate(order)}
    parents = _nest(raw, order)
    launchers = _launchers(raw)
    phases = _phases(raw, order, parents, launchers)

    def moved(index: int | None) -> int | None:
        return None if index is None else position[index]

    events = tuple(
        TraceEvent(
            name=raw[i].name,
            category=raw[i].category,
            kind=raw[i].kind,
            phase=phases[i],
            start_us=raw[i].start - origin,
            duration_us=raw[i].end - raw[i].start,
            thread=raw[i].thread,
            parent=moved(parents[i]),
            launcher=moved(launchers.get(i)),
        )
        for i in order
    )
    info = document.get("distributedInfo") if isinstance(document, dict) else None
    backend = info.get("backend") if isinstance(info, dict) else None
    return ChromeTrace(path, events, backend if isinstance(backend, str) else None)


def _load_json(path: Path) -> Any:
    data = read_bytes(path)
    if not data:
        raise InputError(path, None, "empty file")
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(path, None, f"corrupt or truncated gzip data: {exc}") from None
    elif path.suffix == ".gz":
        raise InputError(path, None, "not gzip data, though the name ends in .gz")
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        raise InputError(path, None, f"{where}: invalid JSON: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(path, None, f"line {line}: not UTF-8 text") from None
    except RecursionError:
        raise InputError(path, None, "invalid JSON: nested too deeply") from None


def _complete_events(path: Path, document: Any) -> list[_Raw]:
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        raise InputError(path, "traceEvents", "missing, or not a list of events")
    raw = []
    for index, event in enumerate(events):
        field = f"traceEvents[{index}]"
        if not isinstance(event, dict):
            raise InputError(path, field, "an event must be a JSON object")
        if event.get("ph") != "X":
            continue
        start = _number(path, f"{field}.ts", event.get("ts"))
        duration = _number(path, f"{field}.dur", event.get("dur"))
        if duration < 0:
            raise InputError(path, f"{field}.dur", f"negative duration {exact_text(duration)} µs")
        kind = CATEGORY_KINDS.get(str(event.get("cat")))
        if kind is None:
            continue
        name = event.get("name")
        if not isinstance(name, str) or not name:
            raise InputError(path, f"{field}.name", "missing or not a string")
        args = event.get("args")
        correlation = args.get("correlation") if isinstance(args, dict) else None
        raw.append(
            _Raw(
                name=name,
                category=str(event["cat"]),
                kind=kind,
                start=start,
                end=start + duration,
                thread=f"{event.get('pid')}/{event.get('tid')}",
                correlation=correlation if isinstance(correlation, int) else None,
            )
        )
    return raw


def _number(path: Path, field: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(path, field, f"must be a number, got {shown_text(json.dumps(value))}")
    try:
        number = float(value)
    except OverflowError:
        raise InputError(path, field, "number out of range") from None
    if not math.isfinite(number):
        raise InputError(path, field, f"must be finite, got {number}")
    return number


def _nest(raw: list[_Raw], order: list[int]) -> list[int | None]:
    """Innermost enclosing host/runtime event on the same thread, for host/runtime events."""
    parents: list[int | None] = [None] * len(raw)
    stacks: dict[str, list[int]] = {}
    for i in order:
        if raw[i].kind.on_device:
            continue
        stack = stacks.setdefault(raw[i].thread, [])
        while stack and raw[stack[-1]].end < raw[i].end - _NEST_TOLERANCE_US:
            stack.pop()
        parents[i] = stack[-1] if stack else None
        stack.append(i)
    return parents


def _launchers(raw: list[_Raw]) -> dict[int, int]:
    """GPU event index -> index of the runtime call with the same correlation id."""
    calls = {
        e.correlation: i
        for i, e in enumerate(raw)
        if e.kind is EventKind.RUNTIME and e.correlation is not None
    }
    return {
        i: calls[e.correlation]
        for i, e in enumerate(raw)
        if e.kind.on_device and e.correlation in calls
    }


def _phases(
    raw: list[_Raw], order: list[int], parents: list[int | None], launchers: dict[int, int]
) -> list[Phase]:
    staging_roots: set[int] = set()
    launches_gpu: set[int] = set()
    for device_index, call in launchers.items():
        if _is_host_device_copy(raw[device_index]):
            root = call
            while (up := parents[root]) is not None and raw[up].name in TRANSFER_OPS:
                root = up
            staging_roots.add(root)
        node: int | None = call
        while node is not None and node not in launches_gpu:
            launches_gpu.add(node)
            node = parents[node]
    has_gpu = any(e.kind.on_device for e in raw)
    phases = [Phase.COMPUTE] * len(raw)
    for i in order:  # parents come before their children
        event, parent = raw[i], parents[i]
        if COMMUNICATION_NAME.match(event.name):
            phases[i] = Phase.COMMUNICATION
        elif event.kind.on_device:
            phases[i] = Phase.STAGING if _is_host_device_copy(event) else Phase.COMPUTE
        elif parent is not None and phases[parent] is not Phase.COMPUTE:
            phases[i] = phases[parent]
        elif i in staging_roots or (
            has_gpu and event.name in HOST_MOVE_OPS and i not in launches_gpu
        ):
            phases[i] = Phase.STAGING
    return phases


def _is_host_device_copy(event: _Raw) -> bool:
    return event.kind is EventKind.MEMCPY and HOST_DEVICE_COPY.search(event.name) is not None
