"""Bad input to the commands beside ``run``: calibration specs and the tables they read,
results tables given to ``report`` and ``compare``, ``--emu`` folders and output paths.

Each case goes through the real command line in-process (``edgetwin.cli.main``) and must
exit 2 with one line naming the file and the field, and leave nothing behind. The cases
are the ones a fuzz of the shipped specs, tables and output paths found tracebacking.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import edgetwin
from edgetwin.atomic import write_texts_together
from edgetwin.calibration.fit_android import write_android_profiles
from edgetwin.calibration.profile_io import write_profile
from edgetwin.cli import main
from edgetwin.emu.mininet.mn import DEBIAN_MININET
from edgetwin.errors import InputError
from edgetwin.phone_profile import load_phone_profile
from edgetwin.profile import load_profile
from edgetwin.scenario import load_scenario
from edgetwin.schema import dump_yaml, load_yaml
from edgetwin.sweep_spec import SweepSpec

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "edgetwin" / "calibration" / "specs"
MAX_LINE_CHARS = 600


def _listing(folder: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(folder.rglob("*"))
    }


def assert_clean_failure(
    argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path, *expect: str
) -> str:
    """``main(argv)`` exits 2 with one line holding ``expect``; ``tmp_path`` is unchanged."""
    before = _listing(tmp_path)
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("edgetwin: error: "), err
    assert len(lines[0]) <= MAX_LINE_CHARS
    for fragment in expect:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
    assert _listing(tmp_path) == before
    return lines[0]


def _spec(name: str, tmp_path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """A shipped calibration spec with absolute paths, changed by ``change``, in tmp_path."""
    raw = yaml.safe_load((SPECS / f"{name}.yaml").read_text())
    for key in ("reference", "scenario", "session_loads", "traces"):
        if key in raw:
            raw[key] = str((SPECS / raw[key]).resolve())
    change(raw)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


# ---------------------------------------------------------------- YAML files


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ("name: a\nseed: 1\nname: b\n", ("line 3", "key 'name' given twice")),
        ("name: a\nnetwork: {bandwidth_mbps: 1, bandwidth_mbps: 2}\n", ("line 2", "'bandwidth")),
        (b"name: caf\xe9\n", ("line 1: not UTF-8 text",)),
        # a ValueError of int() (sys.get_int_max_str_digits) was a traceback, exit 1
        ("name: a\nseed: " + "9" * 5000 + "\n", ("line 2", "an integer of 5,000 characters")),
    ],
    ids=["repeated-key", "repeated-nested-key", "latin-1", "5000-digits"],
)
def test_scenario_text_that_yaml_reads_ambiguously(
    text: str | bytes, expect: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A repeated key was silently the last one's value; non-UTF-8 bytes a codec message."""
    scenario = tmp_path / "scenario.yaml"
    scenario.write_bytes(text if isinstance(text, bytes) else text.encode())
    argv = ["run", str(scenario), "--out", str(tmp_path / "out")]
    assert_clean_failure(argv, capsys, tmp_path, "scenario.yaml", *expect)


def test_numbers_with_an_exponent_and_no_dot_are_numbers(tmp_path: Path) -> None:
    """YAML 1.1 (PyYAML) read ``1e1`` as the string "1e1": a float field took it, but an
    integer field ('unable to parse string as an integer') and a CR (a number or a list:
    'a valid tuple') refused it. YAML 1.2 and a reader read it as the number 10."""
    text = (REPO / "scenarios/prism_jetson.yaml").read_text()
    text = text.replace("seed: 0\n", "seed: 1e1\n").replace("cr: [9.9, 4.95, 3.3]", "cr: 9.9e0")
    path = tmp_path / "scenario.yaml"
    path.write_text(text.replace("reference: ", "# reference: "))  # no table beside the copy
    scenario = load_scenario(path, ["network.latency_ms=2.5E-1", "repetitions=2e0"])
    assert scenario.seed == 10 and scenario.repetitions == 2
    assert scenario.strategies[2].cr == (9.9,)
    assert scenario.network.latency_ms == 0.25
    assert scenario.name == "prism_jetson"  # other plain scalars read as before


def test_a_string_that_reads_as_a_number_is_written_quoted() -> None:
    """A name "1e3" in a written file (scenario.resolved.yaml, a fitted profile) must read
    back as the string: PyYAML's dumper, knowing only YAML 1.1, left it bare."""
    data = {"name": "1e3", "stages": ["2.5E-1", ".5e1"], "bandwidth_mbps": 1e3}
    text = dump_yaml(data)
    assert "'1e3'" in text
    assert load_yaml(text) == data


