"""Shared pieces of the YAML schemas: strict models, number types, error mapping."""

from __future__ import annotations

import codecs
import difflib
import re
import stat
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from edgetwin.errors import InputError, shown, shown_text
from edgetwin.number_text import counted, exact_text
from edgetwin.provenance import note_read

MAX_YAML_BYTES = 16 * 2**20  # a scenario, evaluation, plan or profile file
MAX_NESTING = 64  # levels of mappings and lists in one file
MAX_VALUES = 1_000_000  # values in one file, aliases counted at each use
BOOLEAN_NUMBER = "boolean_number"  # the error type of ``true`` where a number belongs

UNION_TAGS = (
    *("constant", "exponential", "weibull", "lognormal", "profile_name", "profile_inline"),
    *("link_down", "kill_worker", "encoder", "decoder"),
)

PositiveFloat = Annotated[float, Field(gt=0)]
NonNegativeFloat = Annotated[float, Field(ge=0)]
PositiveInt = Annotated[int, Field(gt=0)]
# a seed is one 32-bit word: numpy's SeedSequence splits a larger one into several words,
# and then streams keyed by entropy lists of different lengths ([seed, rep, stream] and
# [seed, rep, stream, phone]) can coincide
MAX_SEED = 2**32 - 1
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]
# the least rate a link is given: 1 bit/s. Below it a run's transfers outlast any run, and at
# rates near 1e-300 Mbit/s the twin's times overflow a float to inf
MIN_BANDWIDTH_MBPS = 1e-6


def _at_least_a_bit_per_s(value: float) -> float:
    if value < MIN_BANDWIDTH_MBPS:
        least = f"1 bit/s ({exact_text(MIN_BANDWIDTH_MBPS)} Mbit/s)"
        raise ValueError(f"below the least rate a link may have, {least}")
    return value


BandwidthMbps = Annotated[float, Field(gt=0), AfterValidator(_at_least_a_bit_per_s)]
# the longest sequence a model may take (an encoder's tokens, a decoder's positions): past
# the longest published context (Llama 4 Scout's 10M tokens). The twin's layouts hold every
# device's rows and segments: 10^15 tokens filled memory until a MemoryError traceback
MAX_TOKENS = 2**24
Tokens = Annotated[int, Field(gt=0, le=MAX_TOKENS)]
# the most samples (a decoder's sequences) in one batch, a scenario's or a table's: a
# ViT-B/16 batch of 2^20 images is 630 GB of fp32 input, past any device a profile
# describes. A measured row of batch 1e300 ran the twin out of memory (the calibration
# blamed the profile), and a sweep's ran to a row of nothing but 'out of memory'
MAX_BATCH = 2**20
Batch = Annotated[int, Field(gt=0, le=MAX_BATCH)]
# the most bytes one traced tensor copy or exchanged piece holds: 1 TiB, past any device's
# memory (an H200 holds 141 GB). A staging copy of 1.7e308 bytes was read and fitted
MAX_TENSOR_BYTES = 2**40


class Strict(BaseModel):
    """Base: unknown keys are errors, instances are immutable, numbers are finite and are
    numbers (``true`` is not 1)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_boolean_number(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, value in data.items():
                field = cls.model_fields.get(name)
                where = None if field is None else _boolean_number(field.annotation, value)
                if where is not None:
                    index, given = where
                    raise PydanticCustomError(
                        BOOLEAN_NUMBER, "should be a number, not {given}",
                        {"field": ".".join((name, *index)), "given": str(given).lower()},
                    )  # fmt: skip
        return data


def _boolean_number(annotation: Any, value: Any) -> tuple[tuple[str, ...], bool] | None:
    """The first ``true``/``false`` in ``value`` where ``annotation`` takes a number (pydantic
    would take it as 1 or 0), at any depth of lists, tuples and mappings: its index path
    (``()``: ``value`` itself) and the boolean; None if there is none. A nested model
    checks its own fields."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _boolean_number(args[0], value)
    if isinstance(value, bool):
        return ((), value) if _takes_a_number_not_a_boolean(annotation) else None
    if origin in (Union, types.UnionType):
        found = (_boolean_number(option, value) for option in args)
        return next((where for where in found if where is not None), None)
    if isinstance(value, dict) and origin in (dict, Mapping) and len(args) == 2:
        items = [(str(key), args[1], item) for key, item in value.items()]
    elif isinstance(value, list | tuple) and origin in _SEQUENCES and args:
        each = args[:1] * len(value) if origin is not tuple or args[-1] is Ellipsis else args
        items = [(str(i), t, item) for i, (t, item) in enumerate(zip(each, value, strict=False))]
    else:
        return None
    for key, item_type, item in items:
        where = _boolean_number(item_type, item)
        if where is not None:
            return (key, *where[0]), where[1]
    return None


