"""The package's layout as the docs draw it is the package as it is: docs/architecture.md's
layer table is pyproject.toml's layers contract (the same modules in the same layer, `|`
where the contract forbids siblings to import each other), the contract places every
module and subpackage of edgetwin, and the README's layout names each of them and nothing
that is gone."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "edgetwin"


def _contract_layers() -> list[str]:
    """The layers contract of pyproject.toml, top layer first."""
    with open(ROOT / "pyproject.toml", "rb") as handle:
        contracts = tomllib.load(handle)["tool"]["importlinter"]["contracts"]
    (layers,) = [contract["layers"] for contract in contracts if contract["type"] == "layers"]
    return list(layers)


def _names(text: str) -> list[str]:
    """The modules and packages of edgetwin that ``text`` names, without ``edgetwin.``."""
    return sorted(re.sub(r"^edgetwin\.", "", name) for name in re.findall(r"[\w.]+", text))


def _package_parts() -> set[str]:
    """The top-level modules and subpackages of edgetwin, by name."""
    modules = {path.stem for path in PACKAGE.glob("*.py")} - {"__init__"}
    return modules | {path.parent.name for path in PACKAGE.glob("*/__init__.py")}


def test_architecture_md_draws_the_layers_contract() -> None:
    text = (ROOT / "docs/architecture.md").read_text()
    rows = re.findall(r"^\| \d+ [^|]+ \| (.+?) \| [^|]*[^\\]\|$", text, flags=re.M)
    drawn = [_names(" ".join(re.findall(r"`([\w.]+)`", row))) for row in rows]
    layers = _contract_layers()
    assert drawn == [_names(layer) for layer in layers]
    assert [r"\|" in row for row in rows] == [" | " in layer for layer in layers]


def test_the_layers_contract_places_every_part_of_the_package() -> None:
    placed = {name for layer in _contract_layers() for name in _names(layer)}
    assert sorted(_package_parts() - placed) == []


def test_the_readme_layout_names_every_part_of_the_package_and_nothing_gone() -> None:
    """A line starts with a path, or several (`edgetwin/errors.py, atomic.py`: one folder)."""
    block = (ROOT / "README.md").read_text().split("## Layout", 1)[1].split("```")[1]
    named = set()
    for paths in re.findall(r"^edgetwin/[\w/.]+(?:, [\w.]+)*", block, flags=re.M):
        first, *others = paths.split(", ")
        folder = first.rpartition("/")[0]
        for path in [first, *(f"{folder}/{name}" for name in others)]:
            assert (ROOT / path).exists(), f"README's layout: {path} is gone"
            if path.rstrip("/").count("/") == 1:
                named.add(Path(path).stem)
    assert sorted(_package_parts() - named) == []