@pytest.mark.parametrize(
    ("item", "expect"),
    [
        ("network={bandwidth_mbps: 1, bandwidth_mbps: 2}", ("field 'network'", "not valid YAML")),
        ("network.latency_ms=" + "9" * 5000, ("'network.latency_ms'", "integer of 5,000")),
        ("sweeps=[]", ("field 'sweeps'", "give at least one value")),  # was 0 runs and exit 0
        # these three ran: true as 1 ms, an endless link, a link of no rate at all
        ("network.latency_ms=true", ("field 'network.latency_ms'", "a number, not true")),
        ("devices.0.count=false", ("field 'devices.0.count'", "a number, not false")),
        ("network.bandwidth_mbps=.inf", ("field 'network.bandwidth_mbps'", "finite number")),
        ("network.bandwidth_mbps=.nan", ("field 'network.bandwidth_mbps'", "finite number")),
        # a 300-digit segments column; a key that named no field
        ("strategies=[{name: prism, cr: 1.0e-300}]", ("'strategies.0.cr.0'", "greater than or")),
        (".network=1", ("override '.network': a dotted key with an empty part",)),
        # these ran: true as 1 inside a list (a scalar was refused), [] as the default
        (
            "sweeps=[{batch: [1], bandwidth_mbps: [true]}]",
            ("'sweeps.0.bandwidth_mbps.0'", "not true"),
        ),
        ("sweeps=[{bandwidth_mbps: true}]", ("'sweeps.0.bandwidth_mbps.0'", "a number, not true")),
        ("sweeps=[{batch: [1, false]}]", ("field 'sweeps.0.batch.1'", "a number, not false")),
        ("sweeps=[{devices: [true]}]", ("field 'sweeps.0.devices.0'", "a number, not true")),
        ("strategies=[{name: prism, cr: [true]}]", ("'strategies.0.cr.0'", "a number, not true")),
        (
            "sweeps=[{bandwidth_mbps: []}]",
            ("field 'sweeps.0.bandwidth_mbps'", "give at least one value"),
        ),
        (
            "sweeps=[{prompt_tokens: []}]",
            ("field 'sweeps.0.prompt_tokens'", "give at least one value"),
        ),
        # ran, a row out of memory, which a results table's reader refuses (MAX_BATCH)
        ("sweeps=[{batch: [2000000]}]", ("'sweeps.0.batch.0'", "less than or equal to 1,048,576")),
        # ran, the step never played; the emulator's clock thread died of an OverflowError
        (
            "network.schedule=[{at_ms: 1.0e+300, bandwidth_mbps: 100}]",
            ("'network.schedule.0.at_ms'", "after the longest run", "2,678,400,000 ms"),
        ),
    ],
    ids=[
        *(
            "repeated-key",
            "5000-digits",
            "no-sweeps",
            "true-as-number",
            "false-as-count",
            "inf",
            "nan",
        ),
        *("tiny-cr", "empty-key-part", "true-in-a-list", "true-as-a-list", "false-in-a-list"),
        *("true-as-devices", "true-as-cr", "no-bandwidths", "no-prompt-lengths", "huge-batch"),
        "step-after-any-run",
    ],
)
def test_bad_set_value(
    item: str, expect: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = REPO / "scenarios" / "prism_jetson.yaml"
    argv = ["run", str(scenario), "--out", str(tmp_path / "out"), "--set", item]
    assert_clean_failure(argv, capsys, tmp_path, *expect)


def test_tensor_parallel_on_more_devices_than_heads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ViT-B/16's 12 heads on 13 boards: one would hold no head (the twin ran it, its
    ranks' shares summing to 13/12 of the model; the real code splits heads)."""
    scenario = REPO / "scenarios" / "prism_jetson.yaml"
    sets = ["devices.0.count=13", "sweeps=[{batch: [1], devices: [2, 13]}]"]
    sets += ["strategies=[{name: single}, {name: tensor_parallel}]"]
    argv = ["run", str(scenario), "--out", str(tmp_path / "out")]
    argv += [arg for item in sets for arg in ("--set", item)]
    expect = "field 'sweeps.0.devices'", "tensor_parallel: 12 heads cannot be split over 13"
    assert_clean_failure(argv, capsys, tmp_path, *expect)


def test_a_sweep_list_left_out_stays_out_of_a_dump() -> None:
    """``[]`` is refused, so a dump (a resolved scenario, a plan's payload) must not write
    one for a list left out."""
    sweep = SweepSpec(batch=(2,))
    assert sweep.model_dump(mode="json") == {"batch": [2], "devices": [2]}
    assert SweepSpec.model_validate_json(sweep.model_dump_json()) == sweep


@pytest.mark.timeout(120)
def test_a_folder_written_before_still_loads(tmp_path: Path) -> None:
    """Resolved scenarios written before ``[]`` was refused hold one wherever a sweep left
    a list out (every crowd run's ``bandwidth_mbps``): their folders still load and
    report."""
    out = tmp_path / "out"
    scenario = REPO / "scenarios" / "emu_crowdio.yaml"
    assert main(["run", str(scenario), "--mode", "twin", "--out", str(out), "--quiet"]) == 0
    resolved = out / "scenario.resolved.yaml"
    raw = yaml.safe_load(resolved.read_text())
    raw["sweeps"].append({"batch": [1], "devices": [2], "bandwidth_mbps": []})
    for sweep in raw["sweeps"]:
        sweep.update({"prompt_tokens": [], "output_tokens": []})
    resolved.write_text(yaml.safe_dump(raw, sort_keys=False))
    loaded = edgetwin.load_results(out)
    assert loaded.scenario is not None and loaded.scenario.sweeps[-1].bandwidth_mbps == ()
    assert main(["report", str(out)]) == 0


@pytest.mark.parametrize(
    ("item", "expect"),
    [
        ("sweeps=[{bandwidth_mbps: [true]}]", ("'sweeps.0.bandwidth_mbps.0'", "not true")),
        (
            "sweeps=[{bandwidth_mbps: []}]",
            ("field 'sweeps.0.bandwidth_mbps'", "give at least one value"),
        ),
    ],
    ids=["true-as-bandwidth", "no-bandwidths"],
)
def test_bad_crowd_sweep(
    item: str, expect: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A crowd twin ran its phones' links at 1 Mbit/s, or at network.bandwidth_mbps."""
    scenario = REPO / "scenarios" / "emu_crowdio.yaml"
    argv = ["run", str(scenario), "--mode", "twin", "--out", str(tmp_path / "out"), "--set", item]
    assert_clean_failure(argv, capsys, tmp_path, "emu_crowdio.yaml", *expect)


@pytest.mark.parametrize(
    ("axes", "expect"),
    [
        ({"fleet_size": [3], "bandwidth_mbps": [True]}, ("'axes.bandwidth_mbps.0'", "not true")),
        ({"fleet_size": [True, 2]}, ("field 'axes.fleet_size.0'", "a number, not true")),
        (
            {"fleet_size": [3], "bandwidth_mbps": []},
            ("'axes.bandwidth_mbps'", "give at least one value"),
        ),
        # was "field 'axes.batch': unknown key (did you mean 'batch'?)"
        ({"fleet_size": [3], "batch": [1]}, ("field 'axes': fleet_size sweeps a crowd, batch",)),
        ({"fleet_sizes": [3]}, ("'axes.fleet_sizes': unknown key (did you mean 'fleet_size'?)",)),
        ({"fleet_size": [3], "bogus": [1]}, ("'axes.bogus': unknown key",)),
        # each was "field 'axes.batch': required key is missing"
        ({"bandwidth_mbps": [10]}, ("field 'axes.fleet_size': required key is missing",)),
        ({}, ("field 'axes.fleet_size': required key is missing", "crowd_capacity")),
    ],
    ids=[
        *("true-as-bandwidth", "true-as-fleet-size", "no-bandwidths", "a-device-axis-too"),
        *("misspelt-fleet-size", "unknown-axis", "no-fleet-size", "no-axes"),
    ],
)
def test_bad_crowd_question_axes(
    axes: dict[str, Any],
    expect: tuple[str, ...],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A crowd_capacity plan ran fleets of 1 phone, links of 1 Mbit/s, or the scenario's
    bandwidth for ``bandwidth_mbps: []``."""
    raw = yaml.safe_load((REPO / "scenarios" / "plan_crowd_capacity.plan.yaml").read_text())
    raw["scenario"] = str(REPO / "scenarios" / raw["scenario"])
    raw["axes"] = axes
    question = tmp_path / "q.plan.yaml"
    question.write_text(yaml.safe_dump(raw, sort_keys=False))
    argv = ["plan", str(question), "--out", str(tmp_path / "out"), "--quiet"]
    assert_clean_failure(argv, capsys, tmp_path, "q.plan.yaml", *expect)


_LIST = "should be a list: [a, b], or one '- item' a line"
_MAPPING = "should be a mapping: one 'key: value' a line, or {key: value}"


@pytest.mark.parametrize(
    ("command", "file", "item", "expect"),
    [
        ("run", "prism_jetson.yaml", "devices=jetson", ("'devices'", _LIST, "(got 'jetson')")),
        ("run", "prism_jetson.yaml", "strategies.1.cr={a: 1}", ("'strategies.1.cr'", _LIST)),
        ("run", "prism_jetson.yaml", "sweeps.0.batch=abc", ("'sweeps.0.batch'", _LIST)),
        ("run", "prism_jetson.yaml", "network.schedule=5", ("'network.schedule'", _LIST)),
        ("run", "crowd_city.yaml", "crowd.schedulers=affinity", ("'crowd.schedulers'", _LIST)),
        ("run", "emu_smoke.yaml", "emulator.host_cpu_cores=2", ("'emulator.host_cpu_cores'",)),
        (
            "run",
            "crowd_city.yaml",
            "crowd.fleet.0.battery_start_pct=[50]",
            ("'crowd.fleet.0.battery_start_pct'", "should have 2 items, not 1 (got [50])"),
        ),
        (
            "run",
            "crowd_city.yaml",
            "crowd.fleet.0.battery_start_pct=[1, 2, 3]",
            ("'crowd.fleet.0.battery_start_pct'", "should have at most 2 items, not 3"),
        ),
        ("run", "prism_jetson.yaml", "devices=[5]", ("'devices.0'", _MAPPING, "(got 5)")),
        ("plan", "plan_fleet.plan.yaml", "set=devices.0.count=8", ("'set'", _LIST)),
        ("plan", "plan_best_mode.plan.yaml", "question.metrics=total_ms", ("'question.metrics'",)),
        ("plan", "plan_fleet.plan.yaml", "axes.batch={a: 1}", ("'axes.batch'", _LIST)),
        ("plan", "plan_fleet.plan.yaml", "axes=5", ("'axes'", _MAPPING)),
        ("evaluate", "adaptive_prism.eval.yaml", "policies=adaptive", ("'policies'", _LIST)),
        ("evaluate", "adaptive_prism.eval.yaml", "held_out.batch=abc", ("'held_out.batch'",)),
        ("evaluate", "adaptive_prism.eval.yaml", "held_out=5", ("'held_out'", _MAPPING)),
    ],
    ids=[
        *("devices", "cr", "sweep-batch", "schedule", "schedulers", "host-cores", "pair-short"),
        *("pair-long", "a-device", "plan-set", "plan-metrics", "plan-axis", "plan-axes"),
        *("eval-policies", "eval-held-out-batch", "eval-held-out"),
    ],
)
def test_a_value_of_the_wrong_kind_of_container_in_plain_words(
    command: str,
    file: str,
    item: str,
    expect: tuple[str, ...],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A list field given one value or a mapping said pydantic's "Input should be a valid
    tuple", a mapping field given a value "Input should be a valid dictionary or instance
    of DeviceSpec", a [low, high] pair given one number "field '....battery_start_pct.1':
    required key is missing" (scenario, plan and evaluation files alike)."""
    argv = [command, str(REPO / "scenarios" / file), "--out", str(tmp_path / "out")]
    line = assert_clean_failure([*argv, "--set", item], capsys, tmp_path, file, *expect)
    assert "valid tuple" not in line and "instance of" not in line and "Tuple" not in line


@pytest.mark.parametrize(
    ("command", "file", "item", "expect"),
    [
        (
            "run",
            "prism_jetson.yaml",
            "network.bandwidth_mbps=fast",
            "should be a number, not 'fast'",
        ),
        ("run", "prism_jetson.yaml", "network.bandwidth_mbps=true", "should be a number, not true"),
        ("run", "prism_jetson.yaml", "repetitions=2.5", "should be a whole number, not 2.5"),
        ("run", "prism_jetson.yaml", "sweeps.0.batch=[x]", "should be a whole number, not 'x'"),
        ("run", "prism_jetson.yaml", "name=[1, 2]", "should be text, not [1, 2]"),
        ("run", "prism_jetson.yaml", "description=", "should be text, not null"),
        (
            "run",
            "prism_jetson.yaml",
            "network.medium=wifi",
            "should be 'dedicated' or 'shared', not 'wifi'",
        ),
        ("run", "prism_jetson.yaml", "devices.0.count=-1", "should be greater than 0, not -1"),
        (
            "run",
            "crowd_city.yaml",
            "crowd.horizon_s=1e10",
            "should be less than or equal to 2,678,400, not 10,000,000,000",
        ),
        ("plan", "plan_fleet.plan.yaml", "axes.batch=[x]", "should be a whole number, not 'x'"),
        ("plan", "plan_fleet.plan.yaml", "question.target_p95_ms=-1", "greater than 0, not -1"),
        ("evaluate", "adaptive_prism.eval.yaml", "weight=heavy", "should be a number, not 'heavy'"),
        ("evaluate", "adaptive_prism.eval.yaml", "objective=fast", ", not 'fast'"),
    ],
    ids=[
        *("number", "boolean", "whole", "sweep-batch", "text", "empty", "choice", "bound"),
        *("large-bound", "plan-axis", "plan-target", "eval-weight", "eval-objective"),
    ],
)
def test_a_single_value_of_the_wrong_kind_in_plain_words(
    command: str,
    file: str,
    item: str,
    expect: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """pydantic's words for one value reached the user: "Input should be a valid number,
    unable to parse string as a number (got 'fast')", "Input should be less than or equal
    to 2678400 (got 10000000000.0)" (scenario, plan and evaluation files alike)."""
    field = item.split("=")[0]
    argv = [command, str(REPO / "scenarios" / file), "--out", str(tmp_path / "out")]
    line = assert_clean_failure([*argv, "--set", item], capsys, tmp_path, file, f"'{field}")
    assert expect in line and "Input" not in line and "valid" not in line and "(got" not in line


@pytest.mark.parametrize(
    ("item", "expect"),
    [
        ("repetitions=1,000", "not '1,000': write it without separators, 1000"),
        (
            "network.latency_ms=5ms",
            "not '5ms': a number alone, in the unit its key names (latency_ms: 5)",
        ),
        ("sweeps.0.bandwidth_mbps=[400 Mbps]", "unit its key names (bandwidth_mbps: 400)"),
        # one value stands for a list of it: said as one, not "should be a list"
        ("sweeps.0.bandwidth_mbps=400 Mbps", "unit its key names (bandwidth_mbps: 400)"),
        ("sweeps.0.batch=1,000", "not '1,000': write it without separators, 1000"),
    ],
    ids=["separators", "unit", "unit-in-a-list", "unit-for-a-list", "separators-for-a-list"],
)
def test_a_number_written_as_edgetwin_writes_it_or_with_its_unit_says_how_to_write_it(
    item: str, expect: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """edgetwin writes 1,000 Mbps on every page; given back in a file (YAML reads it as
    text) or with its unit, a number was only 'should be a number'."""
    argv = ["run", str(REPO / "scenarios" / "prism_jetson.yaml"), "--out", str(tmp_path / "o")]
    assert_clean_failure([*argv, "--set", item], capsys, tmp_path, "should be a", expect)


@pytest.mark.parametrize(
    ("item", "expect"),
    [
        (
            "network={bandwidth_mbps: 1,000}",
            ("'network.0': unknown key 0: a key is text", "write 1000"),
        ),
        ("network={5: 1}", ("'network.5': unknown key 5: a key is text",)),
        ("network={true: 1}", ("unknown key true: a key is text",)),
    ],
    ids=["separators-in-braces", "number-key", "boolean-key"],
)
def test_a_key_that_is_not_text_is_an_unknown_key_in_plain_words(
    item: str, expect: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pydantic's words reached the user, "Keys should be strings (got 0)", where 1,000 in
    a {...} mapping reads as 1 and a key 000."""
    argv = ["run", str(REPO / "scenarios" / "prism_jetson.yaml"), "--out", str(tmp_path / "o")]
    line = assert_clean_failure([*argv, "--set", item], capsys, tmp_path, *expect)
    assert "Keys should be" not in line


@pytest.mark.parametrize("value", ["5", "fast", ""], ids=["number", "text", "empty"])
def test_a_question_that_is_neither_a_mapping_nor_a_list_says_both_are_taken(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``question: 5`` said "should be a mapping", though a list of questions is taken
    too."""
    question = REPO / "scenarios" / "plan_fleet.plan.yaml"
    argv = ["plan", str(question), "--out", str(tmp_path / "out"), "--set", f"question={value}"]
    expect = ("field 'question': should be a mapping", "or a list of questions")
    assert_clean_failure(argv, capsys, tmp_path, "plan_fleet.plan.yaml", *expect)


@pytest.mark.parametrize(
    ("command", "file", "item", "expect"),
    [
        ("run", "prism_jetson.yaml", "strategies.0.name=magic", "'magic'; known: single, voltage"),
        (
            "run",
            "prism_jetson.yaml",
            "model.preset=x",
            "known: bert_base, vit_b16, vit_l16; decoders:",
        ),
        (
            "run",
            "crowd_city.yaml",
            "crowd.schedulers=[magic]",
            "known: affinity, fifo, least_loaded",
        ),
        ("evaluate", "adaptive_prism.eval.yaml", "policies=[magic]", "known: adaptive, always_"),
    ],
    ids=["strategy", "preset", "scheduler", "policy"],
)
def test_an_unknown_name_is_said_once_with_the_known_ones_as_words(
    command: str,
    file: str,
    item: str,
    expect: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``unknown policy 'magic'; known: ['adaptive', ...] (got ['magic'])``: a Python list,
    and the value said a second time."""
    argv = [command, str(REPO / "scenarios" / file), "--out", str(tmp_path / "out")]
    line = assert_clean_failure([*argv, "--set", item], capsys, tmp_path, file, expect)
    assert "(got" not in line and "['" not in line


# ---------------------------------------------------------------- calibration specs


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(raw: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        node = raw
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if value is DROP:
            del node[int(last) if isinstance(node, list) else last]
        else:
            node[last] = value

    return change


DROP = object()
SPEC_CASES = [
    ("jetson_orin_nano", "profile/ram_mb", -1, ("field 'profile.ram_mb'", "greater than 0")),
    ("jetson_orin_nano", "profile/ram_mb", 1, ("field 'profile'", "out of memory")),
    ("jetson_orin_nano", "profile/battery_wh", 0, ("field 'profile.battery_wh'",)),
    (
        "h200_loopback",
        "fixed/network.bandwidth_efficiency",
        0,
        ("field 'fixed.network.bandwidth_efficiency'", "greater than 0"),
    ),
    ("h200_loopback", "fixed/staging.large_copy_kb", -1, ("field 'fixed.staging.large_copy_kb'",)),
    ("h200_loopback", "fixed/nothing", 1, ("field 'fixed.nothing'", "not a parameter")),
    ("h200_loopback", "from_base", ["network.large_message_ms"], ("'from_base'", "base profile")),
    ("h200_netns", "from_base", ["network.nothing"], ("field 'from_base.0'", "not a parameter")),
    (
        "h200_netns",
        "fixed/network.large_message_ms",
        1.0,
        ("field 'from_base.0'", "also in fixed"),
    ),
    (
        "android_crowdio",
        "assumptions/relative_power/inference",
        0,
        ("field 'assumptions.relative_power.inference'",),
    ),
    (
        "android_crowdio",
        "assumptions/inference_floor_ms",
        float("nan"),
        ("field 'assumptions.inference_floor_ms'", "finite"),
    ),
    ("android_crowdio", "phone_classes/0", DROP, ("field 'crowd.fleet'", "'android_low'")),
    (  # its profile was written as <out>/../x.yaml, outside the folder
        "android_crowdio",
        "phone_classes/0/name",
        "../x",
        ("field 'phone_classes.0.name'", "should match pattern"),
    ),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("name", "path", "value", "expect"),
    SPEC_CASES,
    ids=[f"{c[0]}-{c[1]}={c[2] if c[2] is not DROP else 'drop'}" for c in SPEC_CASES],
)
def test_bad_calibration_spec(
    name: str,
    path: str,
    value: Any,
    expect: tuple[str, ...],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Facts, fixed values and assumptions are checked as the profile checks them (they
    were pydantic, SciPy or zip tracebacks after the fit)."""
    spec = _spec(name, tmp_path, _set(path, value))
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "profile.yaml")]
    assert_clean_failure(argv, capsys, tmp_path, *expect)


@pytest.mark.timeout(60)
def test_a_parameter_taken_from_a_base_that_has_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``from_base`` names a parameter the base profile leaves unset (the Jetson's links
    have no large-message threshold)."""

    def change(raw: dict[str, Any]) -> None:
        raw["base"] = "jetson_orin_nano"
        raw["from_base"] = ["network.large_message_kb"]
        del raw["fixed"]["network.large_message_kb"]

    spec = _spec("h200_netns", tmp_path, change)
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "profile.yaml")]
    assert_clean_failure(argv, capsys, tmp_path, "field 'from_base.0'", "no value for")


FIT_CASES = [
    # Sections neither fitted nor in a base: with a parameter of theirs fixed, the profile
    # check named a field the spec does not have ('compute.throughput_gflops: required key
    # is missing'); with ``fit: []`` it said 'no data' for power, whose data is there.
    (["power"], ("field 'fit'", "nothing sets compute.throughput_gflops", "name a base profile")),
    ([], ("field 'fit'", "nothing sets compute.throughput_gflops", "name a base profile")),
    # ``fit: [..., memory]`` over a folder without decoder_latency.csv: memory was left out
    # of the profile (and a section without its trace taken from the base) without a word.
    (
        ["compute", "staging", "network", "power", "memory"],
        ("field 'fit.4'", "asks for memory", "holds no decoder_latency.csv"),
    ),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("fit", "expect"), FIT_CASES, ids=["power", "none", "memory"])
def test_a_trace_spec_whose_fit_leaves_a_section_without_a_source(
    fit: list[str], expect: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A section the spec fits needs its trace; one it does not fit needs a base or fixed
    values."""

    def change(raw: dict[str, Any]) -> None:
        raw["fit"] = fit
        raw["bootstrap"] = 0

    spec = _spec("h200_loopback", tmp_path, change)
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "profile.yaml")]
    assert_clean_failure(argv, capsys, tmp_path, *expect)


@pytest.mark.timeout(60)
def test_a_parameter_the_fitted_section_does_not_set_is_asked_for_in_fixed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The compute fit sets no ``sync_host_ms_per_mb`` (no trace has a synchronised block):
    the error told a spec that already fits compute to 'fit their sections from the
    traces'. It is refused before the fits run: the error is the one line, no fit's
    progress line before it (the 30 bootstrap resamples took seconds)."""

    def change(raw: dict[str, Any]) -> None:
        del raw["fixed"]["compute.sync_host_ms_per_mb"]

    spec = _spec("h200_loopback", tmp_path, change)
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "profile.yaml")]
    line = assert_clean_failure(
        argv,
        capsys,
        tmp_path,
        "field 'fit'",
        "nothing sets compute.sync_host_ms_per_mb: the compute fit from the traces does not",
        "give it in fixed",
    )
    assert "fit their sections" not in line


def test_validate_names_the_kind_of_spec_it_does_not_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An Android spec is refused by validate naming its field 'kind' (it named none)."""
    argv = ["validate", str(SPECS / "android_crowdio.yaml"), "--out", str(tmp_path / "v")]
    assert_clean_failure(argv, capsys, tmp_path, "field 'kind'", "an Android spec is checked")


MEASURED_ROWS = [
    ("strategy", "magic", "'magic' is not one of"),
    ("devices", "inf", "not a finite number"),
    ("batch", "0", "below the minimum 1"),
    ("segments", "", "needs its segments"),
    ("total_ms", "nan", "not a finite number"),
    ("batch", "2.5", "not a whole number"),  # was read as batch 2, then a traceback
    ("compute_ms", "-1", "below the minimum 0"),  # was fitted
    ("bandwidth_mbps", "0", "must be above 0"),
    # the twin ran it: 'field profile: ... out of memory on dev-0', the batch in 300 digits
    ("batch", "1e300", "1e+300 is above the maximum 1048576"),
    ("devices", "1e300", "1e+300 is above the maximum 1024"),  # a ValidationError traceback
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("column", "cell", "problem"), MEASURED_ROWS, ids=[f"{r[0]}={r[1]}" for r in MEASURED_ROWS]
)
def test_bad_measured_table_row(
    column: str, cell: str, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row of a table spec's measured table that the twin cannot run (an
    AssertionError, OverflowError or unknown-strategy traceback), or a measurement that
    cannot be one (a fraction of a sample, a negative time): the column is named (it was
    ``field 'line N'``)."""
    _refused_with_a_row_changed("prism", column, cell, problem, tmp_path, capsys)


# a configuration the twin has no encoder plan for: each was a traceback of the twin
MEASURED_CONFIGURATIONS = [
    ("prism", "strategy", "pipeline", "'pipeline' is not one of prism, single, tensor_par"),
    ("prism", "strategy", "crowdio_streaming", "'crowdio_streaming' is not one of"),
    ("prism", "devices", "1", "prism runs on 2 or more devices, not 1"),
    ("single", "devices", "2", "single runs on 1 device, not 2"),  # an IndexError
    ("single", "segments", "10", "single takes no segments"),  # was run, and fitted
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("strategy", "column", "cell", "problem"),
    MEASURED_CONFIGURATIONS,
    ids=[f"{r[0]}-{r[1]}={r[2]}" for r in MEASURED_CONFIGURATIONS],
)
def test_a_measured_configuration_the_twin_has_no_plan_for(
    strategy: str,
    column: str,
    cell: str,
    problem: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A decoder or crowd strategy, a split on one device, ``single`` on two or with
    segments: the row and the column are named, as for any bad cell (it was a
    ValueError or IndexError traceback out of the twin)."""
    _refused_with_a_row_changed(strategy, column, cell, problem, tmp_path, capsys)


def _refused_with_a_row_changed(
    strategy: str,
    column: str,
    cell: str,
    problem: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The shipped Jetson table with ``column`` of the first ``strategy`` row set to
    ``cell``: calibrate and validate refuse it naming the column, the line and
    ``problem``."""
    shipped = (REPO / "data" / "reference" / "prism-jetson" / "measurements.csv").read_text()
    lines = shipped.splitlines()
    header = lines[0].split(",")
    changed = next(i for i, line in enumerate(lines) if line.startswith(f"{strategy},"))
    cells = lines[changed].split(",")
    cells[header.index(column)] = cell
    lines[changed] = ",".join(cells)
    table = tmp_path / "measurements.csv"
    table.write_text("\n".join(lines) + "\n")
    spec = _spec("jetson_orin_nano", tmp_path, _set("reference", str(table)))
    _calibrate_and_validate_refuse(
        spec,
        capsys,
        tmp_path,
        f"measurements.csv: field '{column}'",
        f"line {changed + 1}",
        problem,
    )


def _calibrate_and_validate_refuse(
    spec: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, *expected: str
) -> None:
    """``calibrate`` and ``validate`` of ``spec`` each fail cleanly, saying ``expected``."""
    for command, out in (("calibrate", "p.yaml"), ("validate", "v")):
        argv = [command, str(spec), "--out", str(tmp_path / out)]
        assert_clean_failure(argv, capsys, tmp_path, *expected)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("column", ["compute_ms", "staging_ms", "comm_ms"])
def test_measured_table_without_a_component_column(
    column: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A component column misnamed in a table spec's measured table (``comm_s``) is an
    extra column, ignored: the fit left that section's parameters where it started, or
    wherever the other columns pushed them (the network at 14.5 ms a message), and wrote
    the profile (exit 0). Now the column and the parameters it fits are named; a column
    in another unit (``comm_s``) with the unit it is read in."""
    shipped = (REPO / "data" / "reference" / "prism-jetson" / "measurements.csv").read_text()
    table = tmp_path / "measurements.csv"
    stem = column.removesuffix("_ms")
    table.write_text(shipped.replace(column, f"{stem}_time", 1))
    spec = _spec("jetson_orin_nano", tmp_path, _set("reference", str(table)))
    _calibrate_and_validate_refuse(
        spec,
        capsys,
        tmp_path,
        f"measurements.csv: field '{column}': no row has a value above 0",
        f"{stem}_time, ",
        "set them in the spec's fixed",
    )
    table.write_text(shipped.replace(column, f"{stem}_s", 1))
    _calibrate_and_validate_refuse(
        spec,
        capsys,
        tmp_path,
        f"measurements.csv: field '{stem}_s': line 1: the column is in s, where {column} is "
        "read in ms (edgetwin converts no unit)",
    )


@pytest.mark.timeout(60)
def test_measured_table_with_a_unit_written_out_in_its_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``compute (ms)``, as a spreadsheet's column title, is an extra column: the message
    named ``compute_ms`` and listed the header, and the fix was left to be spotted."""
    shipped = (REPO / "data" / "reference" / "prism-jetson" / "measurements.csv").read_text()
    table = tmp_path / "measurements.csv"
    table.write_text(shipped.replace("compute_ms", "compute (ms)", 1))
    spec = _spec("jetson_orin_nano", tmp_path, _set("reference", str(table)))
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "p.yaml")]
    expect = ("field 'compute_ms'", "'compute (ms)' in the header: name it compute_ms")
    assert_clean_failure(argv, capsys, tmp_path, *expect)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("key", "column", "cell", "expect"),
    [
        ("reference", "std", "-1", "below the minimum 0"),
        ("reference", "mean", "inf", "not a finite number"),
        ("session_loads", "size_mb", "nan", "not a finite number"),
        ("session_loads", "load_ms", "-5", "-5 must be above 0"),  # was read
        ("session_loads", "nodes", "155.5", "not a whole number"),
        # a mean of 0 divided by zero in the fit; a unit was not read (ms taken as s)
        ("reference", "mean", "0", "0 must be above 0"),
        ("reference", "unit", "ms", "'ms': pipeline_latency_streaming is read in s"),
        ("session_loads", "load_ms", "0", "0 must be above 0"),  # the fit divided by it
    ],
    ids=[
        *("std-negative", "mean-inf", "size-nan", "load-negative", "nodes-fraction"),
        *("mean-zero", "unit-not-read", "load-zero"),
    ],
)
def test_bad_android_table_cell(
    key: str,
    column: str,
    cell: str,
    expect: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A NaN, inf or negative spread in an Android spec's tables (pydantic and NumPy
    tracebacks in the fit), a negative time: the column is named (it was
    ``field 'line N'``)."""
    shipped = yaml.safe_load((SPECS / "android_crowdio.yaml").read_text())[key]
    lines = (SPECS / shipped).resolve().read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[1].split(",")
    cells[header.index(column)] = cell
    table = tmp_path / Path(shipped).name
    table.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    spec = _spec("android_crowdio", tmp_path, _set(key, str(table)))
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "profiles")]
    assert_clean_failure(
        argv, capsys, tmp_path, f"{table.name}: field '{column}'", "line 2", expect
    )


@pytest.mark.timeout(60)
def test_a_metric_measured_twice_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second cold_load row (another run's figure, say) replaced the first without a
    word, and the fit solved for whichever came last."""
    shipped = yaml.safe_load((SPECS / "android_crowdio.yaml").read_text())["reference"]
    lines = (SPECS / shipped).resolve().read_text().splitlines()
    cold = next(line for line in lines if line.startswith("cold_load,"))
    table = tmp_path / "measurements.csv"
    table.write_text("\n".join([*lines, cold.replace(",48,", ",480,")]) + "\n")
    spec = _spec("android_crowdio", tmp_path, _set("reference", str(table)))
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "profiles")]
    first = lines.index(cold) + 1
    expect = f"line {len(lines) + 1} repeats line {first}: metric cold_load"
    assert_clean_failure(argv, capsys, tmp_path, "measurements.csv: field 'metric'", expect)


@pytest.mark.timeout(60)
def test_a_configuration_measured_twice_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table spec's measured table with a configuration on a second row (total_ms 999):
    the fit weighed both, and its median total error went from 1.6 % to 6.6 % without a
    word."""
    shipped = yaml.safe_load((SPECS / "jetson_orin_nano.yaml").read_text())["reference"]
    lines = (SPECS / shipped).resolve().read_text().splitlines()
    cells = lines[5].split(",")
    cells[lines[0].split(",").index("total_ms")] = "999"
    table = tmp_path / "measurements.csv"
    table.write_text("\n".join([*lines, ",".join(cells)]) + "\n")
    spec = _spec("jetson_orin_nano", tmp_path, _set("reference", str(table)))
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "p.yaml")]
    expect = f"line {len(lines) + 1} repeats line 6: strategy prism, devices 2, batch 1, "
    assert_clean_failure(
        argv, capsys, tmp_path, "measurements.csv: ", expect, "segments 10, rep (empty)"
    )


@pytest.mark.timeout(60)
def test_a_repetition_given_twice_in_a_truth_table_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """evaluate's measured ground truth is the median of a configuration's rows: the
    published Jetson table with its prism row at batch 1 again (total_ms 999) was scored,
    that row weighed twice, while calibrate refuses the same table."""
    shipped = REPO / "data" / "reference" / "prism-jetson" / "measurements.csv"
    lines = shipped.read_text().splitlines()
    cells = lines[5].split(",")
    cells[lines[0].split(",").index("total_ms")] = "999"
    table = tmp_path / "measured.csv"
    table.write_text("\n".join([*lines, ",".join(cells)]) + "\n")
    evaluation = tmp_path / "jetson.eval.yaml"
    raw = yaml.safe_load((REPO / "scenarios" / "adaptive_jetson_measured.eval.yaml").read_text())
    raw["scenario"] = str(REPO / "scenarios" / raw["scenario"])
    evaluation.write_text(yaml.safe_dump({**raw, "truth_table": str(table)}))
    argv = ["evaluate", str(evaluation), "--out", str(tmp_path / "out")]
    expect = (
        f"{evaluation}: field 'truth_table': measured.csv line {len(lines) + 1} repeats line 6: "
        "strategy prism, devices 2, cr 9.9, segments 10, batch 1, bandwidth_mbps 400, "
        "rep (empty); each repetition is one row, with its own rep"
    )
    assert_clean_failure(argv, capsys, tmp_path, expect)


def test_a_crowd_scenario_is_refused_by_evaluate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """evaluate ranks a model's split strategies; a crowd scenario's have no cost plan: with a
    truth_table its --check said ok and the run was a ValueError traceback from the strategy
    registry, with held_out it said the scenario had 0 devices."""
    table = tmp_path / "measured.csv"
    table.write_text(
        "strategy,devices,batch,bandwidth_mbps,total_ms\ncrowdio_streaming,10,1,10,500\n"
    )
    evaluation = tmp_path / "crowd.eval.yaml"
    evaluation.write_text(
        yaml.safe_dump(
            {
                "scenario": str(REPO / "scenarios" / "crowd_city.yaml"),
                "truth_table": str(table),
                "objective": "latency",
                "policies": ["adaptive"],
            }
        )
    )
    expect = (
        f"{evaluation}: field 'scenario': crowd_city.yaml is a crowd scenario: evaluate scores "
        "the choice among a model's split strategies; a crowd's schedulers are scored by "
        "evaluate-affinity"
    )
    for argv in (
        ["evaluate", str(evaluation), "--check"],
        ["evaluate", str(evaluation), "--out", str(tmp_path / "out")],
    ):
        assert_clean_failure(argv, capsys, tmp_path, expect)


@pytest.mark.timeout(120)
def test_measurements_no_phone_profile_fits_name_the_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A latency spread of 1,100 s made a load cv above 1, which the fitted profile
    refused with a pydantic traceback (a load of 6,000 s found no root: a SciPy one)."""
    shipped = (SPECS / "android_crowdio.yaml").parent / "../../../data/reference"
    measured = (shipped / "crowdio-android/measurements.csv").resolve().read_text()
    table = tmp_path / "measurements.csv"
    table.write_text(
        measured.replace(
            "pipeline_latency_streaming,18.4,1.1,", "pipeline_latency_streaming,18.4,1100,"
        )
    )
    spec = _spec("android_crowdio", tmp_path, _set("reference", str(table)))
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "profiles")]
    expect = ("android_crowdio.yaml: no phone profile fits measurements.csv and session_load.csv",)
    assert_clean_failure(argv, capsys, tmp_path, *expect, "its session.load_cv")


def _loopback_traces(tmp_path: Path) -> Path:
    """A copy of the H200 loopback trace folder."""
    traces = tmp_path / "traces"
    shutil.copytree(REPO / "data" / "traces" / "h200-loopback-2026-11", traces)
    return traces


def test_an_exchange_trace_without_rank_0_names_its_rank_column(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every row of rank 5: the fit reads rank 0's and found none, and said 'nothing sets
    staging.fixed_ms' of the spec's fit (with a base profile, it fitted nothing and wrote
    the base's staging and network without a word)."""
    traces = _loopback_traces(tmp_path)
    exchanges = traces / "gloo_staged_allgather.csv"
    header, *rows = exchanges.read_text().splitlines()
    rank_5 = ["5" + row[row.index(",") :] for row in rows if row.startswith("0,")]
    exchanges.write_text("\n".join([header, *rank_5]))  # rank 0's rows, as rank 5's
    spec = _spec("h200_loopback", tmp_path, _set("traces", str(traces)))
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "p.yaml")]
    expect = ("gloo_staged_allgather.csv: field 'rank'", "none of rank 0 (ranks: 5)")
    assert_clean_failure(argv, capsys, tmp_path, *expect)