_SEQUENCES = (list, tuple, set, frozenset, Sequence)


def _takes_a_number_not_a_boolean(annotation: Any) -> bool:
    """``int``, ``float`` or an optional one (constrained or not): a field pydantic would
    give True as 1."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _takes_a_number_not_a_boolean(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        options = get_args(annotation)
        return bool not in options and any(_takes_a_number_not_a_boolean(o) for o in options)
    return annotation in (int, float)


class StrictSweep(Strict):
    """Base of the sweeps: every field is a list of values; one number stands for a list of
    it (one written with separators or its unit too, ``1,000`` or ``400 Mbps``, so that its
    error says how to write it); a value given twice is an error."""

    @model_validator(mode="before")
    @classmethod
    def _one_value_as_list(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: [v] if _one_number(v) else v for k, v in data.items()}
        return data

    @field_validator("*")
    @classmethod
    def _once(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        """A value swept twice is a configuration (a row, a held-out condition scored, a
        curve or a cell of an answer) twice."""
        repeated = first_repeated(values)
        if repeated is not None:
            raise ValueError(f"{exact_text(repeated[1])} is given twice; give each value once")
        return values


# a name that also names a file or a host (a profile <name>.yaml, a phone's host): letters,
# digits, "_", "." and "-" (no "/": it would reach outside its folder)
FileName = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")]


def optional_values() -> Any:
    """A list field that is left out to mean a default (its ``()``, which the code reads as
    "the scenario's"): given, it holds at least one value (``[]`` is an error, not the
    default); left out of a dump while ``()``, so that a dump validates again."""
    return Field((), min_length=1, exclude_if=_is_empty)


def _is_empty(values: tuple[Any, ...]) -> bool:
    return not values


def with_preset(
    data: Any, presets: Mapping[str, Mapping[str, Any]], unknown: Callable[[str], str]
) -> Any:
    """A model's raw fields over the preset its ``preset`` names (fields given win);
    ``data`` as it is without one. A name not in ``presets``: ValueError ``unknown(name)``,
    the name as ``shown`` writes it."""
    if isinstance(data, dict) and data.get("preset") is not None:
        preset = data["preset"]
        if not isinstance(preset, str) or preset not in presets:
            raise ValueError(unknown(shown(preset)))
        return {**presets[preset], **data}
    return data


def first_repeated(values: Sequence[Any]) -> tuple[int, Any] | None:
    """The first value given twice and the place of its second coming; None if none."""
    seen: list[Any] = []
    for index, value in enumerate(values):
        if value in seen:
            return index, value
        seen.append(value)
    return None


def check_given_once(names: Sequence[str], noun: str) -> None:
    """A ValueError naming the first of ``names`` given twice (``noun``: what each is)."""
    repeated = first_repeated(names)
    if repeated is not None:
        raise ValueError(f"{noun} {repeated[1]!r} is given twice; give each once")


def check_known_once(names: Sequence[str], known: Iterable[str], noun: str) -> None:
    """A ValueError naming the first of ``names`` that is not ``known`` (listing those), or
    the first given twice (``noun``: what each is, a policy or a scheduler)."""
    choices = sorted(known)
    unknown = [n for n in names if n not in choices]
    if unknown:
        raise ValueError(f"unknown {noun} {unknown[0]!r}; known: {', '.join(choices)}")
    check_given_once(names, noun)


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """A YAML file whose top level is a mapping, or an InputError."""
    check_regular_file(path, path, None)
    if path.stat().st_size > MAX_YAML_BYTES:
        raise InputError(path, None, f"larger than {MAX_YAML_BYTES // 2**20} MiB")
    try:
        raw = path.read_bytes()
        note_read(path, raw)
        data = load_yaml(utf8_text(path, raw))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(path, None, f"malformed YAML{where}: {problem}") from None
    except RecursionError:
        raise InputError(path, None, f"nested deeper than {MAX_NESTING} levels") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, None, f"cannot read: {_reason(exc)}") from None
    if not isinstance(data, dict):
        given = "the file is empty" if data is None else f"not {_kind_of(data)}"
        raise InputError(path, None, f"the top level must be a mapping of keys to values: {given}")
    check_nesting(data, path, None)
    return data


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, but a key given twice in one mapping is an error (the safe
    loader keeps the last silently, so a repeated field would change a run unseen)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                repeated = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the safe loader names it
                break
            if repeated:
                problem = f"key {shown(key)} given twice in one mapping"
                raise yaml.constructor.ConstructorError(None, None, problem, key_node.start_mark)
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """An integer, or a YAML error at its place when it has more digits than Python
        converts (``sys.get_int_max_str_digits``: its ValueError was a traceback)."""
        try:
            return int(super().construct_yaml_int(node))
        except ValueError:
            problem = (
                f"an integer of {len(node.value):,} characters: more digits than any value needs"
            )
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark) from None


# YAML 1.2 reads 1e9, 2.5E-3 and 1.e+6 as numbers; PyYAML follows YAML 1.1, whose floats
# need a dot and a signed exponent (1.0e+9), and gives a bare 1e9 back as the string
# "1e9", which a number field then refuses. Exponent forms only: every other plain
# scalar reads as before.
_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, quoting a string that ``load_yaml`` would read as a number."""


_UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", _UniqueKeyLoader.construct_yaml_int)
for _reads_numbers in (_UniqueKeyLoader, _Dumper):
    _reads_numbers.add_implicit_resolver(
        "tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789.")
    )


def _kind_of(data: Any) -> str:
    """What a file's top level is instead of a mapping: ``a list``, ``a value ('x')``."""
    return "a list" if isinstance(data, list) else f"a value ({given_text(data)})"


def load_yaml(text: str) -> Any:
    """``text`` parsed as YAML with the safe loader; a key repeated in a mapping is an error."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader: no Python objects


def dump_yaml(data: Any, width: int = 80) -> str:
    """``data`` as YAML (keys in their order) that ``load_yaml`` reads back as ``data``."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=width)


_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)  # FF FE, FE FF
_SAVE_AS_UTF8 = "save it as UTF-8 (a spreadsheet: 'CSV UTF-8')"


def utf8_text(path: Path, data: bytes) -> str:
    """``data``, read from ``path``, as UTF-8 text (optional BOM); other bytes are an
    InputError that says how to re-save the file: UTF-16 (a spreadsheet's "Unicode text")
    by its byte-order mark, else the line and the first byte not UTF-8, as Latin-1 reads
    it."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if data.startswith(_UTF16_BOMS):
            bom = data[:2].hex(" ").upper()
            problem = f"UTF-16 text (byte-order mark {bom}, a spreadsheet's 'Unicode text')"
            raise InputError(path, None, f"{problem}; {_SAVE_AS_UTF8}") from None
        line = data[: exc.start].count(b"\n") + 1
        byte = data[exc.start : exc.start + 1]
        latin = f"byte 0x{byte.hex().upper()}, {byte.decode('latin-1')!r} in Latin-1"
        problem = f"line {line}: not UTF-8 text ({latin}); {_SAVE_AS_UTF8}"
        raise InputError(path, None, problem) from None


def check_nesting(data: Any, path: Path | str, field: str | None) -> None:
    """An InputError if ``data`` nests deeper than ``MAX_NESTING`` or holds more than
    ``MAX_VALUES`` values (counted through YAML aliases)."""
    pending: list[tuple[Any, int]] = [(data, 0)]
    seen = 0
    while pending:
        node, depth = pending.pop()
        seen += 1
        if depth > MAX_NESTING:
            raise InputError(path, field, f"nested deeper than {MAX_NESTING} levels")
        if seen > MAX_VALUES:
            raise InputError(path, field, f"more than {MAX_VALUES} values (YAML aliases?)")
        if isinstance(node, dict):
            pending.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            pending.extend((child, depth + 1) for child in node)


def check_regular_file(path: Path, named_by: Path | str | None, field: str | None) -> Path:
    """``path`` if it is a regular file; else an InputError naming ``named_by`` and
    ``field`` (the file and key that name ``path``; the file itself when ``field`` is None)."""
    where = "" if field is None else f": {shown_text(str(path))}"
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise InputError(named_by, field, f"file not found{where}") from None
    except OSError as exc:
        raise InputError(named_by, field, f"cannot read{where}: {_reason(exc)}") from None
    except ValueError:  # a NUL byte in the name
        raise InputError(named_by, field, "not a valid file name") from None
    if stat.S_ISDIR(mode):
        raise InputError(named_by, field, f"a folder, not a file{where}")
    if not stat.S_ISREG(mode):
        raise InputError(named_by, field, f"not a regular file{where}")
    return path


def referenced_file(value: str, relative_to: Path, named_by: Path | str, field: str) -> Path:
    """The regular file ``value`` names (relative to ``relative_to`` unless absolute);
    errors name ``named_by`` and its ``field``."""
    if not value:
        raise InputError(named_by, field, "an empty file name")
    return check_regular_file(relative_to / value, named_by, field)


def _reason(exc: BaseException) -> str:
    """An OS or decoding error without the (possibly very long) file name."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return shown_text(str(exc))


