"""A CLI that guides (issue 17): a file given to the wrong command names the right one,
plain-text help with an example, ``init`` templates that load and run, a warning when a
comparison crosses devices, ``--trace`` as documented, progress lines off a terminal."""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import pytest
import yaml
from rich.console import Console

import edgetwin
from edgetwin.calibration.machine import QUICK, calibration_steps
from edgetwin.cli import _parser, main
from edgetwin.cli.progress import _LIVE as LIVE_BARS
from edgetwin.cli.progress import progress
from edgetwin.comparison import (
    devices_warning,
    loopback_warning,
    model_warning,
    network_warning,
    run_side,
)
from edgetwin.configuration import step_label
from edgetwin.evaluate.adaptive_inputs import load_eval_inputs
from edgetwin.plan.question_file import load_question
from edgetwin.resolved_scenario import dump_resolved
from edgetwin.result_cells import read_results
from edgetwin.scenario import load_scenario
from edgetwin.sweep_points import Configuration
from edgetwin.workbench.inputs import load_run_inputs
from tests.conftest import PipedRun, piped_stderr

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
SMALL = """\
name: small
model: {preset: vit_b16}
devices: [{name: jetson, profile: jetson_orin_nano, count: 2}]
strategies: [{name: single}, {name: prism, cr: 9.9}]
sweeps: [{batch: [1, 2]}]
"""