@pytest.mark.timeout(60)
def test_an_exchange_trace_of_more_blocks_than_a_model_has_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The network fit replays a row's blocks exchange by exchange: 10^300 ran until killed
    (a model has at most MAX_LAYERS)."""
    traces = _loopback_traces(tmp_path)
    exchanges = traces / "gloo_staged_allgather.csv"
    header, first, *rows = exchanges.read_text().splitlines()
    cells = first.split(",")
    cells[header.split(",").index("blocks")] = "1e300"
    exchanges.write_text("\n".join([header, ",".join(cells), *rows]) + "\n")
    spec = _spec("h200_loopback", tmp_path, _set("traces", str(traces)))
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "p.yaml")]
    expect = ("gloo_staged_allgather.csv: field 'blocks'", "line 2", "above the maximum 10000")
    assert_clean_failure(argv, capsys, tmp_path, *expect)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("column", "expect"),
    [
        ("batch", "vit_latency.csv: field 'batch': line 2: 1e+300 is above the maximum"),
        ("tokens", "vit_latency.csv: field 'tokens': line 2: 1e+300 is above the maximum"),
    ],
    ids=["batch", "tokens"],
)
def test_a_latency_trace_whose_prediction_overflows_names_its_file(
    column: str, expect: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A batch (or tokens) of 1e300 in vit_latency.csv: the compute fit's FLOPs, a whole
    number, were past a float's range, an OverflowError traceback."""
    traces = _loopback_traces(tmp_path)
    latency = traces / "vit_latency.csv"
    header, first, *rows = latency.read_text().splitlines()
    cells = first.split(",")
    cells[header.split(",").index(column)] = "1e300"
    latency.write_text("\n".join([header, ",".join(cells), *rows]) + "\n")
    spec = _spec("h200_loopback", tmp_path, _set("traces", str(traces)))
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "p.yaml")]
    assert_clean_failure(argv, capsys, tmp_path, expect)