_EMPTY_LIST = (
    "an empty list: give at least one value, or leave the key out for its default if it has one"
)
# where a key that is a whole number most likely comes from: YAML reads "{a: 1,000}" as a: 1
# and a key 000
_KEY_HINT = " (in {...}, 1,000 reads as 1 and a key 000: write 1000)"
# pydantic's words for a value of the wrong container ("Input should be a valid tuple",
# "... a valid dictionary or instance of DeviceSpec"), in the file's terms
LIST_WORDS = "a list: [a, b], or one '- item' a line"
MAPPING_WORDS = "a mapping: one 'key: value' a line, or {key: value}"
_CONTAINER_TYPES = {
    "tuple_type": f"should be {LIST_WORDS}",
    "list_type": f"should be {LIST_WORDS}",
    "dict_type": f"should be {MAPPING_WORDS}",
    "model_type": f"should be {MAPPING_WORDS}",
    "model_attributes_type": f"should be {MAPPING_WORDS}",
}

# pydantic's words for one value of the wrong kind ("Input should be a valid number, unable
# to parse string as a number"), in the file's terms
_VALUE_TYPES = {
    "float_parsing": "should be a number",
    "float_type": "should be a number",
    "int_parsing": "should be a whole number",
    "int_type": "should be a whole number",
    "int_from_float": "should be a whole number",
    "int_parsing_size": "should be a smaller whole number",
    "string_type": "should be text",
    "bool_parsing": "should be true or false",
    "bool_type": "should be true or false",
    "finite_number": "should be a finite number",
}
# a value past a bound, by the bound's key in pydantic's context
_BOUNDS = {
    "greater_than": ("gt", "greater than"),
    "greater_than_equal": ("ge", "greater than or equal to"),
    "less_than": ("lt", "less than"),
    "less_than_equal": ("le", "less than or equal to"),
}


