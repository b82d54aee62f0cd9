"""Shared pieces of the YAML schemas: strict models, number types, error mapping."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from edgetwin.errors import InputError

UNION_TAGS = ("constant", "exponential", "weibull", "lognormal", "profile_name", "profile_inline")

PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
PositiveInt = Annotated[int, Field(gt=0)]


class Strict(BaseModel):
    """Base: unknown keys are errors, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """A YAML file whose top level is a mapping, or an InputError."""
    if not path.is_file():
        raise InputError(path, None, "file not found")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(path, None, f"malformed YAML{where}: {problem}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, None, f"cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(path, None, "the top level must be a mapping of keys to values")
    return data


def validation_error(exc: ValidationError, path: Path | str) -> InputError:
    """The first pydantic error as an InputError naming its field."""
    error = exc.errors()[0]
    loc = [str(part) for part in error["loc"] if not _is_union_tag(part)]
    field = ".".join(loc) or None
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unknown key"
    elif error["type"] == "missing":
        message = "required key is missing"
    if "input" in error and error["type"] not in ("missing", "extra_forbidden"):
        shown = repr(error["input"])
        message += f" (got {shown[:60]})" if len(shown) <= 60 else ""
    return InputError(path, field, message)


def _is_union_tag(part: object) -> bool:
    return isinstance(part, str) and part in UNION_TAGS