def test_a_folder_named_as_a_trace_file_is_not_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder named vit_latency.csv was taken for no file: 'holds no vit_latency.csv'."""
    traces = _loopback_traces(tmp_path)
    (traces / "vit_latency.csv").unlink()
    (traces / "vit_latency.csv").mkdir()
    spec = _spec("h200_loopback", tmp_path, _set("traces", str(traces)))
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "p.yaml")]
    assert_clean_failure(argv, capsys, tmp_path, "vit_latency.csv: a folder, not a trace file")


ANDROID_FIGURES_NO_PROFILE_REACHES = [
    (  # ended in SciPy's own words: 'f(a) and f(b) must have different signs'
        ("cold_load,48,4,", "cold_load,6000,4,"),
        ("no WiFi share from 0.01 to 2", "(cold_load)", "stays shorter"),
        "f(a)",
    ),
    (  # at the largest load scale no run finishes a warm load: Python's 'fmean requires ...'
        ("warm_load,6,1,", "warm_load,6000,1,"),
        ("finish no warm load", "(warm_load)"),
        "fmean",
    ),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("change", "expect", "not_said"), ANDROID_FIGURES_NO_PROFILE_REACHES, ids=["cold", "warm"]
)
def test_an_android_figure_no_profile_reaches_is_said_in_the_fits_words(
    change: tuple[str, str],
    expect: tuple[str, ...],
    not_said: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A load of 6,000 s, which the twin's phones reach at no value of the parameter the fit
    solves for, is refused in the fit's words, not the solver's."""
    shipped = (SPECS / "android_crowdio.yaml").parent / "../../../data/reference"
    measured = (shipped / "crowdio-android/measurements.csv").resolve().read_text()
    table = tmp_path / "measurements.csv"
    table.write_text(measured.replace(*change))
    spec = _spec("android_crowdio", tmp_path, _set("reference", str(table)))
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "profiles")]
    head = "no phone profile fits measurements.csv"
    line = assert_clean_failure(argv, capsys, tmp_path, head, *expect)
    assert not_said not in line
    if "stays" in expect[-1]:  # by how much: .4g wrote 2,783 s "2783", 27,830 "2.783e+04"
        closest = re.search(r"\(by ([0-9,]+) s at the closest\)", line)
        assert closest is not None and re.fullmatch(r"[0-9]{1,3}(,[0-9]{3})+", closest[1]), line


