"""The docs name code that exists. In README.md and docs/*.md, outside fenced blocks:

- a path in backticks whose first folder is edgetwin/, tests/, benchmarks/, scripts/,
  scenarios/ or data/ (from the repo root), or a folder of edgetwin/ or data/ (written from
  its parent: `sim/network.py`, `vit/worker.py`, `traces/h200-loopback-2026-11/`), is a file
  or folder (`{a,b}` expanded, `*` globbed); `x.py::test_y` and `x.py:name` also name a
  function or name defined in that file;
- a bare `name.py` is a file somewhere in the repository, and a `.py` or `.sh` file under
  edgetwin/, tests/, benchmarks/ or scripts/ in a code block (`python benchmarks/x.py`) exists;
- a dotted name in backticks (a call's arguments dropped) names something that exists
  (importlib, then getattr or a dataclass/model field) when its head is `edgetwin`, a
  subpackage of edgetwin (`sim.collectives.received_bytes`), a class defined at the top of
  a module of edgetwin (`Device._schedule_drain`), or the file name of a module of edgetwin
  (`fit_check.at_bound`: any module of that name may hold it), unless each of its parts is
  a field name of a class of edgetwin (`network.latency_ms` is a scenario's key);
- `python -m edgetwin.x`, anywhere in the docs (code blocks included), names a module.

Anything else (a placeholder such as `<name>`, an output folder `out/...`, another library's
`torch.profiler`) is not resolved mechanically and not checked."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "edgetwin"
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "data").rglob("README.md")),
    *sorted((ROOT / "benchmarks").glob("*.py")),
]
ROOT_FOLDERS = ("edgetwin", "tests", "benchmarks", "scripts", "scenarios", "data")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
# names in the docs of code that is not the repository's: the measuring team's scripts
# (data/README.md) and jetson-stats' module (`jtop.stats`)
OTHERS = frozenset({"collect.py", "bw_exchange.py", "jtop"})
NAME = r"`([A-Za-z_][\w.]*)(?:\(\))?`"
PY_FILE = r"`([\w/]+\.py)`"
NAME_IN_FILE = re.compile(rf"{NAME},? (?:in|of|from|\() ?{PY_FILE}")
FILE_HOLDS_NAME = re.compile(rf"{PY_FILE}(?:'s|:| \(| holds| keeps| has) ?{NAME}")
FILE_SUFFIX = re.compile(r"\.(py|yaml|yml|csv|json|jsonl|md|html|sh|toml|txt|gz|svg|pdf|parquet)$")


@cache
def _modules() -> dict[str, Path]:
    """Every module of edgetwin by dotted name (a package by its own name)."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


@cache
def _trees() -> dict[str, ast.Module]:
    return {name: ast.parse(path.read_text()) for name, path in _modules().items()}


@cache
def _classes() -> dict[str, list[str]]:
    """The modules that define a class at their top level, by class name."""
    found: dict[str, list[str]] = {}
    for name, tree in _trees().items():
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(name)
    return found


@cache
def _field_names() -> frozenset[str]:
    """The annotated names in class bodies: the keys of scenario, profile and JSON files."""
    return frozenset(
        node.target.id
        for tree in _trees().values()
        for cls in ast.walk(tree)
        if isinstance(cls, ast.ClassDef)
        for node in cls.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    )


def _has(owner: Any, name: str) -> bool:
    """An attribute, or a field of a class (a dataclass's or model's, annotated only)."""
    return hasattr(owner, name) or (
        isinstance(owner, type)
        and any(name in vars(k).get("__annotations__", {}) for k in owner.__mro__)
    )


def _resolves(parts: list[str]) -> bool:
    """``parts`` are a module of edgetwin (its longest prefix that is one), then attributes."""
    for cut in range(len(parts), 0, -1):
        if ".".join(parts[:cut]) in _modules():
            break
    else:
        return False
    owner: Any = importlib.import_module(".".join(parts[:cut]))
    for name in parts[cut:]:
        if not _has(owner, name):
            return False
        owner = getattr(owner, name, None)
    return True


def _dotted_candidates(name: str) -> list[list[str]]:
    """The ways ``name`` reads as a module of edgetwin then attributes; none: not checked."""
    parts = name.split(".")
    head = parts[0]
    if head == "edgetwin":
        return [parts]
    if (PACKAGE / head / "__init__.py").exists():
        return [["edgetwin", *parts]]
    if head in _classes():
        return [[*module.split("."), *parts] for module in _classes()[head]]
    named = [module for module in _modules() if module.rsplit(".", 1)[-1] == head]
    # `network.latency_ms`, `crowd.fleet.N.ram_mb`: a scenario's keys
    keys = all(part in _field_names() or part.isupper() for part in parts)
    if named and head not in OTHERS and len(parts) > 1 and not keys:
        return [[*module.split("."), *parts[1:]] for module in named]
    return []