def validation_error(exc: ValidationError, path: Path | str, model: type[BaseModel]) -> InputError:
    """The first pydantic error of validating ``model`` as an InputError naming its field;
    but an unknown key that misspells a missing one is named first (``_reported``). An
    unknown key close to a key of its place, or another tool's name for one (a model's
    ``KEY_HINTS``), is said to mean that one."""
    errors = exc.errors()
    error, meant = _reported(errors)
    if meant is None and error["type"] == "extra_forbidden":
        meant = _meant_key(model, error["loc"][:-1], str(error["loc"][-1]))
    loc = [str(part) for part in error["loc"] if not _is_union_tag(part)]
    short = _short_list(error, errors)
    if short is not None:  # a fixed-length list (a [low, high] pair), an item missing
        return InputError(path, ".".join(loc[:-1]), short)
    if error["type"] == BOOLEAN_NUMBER:  # raised by the model, about one of its fields
        loc.append(error["ctx"]["field"])
    message = error["msg"].removeprefix("Value error, ")
    kind = error["type"]
    named = False  # a model's own check that names the field it is about: its input is
    if kind == "value_error":  # the model's whole mapping, not the field's value
        named_loc, message = _named_field(model, error["loc"], loc, message)
        loc, named = named_loc, named_loc != loc
    field = ".".join(loc) or None
    if kind == "extra_forbidden":
        message = "unknown key" if meant is None else f"unknown key (did you mean {meant!r}?)"
    elif kind == "missing":
        message = "required key is missing"
    elif kind == "invalid_key":  # pydantic: "Keys should be strings"
        key = error["input"]
        number = isinstance(key, int) and not isinstance(key, bool)
        message = f"unknown key {given_text(key)}: a key is text{_KEY_HINT if number else ''}"
    elif kind == "too_short" and not error.get("input"):
        message = _EMPTY_LIST
    elif kind in _CONTAINER_TYPES:
        message = _CONTAINER_TYPES[kind] + _got(error)
    elif (words := single_value_words(error)) is not None:
        message = words
    elif kind in ("too_short", "too_long") and isinstance(error.get("input"), list | tuple):
        context = error["ctx"]  # pydantic says "Tuple should have ... after validation"
        most = "least" if kind == "too_short" else "most"
        bound = context.get("min_length" if kind == "too_short" else "max_length")
        count = context["actual_length"]
        message = f"should have at {most} {counted(bound, 'item')}, not {count}{_got(error)}"
    elif kind == "union_tag_invalid":  # pydantic's words name neither the key nor its place
        context = error["ctx"]
        key = context["discriminator"].strip("'")
        message = f"unknown {key} {context['tag']!r}: one of "
        return InputError(path, field, message + context["expected_tags"])
    elif kind == "union_tag_not_found":
        discriminator = error["ctx"]["discriminator"]
        message = f"needs a {discriminator} key: it says which form this takes{_got(error)}"
    elif kind != BOOLEAN_NUMBER and not named and not _says_its_value(message, error):
        message += _got(error)
    return InputError(path, field, message)


_FIELD_PREFIX = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*): (.+)$", re.DOTALL)


def _named_field(
    model: type[BaseModel], place: Sequence[Any], loc: list[str], message: str
) -> tuple[list[str], str]:
    """A model's check that starts its message with a key path below its place
    (``devices.0.battery_wh: ...``): that path as the field, the rest as the message (it
    was reported with no field). Any other message is kept whole."""
    match = _FIELD_PREFIX.match(message)
    if match is None or match.group(1).split(".")[0] not in keys_at(model, place):
        return loc, message
    return [*loc, *match.group(1).split(".")], match.group(2)


def _short_list(error: Any, errors: Sequence[Any]) -> str | None:
    """What is wrong with a fixed-length list given too few items, which pydantic reports
    as a "missing" key at each place left (``battery_start_pct.1``); None for another
    error."""
    loc, given = error["loc"], error.get("input")
    if error["type"] != "missing" or not loc or not isinstance(loc[-1], int):
        return None
    if not isinstance(given, list | tuple):
        return None
    left = sum(1 for e in errors if e["type"] == "missing" and e["loc"][:-1] == loc[:-1])
    return f"should have {counted(len(given) + left, 'item')}, not {len(given)}{_got(error)}"