@pytest.mark.timeout(60)
@pytest.mark.parametrize("samples", ["one-row", "unlabelled"])
def test_power_samples_without_the_phases(
    samples: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A power fit needs idle samples, then vit_b<batch> and gloo phases (a StopIteration or
    a ValueError traceback from the energy reader)."""
    traces = tmp_path / "traces"
    traces.mkdir()
    shipped = REPO / "data" / "traces" / "h200-loopback-2026-11" / "power_samples.csv"
    lines = shipped.read_text().splitlines()
    if samples == "one-row":
        lines = lines[:2]
    else:
        lines = [lines[0]] + [
            ",".join(["x" if i == 1 else c for i, c in enumerate(line.split(","))])
            for line in lines[1:]
        ]
    (traces / "power_samples.csv").write_text("\n".join(lines) + "\n")

    def power_only(raw: dict[str, Any]) -> None:
        raw.update(traces=str(traces), fit=["power"], bootstrap=0)

    spec = _spec("h200_loopback", tmp_path, power_only)
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "p.yaml")]
    assert_clean_failure(argv, capsys, tmp_path, "power_samples.csv: field 'phase'")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("others", [(), ("gloo_staged_allgather.csv",)], ids=["alone", "beside"])
def test_a_trace_file_under_another_name_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], others: tuple[str, ...]
) -> None:
    """Trace files are found by exact name: a folder of ``vit_latency_jetson.csv`` gave only
    "no trace file in '...'", and beside another trace, "holds no vit_latency.csv"."""
    traces = tmp_path / "traces"
    traces.mkdir()
    shipped = REPO / "data" / "traces" / "h200-loopback-2026-11"
    shutil.copy(shipped / "vit_latency.csv", traces / "vit_latency_jetson.csv")
    for name in others:
        shutil.copy(shipped / name, traces / name)

    def compute(raw: dict[str, Any]) -> None:
        raw.update(traces=str(traces), fit=["compute"], bootstrap=0, base="jetson_orin_nano")

    spec = _spec("h200_loopback", tmp_path, compute)
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "p.yaml")]
    near = "vit_latency_jetson.csv is not read: trace files are found by name (rename it "
    line = assert_clean_failure(argv, capsys, tmp_path, near + "vit_latency.csv)")
    if not others:
        assert "it reads vit_latency.csv, gloo_staged_allgather.csv, " in line


@pytest.mark.timeout(60)
def test_a_group_timed_at_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A group whose every repetition is 0 ms was a ZeroDivisionError traceback in the fit
    on log errors; the reader refuses its first 0 (a single one: test_hand_made_traces)."""
    traces = tmp_path / "traces"
    traces.mkdir()
    shipped = REPO / "data" / "traces" / "h200-loopback-2026-11" / "vit_latency.csv"
    header, *rows = shipped.read_text().splitlines()
    zeroed = [
        ",".join([*row.split(",")[:-1], "0"]) if row.startswith("vit_full,1,") else row
        for row in rows
    ]
    (traces / "vit_latency.csv").write_text("\n".join([header, *zeroed]) + "\n")

    def compute_only(raw: dict[str, Any]) -> None:
        # the other sections from a base: a spec that leaves them unset is refused first
        raw.update(traces=str(traces), fit=["compute"], bootstrap=0, base="jetson_orin_nano")
        raw.pop("decoder", None)

    spec = _spec("h200_loopback", tmp_path, compute_only)
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "p.yaml")]
    first = 2 + next(i for i, row in enumerate(rows) if row.startswith("vit_full,1,"))
    expect = ("vit_latency.csv: field 'latency_ms'", f"line {first}: 0 must be above 0")
    assert_clean_failure(argv, capsys, tmp_path, *expect)