def _bases(path: str, doc: Path) -> list[Path]:
    """The folders a relative ``path`` is written from: the root, the parent of a folder of
    edgetwin/, data/ (when a folder follows: `traces/decoder_latency.csv` is a run's), or
    data/traces/ or data/reference/ (`prism-jetson/`)."""
    head, _, rest = path.partition("/")
    if not re.fullmatch(r"\w[\w-]*", head):
        return []
    if head in ROOT_FOLDERS:
        return [ROOT]
    data = ROOT / "data"
    folders = [found.parent for found in PACKAGE.rglob(head) if found.is_dir()]
    if (data / head).is_dir() and not FILE_SUFFIX.search(rest.split("/", 1)[0]):
        folders.append(data)
    folders += [top for top in data.iterdir() if (top / head).is_dir()]
    if doc.name == "README.md" and doc.parent != ROOT and (doc.parent / head).exists():
        folders.append(doc.parent)
    return folders


def _expand(path: str) -> list[str]:
    """``sim/{device,network}.py`` -> both paths."""
    match = re.search(r"\{([^{}]*)\}", path)
    if not match:
        return [path]
    return [
        expanded
        for option in match.group(1).split(",")
        for expanded in _expand(path[: match.start()] + option + path[match.end() :])
    ]


@cache
def _tracked() -> tuple[str, ...]:
    """The repository's files (git ls-files)."""
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return tuple(listed.stdout.splitlines())


def _path_problem(token: str, doc: Path) -> str | None:
    """Why the path ``token`` names nothing; None when it does or is not checked."""
    match = re.fullmatch(r"(.+?\.py)::?(\w+)", token)
    path, name = (match.group(1), match.group(2)) if match else (token, "")
    if "/" not in path:
        if path.endswith(".py") and path not in {Path(line).name for line in _tracked()} | OTHERS:
            return "no such file in the repository"
        return None
    bases = _bases(path, doc)
    if not bases:
        return None
    for relative in _expand(path.rstrip("/")):
        found = [hit for base in bases for hit in base.glob(relative)]
        if not found:
            return "no such file or folder"
        if name and not any(
            re.search(rf"^\s*(def|class) {name}\b|^{name}\b", hit.read_text(), re.M)
            for hit in found
        ):
            return f"no {name} in it"
    return None


def _text(doc: Path) -> str:
    """A Markdown file's text, or a Python file's docstring."""
    if doc.suffix == ".py":
        return ast.get_docstring(ast.parse(doc.read_text())) or ""
    return doc.read_text()


def _spans(doc: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", _text(doc), flags=re.S)
    return [span.strip() for span in CODE_SPAN.findall(text)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_paths_exist(doc: Path) -> None:
    stale = []
    for span in _spans(doc):
        if re.search(r"[<>\s]|\.\.|(^|/)[A-Z_]+(\.\w+)?$", span) or not re.search(
            r"/|\w\.py$", span
        ):
            continue
        problem = _path_problem(span, doc)
        if problem:
            stale.append(f"{span}: {problem}")
    for block in re.findall(r"```.*?```", _text(doc), flags=re.S):
        for path in re.findall(
            r"(?<![\w/.])(?:edgetwin|tests|benchmarks|scripts)/[\w/]+\.(?:py|sh)", block
        ):
            if not (ROOT / path).is_file():
                stale.append(f"{path}: no such file (in a code block)")
    assert not stale, f"{doc.name}: {stale}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_code_exists(doc: Path) -> None:
    names = [
        match.group(0)
        for span in _spans(doc)
        if (match := DOTTED.match(span)) and not FILE_SUFFIX.search(match.group(0))
    ]
    names += re.findall(r"python -m (edgetwin[\w.]*)", _text(doc))
    stale = []
    for name in names:
        candidates = _dotted_candidates(name)
        if candidates and not any(_resolves(parts) for parts in candidates):
            stale.append(name)
    assert not stale, f"{doc.name}: {sorted(set(stale))}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_name_said_to_be_in_a_file_is_defined_there(doc: Path) -> None:
    """`name` in `path.py` (`Device._schedule_drain` in `sim/device.py`), `name` (`path.py`,
    `path.py`'s `name`, `path.py`: `name`, `path.py` holds `name`."""
    stale = []
    text = re.sub(r"\s+", " ", _text(doc))
    pairs = NAME_IN_FILE.findall(text) + [pair[::-1] for pair in FILE_HOLDS_NAME.findall(text)]
    for name, path in pairs:
        if "/" in path:
            files = [base / path for base in _bases(path, doc) if (base / path).is_file()]
        else:
            files = [ROOT / line for line in _tracked() if Path(line).name == path]
        last = name.rsplit(".", 1)[-1]
        defined = rf"^\s*(def|class) {last}\b|^\s*{last}\b[^=\n]*="
        if files and not any(re.search(defined, hit.read_text(), re.M) for hit in files):
            stale.append(f"{name} in {path}")
    assert not stale, f"{doc.name}: {stale}"