def _reported(errors: Sequence[Any]) -> tuple[Any, str | None]:
    """The error to report, and the missing key an unknown one is a misspelling of.

    pydantic lists a required key that is missing before an unknown key beside it; when
    the unknown key's spelling is close to the missing one's (``ram_mbb``, ``ram_mb``),
    the unknown key is the mistake: it is named, with the key it likely means."""
    first = errors[0]
    if first["type"] != "missing":
        return first, None
    parent = first["loc"][:-1]
    beside = [e for e in errors if e["loc"][:-1] == parent]
    missing = [str(e["loc"][-1]) for e in beside if e["type"] == "missing"]
    for error in beside:
        if error["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(error["loc"][-1]), missing, n=1)
            if close:
                return error, close[0]
    return first, None


def keys_at(model: type[BaseModel], loc: Sequence[Any]) -> set[str]:
    """The keys a mapping at ``loc`` (a pydantic error's place, less its last key) may have
    in a file validated as ``model``: the fields of every model that can stand there."""
    return {name for m in _models_at(model, loc) for name in m.model_fields}


def _models_at(model: type[BaseModel], loc: Sequence[Any]) -> list[type[BaseModel]]:
    """Every model that can stand at ``loc`` in a file validated as ``model``. A list index
    passes through; a part that names no field (a mapping's own key, a union's tag) keeps
    the models, narrowed to those a tag names when it names some."""
    models: list[tuple[type[BaseModel], str | None]] = [(model, None)]
    for part in loc:
        if isinstance(part, int):
            continue
        inner = [m for parent, _ in models for m in _field_models(parent, str(part))]
        # else a union's tag (or a mapping's own key, which tags none of them)
        tagged = [(m, tag) for m, tag in models if _tagged(m, tag, str(part))]
        models = inner or tagged or models
    return [m for m, _ in models]


def _meant_key(model: type[BaseModel], loc: Sequence[Any], unknown: str) -> str | None:
    """The key an unknown key at ``loc`` stands for by a model's ``KEY_HINTS`` (another
    tool's name for one of its fields: Hugging Face's ``hidden_size`` for a decoder's
    ``width``; None there: for no one field, so no guess), else the key of its place
    closest in spelling; None without one."""
    for candidate in _models_at(model, loc):
        hints: dict[str, str | None] = getattr(candidate, "KEY_HINTS", {})
        if unknown in hints:
            return hints[unknown]
    keys = keys_at(model, loc) - {unknown}  # a sibling model's key, not here
    close = difflib.get_close_matches(unknown, sorted(keys), n=1)
    return close[0] if close else None


def _field_models(model: type[BaseModel], name: str) -> list[tuple[type[BaseModel], str | None]]:
    """The models the field ``name`` of ``model`` can hold (none if it has no such field)."""
    field = model.model_fields.get(name)
    return [] if field is None else _models_in(field.annotation, None)


def _models_in(annotation: Any, tag: str | None) -> list[tuple[type[BaseModel], str | None]]:
    """The models an annotation holds, through unions, lists, tuples, mappings and
    ``Annotated``, each with the ``Tag`` a callable discriminator knows it by (or None)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, tag)]
    args = get_args(annotation)
    if get_origin(annotation) is Annotated:
        tags = [m.tag for m in args[1:] if isinstance(m, Tag)]
        return _models_in(args[0], tags[0] if tags else tag)
    return [found for arg in args for found in _models_in(arg, tag)]


def _tagged(model: type[BaseModel], tag: str | None, part: str) -> bool:
    """Whether ``part`` is the union tag of ``model``: its ``Tag``, or a field of that value
    (a ``kind`` whose literal or default it is)."""
    fields = model.model_fields.values()
    return tag == part or any(part in get_args(f.annotation) or f.default == part for f in fields)


def single_value_words(error: Any) -> str | None:
    """A pydantic error about one value in plain words, with the value: ``should be a
    number, not 'fast'``, ``should be greater than 0, not -5``; None for another error."""
    if not (str(error["msg"]).startswith("Input should be ") or error["type"] in _VALUE_TYPES):
        return None
    return _value_words(error) + _not(error) + _number_hint(error)


def _value_words(error: Any) -> str:
    """What a single value should be, in plain words: ``should be a number``, ``should be
    greater than 0``, ``should be 'dedicated' or 'shared'``."""
    kind, context = error["type"], error.get("ctx", {})
    if kind in _VALUE_TYPES:
        return _VALUE_TYPES[kind]
    bound = _BOUNDS.get(kind)
    if bound is not None and isinstance(context.get(bound[0]), int | float):
        return f"should be {bound[1]} {exact_text(context[bound[0]])}"
    return "s" + str(error["msg"]).removeprefix("Input s")  # a literal's, an enum's: its choices


# a number as edgetwin writes one (1,000) or with its unit (5 Mbps), given where a number goes
_SEPARATED = re.compile(r"^\s*[-+]?\d{1,3}(,\d{3})+(\.\d*)?\s*$")
_WITH_UNIT = re.compile(r"^\s*[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?\s*[a-zA-Z/%µ]+\s*$")


def _one_number(value: Any) -> bool:
    """Whether ``value`` is one number, or one written as edgetwin writes it or with its
    unit (text to YAML)."""
    if isinstance(value, str):
        return bool(_SEPARATED.match(value) or _WITH_UNIT.match(value))
    return isinstance(value, int | float)


def _number_hint(error: Any) -> str:
    """How to write a number a file gave as edgetwin writes one (``1,000``: YAML reads it
    as text) or with its unit (``5 Mbps``: the unit is the key's, ``bandwidth_mbps``)."""
    given = error.get("input")
    if error["type"] not in ("float_parsing", "int_parsing") or not isinstance(given, str):
        return ""
    if _SEPARATED.match(given):
        return f": write it without separators, {given.replace(',', '').strip()}"
    unit = _WITH_UNIT.match(given)
    keys = [part for part in error["loc"] if isinstance(part, str)]
    if unit is not None and keys:
        number = unit.group(1) + (unit.group(2) or "")
        return f": a number alone, in the unit its key names ({keys[-1]}: {number})"
    return ""


def _not(error: Any) -> str:
    """``, not VALUE`` for a pydantic error's input, if it has one short enough to show."""
    given = _given(error)
    return "" if given is None else f", not {given}"


def _got(error: Any) -> str:
    """`` (got VALUE)`` for a pydantic error's input, if it has one short enough to show."""
    given = _given(error)
    return "" if given is None else f" (got {given})"


def _says_its_value(message: str, error: Any) -> bool:
    """Whether a model's check already quotes the value it refuses (``unknown strategy
    'magic'; known: ...``): `` (got 'magic')`` after it said it twice."""
    given = error.get("input")
    values = [*given.values()] if isinstance(given, dict) else given
    values = values if isinstance(values, list | tuple) else [given]
    return any(isinstance(v, str) and repr(v) in message for v in values)


def _given(error: Any) -> str | None:
    """A pydantic error's input as ``given_text`` writes it; None without one, or for a
    list or mapping too long to show."""
    if "input" not in error:
        return None
    given = error["input"]
    if isinstance(given, dict | list) and len(repr(given)) > 60:
        return None
    return given_text(given)


def given_text(given: Any) -> str:
    """A value of a file as its error shows it: as YAML writes it (``'fast'``, ``true``,
    ``null``), a number as a reader reads it (``10,000,000,000``)."""
    if given is None or isinstance(given, bool):
        return "null" if given is None else str(given).lower()
    return exact_text(given) if isinstance(given, int | float) else shown(given)


def _is_union_tag(part: object) -> bool:
    return isinstance(part, str) and part in UNION_TAGS


ModelT = TypeVar("ModelT", bound=BaseModel)


def load_yaml_model(path: Path, model: type[ModelT], overrides: Sequence[str] = ()) -> ModelT:
    """A YAML file, with ``key.sub=value`` overrides applied, validated as ``model``."""
    raw = read_yaml_mapping(path)
    for item in overrides:
        apply_override(raw, item, path)
    return validate_model(model, raw, path)


def validate_model(model: type[ModelT], raw: Any, path: Path | str) -> ModelT:
    """``raw`` validated as ``model``; the first error becomes one InputError."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise validation_error(exc, path, model) from None


def apply_override(raw: dict[str, Any], item: str, path: Path) -> None:
    """Apply ``a.b.c=value`` (value parsed as YAML) to a raw scenario mapping, or remove
    the key ``a.b.c`` for ``~a.b.c`` (the field then takes its default; a list item is
    removed from its list)."""
    key, sep, text = item.partition("=")
    removal = not sep and key.startswith("~")
    if removal:
        key = key[1:]
    elif not sep or not key:
        raise InputError(path, None, f"override {shown(item)}: expected key=value or ~key")
    if not key or "" in key.split("."):
        raise InputError(path, None, f"override {shown(key)}: a dotted key with an empty part")
    if removal:
        _remove(raw, key, path)
        return
    try:
        value = load_yaml(text)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None)
        why = f": {problem}" if problem else ""
        raise InputError(
            path, key, f"override value {shown(text)} is not valid YAML{why}"
        ) from None
    except RecursionError:
        raise InputError(
            path, key, f"override value nested deeper than {MAX_NESTING} levels"
        ) from None
    check_nesting(value, path, key)
    node: Any = raw
    parts = key.split(".")
    for depth, part in enumerate(parts[:-1]):
        _check_list_there(node, part, parts[depth + 1], ".".join(parts[: depth + 2]), path)
        node = _child(node, part, ".".join(parts[: depth + 1]), path)
    last = parts[-1]
    if isinstance(node, list):
        node[_index(node, last, key, path)] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise InputError(path, key, "an override goes inside a value that is not a mapping or list")


def apply_listed_override(raw: dict[str, Any], item: str, path: Path, field: str) -> None:
    """``apply_override`` of an item of a file's own list of scenario overrides (a plan
    question's ``set``, an affinity instance's): an error names that item, ``field`` of
    ``path``, with the scenario's field in its problem (``as_scenario_problem``)."""
    try:
        apply_override(raw, item, path)
    except InputError as exc:
        raise InputError(path, field, as_scenario_problem(exc)) from None


def as_scenario_problem(exc: InputError) -> str:
    """A scenario's error as the file that changes the scenario reports it: the scenario's
    field goes into the problem (``scenario field 'devices.9': ...``)."""
    return exc.problem if exc.field is None else f"scenario field {exc.field!r}: {exc.problem}"


def _remove(raw: dict[str, Any], key: str, path: Path) -> None:
    """Remove ``key`` (dotted) from ``raw``: an InputError when it is not there."""
    node: Any = raw
    parts = key.split(".")
    for depth, part in enumerate(parts[:-1]):
        field = ".".join(parts[: depth + 1])
        if isinstance(node, dict) and part not in node:
            raise InputError(path, key, f"override {shown('~' + key)}: no such key to remove")
        node = _child(node, part, field, path)
    last = parts[-1]
    if isinstance(node, list):
        del node[_index(node, last, key, path)]
    elif isinstance(node, dict) and last in node:
        del node[last]
    elif isinstance(node, dict):
        raise InputError(path, key, f"override {shown('~' + key)}: no such key to remove")
    else:
        raise InputError(path, key, "an override goes inside a value that is not a mapping or list")


def _check_list_there(node: Any, part: str, index: str, field: str, path: Path) -> None:
    """Refuse an index into a list the file lacks (``sweeps.0.batch=...`` without
    ``sweeps``): it would become a mapping with the key '0', which the schema then
    refused without saying why."""
    if isinstance(node, dict) and part not in node and index.isascii() and index.isdigit():
        problem = (
            f"override index {shown(index)}: the file has no list {shown(part)} to index;"
            f" set the whole list ({part}=[...])"
        )
        raise InputError(path, field, problem)


def _child(node: Any, part: str, field: str, path: Path) -> Any:
    if isinstance(node, list):
        return node[_index(node, part, field, path)]
    if isinstance(node, dict):
        return node.setdefault(part, {})
    raise InputError(path, field, "an override goes inside a value that is not a mapping or list")


def _index(node: list[Any], part: str, field: str, path: Path) -> int:
    """``part`` as an index of ``node`` (its digits compared before ``int``, which refuses
    a number of thousands of digits with a ValueError)."""
    if not (part.isascii() and part.isdigit()):
        problem = f"override index {shown(part)} is not a list index (list has {len(node)})"
        raise InputError(path, field, problem)
    if len(part.lstrip("0")) > len(str(len(node))) or int(part) >= len(node):
        problem = f"override index {shown(part)} out of range (list has {len(node)})"
        raise InputError(path, field, problem)
    return int(part)