@pytest.mark.timeout(60)
def test_a_whole_model_timed_on_another_model_than_the_specs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``vit_full`` rows of 257 tokens (a ViT at patch 14) under a spec's ViT-B/16 (197):
    the fit took the patch embedding of one model and the blocks of the other and wrote a
    profile with a median error of a few percent, without a word."""
    traces = tmp_path / "traces"
    traces.mkdir()
    shipped = REPO / "data" / "traces" / "h200-loopback-2026-11" / "vit_latency.csv"
    text = shipped.read_text().replace(",197,", ",257,")
    (traces / "vit_latency.csv").write_text(text)

    def compute_only(raw: dict[str, Any]) -> None:
        raw.update(traces=str(traces), fit=["compute"], bootstrap=0, base="jetson_orin_nano")

    spec = _spec("h200_loopback", tmp_path, compute_only)
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "p.yaml")]
    expect = ("vit_latency.csv: field 'tokens'", "vit_full, batch 1, 257 tokens", "197 tokens")
    assert_clean_failure(argv, capsys, tmp_path, *expect)


# ---------------------------------------------------------------- results tables


def _single_batch_1_run(scenario: str, folder: Path) -> Path:
    """``folder`` with a real twin run of ``scenarios/<scenario>.yaml``: single, batch 1."""
    argv = ["run", str(REPO / "scenarios" / f"{scenario}.yaml"), "--out", str(folder), "--quiet"]
    argv += ["--set", "strategies=[{name: single}]", "--set", "sweeps=[{batch: [1]}]"]
    assert main(argv) == 0
    return folder


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real twin run of a one-strategy scenario (its results.csv and reference.csv)."""
    return _single_batch_1_run("prism_jetson", tmp_path_factory.mktemp("run") / "run")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("table", "column", "cell", "expect"),
    [
        ("results.csv", "strategy", "magic", "field 'strategy': line 2: unknown strategy"),
        ("results.csv", "mode", "sim", "field 'mode': line 2: 'sim' is not one of twin, emu"),
        ("results.csv", "devices", "inf", "field 'devices': line 2: 'inf' is not a finite"),
        ("results.csv", "batch", "1.5", "field 'batch': line 2: '1.5' is not a whole number"),
        ("results.csv", "compute_ms", "inf", "field 'compute_ms': line 2: 'inf' is not a"),
        ("results.csv", "energy_j", "lots", "field 'energy_j': line 2: 'lots' is not a number"),
        ("reference.csv", "total_ms", "inf", "field 'total_ms': line 2: 'inf' is not a finite"),
        # out of range: these were read, and plotted
        ("results.csv", "devices", "0", "field 'devices': line 2: '0': must be more than 0"),
        ("results.csv", "total_ms", "-5", "field 'total_ms': line 2: '-5': must be 0 or more"),
        ("results.csv", "rep", "-1", "field 'rep': line 2: '-1': must be 0 or more"),
    ],
    ids=[
        *(
            "strategy",
            "mode",
            "devices-inf",
            "batch-fraction",
            "time-inf",
            "energy-text",
            "reference-inf",
        ),
        *("no-devices", "negative-time", "negative-rep"),
    ],
)
def test_report_and_compare_read_cells_by_column(
    table: str,
    column: str,
    cell: str,
    expect: str,
    run_folder: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A bad cell names its column (it was an OverflowError in a figure's axis or an
    unknown-strategy traceback, or a message without the column)."""
    folder = tmp_path / "run"
    folder.mkdir()
    for name in ("results.csv", "reference.csv", "scenario.resolved.yaml"):
        (folder / name).write_bytes((run_folder / name).read_bytes())
    _with_cell(folder / table, folder / table, column, cell)
    assert_clean_failure(["report", str(folder)], capsys, tmp_path, table, expect)
    if table == "results.csv":
        argv = ["compare", str(folder), str(run_folder), "--out", str(tmp_path / "cmp")]
        assert_clean_failure(argv, capsys, tmp_path, table, expect)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("side", ["predicted", "measured"])
def test_compare_names_a_resolved_scenario_it_cannot_read(
    side: str, run_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The warning that two runs come from different devices reads each folder's
    ``scenario.resolved.yaml``: one that is there but unreadable was skipped unsaid (and
    the warning with it); it is named, as a malformed provenance.json or timeline.json is."""
    folder = tmp_path / "run"
    shutil.copytree(run_folder, folder)
    resolved = folder / "scenario.resolved.yaml"
    resolved.write_text("name: [unclosed\n")
    folders = [str(folder), str(run_folder)]
    argv = ["compare", *(folders if side == "predicted" else folders[::-1])]
    assert_clean_failure(argv, capsys, tmp_path, str(resolved), "malformed YAML")


@pytest.fixture(scope="module")
def decoder_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real twin run of a decoder scenario, one strategy and batch."""
    return _single_batch_1_run("llm_smoke", tmp_path_factory.mktemp("decoder") / "run")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("column", "cell", "expect"),
    [
        # a traceback on the predicted side ('None' is not a number), 'a key is not a
        # number' on the measured side; an empty prompt_tokens joined as an encoder's row
        ("output_tokens", "", "field 'output_tokens': line 2: empty while prompt_tokens is"),
        ("prompt_tokens", "", "field 'prompt_tokens': line 2: empty while output_tokens is"),
    ],
    ids=["no-output-tokens", "no-prompt-tokens"],
)
def test_a_decoder_row_gives_both_its_workload_columns(
    column: str,
    cell: str,
    expect: str,
    decoder_folder: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / "run"
    shutil.copytree(decoder_folder, folder)
    _with_cell(decoder_folder / "results.csv", folder / "results.csv", column, cell)
    table = str(folder / "results.csv")
    for pair in ([folder, decoder_folder], [decoder_folder, folder]):
        argv = ["compare", *map(str, pair), "--out", str(tmp_path / "cmp")]
        assert_clean_failure(argv, capsys, tmp_path, table, expect)
    assert_clean_failure(["report", str(folder)], capsys, tmp_path, table, expect)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("column", ["ttft_ms", "total_ms"])
def test_a_time_near_the_largest_float_is_plotted(
    column: str, decoder_folder: Path, tmp_path: Path
) -> None:
    """A finite time of 1.7e308 ms drew its log axis's ticks up to 10.0**309: an
    OverflowError traceback from report and compare; it is drawn."""
    folder = tmp_path / "run"
    shutil.copytree(decoder_folder, folder)
    _with_cell(decoder_folder / "results.csv", folder / "results.csv", column, "1.7e308")
    assert main(["report", str(folder)]) == 0
    argv = ["compare", str(decoder_folder), str(folder), "--out", str(tmp_path / "cmp")]
    assert main(argv) == 0


def _with_cell(table: Path, out: Path, column: str, cell: str, line: int = 2) -> None:
    """``table`` written to ``out`` with ``column`` set to ``cell`` on ``line`` (the header
    is line 1; the first row by default)."""
    lines = table.read_text().splitlines()
    cells = lines[line - 1].split(",")
    cells[lines[0].split(",").index(column)] = cell
    lines[line - 1] = ",".join(cells)
    out.write_text("\n".join(lines) + "\n")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("column", "cell", "expect"),
    [
        ("strategy", "magic", "field 'strategy': line 2: unknown strategy 'magic'"),
        ("devices", "0", "field 'devices': line 2: '0': must be more than 0"),
        ("batch", "1.5", "field 'batch': line 2: '1.5' is not a whole number"),
        ("total_ms", "-5", "field 'total_ms': line 2: '-5': must be 0 or more"),
        ("energy_j", "inf", "field 'energy_j': line 2: 'inf' is not a finite number"),
        ("batch", "1e300", "field 'batch': line 2: '1e300': must be at most 1048576"),
        # was read, and joined as a row of 1e300 devices
        ("devices", "1e300", "field 'devices': line 2: '1e300': must be at most 1000000"),
    ],
    ids=[
        *("strategy", "no-devices", "batch-fraction", "negative-time", "energy-inf"),
        *("batch-huge", "devices-huge"),
    ],
)
def test_compare_reads_the_measured_table_by_column(
    column: str,
    cell: str,
    expect: str,
    run_folder: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The measured side of ``compare`` is checked as the predicted side is: an unknown
    strategy or a negative time was read (a row that joined nothing, a point with its
    error), an infinite number said only 'a key or metric is not a number'."""
    measured = tmp_path / "measured"
    measured.mkdir()
    _with_cell(run_folder / "results.csv", measured / "results.csv", column, cell)
    argv = ["compare", str(run_folder), str(measured), "--out", str(tmp_path / "cmp")]
    assert_clean_failure(argv, capsys, tmp_path, str(measured / "results.csv"), expect)


# ---------------------------------------------------------------- folders and outputs


@pytest.mark.parametrize("kind", ["missing", "empty-folder", "a-file", "symlink-loop"])
def test_calibrate_machine_emu_folder(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--emu`` that is not an emulator run's folder names the option (a symlink loop was
    a RuntimeError traceback)."""
    run = tmp_path / "run"
    if kind == "empty-folder":
        run.mkdir()
    elif kind == "a-file":
        run.write_text("x\n")
    elif kind == "symlink-loop":
        os.symlink(tmp_path / "loop", run)
        os.symlink(run, tmp_path / "loop")
    argv = ["calibrate-machine", "--emu", str(run), "--out", str(tmp_path / "out")]
    assert_clean_failure(argv, capsys, tmp_path, "field '--emu (emu= in Python)'")


def _emu_run_with(tmp_path: Path, **cells: str) -> Path:
    """A copy of a shipped emulator run whose link_check.csv has ``cells`` in its first row."""
    run = tmp_path / "run"
    shutil.copytree(REPO / "data" / "traces" / "emu-vit-loop-2026-12" / "fit", run)
    lines = (run / "link_check.csv").read_text().splitlines()
    header, first = lines[0].split(","), lines[1].split(",")
    for column, cell in cells.items():
        first[header.index(column)] = cell
    (run / "link_check.csv").write_text("\n".join([lines[0], ",".join(first), *lines[2:]]) + "\n")
    return run


@pytest.mark.parametrize(
    ("column", "cell", "expect"),
    [
        ("goodput_mbps", "nan", "not a finite number"),
        ("goodput_mbps", "-3", "below the minimum 0"),
        ("error_pct", "nan", "not a finite number"),  # read for the warning below
    ],
)
def test_calibrate_machine_emu_bad_link_check(
    column: str, cell: str, expect: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A NaN goodput in the run's link_check.csv was a ValueError traceback."""
    run = _emu_run_with(tmp_path, **{column: cell})
    argv = ["calibrate-machine", "--emu", str(run), "--out", str(tmp_path / "out")]
    expected = (f"link_check.csv: field '{column}'", "line 2", expect)
    assert_clean_failure(argv, capsys, tmp_path, *expected)


def test_calibrate_machine_emu_refuses_a_goodput_no_link_carries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A goodput of 99999 Mbps on every 200 and 800 Mbps link gave a link share of 312.5,
    and the profile built from it a pydantic traceback (exit 1): the share is checked
    against the profile's range where it is read, naming the file, column and line."""
    run = _emu_run_with(tmp_path)
    lines = (run / "link_check.csv").read_text().splitlines()
    column = lines[0].split(",").index("goodput_mbps")
    rows = [line.split(",") for line in lines[1:]]
    for row in rows:
        row[column] = "99999"
    text = "\n".join([lines[0], *(",".join(row) for row in rows)]) + "\n"
    (run / "link_check.csv").write_text(text)
    argv = ["calibrate-machine", "--emu", str(run), "--out", str(tmp_path / "out")]
    expected = ("link_check.csv: field 'goodput_mbps'", "line 2", "bandwidth_efficiency")
    assert_clean_failure(argv, capsys, tmp_path, *expected, "less than or equal to 2")


def test_calibrate_machine_emu_with_the_link_checks_header_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _emu_run_with(tmp_path)
    header = (run / "link_check.csv").read_text().splitlines()[0]
    (run / "link_check.csv").write_text(header + "\n")
    argv = ["calibrate-machine", "--emu", str(run), "--out", str(tmp_path / "out")]
    assert_clean_failure(argv, capsys, tmp_path, "link_check.csv: no link checks")


def test_calibrate_machine_emu_warns_of_a_link_short_of_its_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The link share was fitted from a link check that missed its tolerance without a word
    (the run and its report warn of it; the profile fitted from it did not)."""
    short = {"goodput_mbps": "179.6", "wire_mbps": "187.8", "error_pct": "-6.1"}
    run = _emu_run_with(tmp_path, within_tolerance="False", **short)
    assert main(["calibrate-machine", "--emu", str(run), "--out", str(tmp_path / "out")]) == 0
    # its inputs are the run's files, not the spec it wrote in its staging folder
    inputs = json.loads((tmp_path / "out" / "provenance.json").read_text())["inputs"]
    assert inputs and all(Path(name).parent == run.resolve() for name in inputs)
    warning = (
        "edgetwin: warning: link etwh1 -> etwh0 set to 200 Mbps carried 187.8 Mbps on the wire"
        " (-6.1 %, tolerance 5 %): times at 200 Mbps are not the link's alone;"
        " network.bandwidth_efficiency is fitted from it\n"
    )
    lines = capsys.readouterr().err.splitlines(keepends=True)
    assert [line for line in lines if "is at its" not in line] == [warning]  # and fit.at_bound's


@pytest.mark.timeout(60)
@pytest.mark.skipif(
    not (DEBIAN_MININET / "__init__.py").is_file(), reason="Debian's Mininet is not installed"
)
def test_a_warning_after_mininet_is_loaded_is_written_once(tmp_path: Path) -> None:
    """Loading Mininet made every logger created after it Mininet's, with a handler of its
    own: a command whose fitting code was imported after Mininet wrote each warning twice,
    the first without its prefix and its newline."""
    run = _emu_run_with(
        tmp_path, goodput_mbps="179.6", wire_mbps="187.8", error_pct="-6.1"
    )  # fmt: skip
    mininet_first = (
        "import sys; from edgetwin.emu.mininet.mn import mininet_module; "
        "mininet_module('net'); from edgetwin.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    argv = ["calibrate-machine", "--emu", str(run), "--out", str(tmp_path / "out")]
    done = subprocess.run(
        [sys.executable, "-c", mininet_first, *argv], capture_output=True, text=True, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("link etwh1 -> etwh0 set to 200 Mbps") == 1, done.stderr
    assert done.stderr.startswith("edgetwin: warning: link etwh1") and done.stderr.endswith("\n")


@pytest.mark.parametrize(
    ("flag", "argument"), [("--quick", "quick=True"), ("--no-decoder", "decoder=False")]
)
def test_calibrate_machine_emu_refuses_what_only_a_measurement_takes(
    flag: str, argument: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--quick`` and ``--no-decoder`` choose what this machine measures; with ``--emu``
    nothing is measured, and they were ignored without a word."""
    run = REPO / "data" / "traces" / "emu-vit-loop-2026-12" / "fit"
    argv = ["calibrate-machine", "--emu", str(run), flag, "--out", str(tmp_path / "out")]
    field = f"field '{flag} ({argument} in Python)'"
    assert_clean_failure(argv, capsys, tmp_path, field, "--emu measures nothing")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("spec", "a file this command read"),
        ("reference", "exists and is not a profile"),  # before the fit, which reads it
        ("base", "a file this command read"),  # a profile the spec names: before the fit
    ],
)
def test_calibrate_out_onto_a_file_it_read(
    target: str, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out`` naming the spec, the measured table or the profile the fit starts from
    replaced that input with the profile (exit 0): the measurements were gone."""
    table = tmp_path / "measured.csv"
    table.write_bytes(
        (REPO / "data" / "reference" / "prism-jetson" / "measurements.csv").read_bytes()
    )
    spec = _spec("jetson_orin_nano", tmp_path, _set("reference", str(table)))
    out = {"spec": spec, "reference": table}.get(target)
    if out is None:  # a traces spec's base profile
        out = tmp_path / "base.yaml"
        shutil.copyfile(REPO / "edgetwin/calibration/profiles/h200_loopback.yaml", out)
        spec = _spec("h200_loopback", tmp_path, lambda raw: raw.update(base=str(out), bootstrap=0))
    argv = ["calibrate", str(spec), "--out", str(out)]
    out_named = "field '--out (out= in Python)'"
    assert_clean_failure(argv, capsys, tmp_path, out_named, said)


def test_calibrate_out_onto_a_file_that_is_no_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out`` naming a run's results.csv (or any file) replaced it with the profile,
    exit 0, even without --force; a profile is still replaced with --force (how a shipped
    one is made again)."""
    spec = _spec("jetson_orin_nano", tmp_path, lambda raw: None)
    table = tmp_path / "results.csv"
    table.write_text("scenario,mode\nx,twin\n")
    argv = ["calibrate", str(spec), "--out", str(table)]
    out_named = "field '--out (out= in Python)'"
    assert_clean_failure(argv, capsys, tmp_path, out_named, "exists and is not a profile")
    profile = tmp_path / "profile.yaml"
    for force in ([], ["--force"]):
        assert main(["calibrate", str(spec), "--out", str(profile), *force]) == 0


def test_calibrate_refuses_its_out_before_fitting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad --out was said after the fit (seconds, for nothing): with a table the fit
    would refuse (one row), the error is --out's, so the fit did not run."""
    shipped = (SPECS / "jetson_orin_nano.yaml").parent / "../../../data/reference"
    lines = (shipped / "prism-jetson/measurements.csv").resolve().read_text().splitlines()
    table = tmp_path / "one_row.csv"
    table.write_text("\n".join(lines[:2]) + "\n")
    spec = _spec("jetson_orin_nano", tmp_path, _set("reference", str(table)))
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    argv = ["calibrate", str(spec), "--out", str(notes)]
    assert_clean_failure(argv, capsys, tmp_path, "notes.txt", "exists and is not a profile")
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "p.yaml")]
    assert_clean_failure(argv, capsys, tmp_path, "one_row.csv")  # the fit's own refusal


