"""Loader fuzz: mutations of every shipped scenario, evaluation and plan file.

Loading a mutated file either succeeds or raises ``InputError`` (one short line naming
a file), never another exception; a few mutated files also go through the real command
line (``python -m edgetwin ... --check``): exit 0 or 2, no traceback. The mutations are
drawn from a seeded generator, so every run tries the same ones.
"""

from __future__ import annotations

import copy
import random
import shutil
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from edgetwin.errors import InputError
from edgetwin.evaluate.adaptive_inputs import load_eval_inputs
from edgetwin.evaluate.affinity import load_affinity_settings
from edgetwin.plan.question_file import load_question
from edgetwin.workbench.inputs import load_run_inputs
from tests.conftest import yaml_text

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted((REPO / "scenarios").glob("*.yaml"))
MUTATIONS_PER_FILE = 12  # x 25 shipped files: 300 mutations
SEED = 13
MAX_MESSAGE_CHARS = 600  # an error line is at most this long, whatever the input

DEEP = "__deep_nesting__"  # replaced in the file's text by lists nested 3,000 deep
LONG_NAME = "n" * 300  # one name beyond NAME_MAX (255)
LONG_PATH = "/".join(["p" * 200] * 25)  # beyond PATH_MAX (4096)
PATHS = (LONG_NAME, LONG_PATH, "/etc/passwd", ".", "../data", "/dev/null", "")
WRONG_KIND = ("crowdio_leave.csv", "prism_jetson.yaml", "plan_fleet.plan.yaml")
VALUES: tuple[Any, ...] = (
    *([1], {"x": 1}, 7, -1, -1e9, 0, 2.5, "text", None, True, False),
    *(float("nan"), float("inf"), float("-inf"), "x" * 1_000_000, DEEP, *PATHS),
)
FILE_KEYS = ("reference", "profile", "availability_trace", "scenario", "map_table")


def kind_of(path: Path) -> str:
    """Which loader reads ``path``: plan, affinity (evaluation), eval (adaptive), scenario."""
    if path.name.endswith(".plan.yaml"):
        return "plan"
    if path.name.endswith(".eval.yaml"):
        return "affinity" if "instances" in yaml.safe_load(path.read_text()) else "eval"
    return "scenario"


LOADERS: dict[str, Callable[[Path], object]] = {
    "plan": load_question,
    "affinity": load_affinity_settings,
    "eval": load_eval_inputs,
    "scenario": load_run_inputs,
}
COMMANDS = {"plan": "plan", "affinity": "evaluate-affinity", "eval": "evaluate", "scenario": "run"}


def _slots(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, Any, tuple[Any, ...]]]:
    """(container, key, path) of every value below ``node``."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, child in list(items):
        yield node, key, (*path, key)
        if isinstance(child, dict | list):
            yield from _slots(child, (*path, key))


def _new_file_slots(data: dict[str, Any]) -> list[tuple[Any, Any, tuple[Any, ...]]]:
    """Where a scenario may name a file it does not name yet: reference, availability trace."""
    if "strategies" not in data:  # an evaluation or a question
        return []
    slots: list[tuple[Any, Any, tuple[Any, ...]]] = [(data, "reference", ("reference",))]
    if isinstance(data.get("crowd"), dict):
        slots.append((data["crowd"], "availability_trace", ("crowd", "availability_trace")))
    return slots


def mutate(raw: dict[str, Any], rng: random.Random) -> tuple[dict[str, Any], str]:
    """A deep copy of ``raw`` with one or two random changes, and what they were."""
    data = copy.deepcopy(raw)
    done = []
    for _ in range(rng.choice((1, 1, 2))):
        slots = list(_slots(data))
        files = [s for s in slots if s[1] in FILE_KEYS]
        dicts = [data] + [c[k] for c, k, _ in slots if isinstance(c[k], dict)]
        operation = rng.choice(("drop", "value", "value", "value", "unknown", "file"))
        if operation == "drop" and slots:
            container, key, where = rng.choice([s for s in slots if isinstance(s[0], dict)])
            del container[key]
            done.append(f"drop {where}")
        elif operation == "unknown":
            rng.choice(dicts)["zz_unknown"] = 1
            done.append("unknown key")
        elif operation == "file" and files + _new_file_slots(data):
            value = rng.choice(PATHS + WRONG_KIND)
            container, key, where = rng.choice(files + _new_file_slots(data))
            container[key] = value
            done.append(f"{where} = {value[:20]!r}")
        elif slots:
            container, key, where = rng.choice(slots)
            container[key] = copy.deepcopy(rng.choice(VALUES))
            done.append(f"{where} = {repr(container[key])[:20]}")
    return data, "; ".join(done)


def test_the_fast_yaml_emitter_writes_what_pyyaml_writes() -> None:
    """``yaml_text`` (libyaml) makes the texts below: the same as PyYAML's own emitter."""
    for path in SHIPPED:
        raw = yaml.safe_load(path.read_text())
        for data in (raw, {**raw, "zz_long": "x" * 1000, "zz_float": float("-inf")}):
            assert yaml_text(data) == yaml.safe_dump(data, sort_keys=False), path