def _error_of(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The one error line of a command that must exit 2."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("command", "file", "right"),
    [
        ("run", "adaptive_prism.eval.yaml", "evaluate"),
        ("run", "affinity_small.eval.yaml", "evaluate-affinity"),
        ("run", "plan_fleet.plan.yaml", "plan"),
        ("evaluate", "prism_jetson.yaml", "run"),
        ("evaluate", "affinity_small.eval.yaml", "evaluate-affinity"),
        ("evaluate", "plan_crossover.plan.yaml", "plan"),
        ("evaluate-affinity", "affinity_small.yaml", "run"),
        ("evaluate-affinity", "adaptive_prism.eval.yaml", "evaluate"),
        ("evaluate-affinity", "plan_crowd_capacity.plan.yaml", "plan"),
        ("plan", "prism_jetson.yaml", "run"),
        ("plan", "adaptive_devices.eval.yaml", "evaluate"),
        ("plan", "affinity_small.eval.yaml", "evaluate-affinity"),
        ("calibrate", "h200_bw.yaml", "run"),
        ("validate", "adaptive_prism.eval.yaml", "evaluate"),
        ("run", "../edgetwin/calibration/specs/h200_netns.yaml", "calibrate"),
        ("run", "../edgetwin/calibration/specs/jetson_orin_nano.yaml", "calibrate"),
        ("plan", "../edgetwin/calibration/specs/android_crowdio.yaml", "calibrate"),
    ],
)
def test_a_wrong_file_kind_names_its_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, file: str, right: str
) -> None:
    path = SCENARIOS / file
    err = _error_of(capsys, [command, str(path), "--out", str(tmp_path / "out")])
    assert f"use `edgetwin {right} {path}`" in err
    assert "missing" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("command", "profile"),
    [
        ("calibrate", "h200_loopback"),
        ("validate", "jetson_orin_nano"),
        ("evaluate", "h200_netns"),
        ("run", "jetson_orin_nano"),
        ("calibrate", "android_low"),
    ],
)
def test_a_device_profile_given_to_a_command_says_a_scenario_names_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: str, profile: str
) -> None:
    """A profile was taken for a scenario (its network section): calibrate, validate and
    evaluate said 'use `edgetwin run PROFILE`', and run then named a profile field as an
    unknown scenario key."""
    path = ROOT / "edgetwin" / "calibration" / "profiles" / f"{profile}.yaml"
    err = _error_of(capsys, [command, str(path), "--out", str(tmp_path / "out")])
    assert "this is a device profile, not " in err
    assert ": a scenario names it (devices.N.profile" in err
    assert "use `edgetwin" not in err and "unknown key" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("named", "noun", "command"),
    [
        ("edgetwin/calibration/specs/jetson_orin_nano.yaml", "a calibration spec", "calibrate"),
        # these said 'plan_fleet.plan.yaml: field 'ram_mb': required key is missing'
        ("scenarios/plan_fleet.plan.yaml", "a plan question", "plan"),
        ("scenarios/adaptive_prism.eval.yaml", "an evaluation of the adaptive", "evaluate"),
        ("scenarios/affinity_small.eval.yaml", "an evaluation of crowd", "evaluate-affinity"),
        # said 'prism_jetson.yaml: field 'ram_mb': required key is missing'
        ("scenarios/prism_jetson.yaml", "a scenario", "run"),
    ],
    ids=["spec", "plan", "evaluation", "affinity", "scenario"],
)
def test_a_command_file_named_as_a_profile_says_its_command(
    named: str, noun: str, command: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A scenario naming the spec of a profile (not the profile it fits), or another
    command's file, as a device's profile said 'spec.yaml: field 'name': required key is
    missing'."""
    path = ROOT / named
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    argv = ["run", str(scenario), "--check", "--set", f"devices.0.profile={path}"]
    err = _error_of(capsys, argv)
    assert err.startswith(f"edgetwin: error: {path}: this is {noun}")
    assert "not a device profile" in err
    assert f"use `edgetwin {command} {path}`" in err and "missing" not in err


@pytest.mark.timeout(60)
def test_a_file_given_for_a_run_folder_says_what_to_give(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """report and compare read a run's output folder; given a scenario they said
    'scenarios/x.yaml/results.csv: file not found', given the results.csv itself
    'results.csv/results.csv: file not found'."""
    run = tmp_path / "run"
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    assert main(["run", str(scenario), "--out", str(run), "--quiet"]) == 0
    table = run / "results.csv"
    err = _error_of(capsys, ["report", str(scenario)])
    assert f"this is a scenario: use `edgetwin run {scenario}` (edgetwin.run in Python)" in err
    assert "run's output folder" in err and "results.csv: file not found" not in err
    err = _error_of(capsys, ["compare", str(table), str(run)])  # measured may be a table
    assert err.startswith(f"edgetwin: error: {table}: ") and f"give its folder, {run}" in err
    err = _error_of(capsys, ["report", str(SCENARIOS / "adaptive_prism.eval.yaml")])
    assert "use `edgetwin evaluate" in err
    other = tmp_path / "notes.txt"
    other.write_text("not a table\n")
    err = _error_of(capsys, ["compare", str(other), str(run)])
    assert f"{other}: a file, not a run's output folder" in err, err


def test_the_suffix_decides_when_the_keys_do_not(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "q.plan.yaml"
    path.write_text("name: q\n")
    assert "use `edgetwin plan" in _error_of(capsys, ["run", str(path), "--out", str(tmp_path)])


@pytest.mark.timeout(60)
def test_a_bert_scenario_in_the_emulator_says_to_use_the_twin(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["run", str(SCENARIOS / "prism_jetson.yaml"), "--out", str(tmp_path / "o")]
    err = _error_of(capsys, [*argv, "--mode", "emu", "--set", "model={preset: bert_base}"])
    assert "field 'model'" in err and "use --mode twin" in err
    assert "local mode" not in err
    assert "mode 'emu' runs real code for a ViT encoder, a decoder or a crowd" in err


def test_a_crowd_too_large_for_the_emulator_says_so_in_a_whole_sentence(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The line ended '... holds 249 and the foreman', as if cut short."""
    argv = ["run", str(SCENARIOS / "crowd_city.yaml"), "--out", str(tmp_path / "o")]
    err = _error_of(capsys, [*argv, "--mode", "emu"])
    assert err.endswith("holds 249 phones besides the foreman's host\n"), err


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_help_is_plain_text_with_an_example_and_described_arguments(name: str) -> None:
    parser = _subcommands()[name]
    text = parser.format_help()
    assert "`" not in text
    example = text.split("example:\n", 1)[1].strip()
    assert example.startswith(("edgetwin " + name, "sudo edgetwin " + name))
    for action in parser._actions:
        if not action.option_strings:  # a positional argument
            assert action.help, f"{name} {action.dest} has no description"


def _readme_commands() -> dict[str, str]:
    """The README's "Commands" block: each command's line, by command name."""
    block = (ROOT / "README.md").read_text().split("## Commands\n", 1)[1].split("```")[1]
    lines = [line.split("#", 1)[0] for line in block.splitlines() if line.startswith("edgetwin ")]
    return {line.split()[1]: line for line in lines}


def test_the_readme_lists_every_command_and_option() -> None:
    """Both ways: every option of a command is on its README line, and every option there
    is one of the command's."""
    readme = _readme_commands()
    assert sorted(readme) == sorted(_subcommands())
    for name, parser in _subcommands().items():
        options = {o for a in parser._actions for o in a.option_strings if o.startswith("--")}
        listed = set(re.findall(r"--[a-z][a-z-]*", readme[name]))
        assert listed == options - {"--help"}, f"README's {name} line"


def test_the_top_level_help_is_plain_text() -> None:
    text = _parser().format_help()
    assert "`" not in text and "example:" in text


@pytest.mark.timeout(120)
def test_init_writes_templates_that_load_and_the_scenario_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for kind in ("scenario", "eval", "plan"):
        assert main(["init", kind]) == 0
    assert "#" in Path("scenario.yaml").read_text()  # commented
    load_run_inputs(Path("scenario.yaml"))
    load_eval_inputs(Path("evaluation.eval.yaml"))
    load_question(Path("question.plan.yaml"))
    assert main(["run", "scenario.yaml", "--out", "out", "--quiet"]) == 0
    assert Path("out/results.csv").read_text().count("\n") > 1
    for argv in (["evaluate", "evaluation.eval.yaml"], ["plan", "question.plan.yaml"]):
        assert main([*argv, "--out", "o", "--check"]) == 0


def _header_sets(text: str) -> list[str]:
    """The values of the ``--set`` lines in a template's header comment."""
    lines = [line.removeprefix("#").strip() for line in text.splitlines()]
    args = [arg for line in lines if line.startswith("--set ") for arg in shlex.split(line)]
    return [arg for arg in args if arg != "--set"]


@pytest.mark.timeout(60)
def test_the_scenario_template_says_how_to_run_a_decoder_of_ones_own(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``init scenario`` wrote a ViT scenario whose only word on decoders was
    'docs/llm.md': its --set lines now turn it into one, and they run."""
    monkeypatch.chdir(tmp_path)
    assert main(["init", "scenario"]) == 0
    text = Path("scenario.yaml").read_text()
    sets = [arg for value in _header_sets(text) for arg in ("--set", value)]
    assert sets, text
    assert main(["run", "scenario.yaml", "--out", "llm", "--quiet", *sets]) == 0
    rows = read_results(Path("llm/results.csv"))
    assert rows and all(row.prompt_tokens == 128 and row.ttft_ms for row in rows)
    assert {"pipeline", "tensor_parallel"} <= {row.strategy for row in rows}


@pytest.mark.timeout(60)
def test_init_plan_llm_asks_of_the_decoder_the_scenario_header_gives(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``init`` had no decoder question (best_mode with ttft/tpot, longest_context): the
    plan-llm template turns ``init scenario``'s ViT into its header's decoder, and answers."""
    monkeypatch.chdir(tmp_path)
    assert main(["init", "scenario"]) == 0 and main(["init", "plan-llm"]) == 0
    listed = yaml.safe_load(Path("llm.plan.yaml").read_text())["set"]
    header = _header_sets(Path("scenario.yaml").read_text())
    assert header and listed[: len(header)] == header  # one decoder, not two that drift
    assert main(["plan", "llm.plan.yaml", "--out", "p", "--quiet"]) == 0
    answers = json.loads(Path("p/answer.json").read_text())["answers"]
    assert [a["kind"] for a in answers] == ["best_mode", "longest_context"]
    assert {grid["metric"] for grid in answers[0]["grids"]} == {"ttft_ms", "tpot_ms"}
    assert {c["strategy"] for c in answers[1]["candidates"]} >= {"pipeline", "single"}


@pytest.mark.timeout(60)
def test_check_refuses_the_out_the_command_would_refuse(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--check said ok for an --out its command refuses at once (a file, a non-empty folder
    without --force)."""
    monkeypatch.chdir(tmp_path)
    for kind in ("scenario", "eval", "plan"):
        assert main(["init", kind]) == 0
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine\n")
    commands = (
        ["run", "scenario.yaml"],
        ["evaluate", "evaluation.eval.yaml"],
        ["plan", "question.plan.yaml"],
    )
    for argv in commands:
        for out, expect in ((tmp_path / "scenario.yaml", "is not a folder"), (full, "not empty")):
            assert expect in _error_of(capsys, [*argv, "--out", str(out), "--check"])
        forced = [*argv, "--out", str(full), "--check", "--force"]
        assert "is no edgetwin output" in _error_of(capsys, forced)
        (full / "provenance.json").write_text("{}\n")  # an earlier run's folder
        assert main(forced) == 0
        (full / "provenance.json").unlink()
    assert sorted(p.name for p in full.iterdir()) == ["notes.txt"]  # --check wrote nothing


@pytest.mark.timeout(60)
def test_an_out_ending_in_dot_dot_is_refused_before_the_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--out new/..`` ran the whole sweep, then said 'cannot replace it: Device or
    resource busy' and left an empty ``new``."""
    monkeypatch.chdir(tmp_path)
    assert main(["init", "scenario"]) == 0
    for force in ([], ["--force"]):
        err = _error_of(capsys, ["run", "scenario.yaml", "--out", "sand/new/..", *force])
        assert "--out (out= in Python) ends in '..'" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scenario.yaml"]


def test_init_into_a_folder_writes_the_default_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``init scenario new/`` wrote a file named ``new`` (the slash was dropped)."""
    assert main(["init", "scenario", f"{tmp_path / 'new'}/"]) == 0
    assert main(["init", "plan", str(tmp_path / "new")]) == 0
    assert sorted(p.name for p in (tmp_path / "new").iterdir()) == [
        "question.plan.yaml",
        "scenario.yaml",
    ]


def test_init_refuses_to_overwrite_unless_forced(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\n")
    err = _error_of(capsys, ["init", "scenario", str(path)])
    assert "--force" in err and path.read_text() == "name: mine\n"
    assert main(["init", "scenario", str(path), "--force"]) == 0
    assert load_scenario(path).name == "my_scenario"


def test_init_under_a_file_says_which_is_not_a_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """It said only 'cannot write: File exists' (of the new file, which did not exist)."""
    blocking = tmp_path / "afile"
    blocking.write_text("")
    err = _error_of(capsys, ["init", "scenario", str(blocking / "new.yaml")])
    assert f"cannot write: {blocking} is a file, not a folder" in err


@pytest.mark.timeout(120)
def test_compare_warns_when_the_sides_ran_on_different_devices(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    jetson, h200, again = tmp_path / "jetson", tmp_path / "h200", tmp_path / "again"
    for out, profile in ((jetson, "jetson_orin_nano"), (h200, "h200_loopback"), (again, None)):
        extra = [] if profile is None else ["--set", f"devices.0.profile={profile}"]
        assert main(["run", str(scenario), "--out", str(out), "--quiet", *extra]) == 0
    capsys.readouterr()
    assert main(["compare", str(jetson), str(h200)]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "jetson_orin_nano" in err and "h200_loopback" in err
    assert main(["compare", str(jetson), str(again)]) == 0
    assert "warning" not in capsys.readouterr().err


@pytest.mark.timeout(120)
def test_compare_warns_when_the_sides_ran_other_models(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A twin run of the whole model against a run cut to 2 blocks (a local run kept
    small) was joined configuration by configuration without a word: the errors were the
    models' difference. A preset's name alone (the same sizes written out) is no other
    model."""
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    whole, cut, written = tmp_path / "whole", tmp_path / "cut", tmp_path / "written"
    for out, model in ((whole, None), (cut, "model.blocks=2"), (written, "model={width: 768}")):
        extra = [] if model is None else ["--set", model]
        assert main(["run", str(scenario), "--out", str(out), "--quiet", *extra]) == 0
    capsys.readouterr()
    assert main(["compare", str(whole), str(cut)]) == 0
    (warning,) = capsys.readouterr().err.strip().splitlines()
    assert "other models" in warning and "blocks 12 vs 2" in warning
    assert str(whole) in warning and str(cut) in warning and "model.blocks" in warning
    assert main(["compare", str(whole), str(written)]) == 0
    assert "warning" not in capsys.readouterr().err


@pytest.mark.timeout(120)
def test_compare_warns_when_the_sides_ran_other_networks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A twin run at a constant rate against a run whose links a schedule took to 50 Mbps:
    both rows read the same bandwidth_mbps, so they were joined without a word and the
    errors were the networks' difference."""
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    plain, stepped, again = tmp_path / "plain", tmp_path / "stepped", tmp_path / "again"
    step = "network.schedule=[{at_ms: 0, bandwidth_mbps: 50}]"
    for out, network in ((plain, None), (stepped, step), (again, None)):
        extra = [] if network is None else ["--set", network]
        assert main(["run", str(scenario), "--out", str(out), "--quiet", *extra]) == 0
    capsys.readouterr()
    assert main(["compare", str(plain), str(stepped)]) == 0
    (warning,) = capsys.readouterr().err.strip().splitlines()
    assert "other networks (schedule none vs 50 Mbps at 0 ms)" in warning
    assert str(plain) in warning and str(stepped) in warning and "network.schedule" in warning
    assert main(["compare", str(plain), str(again)]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_loopback_side_is_no_other_network(tmp_path: Path) -> None:
    """A local run shapes nothing whatever its network says: the loopback warning covers it,
    and a latency on one side only is a network difference elsewhere."""
    folders = {}
    for name, mode, latency in (("local", "local", 0), ("twin", "twin", 2), ("emu", "emu", 0)):
        scenario = load_scenario(
            SCENARIOS / "emu_smoke.yaml", [f"mode={mode}", f"network.latency_ms={latency}"]
        )
        folders[name] = tmp_path / name
        folders[name].mkdir()
        (folders[name] / "scenario.resolved.yaml").write_text(dump_resolved(scenario))
    local, twin, emu = (run_side(folders[name]) for name in ("local", "twin", "emu"))
    assert network_warning(twin, local) is None and loopback_warning(twin, local) is not None
    warning = network_warning(twin, emu)
    assert warning is not None and "(latency_ms 2 vs 0)" in warning


def test_a_preset_figure_or_a_newer_key_is_no_other_model(tmp_path: Path) -> None:
    """gpt2_small by its preset and by its sizes written out differ only in the authors'
    parameter count, no size the runs used; a folder an older edgetwin wrote lacks a key
    added since (``kv_dtype``): both were 'other models' (published_params 124439808 vs
    None, kv_dtype fp32 vs None). A size that differs still is."""
    sizes = "{kind: decoder, layers: 12, width: 768, heads: 12, ffn_size: 3072}"
    folders = {}
    for name, model in (("preset", "{kind: decoder, preset: gpt2_small}"), ("sizes", sizes)):
        scenario = load_scenario(SCENARIOS / "llm_smoke.yaml", [f"model={model}"])
        folders[name] = tmp_path / name
        folders[name].mkdir()
        (folders[name] / "scenario.resolved.yaml").write_text(dump_resolved(scenario))
    preset, written = run_side(folders["preset"]), run_side(folders["sizes"])
    assert model_warning(preset, written) is None
    old = folders["sizes"] / "scenario.resolved.yaml"
    old.write_text(old.read_text().replace("  kv_dtype: fp32\n", ""))
    assert model_warning(preset, run_side(folders["sizes"])) is None
    old.write_text(old.read_text().replace("layers: 12", "layers: 2"))
    warning = model_warning(preset, run_side(folders["sizes"]))
    assert warning is not None and "(layers 12 vs 2)" in warning


def test_a_real_run_is_this_machine_and_a_machine_profile_matches_it(tmp_path: Path) -> None:
    smoke = load_scenario(SCENARIOS / "emu_smoke.yaml")
    real, twin, machine = tmp_path / "real", tmp_path / "twin", tmp_path / "machine"
    for folder, scenario in (
        (real, smoke),
        (twin, smoke.model_copy(update={"mode": "twin"})),
        (machine, load_scenario(SCENARIOS / "h200_loopback.yaml")),
    ):
        folder.mkdir()
        (folder / "scenario.resolved.yaml").write_text(dump_resolved(scenario))
    assert run_side(real).devices == "this machine (mode local)"
    assert run_side(twin).devices == "profile jetson_orin_nano"
    warning = devices_warning(run_side(twin), run_side(real))
    assert warning is not None and "this machine (mode local)" in warning
    resolved = machine / "scenario.resolved.yaml"
    text = resolved.read_text().replace("profile: h200_loopback", "profile: machine_box")
    resolved.write_text(text)
    assert devices_warning(run_side(machine), run_side(real)) is None
    assert devices_warning(run_side(tmp_path / "no_run_here"), run_side(real)) is None


def _small_on_a_calibrated_machine(tmp_path: Path) -> tuple[Path, Path]:
    """A small scenario and a profile file named as a calibrated machine's (machine_box)."""
    scenario, calibrated = tmp_path / "small.yaml", tmp_path / "machine" / "profile.yaml"
    scenario.write_text(SMALL)
    calibrated.parent.mkdir()
    shipped = (ROOT / "edgetwin/calibration/profiles/h200_loopback.yaml").read_text()
    calibrated.write_text(shipped.replace("name: h200_loopback", "name: machine_box", 1))
    return scenario, calibrated


@pytest.mark.timeout(120)
def test_compare_tells_a_gone_profile_apart_from_another_device(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A folder copied without the calibrated profile file its scenario.resolved.yaml names
    was named by the file's path: against the folder whose file is there, or a local run,
    compare warned "different devices"; now it says it cannot tell, naming the file, where
    the folder records no profile names (devices.yaml: an older edgetwin's folder)."""
    scenario, calibrated = _small_on_a_calibrated_machine(tmp_path)
    here, copied = tmp_path / "here", tmp_path / "copied"
    for out in (here, copied):
        run = ["run", str(scenario), "--out", str(out), "--quiet"]
        assert main([*run, "--set", f"devices.0.profile={calibrated}"]) == 0
    assert run_side(here).devices == "profile machine_box"
    gone = tmp_path / "elsewhere" / "profile.yaml"  # where it was on the other machine
    resolved = copied / "scenario.resolved.yaml"
    resolved.write_text(resolved.read_text().replace(str(calibrated), str(gone)))
    (copied / "devices.yaml").unlink()
    capsys.readouterr()
    assert main(["compare", str(here), str(copied)]) == 0
    (warning,) = capsys.readouterr().err.strip().splitlines()
    assert "cannot tell" in warning and str(gone) in warning and str(copied) in warning
    assert "the difference between the devices" not in warning
    real = tmp_path / "real"
    real.mkdir()
    local = load_scenario(SCENARIOS / "emu_smoke.yaml")
    (real / "scenario.resolved.yaml").write_text(dump_resolved(local))
    assert (
        devices_warning(run_side(here), run_side(real)) is None
    )  # machine_box counts as this machine
    warning = devices_warning(run_side(copied), run_side(real))
    assert warning is not None and "cannot tell" in warning and str(gone) in warning


@pytest.mark.timeout(120)
def test_compare_tells_devices_apart_once_their_profile_file_is_gone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A run recorded only its profile's path: with the file gone, compare could not tell a
    run on a calibrated machine from one on a Jetson. The run records each class's
    profile name (devices.yaml), and Results.write carries it."""
    scenario, calibrated = _small_on_a_calibrated_machine(tmp_path)
    ran, jetson = tmp_path / "ran", tmp_path / "jetson"
    run = ["run", str(scenario), "--quiet", "--set"]
    assert main([*run, f"devices.0.profile={calibrated}", "--out", str(ran)]) == 0
    assert main([*run, "devices.0.profile=jetson_orin_nano", "--out", str(jetson)]) == 0
    calibrated.unlink()
    capsys.readouterr()
    assert main(["compare", str(ran), str(jetson)]) == 0
    (warning,) = capsys.readouterr().err.strip().splitlines()
    assert "profile machine_box" in warning and "the difference between the devices" in warning
    again = edgetwin.load_results(ran).write(tmp_path / "again")
    assert run_side(again).devices == "profile machine_box"
    real = tmp_path / "real"
    real.mkdir()
    local = load_scenario(SCENARIOS / "emu_smoke.yaml")
    (real / "scenario.resolved.yaml").write_text(dump_resolved(local))
    assert devices_warning(run_side(again), run_side(real)) is None  # machine_box: this one


def test_local_and_emu_are_one_machine_and_loopback_is_said(tmp_path: Path) -> None:
    """compare of a local and an emulator run warned "this machine (mode local) but this
    machine (mode emu)"; a twin run against a local one said nothing of loopback's
    nominal bandwidth (errors of 170-3147 % by bandwidth)."""
    smoke = load_scenario(SCENARIOS / "emu_smoke.yaml")
    folders = {mode: tmp_path / mode for mode in ("twin", "local", "emu")}
    for mode, folder in folders.items():
        folder.mkdir()
        resolved = dump_resolved(smoke.model_copy(update={"mode": mode}))
        (folder / "scenario.resolved.yaml").write_text(resolved)
    assert devices_warning(run_side(folders["local"]), run_side(folders["emu"])) is None
    for other in ("twin", "emu"):
        warning = loopback_warning(run_side(folders[other]), run_side(folders["local"]))
        assert warning is not None and "nominal" in warning and str(folders["local"]) in warning
        assert loopback_warning(run_side(folders["local"]), run_side(folders[other])) is not None
    assert loopback_warning(run_side(folders["twin"]), run_side(folders["emu"])) is None
    assert loopback_warning(run_side(folders["local"]), run_side(folders["local"])) is None


def test_help_of_trace_names_what_each_kind_of_run_writes() -> None:
    text = " ".join(_subcommands()["run"].format_help().split())
    assert "trace.json (Chrome trace) for a twin run" in text
    assert "timeline.json" in text and "for a crowd run in the twin" in text
    assert "traces/" in text and "for a local ViT run" in text
    # a local decoder or crowd run refuses --trace (exit 2): help says so, not "traces/"
    assert "a local decoder or crowd run refuses it" in text


def test_help_of_calibrate_out_says_an_android_spec_writes_a_folder() -> None:
    """An Android spec writes a profile per phone class into --out, a folder (its
    documented command: --out edgetwin/calibration/profiles); help said 'profile file'."""
    text = " ".join(_subcommands()["calibrate"].format_help().split())
    assert "an Android spec's: the folder" in text


def _help(name: str) -> str:
    return " ".join(_subcommands()[name].format_help().split())


def test_help_of_mode_says_which_mode_runs_without_it() -> None:
    """Help read 'default: its mode:, twin; emu: Mininet, root'."""
    assert (
        "--mode {twin,emu} run in this mode instead of the file's mode: (default: the file's,"
        in (_help("evaluate-affinity"))
    )
    assert "twin where it has none; emu needs Mininet and root)" in _help("evaluate-affinity")
    assert "instead of the scenario's mode: (default: the scenario's, twin where it has none)" in (
        _help("run")
    )


def test_help_of_calibrate_machine_quick_says_how_long_and_what_it_is_not_for() -> None:
    """Help said 'a few seconds'; docs/calibration.md measures about 18 s, and a --quick
    profile predicts a real-size model far too fast."""
    text = _help("calibrate-machine")
    assert "--quick a 4-block ViT of width 192 and a small decoder (about 18 s)" in text
    assert "too small for its profile to predict models of real size" in text


def test_help_of_plan_says_what_out_resumes_and_what_scheduler_replaces() -> None:
    """Help said 'output folder (resumable) (required, except with --check)' and gave no
    default for --scheduler."""
    text = _help("plan")
    assert "--out OUT output folder; the same command again resumes its sweep (required" in text
    assert "a Dask scheduler, e.g. tcp://host:8786, instead of --workers (default: none" in text


def test_help_of_init_lists_the_kinds_in_the_readme_order() -> None:
    """Usage read {eval,plan,scenario}; the README and the help's own text say scenario,
    eval, plan."""
    assert "edgetwin init [-h] [--force] {scenario,eval,plan,plan-llm} [path]" in _help("init")
    assert "edgetwin init scenario|eval|plan|plan-llm" in _readme_commands()["init"]


def test_help_of_emu_cleanup_says_what_needs_root() -> None:
    """Help said 'a crashed emulator run ... or local run' and nothing of root: without it
    only a killed local run's folders are removed, and the command exits 2."""
    text = _help("emu-cleanup")
    assert "killed runs left: local runs' folders; as root, emulator processes, links" in text


def test_help_of_quiet_says_what_it_silences() -> None:
    text = " ".join(_subcommands()["run"].format_help().split())
    assert "--quiet no progress bar on a terminal, no progress lines on stderr" in text


@pytest.mark.timeout(120)
def test_trace_writes_what_help_says_for_a_twin_and_a_crowd_run(tmp_path: Path) -> None:
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    twin, crowd = tmp_path / "twin", tmp_path / "crowd"
    assert main(["run", str(scenario), "--out", str(twin), "--quiet", "--trace"]) == 0
    assert (twin / "trace.json").is_file() and not (twin / "timeline.json").exists()
    crowd_scenario = str(SCENARIOS / "affinity_small.yaml")
    assert main(["run", crowd_scenario, "--out", str(crowd), "--quiet", "--trace"]) == 0
    assert (crowd / "timeline.json").is_file() and not (crowd / "trace.json").exists()


def test_progress_off_a_terminal_is_a_line_per_step() -> None:
    stream = io.StringIO()
    with progress("twin x", 3, quiet=False, stream=stream) as advance:
        for _ in range(3):
            advance()
    assert stream.getvalue().splitlines() == ["twin x: 1/3", "twin x: 2/3", "twin x: 3/3"]
    quiet = io.StringIO()
    with progress("twin x", 3, quiet=True, stream=quiet) as advance:
        advance()
    assert quiet.getvalue() == ""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_step_count_in_the_thousands_is_separated() -> None:
    """Lines of a progress of 1,200 steps count as a reader reads them (``1,200/1,200``),
    and so does the bar on a terminal (it showed ``1000/1200``)."""
    stream = io.StringIO()
    with progress("plan x", 1200, quiet=False, stream=stream) as advance:
        for _ in range(1200):
            advance()
    lines = stream.getvalue().splitlines()
    assert lines[998:1000] == ["plan x: 999/1,200", "plan x: 1,000/1,200"]
    assert lines[-1] == "plan x: 1,200/1,200"
    with progress("plan x", 1200, quiet=False, stream=_Terminal()) as advance:
        for _ in range(1000):
            advance()
        (bar,) = LIVE_BARS
        drawn = Console(file=io.StringIO(), width=100)
        drawn.print(bar.get_renderable())
    assert " 1,000/1,200 " in drawn.file.getvalue()


@pytest.mark.parametrize("stream", [io.StringIO(), _Terminal()], ids=["lines", "bar"])
def test_a_step_may_show_its_own_steps(stream: io.StringIO) -> None:
    """An emulator run's link checks have a progress of their own, opened within one of
    the runs' steps: on a terminal, a second line of the same bar for as long as they last
    (a display of its own would fight the first over the cursor); otherwise its lines."""
    with progress("emu x", 2, quiet=False, stream=stream) as run_done:
        with progress("link checks at 200 Mbps", 2, quiet=False, stream=stream) as checked:
            if stream.isatty():
                (bar,) = LIVE_BARS
                shown = [task.description for task in bar.tasks]
                assert shown == ["emu x", "link checks at 200 Mbps"]
            checked()
            checked()
        if stream.isatty():
            assert [task.description for task in bar.tasks] == ["emu x"]
        run_done()
        run_done()
    assert LIVE_BARS == []
    if not stream.isatty():
        assert stream.getvalue().splitlines() == [
            "link checks at 200 Mbps: 1/2",
            "link checks at 200 Mbps: 2/2",
            "emu x: 1/2",
            "emu x: 2/2",
        ]


def test_a_decoder_step_is_named_with_its_tokens() -> None:
    config = Configuration(
        strategy="pipeline",
        devices=2,
        batch=1,
        bandwidth_mbps=400,
        prompt_tokens=64,
        output_tokens=16,
    )
    assert step_label(config, 1) == "pipeline x2, batch 1, 400 Mbps, prompt 64, 16 out, rep 1"


def test_the_bar_names_the_configuration_that_last_ended(tmp_path: Path) -> None:
    """The bar counted the runs without saying which had run."""
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    shown: list[str] = []

    @contextmanager
    def watched(label: str, total: int) -> Iterator[Callable[[str], None]]:
        with progress(label, total, quiet=False, stream=_Terminal()) as advance:

            def step(done: str) -> None:
                advance(done)
                shown.append(LIVE_BARS[-1].tasks[0].description)

            yield step

    edgetwin.run(scenario, overrides=["sweeps=[{batch: [1]}]"], progress=watched)
    assert shown == [
        "twin small (done: single, batch 1, 400 Mbps, rep 0)",
        "twin small (done: prism cr 9.9 x2, batch 1, 400 Mbps, rep 0)",
    ]


@pytest.mark.timeout(120)
def test_a_piped_run_prints_its_progress_to_stderr(tmp_path: Path) -> None:
    scenario = tmp_path / "small.yaml"
    scenario.write_text(SMALL)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "edgetwin", "run", str(scenario), "--out"]
    done = subprocess.run([*argv, str(tmp_path / "a")], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    steps = ["single, batch 1", "single, batch 2", "prism cr 9.9 x2, batch 1"]
    steps.append("prism cr 9.9 x2, batch 2")  # each configuration named as it ends, in order
    lines = [f"twin small: {k}/4 ({step}, 400 Mbps, rep 0)" for k, step in enumerate(steps, 1)]
    assert [line for line in done.stderr.splitlines() if "twin small" in line] == lines
    quiet = subprocess.run(
        [*argv, str(tmp_path / "b"), "--quiet"], capture_output=True, text=True, env=env
    )
    assert quiet.returncode == 0 and "twin small" not in quiet.stderr


@pytest.mark.timeout(60)
def test_the_cr_column_is_the_cr_used_and_old_tables_still_read(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    scenario = tmp_path / "bert.yaml"
    scenario.write_text(SMALL.replace("vit_b16", "bert_base"))
    out = tmp_path / "bert"
    assert main(["run", str(scenario), "--out", str(out), "--quiet"]) == 0
    table = out / "results.csv"
    prism = [r for r in read_results(table) if r.strategy == "prism"]
    assert {(r.segments, r.cr) for r in prism} == {(6, 10.67)}  # 128 / (6 x 2), not 9.9
    old = table.read_text().replace(",10.67,", ",9.9,")  # as written before: the CR asked
    assert ",9.9," in old
    table.write_text(old)
    assert {r.cr for r in read_results(table) if r.strategy == "prism"} == {9.9}
    assert main(["report", str(out)]) == 0
    assert main(["compare", str(out), str(out)]) == 0


@pytest.mark.timeout(120)
def test_an_evaluation_takes_its_map_from_a_run_that_writes_the_cr_used(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["init", "scenario"]) == 0 and main(["init", "eval"]) == 0
    assert main(["run", "scenario.yaml", "--out", "first", "--quiet"]) == 0
    assert ",9.85," in Path("first/results.csv").read_text()
    argv = [
        "evaluate",
        "evaluation.eval.yaml",
        "--out",
        "ev",
        "--set",
        "map_table=first/results.csv",
    ]
    assert main(argv) == 0, capsys.readouterr().err
    assert "adaptive: accuracy" in capsys.readouterr().out


@pytest.mark.timeout(180)
def test_piped_plan_and_affinity_evaluations_print_their_progress(tmp_path: Path) -> None:
    piped = partial(piped_stderr, tmp_path)
    piped("init", "scenario")
    piped("init", "plan")
    err = piped("plan", "question.plan.yaml", "--out", "p", "--workers=1")
    # each unit named as it ends: prism on 2-4 devices and single, at 3 bandwidths
    assert "plan my_plan: 12/12 (" in err
    spec = str(SCENARIOS / "affinity_small.eval.yaml")
    err = piped("evaluate-affinity", spec, "--out", "a")
    assert "instances: 1/6 (p2_n2_s2_warm)" in err and "instances: 6/6 (p3_n3_s3_barrier)" in err
    assert "instances" not in piped("evaluate-affinity", spec, "--out", "b", "--quiet")


@pytest.mark.timeout(300)
def test_piped_evaluate_and_calibrate_machine_print_their_progress(
    tmp_path: Path, quick_machine_calibration: PipedRun
) -> None:
    """Each step a line, named. ``calibrate-machine --quick`` is the session's one run
    (tests/test_trace_calibration.py checks its profile): its lines name each decoder
    launch, counted in the total."""
    piped = partial(piped_stderr, tmp_path)
    spec = str(SCENARIOS / "adaptive_prism.eval.yaml")
    lines = [line for line in piped("evaluate", spec, "--out", "e").splitlines() if line]
    steps = [line.split("twin sweeps: ", 1)[1] for line in lines if "twin sweeps" in line]
    assert steps == ["1/2 (map, 197 tokens)", "2/2 (held-out, 197 tokens)"]  # a line per sweep
    assert "twin sweeps" not in piped("evaluate", spec, "--out", "q", "--quiet")
    err = quick_machine_calibration.stderr
    lines = [line for line in err.splitlines() if line.startswith("calibrate-machine: ")]
    total = calibration_steps(QUICK)
    assert len(lines) == total and total > 3
    assert lines[:2] == [
        f"calibrate-machine: 1/{total} (ViT latencies)",
        f"calibrate-machine: 2/{total} (staged exchange)",
    ]
    for k, line in enumerate(lines[2:-1], start=3):  # each decoder launch named
        assert line.startswith(f"calibrate-machine: {k}/{total} (decoder: "), line
    assert lines[-1] == f"calibrate-machine: {total}/{total} (fit)"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_piped_calibrate_machine_without_the_decoder_has_no_decoder_step(
    tmp_path: Path,
) -> None:
    """A second full calibrate-machine run (the bounded check of its progress lines, above,
    shares the session's run with the decoder): ``--no-decoder`` drops its launches from
    the steps and the total."""
    err = piped_stderr(tmp_path, "calibrate-machine", "--quick", "--no-decoder", "--out", "m")
    lines = [line for line in err.splitlines() if line.startswith("calibrate-machine: ")]
    assert lines == [  # each step named; no decoder step without the decoder
        "calibrate-machine: 1/3 (ViT latencies)",
        "calibrate-machine: 2/3 (staged exchange)",
        "calibrate-machine: 3/3 (fit)",
    ]


@pytest.mark.timeout(180)
def test_piped_calibrate_and_validate_print_their_fits_and_refits(tmp_path: Path) -> None:
    """A trace fit takes seconds to a minute (h200_netns: 30 s) and said nothing until it
    wrote: each solve of each fit (the fit's own and its bootstrap resamples'), then each
    held-out refit, is a line; ``--quiet`` prints none. The profile is the same either way."""
    specs = ROOT / "edgetwin/calibration/specs"
    spec = yaml.safe_load((specs / "h200_loopback.yaml").read_text())
    spec["traces"] = str((specs / spec["traces"]).resolve())
    spec["bootstrap"] = 2
    # the network fit replays each exchange in the twin (3/5 of a run); its solves count in
    # the same loop as the others', so its parameters come from the shipped profile here
    spec["fit"], spec["base"] = ["compute", "staging", "power"], "h200_loopback"
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    err = piped_stderr(tmp_path, "calibrate", "spec.yaml", "--out", "loud.yaml")
    fits = [line.rsplit(": ", 1)[1] for line in err.splitlines() if "fits with" in line]
    counts = [fit.split(" (")[0] for fit in fits]  # each solve named by its fit's sections
    total = int(counts[-1].split("/")[1])
    assert total % 3 == 0 and counts == [f"{k}/{total}" for k in range(1, total + 1)]
    assert fits[0].endswith(" (compute)"), fits[0]
    refits = [line for line in err.splitlines() if line.startswith("held-out refits")]
    assert refits and f"{len(refits)}/{len(refits)} (" in refits[-1]
    quiet = piped_stderr(tmp_path, "calibrate", "spec.yaml", "--out", "quiet.yaml", "--quiet")
    assert "fits with" not in quiet and "held-out refits" not in quiet
    # staging fitted, network from the base: the refits predict its copies (held out)
    assert "no held-out errors" not in quiet

    def body(name: str) -> list[str]:  # the command line recorded differs, the fit not
        return [
            line
            for line in (tmp_path / name).read_text().splitlines()
            if not line.startswith("#") and "calibrate spec.yaml" not in line
        ]

    assert body("loud.yaml") == body("quiet.yaml")
    err = piped_stderr(tmp_path, "validate", "spec.yaml", "--out", "held_out")
    refits = [line for line in err.splitlines() if line.startswith("held-out refits (by batch)")]
    assert refits and refits[-1].endswith(f"{len(refits)}/{len(refits)} (batch 32 held out)")
    quiet = piped_stderr(tmp_path, "validate", "spec.yaml", "--out", "held_out_q", "--quiet")
    assert "held-out refits" not in quiet


@pytest.mark.timeout(180)
def test_piped_table_calibrate_and_validate_print_their_fit_and_refits(
    jetson_table_calibration: PipedRun, jetson_table_validation: PipedRun
) -> None:
    """A measured table's fit (no ``kind``) runs the twin for every row at each step of the
    solver: a 9-row table of a board's own took 25 s on 2 busy cores in silence. The fit is
    a line, then each held-out refit (one a batch size); ``--quiet`` prints none. The loud
    fit and validation are the session's runs (tests/test_hand_made_traces.py and
    tests/test_trace_calibration.py check what they wrote)."""
    batches = (1, 2, 4, 32)  # data/reference/prism-jetson/measurements.csv
    refits = [
        f"held-out refits (by batch): {k}/{len(batches)} (batch {batch} held out)"
        for k, batch in enumerate(batches, start=1)
    ]
    err = jetson_table_calibration.stderr
    assert [line for line in err.splitlines() if line.startswith(("fit:", "held-out"))] == [
        "fit: 1/1 (timing and power)",
        *refits,
    ]
    folder = jetson_table_calibration.folder
    quiet = piped_stderr(folder, "calibrate", "spec.yaml", "--out", "quiet.yaml", "--quiet")
    assert not [line for line in quiet.splitlines() if line.startswith(("fit:", "held-out"))]
    err = jetson_table_validation.stderr
    assert [line for line in err.splitlines() if line.startswith("held-out")] == refits


@pytest.mark.timeout(60)
def test_check_needs_no_out_and_a_run_still_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--check writes nothing, so it takes --out optionally; without --check a missing --out
    is refused as argparse refuses a missing option (exit 2, naming it)."""
    monkeypatch.chdir(tmp_path)
    for kind in ("scenario", "eval", "plan"):
        assert main(["init", kind]) == 0
    commands = (
        ["run", "scenario.yaml"],
        ["evaluate", "evaluation.eval.yaml"],
        ["plan", "question.plan.yaml"],
    )
    for argv in commands:
        assert main([*argv, "--check"]) == 0
        assert "nothing run" in capsys.readouterr().out
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        assert "required: --out" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "evaluation.eval.yaml",
        "question.plan.yaml",
        "scenario.yaml",
    ]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("mode", "setting", "warned"),
    [
        ("emu", "network.schedule=[{at_ms: 700000, bandwidth_mbps: 5}]", "the step never plays"),
        ("twin", "emulator.faults=[{kind: kill_worker, host: 1, at_s: 0.5}]", "only --mode emu"),
        ("local", "network.latency_ms=5", "nothing shapes loopback"),
        ("local", "network.congestion_control=cubic", "connections use the machine's"),
    ],
)
def test_check_warns_of_what_the_run_would_not_play(
    capsys: pytest.CaptureFixture[str], mode: str, setting: str, warned: str
) -> None:
    """--check said 'ok' and nothing else of a setting the run then warns it does not play
    (a crowd job's schedule step past its 600 s deadline, a fault in the twin): the run's
    warnings, on stderr, before it."""
    scenario = str(SCENARIOS / "emu_crowdio.yaml")
    assert main(["run", scenario, "--check", "--mode", mode, "--set", setting]) == 0
    captured = capsys.readouterr()
    (warning,) = captured.err.strip().splitlines()
    assert warning.startswith("edgetwin: warning: ") and warned in warning
    assert "nothing run" in captured.out