@pytest.mark.parametrize("where", ["the-run", "above-the-run"])
def test_calibrate_machine_emu_out_onto_its_run_is_refused(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out RUN --force`` replaced the emulator run being fitted (its results.csv and
    link_check.csv deleted, exit 0): the folder is read after --out is checked."""
    run = _emu_run_with(tmp_path)
    out = run if where == "the-run" else tmp_path
    argv = ["calibrate-machine", "--emu", str(run), "--out", str(out), "--force"]
    assert main(argv) == 2
    assert "holds an input of this command" in capsys.readouterr().err
    assert (run / "results.csv").is_file() and (run / "link_check.csv").is_file()


@pytest.mark.parametrize("command", ["run", "init", "calibrate", "evaluate"])
def test_out_name_too_long(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An --out name beyond NAME_MAX (255) was an OSError traceback from its lookup."""
    out = str(tmp_path / ("n" * 300))
    inputs = {
        "run": ["run", str(REPO / "scenarios" / "prism_jetson.yaml"), "--out", out],
        "init": ["init", "scenario", out],
        "calibrate": ["calibrate", str(SPECS / "android_crowdio.yaml"), "--out", out],
        "evaluate": ["evaluate", str(REPO / "scenarios" / "adaptive_prism.eval.yaml")],
    }
    argv = inputs[command] + (["--out", out] if command == "evaluate" else [])
    assert_clean_failure(argv, capsys, tmp_path, "File name too long")


def test_plan_out_below_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """plan writes its journal in ``--out`` first (a NotADirectoryError traceback)."""
    (tmp_path / "blocker").write_text("a file\n")
    question = REPO / "scenarios" / "plan_crossover.plan.yaml"
    argv = ["plan", str(question), "--out", str(tmp_path / "blocker" / "out"), "--quiet"]
    out_named = "field '--out (out= in Python)'"
    assert_clean_failure(argv, capsys, tmp_path, out_named, "cannot create")


def test_profile_targets_that_cannot_be_written(tmp_path: Path) -> None:
    """A profile file below a file, or where a folder is; Android profiles into a file (its
    error named field '--out' alone, where every other names out= in Python too)."""
    (tmp_path / "blocker").write_text("a file\n")
    (tmp_path / "folder").mkdir()
    profile = load_profile("jetson_orin_nano")
    for target in (tmp_path / "blocker" / "p.yaml", tmp_path / "folder"):
        with pytest.raises(InputError) as caught:
            write_profile(profile, target)
        assert caught.value.field == "--out (out= in Python)"
        assert caught.value.path == str(target)
    phones = [load_phone_profile("android_low")]
    with pytest.raises(InputError, match="not a folder") as caught:
        write_android_profiles(phones, tmp_path / "blocker")
    assert caught.value.field == "--out (out= in Python)"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker", "folder"]
    assert not any((tmp_path / "folder").iterdir())


def test_profiles_written_together_are_all_written_or_none(tmp_path: Path) -> None:
    """Android classes: a class that cannot be written keeps the others from being written
    (the first class used to be written before the second failed)."""
    out = tmp_path / "phones"
    (out / "android_high.yaml").mkdir(parents=True)  # where the second class would go
    phones = [load_phone_profile("android_low"), load_phone_profile("android_high")]
    with pytest.raises(InputError, match="a folder, not a profile file"):
        write_android_profiles(phones, out)
    assert [p.name for p in out.iterdir()] == ["android_high.yaml"]
    # an error while writing (here: a folder below a file) leaves the earlier files as
    # they were, and no temp file beside them
    (tmp_path / "blocker").write_text("a file\n")
    old = out / "old.yaml"
    old.write_text("old\n")
    with pytest.raises(OSError):
        write_texts_together({old: "new\n", tmp_path / "blocker" / "x.yaml": "x\n"})
    assert old.read_text() == "old\n"
    assert sorted(p.name for p in out.iterdir()) == ["android_high.yaml", "old.yaml"]


@pytest.mark.timeout(60)
def test_a_rate_so_small_that_a_time_overflows_is_named_not_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A device whose throughput is 1e-310 GFLOP/s ran to compute_ms inf; the run then
    failed reading its own results.csv back, naming its staging folder."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    raw = yaml.safe_load((REPO / "edgetwin/calibration/profiles/jetson_orin_nano.yaml").read_text())
    raw["compute"]["throughput_gflops"] = 1e-310
    slow = profiles / "slow.yaml"
    slow.write_text(yaml.safe_dump(raw, sort_keys=False))
    argv = ["run", str(REPO / "scenarios/prism_jetson.yaml"), "--out", str(tmp_path / "out")]
    argv += ["--quiet", "--set", f"devices.0.profile={slow}"]
    expect = ("single on 1 device, batch 1: its compute_ms overflows a float (inf)",)
    assert_clean_failure(argv, capsys, tmp_path, *expect)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("item", "where"),
    [  # the first configuration that overflows: single has no exchange, so no latency
        ("network.latency_ms=1e308", "voltage on 2 devices, batch 1: its total_ms"),
        ("model.mlp_ratio=1e308", "single on 1 device, batch 1: its gflops_per_device"),
        # an int product past a float's range: an OverflowError traceback
        (f"model.patch_size={10**300}", "single on 1 device, batch 1: a number"),
    ],
    ids=["latency", "model-dimension", "whole-number-dimension"],
)
def test_a_value_so_large_that_a_column_overflows_names_the_scenario(
    item: str, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check named only the five time and energy columns and blamed a profile's rate:
    a latency of 1e308 ms was blamed on the profile, and a model of MLP ratio 1e308 failed
    reading its own results.csv back (gflops_per_device inf), naming its staging folder."""
    scenario = REPO / "scenarios/prism_jetson.yaml"
    argv = ["run", str(scenario), "--out", str(tmp_path / "out"), "--quiet", "--set", item]
    expect = (f"prism_jetson.yaml: {where} overflows a float", "far out of any physical range")
    assert_clean_failure(argv, capsys, tmp_path, *expect)


@pytest.mark.parametrize("row", ["single,1,4,400,,,249", "single,1,4,400,,,249,0,0,249,1.7,9"])
def test_a_reference_row_cut_short_or_run_on_is_named(
    row: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row cut short was read with its missing cells empty (its total_ms compared as not
    measured); one run on lost its extra cell."""
    measured = REPO / "data/reference/prism-jetson/measurements.csv"
    reference = tmp_path / "measured.csv"
    reference.write_text(measured.read_text() + row + "\n")
    cells = len(row.split(","))
    argv = ["run", str(REPO / "scenarios/prism_jetson.yaml"), "--out", str(tmp_path / "out")]
    argv += ["--set", f"reference={reference}"]
    expect = ("field 'reference'", f"line 12: {cells} cells, the header has 11")
    assert_clean_failure(argv, capsys, tmp_path, *expect)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """prism_jetson at batch 1 (five runs, its reference beside)."""
    out = tmp_path_factory.mktemp("small") / "run"
    argv = ["run", str(REPO / "scenarios/prism_jetson.yaml"), "--out", str(out), "--quiet"]
    assert main([*argv, "--set", "sweeps=[{batch: [1]}]"]) == 0
    return out


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("reference.csv", lambda path: os.mkfifo(path)),
        ("reference.csv", lambda path: path.symlink_to("/dev/zero")),
        ("results.csv", lambda path: os.mkfifo(path)),
    ],
    ids=["fifo-reference", "zero-reference", "fifo-results"],
)
def test_report_refuses_what_would_be_read_forever(
    name: str,
    make: Callable[[Path], None],
    small_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A FIFO or a link to /dev/zero where a table belongs hung report (its provenance
    hashed it before anything checked it was a file)."""
    folder = tmp_path / "run"
    shutil.copytree(small_run, folder)
    (folder / name).unlink()
    make(folder / name)
    assert main(["report", str(folder)]) == 2
    assert "not a regular file" in capsys.readouterr().err


def test_a_results_table_with_a_byte_order_mark_is_read(small_run: Path, tmp_path: Path) -> None:
    """A BOM (a spreadsheet's UTF-8 export) became part of the first column's name: report
    said "field 'scenario': no such column (header: \ufeffscenario, ...)"."""
    folder = tmp_path / "run"
    shutil.copytree(small_run, folder)
    table = folder / "results.csv"
    table.write_text("\ufeff" + table.read_text(), encoding="utf-8")
    assert main(["report", str(folder)]) == 0
    assert len(edgetwin.load_results(folder).rows) == 5


def test_a_column_named_twice_in_a_results_table_is_named(
    small_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The last of two columns of one name was read, unsaid (comm_ms renamed total_ms)."""
    folder = tmp_path / "run"
    shutil.copytree(small_run, folder)
    table = folder / "results.csv"
    table.write_text(table.read_text().replace(",comm_ms,", ",total_ms,", 1))
    assert main(["report", str(folder)]) == 2
    assert "line 1: column 'total_ms' appears twice in the header" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("edit", "expect"),
    [
        (
            lambda table: table.write_text(table.read_text().replace(",total_ms,", ",totl_ms,", 1)),
            "field 'total_ms': no such column",
        ),
        (
            lambda table: _with_cell(table, table, "comm_ms", "", line=3),
            "field 'comm_ms': line 3: empty on a row whose status is ok",
        ),
    ],
    ids=["misspelt-total", "empty-comm-on-ok"],
)
def test_a_results_table_without_the_times_of_an_ok_row_is_refused(
    edit: Callable[[Path], object],
    expect: str,
    small_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without total_ms every row read as NaN: report drew nothing (and with repetitions
    failed in statistics.stdev); an empty time on an ok row was averaged as NaN."""
    folder = tmp_path / "run"
    shutil.copytree(small_run, folder)
    edit(folder / "results.csv")
    assert main(["report", str(folder)]) == 2
    assert expect in capsys.readouterr().err
    with pytest.raises(InputError, match=expect.split("'")[1]):
        edgetwin.load_results(folder)


def test_a_failed_row_may_leave_its_times_empty(small_run: Path, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    shutil.copytree(small_run, folder)
    table = folder / "results.csv"
    _with_cell(table, table, "comm_ms", "")
    _with_cell(table, table, "status", "failed: out of memory")
    rows = edgetwin.load_results(folder).rows
    assert rows[0].status == "failed: out of memory"
    assert math.isnan(rows[0].comm_ms)


@pytest.mark.timeout(60)
def test_session_loads_of_fewer_than_three_stages_name_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The error named no file and a field 'session_load' the spec does not have."""
    shipped = yaml.safe_load((SPECS / "android_crowdio.yaml").read_text())["session_loads"]
    lines = (SPECS / shipped).resolve().read_text().splitlines()
    table = tmp_path / "session_load.csv"
    table.write_text("\n".join(lines[:2]) + "\n")
    spec = _spec("android_crowdio", tmp_path, _set("session_loads", str(table)))
    argv = ["calibrate", str(spec), "--out", str(tmp_path / "profiles")]
    expect = ("session_load.csv: 1 stage(s): the load model needs three or more",)
    assert_clean_failure(argv, capsys, tmp_path, *expect)