def as_text(data: dict[str, Any]) -> str:
    text = yaml_text(data)
    return text.replace(DEEP, "[" * 3000 + "]" * 3000)


def mutations(path: Path, count: int) -> Iterator[tuple[str, str]]:
    """``count`` mutated texts of ``path`` with their descriptions, seeded by its name."""
    raw = yaml.safe_load(path.read_text())
    rng = random.Random(f"{SEED}-{path.name}")
    for _ in range(count):
        data, description = mutate(raw, rng)
        yield as_text(data), description


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of scenarios/ (data/ linked beside it, as in the repository)."""
    root = tmp_path_factory.mktemp("loader-fuzz")
    shutil.copytree(REPO / "scenarios", root / "scenarios")
    (root / "data").symlink_to(REPO / "data")
    return root / "scenarios"


def check_input_error(error: InputError) -> str | None:
    """What is wrong with ``error`` as a user's one line, or None."""
    line = f"edgetwin: error: {error.message}"
    if "\n" in line or len(line) > MAX_MESSAGE_CHARS:
        return f"not one short line ({len(line)} characters): {line[:200]!r}"
    if error.path is None:
        return f"names no file: {line!r}"
    return None


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shipped", SHIPPED, ids=[p.name for p in SHIPPED])
def test_mutated_file_loads_or_is_an_input_error(shipped: Path, workspace: Path) -> None:
    target = workspace / shipped.name
    loader = LOADERS[kind_of(shipped)]
    problems = []
    try:
        for text, description in mutations(shipped, MUTATIONS_PER_FILE):
            target.write_text(text)
            try:
                loader(target)
            except InputError as exc:
                problem = check_input_error(exc)
                if problem is not None:
                    problems.append(f"{description}: {problem}")
            except Exception as exc:  # the defect this test looks for
                where = traceback.extract_tb(exc.__traceback__)[-1]
                found = f"{type(exc).__name__}: {str(exc)[:120]} at {where.filename}:{where.lineno}"
                problems.append(f"{description}: {found}")
    finally:
        shutil.copyfile(shipped, target)
    assert not problems, "\n".join(problems)


CLI_FILES = ("prism_jetson.yaml", "crowd_city.yaml", "adaptive_prism.eval.yaml")
CLI_FILES += ("affinity_small.eval.yaml", "plan_crowd_capacity.plan.yaml")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", CLI_FILES)
def test_mutated_file_through_the_command_line(name: str, workspace: Path) -> None:
    """A mutation of ``name`` and two fixed bad values through ``python -m edgetwin``."""
    shipped = REPO / "scenarios" / name
    raw = yaml.safe_load(shipped.read_text())
    texts = [text for text, _ in mutations(shipped, 1)]
    texts.append(as_text({**raw, next(iter(raw)): "x" * 1_000_000}))
    texts.append(as_text({**raw, "zz_unknown": DEEP}))
    command = COMMANDS[kind_of(shipped)]
    for k, text in enumerate(texts):
        target = workspace / f"cli-{k}-{name}"
        target.write_text(text)
        out = workspace.parent / f"out-{k}-{name}"
        proc = subprocess.run(
            [sys.executable, "-m", "edgetwin", command, str(target), "--out", str(out), "--check"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=workspace,
        )
        assert proc.returncode in (0, 2), proc.stderr[-2000:]
        assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert len(proc.stderr) <= MAX_MESSAGE_CHARS + 1, proc.stderr[:500]
        assert proc.returncode == 0 or proc.stderr.startswith("edgetwin: error: ")
        assert not out.exists()
