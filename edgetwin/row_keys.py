"""Row keys: the configuration a results row describes, the key that joins a twin's rows
to a measured table's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeGuard

from edgetwin.result_cells import check_workload, required_number, whole_number

EncoderKey = tuple[str, int, int, float, str]
CrowdKey = tuple[str, int, int, float, str, str]  # ..., the scheduler
DecoderKey = tuple[str, int, int, float, str, int, int]  # ..., prompt and output tokens
RowKey = EncoderKey | CrowdKey | DecoderKey
# the results columns of a key's parts, in its order (a crowd key's sixth: the scheduler)
KEY_FIELDS = ("strategy", "devices", "batch", "bandwidth_mbps", "segments")
CROWD_KEY_FIELDS = (*KEY_FIELDS, "scheduler")
DECODER_KEY_FIELDS = (*KEY_FIELDS, "prompt_tokens", "output_tokens")


def row_key(row: Mapping[str, object]) -> RowKey:
    """Join key of a configuration: strategy, devices, batch, bandwidth, segments, and a
    crowd row's scheduler or a decoder's prompt and output tokens (rows with neither,
    encoders', keep the first five)."""
    check_workload(row)
    segments = row.get("segments")
    key: EncoderKey = (
        str(row["strategy"]),
        whole_number(str(row["devices"])),
        whole_number(str(row["batch"])),
        round(required_number(str(row["bandwidth_mbps"])), 3),
        "" if segments in (None, "") else str(whole_number(str(segments))),
    )
    scheduler = row.get("scheduler")
    if scheduler not in (None, ""):
        return (*key, str(scheduler))
    prompt = row.get("prompt_tokens")
    if prompt in (None, ""):
        return key
    return (*key, whole_number(str(prompt)), whole_number(str(row.get("output_tokens"))))


def is_crowd_key(key: RowKey) -> TypeGuard[CrowdKey]:
    """A crowd row's key (phones, inputs, a scheduler)."""
    return len(key) == 6


def key_fields(key: RowKey) -> dict[str, object]:
    """A key's parts by their results column (``segments`` a number, or None)."""
    names = CROWD_KEY_FIELDS if is_crowd_key(key) else DECODER_KEY_FIELDS[: len(key)]
    parts = dict(zip(names, key, strict=True))
    parts["segments"] = int(key[4]) if key[4] else None
    return parts
