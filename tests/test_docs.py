"""The docs say what the code does: every results column and command option is
documented, and every link between the docs lands on a file and a heading that exist."""

from __future__ import annotations

import ast
import re
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from edgetwin.results import COLUMNS

ROOT = Path(__file__).resolve().parent.parent
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "data").rglob("README.md")),
]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file (repeated ones get -1, -2, ...)."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # no headings in code
    seen: Counter[str] = Counter()
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug if not seen[slug] else f"{slug}-{seen[slug]}")
        seen[slug] += 1
    return anchors


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_land_on_files_and_headings_that_exist(doc: Path) -> None:
    broken = []
    for target in LINK.findall(doc.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        name, _, anchor = target.partition("#")
        path = (doc.parent / name).resolve() if name else doc
        if not path.exists() or (anchor and path.suffix == ".md" and anchor not in _anchors(path)):
            broken.append(target)
    assert not broken, f"{doc.name}: {broken}"


def test_the_readme_documents_every_results_column() -> None:
    table = (ROOT / "README.md").read_text().split("| column | meaning |", 1)[1]
    table = table.split("\n\n", 1)[0]
    missing = []
    for column in COLUMNS:
        base = re.sub(r"_(lo|hi)$", "", column)
        if f"`{column}`" not in table and not (base != column and f"`{base}`" in table):
            missing.append(column)
    assert not missing


def test_api_md_gives_every_column_its_dtype() -> None:
    from edgetwin.results import DTYPES

    text = (ROOT / "docs/api.md").read_text().split("## Columns and dtypes", 1)[1]
    cells = [re.split(r"(?<!\\)\|", line) for line in text.splitlines() if "| `" in line]
    rows = {cell[2].split("`")[1]: cell[3] for cell in cells}
    for column, dtype in DTYPES.items():
        listed = [d for d, line in rows.items() if f"`{column}`" in line]
        assert listed in ([dtype], []), f"{column}: api.md says {listed}, DTYPES {dtype}"
        if not listed:  # the float row's "every other column"
            assert dtype == "float64", f"{column} ({dtype}) is not in api.md's dtype table"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_table_has_its_header(doc: Path) -> None:
    """A run of table lines starts with a header and its ``| --- |`` line: a blank line
    inside a table (docs/plan.md's question kinds) left its last row a loose line of pipes."""
    text = re.sub(r"```.*?```", "", doc.read_text(), flags=re.S)
    headless = [
        block.split("\n", 1)[0][:60]
        for block in re.findall(r"^(?:\|.*\n?)+", text, flags=re.M)
        if not re.match(r"\|[^\n]*\n\|\s*:?-", block)
    ]
    assert not headless, f"{doc.name}: {headless}"


def _documented_outputs() -> list[tuple[str, str, bool]]:
    """(where, output folder, replaces it) of every command the README, docs/*.md and
    scripts/demo.sh show: a bash line's ``--out`` (``--force``), a python call's ``out=``
    (``force=True``). Placeholders (``DIR``, ``$OUT``) are no folder."""
    found: list[tuple[str, str, bool]] = []
    for doc in [ROOT / "scripts" / "demo.sh", ROOT / "README.md", *sorted(ROOT.glob("docs/*.md"))]:
        text = doc.read_text()
        bash = [text] if doc.suffix == ".sh" else re.findall(r"```bash\n(.*?)```", text, re.S)
        for block in bash:
            for line in block.replace("\\\n", " ").splitlines():
                command = line.split("#", 1)[0]
                out = re.search(r"--out[ =](\S+)", command)
                if "edgetwin" in command and out and re.fullmatch(r"[a-z0-9_./-]+", out[1]):
                    found.append((f"{doc.name}: {command.strip()}", out[1], "--force" in command))
        for block in re.findall(r"```python\n(.*?)```", text, re.S):
            for node in ast.walk(ast.parse(textwrap.dedent(block))):
                keywords = {k.arg: k.value for k in getattr(node, "keywords", [])}
                out_node = keywords.get("out")
                if isinstance(node, ast.Call) and isinstance(out_node, ast.Constant):
                    force = keywords.get("force")
                    forced = isinstance(force, ast.Constant) and force.value is True
                    found.append((f"{doc.name}: {ast.unparse(node)}", str(out_node.value), forced))
    return found


def test_a_folder_two_documented_commands_write_is_replaced_by_each() -> None:
    """A reader runs the commands as the docs show them, in the order they read them: where
    two write the same folder, the second was refused (exit 2, --out not empty). The
    tutorial's first command wrote ``out/prism_jetson``, which ``./scripts/demo.sh``, the
    README's first, had written; README and tutorial both wrote ``out/crowdio``; adaptive.md
    showed its evaluations at its top and again in their sections."""
    writers: dict[str, list[tuple[str, bool]]] = {}
    for where, out, forced in _documented_outputs():
        writers.setdefault(out.removesuffix("/"), []).append((where, forced))
    refused = [
        where
        for shared in writers.values()
        if len(shared) > 1
        for where, forced in shared
        if not forced
    ]
    assert not refused, "\n".join(refused)


def test_the_inline_profile_of_profiles_md_runs(tmp_path: Path) -> None:
    """docs/profiles.md's fleet with a profile given inline runs as the docs show it (the
    README said a profile may be inline; no doc showed how)."""
    import yaml

    import edgetwin

    block = (ROOT / "docs" / "profiles.md").read_text().split("```yaml\n", 1)[1].split("```")[0]
    scenario = yaml.safe_load((ROOT / "scenarios" / "prism_jetson.yaml").read_text())
    scenario |= yaml.safe_load(block)
    scenario.pop("reference")
    scenario["sweeps"] = [{"batch": [1]}]
    (tmp_path / "pair.yaml").write_text(yaml.safe_dump(scenario))
    results = edgetwin.run(tmp_path / "pair.yaml")
    assert results.device_names == {"jetson": "jetson_orin_nano", "pi5": "rpi5"}
    assert {row.status for row in results.rows} == {"ok"}
