"""A performance map's JSON file: validated on reading (an error names its field),
written atomically."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from edgetwin.atomic import write_text_atomic
from edgetwin.errors import InputError
from edgetwin.policies.perf_map import VERSION, PerformanceMap
from edgetwin.schema import validation_error


def validate_map(raw: object, path: Path | None) -> PerformanceMap:
    """Validate a raw map; the first error becomes one InputError naming its field.

    A version-1 map (batch x bandwidth, no tokens axis) is refused with a clear error."""
    if isinstance(raw, dict) and raw.get("version", VERSION) != VERSION:
        found = raw.get("version")
        raise InputError(
            path,
            "version",
            f"version {found!r} maps are not read; this edgetwin reads version {VERSION} "
            "(a tokens axis): profile the map again (edgetwin evaluate)",
        )
    try:
        return PerformanceMap.model_validate(raw)
    except ValidationError as exc:
        raise validation_error(exc, path or "<performance map>", PerformanceMap) from None


def read_map(path: Path) -> PerformanceMap:
    """A performance map from its JSON file."""
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(path, None, "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, None, f"cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InputError(path, None, f"malformed JSON at line {exc.lineno}: {exc.msg}") from None
    return validate_map(raw, path)


def write_map(path: Path, perf_map: PerformanceMap) -> None:
    """Write the map as JSON (atomically); an encoder's map has no ``output_tokens`` key."""
    exclude = None if perf_map.decoder else {"output_tokens"}
    write_text_atomic(path, perf_map.model_dump_json(indent=1, exclude=exclude) + "\n")
