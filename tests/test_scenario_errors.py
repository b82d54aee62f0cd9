"""Bad input through the real command line: exit 2, one clear line, nothing half-written.

Every case runs ``edgetwin run`` in-process (``edgetwin.cli.main``); a few also run it as
a subprocess to prove that no traceback reaches a user. A hypothesis test mutates a valid
scenario at random: the run either succeeds or fails cleanly, never anything else.
"""

from __future__ import annotations

import contextlib
import copy
import io
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import edgetwin
from edgetwin.cli import main
from edgetwin.errors import InputError
from edgetwin.profile import PROFILE_DIR
from edgetwin.result_cells import read_results
from edgetwin.scenario import Scenario
from edgetwin.schema import keys_at, validate_model
from tests.conftest import yaml_text

OUTPUTS = ("results.csv", "scenario.resolved.yaml", "report.html")
SCENARIO = "scenario.yaml"
DELETE = object()  # marks a key to remove in ``scenario_text``
DEEP = "[" * 3000 + "]" * 3000  # YAML lists nested 3,000 deep
HUGE = "x" * 1_000_000  # a value of 1 MB
BAD_REFERENCE = (
    "strategy,devices,batch,bandwidth_mbps,total_ms\nsingle,1,1,400,80\nsingle,one,1,400,5\n"
)
MAX_LINE_CHARS = 600  # an error line is at most this long, whatever the input

JETSONS = {"name": "jetson", "profile": "jetson_orin_nano", "count": 2}
VALID: dict[str, Any] = {
    "name": "tiny",
    "model": {"preset": "vit_b16"},
    "devices": [{"name": "jetson", "profile": "jetson_orin_nano", "count": 2}],
    "network": {"bandwidth_mbps": 400},
    "strategies": [{"name": "single"}, {"name": "voltage"}, {"name": "prism", "cr": 9.9}],
    "sweeps": [{"batch": [1, 2]}],
}


CROWD: dict[str, Any] = {  # budgets: low 1764 MB, high 4608 MB (6144 less 1536)
    "name": "tiny_crowd",
    "network": {"bandwidth_mbps": 20},
    "strategies": [{"name": "crowdio_streaming"}],
    "crowd": {
        "fleet": [
            {"name": "low", "profile": "android_low", "count": 2},
            {"name": "high", "profile": "android_high", "count": 1},
        ],
        "job": {
            "inputs": 2,
            "stages": [
                {"name": "cell_a", "size_mb": 180.4, "ram_mb": 43.0, "gflops": 2.757},
                {"name": "cell_b", "size_mb": 85.05, "ram_mb": 20.27, "gflops": 0.04253},
                {"name": "cell_c", "size_mb": 2.369, "ram_mb": 0.56, "gflops": 0.001184},
            ],
        },
    },
}
MISSPELT_PROFILE = (
    (PROFILE_DIR / "jetson_orin_nano.yaml").read_text().replace("\nram_mb:", "\nram_mbb:")
)
TOO_BIG = "fits no phone class: the largest session budget is 4,608 MB (class high"


def scenario_text(**changes: Any) -> str:
    """VALID as YAML with dotted-path changes (``network__latency_ms`` style keys)."""
    return _changed(VALID, changes)


def crowd_text(**changes: Any) -> str:
    """CROWD as YAML with dotted-path changes, as ``scenario_text``."""
    return _changed(CROWD, changes)


def _changed(base: dict[str, Any], changes: dict[str, Any]) -> str:
    raw = copy.deepcopy(base)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node: Any = raw
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        if value is DELETE:
            del node[last]
        else:
            node[last] = value
    return yaml_text(raw)


def bad_profile_text(**changes: Any) -> str:
    """The shipped Jetson profile with dotted-path changes."""
    raw = yaml.safe_load((PROFILE_DIR / "jetson_orin_nano.yaml").read_text())
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = raw
        for part in parents:
            node = node[part]
        node[last] = value
    return yaml_text(raw)


@dataclass(frozen=True)
class Case:
    """One kind of bad input and what the error line must say."""

    id: str
    text: str | None  # the scenario file; None: it does not exist
    expect: tuple[str, ...]  # fragments of the message: field path and problem
    args: tuple[str, ...] = ()  # extra command-line arguments
    names: str = SCENARIO  # the file the message must name
    files: dict[str, str] = field(default_factory=dict)  # more files beside the scenario
    absent: tuple[str, ...] = ()  # fragments the message must not have


MALFORMED = "name: tiny\nseed: 0\ndevices:\n  - name: jetson\n    profile: x\n   count: 2\n"

CASES = [
    # ------------------------------------------------------------ the file itself
    Case("malformed-yaml", MALFORMED, ("malformed YAML", "line 6")),
    Case("unclosed-flow", "name: tiny\nstrategies: [{name: single}\ndevices: []\n", ("line 3",)),
    Case(
        "top-level-list", "- name: tiny\n- seed: 1\n", ("top level must be a mapping", "not a list")
    ),
    Case("top-level-scalar", "just words\n", ("must be a mapping", "not a value ('just words')")),
    Case("empty-file", "", ("top level must be a mapping of keys to values: the file is empty",)),
    Case("missing-file", None, ("file not found",)),
    # ------------------------------------------------------------ keys
    Case("unknown-top-key", scenario_text(colour="red"), ("'colour'", "unknown key")),
    Case(  # an optional key misspelt: the hint names the key of that place it is close to
        "unknown-nested-key",
        scenario_text(network__bandwith_mbps=400),
        ("'network.bandwith_mbps'", "unknown key (did you mean 'bandwidth_mbps'?)"),
    ),
    Case(
        "unknown-device-key",
        scenario_text(devices__0__rammb=512),
        ("'devices.0.rammb'", "unknown key (did you mean 'ram_mb'?)"),
    ),
    Case(  # behind a union's tag: the keys of the form the tag names
        "unknown-distribution-key",
        scenario_text(devices__0__availability={"up": {"kind": "exponential", "mean_ss": 60}}),
        ("'devices.0.availability.up.mean_ss'", "unknown key (did you mean 'mean_s'?)"),
    ),
    Case(
        "unknown-crowd-stage-key",
        crowd_text(crowd__job__stages__1__gflop=0.04),
        ("'crowd.job.stages.1.gflop'", "unknown key (did you mean 'gflops'?)"),
    ),
    Case(
        "missing-required-key",
        scenario_text(strategies=DELETE),
        ("'strategies'", "required key is missing"),
    ),
    Case(
        "missing-device-profile",
        scenario_text(devices__0__profile=DELETE),
        ("'devices.0.profile'", "required key is missing"),
    ),
    # ------------------------------------------------------------ types and ranges
    Case(
        "wrong-type",
        scenario_text(repetitions="many"),
        ("'repetitions'", "should be a whole number"),
    ),
    Case(
        "wrong-type-container",
        scenario_text(devices="jetson"),
        ("'devices'", "should be a list", "(got 'jetson')"),
    ),
    Case(
        "negative-bandwidth",
        scenario_text(network__bandwidth_mbps=-5),
        ("'network.bandwidth_mbps'", "greater than 0", "-5"),
    ),
    Case(  # the step sorted last was played, unsaid
        "two-schedule-steps-at-one-instant",
        scenario_text(
            network__schedule=[
                {"at_ms": 5, "bandwidth_mbps": 100},
                {"at_ms": 1, "bandwidth_mbps": 100},
                {"at_ms": 5, "bandwidth_mbps": 200},
            ]
        ),
        ("'network.schedule'", "steps 0 and 2 are both at at_ms 5: give an instant one rate"),
    ),
    Case(  # its runs' times overflowed to inf: a results.csv the run could not read back
        "bandwidth-below-a-bit-per-second",
        scenario_text(network__bandwidth_mbps=1e-300),
        ("'network.bandwidth_mbps'", "below the least rate a link may have, 1 bit/s", "1e-300"),
    ),
    Case("noise-cv-2", scenario_text(noise_cv=2), ("'noise_cv'", "less than or equal to 1")),
    Case(  # pydantic said "Unable to extract tag using discriminator 'kind'"
        "distribution-without-kind",
        scenario_text(
            devices__0__availability={
                "up": {"value_s": 5},
                "down": {"kind": "constant", "value_s": 1},
            }
        ),
        ("'devices.0.availability.up'", "needs a 'kind' key", "(got {'value_s': 5})"),
    ),
    Case(  # pydantic said "Input tag 'gamma' found using 'kind' does not match any of ..."
        "distribution-of-unknown-kind",
        scenario_text(
            devices__0__availability={
                "up": {"kind": "gamma"},
                "down": {"kind": "constant", "value_s": 1},
            }
        ),
        ("'devices.0.availability.up'", "unknown kind 'gamma': one of 'constant', 'exponential'"),
    ),
    Case(
        "zero-batch",
        scenario_text(sweeps=[{"batch": [1, 0]}]),
        ("'sweeps.0.batch.1'", "greater than 0"),
    ),
    Case(
        "empty-batch-list",
        scenario_text(sweeps=[{"batch": []}]),
        ("'sweeps.0.batch'", "give at least one value"),
    ),
    Case(
        "sweep-value-twice",
        scenario_text(sweeps=[{"batch": [1], "bandwidth_mbps": [400, 200, 400]}]),
        ("'sweeps.0.bandwidth_mbps'", "400 is given twice; give each value once"),
    ),
    Case(
        "empty-devices-sweep",
        scenario_text(sweeps=[{"batch": [1], "devices": []}]),
        ("'sweeps.0.devices'", "give at least one value"),
    ),
    Case(
        "devices-sweep-beyond-fleet",
        scenario_text(sweeps=[{"batch": [1], "devices": [2, 3]}]),
        ("field 'sweeps.0.devices': asks for 3", "fleet has 2"),
    ),
    Case(  # it said "asks for 2" of a key the file does not have
        "devices-left-out-beyond-the-fleet",
        scenario_text(devices__0__count=1),
        ("field 'sweeps.0.devices': left out, it is [2] (a split runs on 2 devices)", "has 1"),
    ),
    Case(  # both classes were named 'jetson': no field named
        "device-class-named-twice",
        scenario_text(devices=[JETSONS, JETSONS]),
        ("devices.1.name", "'jetson' is the name of devices.0 too"),
    ),
    Case(  # jetson-1 was two devices sharing one uplink: the run was 2x slower, exit 0
        "device-named-as-another-class-device",
        scenario_text(devices=[JETSONS, {**JETSONS, "name": "jetson-1", "count": 1}]),
        ("devices.1.name", "a device named 'jetson-1' is in devices.0 too"),
    ),
    Case(  # a ValueError traceback from the layout, in run and in plan
        "more-devices-than-tokens",
        scenario_text(devices__0__count=198, sweeps=[{"batch": [1], "devices": [2, 198]}]),
        ("sweeps.0.devices", "voltage: 197 tokens cannot be split over 198 devices"),
    ),
    Case("negative-seed", scenario_text(seed=-1), ("'seed'", "greater than or equal to 0")),
    Case("bad-name", scenario_text(name="two words"), ("'name'", "pattern")),
    Case("bad-mode", scenario_text(mode="cloud"), ("'mode'",)),
    Case(
        "bad-availability-kind",
        scenario_text(
            devices__0__availability={"up": {"kind": "poisson"}, "down": {"kind": "constant"}}
        ),
        ("'devices.0.availability.up'",),
    ),
    # ------------------------------------------------------------ strategies and model
    Case(
        "prism-cr-and-segments",
        scenario_text(strategies__2__segments=[4]),
        ("'strategies.2'", "exactly one of 'cr' or 'segments'"),
    ),
    Case(
        "prism-neither",
        scenario_text(strategies__2__cr=DELETE),
        ("'strategies.2'", "exactly one of 'cr' or 'segments'"),
    ),
    Case(
        "voltage-with-cr",
        scenario_text(strategies__1__cr=2.0),
        ("'strategies.1'", "voltage takes no 'cr'"),
    ),
    Case(
        "unknown-strategy",
        scenario_text(strategies__0__name="ring"),
        ("'strategies.0.name'", "'ring'"),
    ),
    Case(
        "decoder-strategy-on-an-encoder",
        scenario_text(strategies__0__name="pipeline"),
        ("field 'strategies.0.name': pipeline runs decoder models only",),
    ),
    Case(
        "negative-cr",
        scenario_text(strategies__2__cr=[9.9, -1]),
        ("'strategies.2.cr.1'", "greater than or equal to 1"),
    ),
    Case(
        "unknown-preset",
        scenario_text(model={"preset": "vit_x99"}),
        ("'model'", "unknown preset 'vit_x99'"),
    ),
    Case(  # its generation was built layer by layer for minutes before anything failed
        "a-million-decoder-layers",
        scenario_text(model={"kind": "decoder", "preset": "gpt2_small", "layers": 1_000_000}),
        ("'model.layers'", "less than or equal to 10,000"),
    ),
    Case(  # was "field 'model.layers': unknown key": read as an encoder
        "decoder-keys-without-kind",
        scenario_text(model={"layers": 4, "weight_dtype": "fp16"}),
        (
            "field 'model.kind': required key is missing",
            "layers, weight_dtype are a decoder's keys",
            "kind: decoder",
        ),
    ),
    Case(  # was "field 'model.kv_heads': unknown key (did you mean 'heads'?)"
        "decoder-key-on-an-encoder-preset",
        scenario_text(model={"preset": "vit_b16", "kv_heads": 4}),
        (
            "field 'model.kv_heads': a decoder's key, and preset 'vit_b16' is an encoder",
            "kind: decoder",
            "llama3_2_1b",
        ),
    ),
    Case(  # was "field 'model.patch_size': unknown key": read as a decoder's
        "encoder-key-on-a-decoder",
        scenario_text(model={"kind": "decoder", "preset": "gpt2_small", "patch_size": 16}),
        ("field 'model.patch_size': an encoder's key, and this model is a decoder",),
    ),
    Case(  # was "field 'model.kind': unknown key": an encoder's model has no kind
        "kind-encoder",
        scenario_text(model={"kind": "encoder"}),
        (
            "field 'model.kind': 'encoder' is not a kind: decoder for a decoder, none for an "
            "encoder",
        ),
    ),
    Case(  # Hugging Face's config.json names: hidden_size was taken for 'ffn_size'
        "decoder-hf-hidden-size",
        scenario_text(model={"kind": "decoder", "hidden_size": 512}),
        ("field 'model.hidden_size': unknown key (did you mean 'width'?)",),
    ),
    Case(  # Llama's config.json (it had no hint at all)
        "decoder-hf-intermediate-size",
        scenario_text(model={"kind": "decoder", "intermediate_size": 1408}),
        ("field 'model.intermediate_size': unknown key (did you mean 'ffn_size'?)",),
    ),
    Case(  # GPT-2's config.json
        "decoder-hf-n-embd",
        scenario_text(model={"kind": "decoder", "n_embd": 512}),
        ("field 'model.n_embd': unknown key (did you mean 'width'?)",),
    ),
    Case(  # an encoder's model (ViT's, BERT's config.json) said only "unknown key"
        "encoder-hf-hidden-size",
        scenario_text(model__hidden_size=512),
        ("field 'model.hidden_size': unknown key (did you mean 'width'?)",),
    ),
    Case(
        "encoder-hf-num-hidden-layers",
        scenario_text(model__num_hidden_layers=6),
        ("field 'model.num_hidden_layers': unknown key (did you mean 'blocks'?)",),
    ),
    Case(
        "encoder-hf-num-attention-heads",
        scenario_text(model__num_attention_heads=8),
        ("field 'model.num_attention_heads': unknown key (did you mean 'heads'?)",),
    ),
    Case(  # ffn width / hidden size is mlp_ratio: no one field, so no hint
        "encoder-hf-intermediate-size",
        scenario_text(model__intermediate_size=3072),
        ("field 'model.intermediate_size': unknown key",),
        absent=("did you mean",),
    ),
    Case(  # tokens is (image / patch)^2 + 1: was "did you mean 'patch_size'?", a wrong hint
        "encoder-hf-image-size",
        scenario_text(model__image_size=224),
        ("field 'model.image_size': unknown key",),
        absent=("did you mean",),
    ),
    Case(
        "width-not-divisible-by-heads",
        scenario_text(model={"width": 100, "heads": 12}),
        ("'model.heads'", "width 100 is not divisible by 12 heads"),
    ),
    # ------------------------------------------------------------ profiles
    Case(
        "unknown-profile",
        scenario_text(devices__0__profile="jetson_nano_9000"),
        ("'devices.0.profile'", "no profile 'jetson_nano_9000'"),
    ),
    Case(  # a path from the current folder (not the scenario's): it said only 'no profile'
        "profile-path-from-the-current-folder",
        scenario_text(),
        (
            "'devices.0.profile'",
            "profile file 'out/refit.yaml' does not exist",
            "a path is relative to the folder of the file that names it: no file '",
            "/out/refit.yaml'",
        ),
        args=("--set", "devices.0.profile=out/refit.yaml"),
    ),
    Case(  # a path is not a shipped name: it said "no profile '/...' (shipped: [...])"
        "profile-absolute-path-missing",
        scenario_text(),
        ("field 'devices.0.profile': profile file '/nonexistent/nope.yaml' does not exist",),
        args=("--set", "devices.0.profile=/nonexistent/nope.yaml"),
        absent=("shipped",),
    ),
    Case(  # a bare file name is a path too: it offered the shipped names
        "profile-yaml-name-missing",
        scenario_text(),
        ("field 'devices.0.profile': profile file 'nope.yaml' does not exist",),
        args=("--set", "devices.0.profile=nope.yaml"),
        absent=("shipped",),
    ),
    Case(  # listed android_* among the choices; naming one blamed it ('compute' missing)
        "phone-profile-for-a-device",
        scenario_text(devices__0__profile="android_low"),
        ("'devices.0.profile'", "android_low.yaml is a phone profile", "not a device profile"),
    ),
    Case(
        "profile-bad-field",
        scenario_text(devices__0__profile="bad_profile.yaml"),
        ("'compute.throughput_gflops'", "greater than 0"),
        names="bad_profile.yaml",
        files={"bad_profile.yaml": bad_profile_text(compute__throughput_gflops=-1)},
    ),
    Case(
        "profile-unknown-key",
        scenario_text(devices__0__profile="bad_profile.yaml"),
        ("'power.standby_w'", "unknown key"),
        names="bad_profile.yaml",
        files={"bad_profile.yaml": bad_profile_text(power__standby_w=1.0)},
    ),
    Case(
        "profile-malformed",
        scenario_text(devices__0__profile="bad_profile.yaml"),
        ("malformed YAML", "line 2"),
        names="bad_profile.yaml",
        files={"bad_profile.yaml": "name: x\n  ram_mb: [\n"},
    ),
    # ------------------------------------------------------------ reference and mode
    Case(
        "reference-missing",
        scenario_text(reference="data/nope.csv"),
        ("'reference'", "file not found", "nope.csv"),
    ),
    # ------------------------------------------------------------ --set and --seed
    Case(
        "set-without-equals", scenario_text(), ("override 'seed'", "key=value"), ("--set", "seed")
    ),
    Case("set-empty-key", scenario_text(), ("override '=3'", "key=value"), ("--set", "=3")),
    Case(
        "set-unknown-key",
        scenario_text(),
        ("'network.bandwith_mbps'", "unknown key"),
        ("--set", "network.bandwith_mbps=300"),
    ),
    Case(
        "set-out-of-range",
        scenario_text(),
        ("'noise_cv'", "less than or equal to 1"),
        ("--set", "noise_cv=2"),
    ),
    Case(
        "set-wrong-type",
        scenario_text(),
        ("'network.bandwidth_mbps'", "should be a number"),
        ("--set", "network.bandwidth_mbps=fast"),
    ),
    Case(
        "set-index-out-of-range",
        scenario_text(),
        ("'strategies.7'", "out of range", "list has 3"),
        ("--set", "strategies.7.name=single"),
    ),
    Case(
        "set-index-not-a-number",
        scenario_text(),
        ("'strategies.first'", "is not a list index", "list has 3"),
        ("--set", "strategies.first.name=single"),
    ),
    Case(
        "set-index-of-5000-digits",  # int() refused it: a ValueError traceback
        scenario_text(),
        ("'strategies.", "out of range", "list has 3"),
        ("--set", f"strategies.{'9' * 5000}.name=single"),
    ),
    Case(
        "set-last-index-out-of-range",
        scenario_text(),
        ("'sweeps.0.batch.5'", "out of range", "list has 2"),
        ("--set", "sweeps.0.batch.5=4"),
    ),
    Case(  # made a mapping {'0': ...}: "field 'sweeps': Input should be a valid tuple"
        "set-index-of-a-list-the-file-lacks",
        scenario_text(sweeps=DELETE),
        ("'sweeps.0'", "no list 'sweeps'", "sweeps=[...]"),
        ("--set", "sweeps.0.bandwidth_mbps=[100, 300]"),
    ),
    Case(
        "set-last-index-of-a-list-the-file-lacks",
        scenario_text(sweeps=DELETE),
        ("'sweeps.0'", "no list 'sweeps'"),
        ("--set", "sweeps.0={batch: [4]}"),
    ),
    Case(
        "set-inside-a-scalar",
        scenario_text(),
        ("'name.first'", "not a mapping or list"),
        ("--set", "name.first=1"),
    ),
    Case(
        "set-inside-a-scalar-deep",
        scenario_text(),
        ("'network.bandwidth_mbps.x'", "not a mapping or list"),
        ("--set", "network.bandwidth_mbps.x.y=1"),
    ),
    Case(
        "set-inside-null",
        scenario_text(model=None),
        ("'model.preset'", "not a mapping or list"),
        ("--set", "model.preset=vit_b16"),
    ),
    Case(
        "set-invalid-yaml-value",
        scenario_text(),
        ("'seed'", "not valid YAML"),
        ("--set", "seed=[1"),
    ),
    Case(
        "set-second-of-several-bad",
        scenario_text(),
        ("'network.latency_ms'", "greater than or equal to 0"),
        ("--set", "seed=4", "--set", "network.latency_ms=-1"),
    ),
    Case(
        "loss-of-every-packet",
        scenario_text(network__loss_pct=100),
        ("'network.loss_pct'", "less than 100"),
    ),
    Case(
        "set-out-of-range-in-list",
        scenario_text(),
        ("'sweeps.0.batch.0'", "greater than 0"),
        ("--set", "sweeps.0.batch.0=0"),
    ),
    Case(
        "set-on-missing-file",
        None,
        ("file not found",),
        ("--set", "seed=1"),
    ),
    Case(
        "seed-negative", scenario_text(), ("'seed'", "greater than or equal to 0"), ("--seed=-1",)
    ),
    # ------------------------------------------------------------ hostile input (issue 13)
    Case("deep-nesting", f"name: tiny\nstrategies: {DEEP}\n", ("nested deeper than 64 levels",)),
    Case(
        "deep-nesting-in-set",
        scenario_text(),
        ("'seed'", "nested deeper than 64 levels"),
        ("--set", f"seed={DEEP}"),
    ),
    Case(
        "nesting-just-too-deep",
        f"name: tiny\nstrategies: {'[' * 66}{']' * 66}\n",
        ("nested deeper than 64 levels",),
    ),
    Case("preset-a-list", scenario_text(model={"preset": [1]}), ("'model'", "unknown preset [1]")),
    Case(
        "preset-a-mapping", scenario_text(model={"preset": {"a": 1}}), ("unknown preset {'a': 1}",)
    ),
    Case(
        "reference-name-too-long",
        scenario_text(reference="r" * 300 + ".csv"),
        ("'reference'", "File name too long"),
    ),
    Case(
        "reference-path-too-long",
        scenario_text(reference="/".join(["r" * 200] * 25)),
        ("'reference'", "File name too long"),
    ),
    Case(
        "profile-name-too-long",
        scenario_text(devices__0__profile="p" * 300 + ".yaml"),
        ("'devices.0.profile'", "File name too long"),
    ),
    Case(
        "reference-not-a-results-table",
        scenario_text(reference="/etc/passwd"),
        ("'reference'", "passwd is not a results table", "no column strategy"),
    ),
    Case(
        "reference-a-folder", scenario_text(reference="."), ("'reference'", "a folder, not a file")
    ),
    Case(
        "reference-a-number-is-not",
        scenario_text(reference="ref.csv"),
        ("'reference'", "ref.csv line 3", "not a number"),
        files={"ref.csv": BAD_REFERENCE},
    ),
    Case(  # ran, compared with nothing, exit 0
        "reference-header-only",
        scenario_text(reference="ref.csv"),
        ("'reference'", "ref.csv: a header and no rows"),
        files={"ref.csv": "strategy,devices,batch,bandwidth_mbps,total_ms\n"},
    ),
    Case(  # its latencies were left out, unsaid
        "reference-column-misspelt",
        scenario_text(reference="ref.csv"),
        ("'reference'", "column 'totl_ms' is no results column (did you mean 'total_ms'?)"),
        files={
            "ref.csv": "strategy,devices,batch,bandwidth_mbps,compute_ms,totl_ms\n"
            "single,1,1,400,70,80\n"
        },
    ),
    Case(  # an evaluation's truth table of it divided by zero (a traceback)
        "reference-a-zero-latency",
        scenario_text(reference="ref.csv"),
        ("'reference'", "ref.csv line 2: total_ms 0: a run that finished took some time"),
        files={"ref.csv": "strategy,devices,batch,bandwidth_mbps,total_ms\nsingle,1,1,400,0\n"},
    ),
    Case(
        "profile-not-a-regular-file",
        scenario_text(devices__0__profile="/dev/null"),
        ("'devices.0.profile'", "not a regular file"),
    ),
    Case(
        "profile-a-folder",
        scenario_text(devices__0__profile="."),
        ("'devices.0.profile'", "a folder, not a file"),
    ),
    Case(  # pydantic says ram_mb is missing first; the misspelling is the mistake
        "profile-key-misspelt",
        scenario_text(devices__0__profile="mine.yaml"),
        ("'ram_mbb'", "unknown key (did you mean 'ram_mb'?)"),
        names="mine.yaml",
        files={"mine.yaml": MISSPELT_PROFILE},
    ),
    Case(
        "profile-not-a-profile",  # it said "field 'ram_mb': required key is missing"
        scenario_text(devices__0__profile="other.yaml"),
        ("other.yaml: this is a scenario, not a device profile: use `edgetwin run ",),
        names="other.yaml",
        files={"other.yaml": scenario_text()},
    ),
    Case(
        "huge-value-not-echoed-whole",
        scenario_text(strategies__0__name=HUGE),
        ("'strategies.0.name'", "unknown strategy 'xxx", "…"),
    ),
    Case("huge-preset", scenario_text(model={"preset": HUGE}), ("'model'", "unknown preset", "…")),
    Case("huge-unknown-key", scenario_text(**{HUGE: 1}), ("unknown key", "…")),
    Case("huge-set-item", scenario_text(), ("expected key=value", "…"), ("--set", HUGE)),
    Case(
        "set-remove-missing",
        scenario_text(),
        ("'network.loss'", "override '~network.loss': no such key to remove"),
        ("--set", "~network.loss"),
    ),
    Case(
        "set-remove-required",
        scenario_text(),
        ("'devices'", "needs at least one device class"),
        ("--set", "~devices"),
    ),
    # ------------------------------------------------------------ a crowd's model
    Case(  # each ran, the model's fields unread
        "crowd-with-model-tokens",
        crowd_text(model={"tokens": 64}),
        ("field 'model.tokens'", "a crowd run's model is its crowd.job.stages"),
    ),
    Case(
        "crowd-with-model-preset",
        crowd_text(model={"preset": "bert_base"}),
        ("field 'model.preset'", "crowd.job.stages", "emulator.model"),
    ),
    Case(  # was "strategies.0.name: crowdio_streaming runs no decoder"
        "crowd-with-a-decoder",
        crowd_text(model={"preset": "gpt2_small"}),
        ("field 'model'", "a crowd run's model is its crowd.job.stages"),
    ),
    # ------------------------------------------------------------ a crowd stage no phone holds
    Case(
        "crowd-stage-fits-no-phone",
        crowd_text(crowd__job__stages__2__ram_mb=5000),
        ("'crowd.job.stages.2.ram_mb'", "stage cell_c's session needs 5,000 MB", TOO_BIG),
    ),
    Case(
        "crowd-stage-peak-fits-no-phone",  # its ram_mb fits; its load's peak does not
        crowd_text(crowd__job__stages__0__load_peak_mb=4608.5),
        ("'crowd.job.stages.0.load_peak_mb'", "needs 4,608.5 MB", TOO_BIG),
    ),
    Case(
        "crowd-stage-fits-no-phone-set",
        crowd_text(crowd__job__stages__1__ram_mb=3000),  # only high holds it
        ("'crowd.job.stages.1.ram_mb'", "budget is 2,464 MB (class high: 4,000 MB of RAM less"),
        ("--set", "crowd.fleet.1.ram_mb=4000"),
    ),
    Case(
        "crowd-stage-fits-no-phone-profile",
        crowd_text(crowd__job__stages__1__ram_mb=3000),
        ("'crowd.job.stages.1.ram_mb'", "largest session budget is 1,764 MB (class low"),
        ("--set", "crowd.fleet.1.profile=android_low"),
    ),
    Case(
        "crowd-stage-fits-no-phone-check",
        crowd_text(crowd__job__stages__2__ram_mb=5000),
        ("'crowd.job.stages.2.ram_mb'", TOO_BIG),
        ("--check",),
    ),
    Case(
        "crowd-stage-fits-no-phone-emu",
        crowd_text(crowd__job__stages__2__ram_mb=5000),
        ("'crowd.job.stages.2.ram_mb'", TOO_BIG),
        ("--mode", "emu", "--check"),
    ),
]


def _listing(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` (hidden ones too) with its bytes (None for folders)."""
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(folder.rglob("*"))
    }


def _prepare(case: Case, tmp_path: Path, existing_out: bool) -> tuple[Path, Path]:
    scenario = tmp_path / SCENARIO
    if case.text is not None:
        scenario.write_text(case.text)
    for name, text in case.files.items():
        (tmp_path / name).write_text(text)
    out = tmp_path / "out"
    if existing_out:
        out.mkdir()
        (out / "old.txt").write_text("from an earlier run\n")
        (out / "results.csv").write_text("old,results\n")
    return scenario, out


def assert_clean_failure(
    code: int, stderr: str, case: Case, before: dict[str, bytes | None], tmp_path: Path
) -> None:
    assert code == 2, stderr
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    line = lines[0]
    assert len(line) <= MAX_LINE_CHARS, line[:500]
    assert line.startswith("edgetwin: error: "), line
    assert case.names in line, line
    for fragment in case.expect:
        assert fragment in line, f"{fragment!r} not in {line!r}"
    for fragment in case.absent:
        assert fragment not in line, f"{fragment!r} in {line!r}"
    # nothing written, nothing moved, no temp folder left beside the output folder
    assert _listing(tmp_path) == before


@pytest.mark.parametrize("existing_out", [False, True], ids=["new-out", "existing-out"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_exits_2_with_one_line(
    case: Case, existing_out: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario, out = _prepare(case, tmp_path, existing_out)
    before = _listing(tmp_path)
    force = ["--force"] if existing_out else []  # a failed forced run keeps the old folder
    code = main(["run", str(scenario), "--out", str(out), "--quiet", *force, *case.args])
    captured = capsys.readouterr()
    assert_clean_failure(code, captured.err, case, before, tmp_path)
    assert captured.out == ""
    assert out.exists() == existing_out


SUBPROCESS_IDS = {"malformed-yaml", "unknown-nested-key", "unknown-profile", "set-inside-null"}
SUBPROCESS_IDS |= {"deep-nesting", "preset-a-list", "reference-not-a-results-table"}
SUBPROCESS_IDS |= {"huge-value-not-echoed-whole", "profile-name-too-long"}
SUBPROCESS_IDS |= {"crowd-stage-fits-no-phone"}
SUBPROCESS_CASES = [c for c in CASES if c.id in SUBPROCESS_IDS | {"missing-file"}]


@pytest.mark.parametrize("case", SUBPROCESS_CASES, ids=[c.id for c in SUBPROCESS_CASES])
def test_bad_input_as_a_user_sees_it(case: Case, tmp_path: Path) -> None:
    scenario, out = _prepare(case, tmp_path, existing_out=False)
    before = _listing(tmp_path)
    argv = ["run", str(scenario), "--out", str(out), *case.args]
    proc = subprocess.run(
        [sys.executable, "-m", "edgetwin", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert_clean_failure(proc.returncode, proc.stderr, case, before, tmp_path)
    assert not out.exists()


@pytest.mark.timeout(120)
def test_a_crowd_stage_only_some_phone_classes_hold_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stage over the low class's budget but in the high class's is no error: its tasks
    run on the high phone and every job finishes."""
    (tmp_path / SCENARIO).write_text(crowd_text(crowd__job__stages__1__ram_mb=3000))
    out = tmp_path / "out"
    assert main(["run", str(tmp_path / SCENARIO), "--out", str(out), "--quiet"]) == 0, (
        capsys.readouterr().err
    )
    rows = read_results(out / "results.csv")
    assert rows and all(row.status == "ok" for row in rows)


@pytest.mark.parametrize(
    ("changes", "overrides", "field"),
    [
        ({"crowd__job__stages__2__ram_mb": 5000}, [], "crowd.job.stages.2.ram_mb"),
        ({"crowd__job__stages__0__load_peak_mb": 4700}, [], "crowd.job.stages.0.load_peak_mb"),
        (
            {"crowd__job__stages__1__ram_mb": 3000},
            ["crowd.fleet.1.ram_mb=4000"],
            "crowd.job.stages.1.ram_mb",
        ),
    ],
    ids=["ram", "load-peak", "set-fleet-ram"],
)
def test_the_api_refuses_a_crowd_stage_no_phone_class_holds(
    changes: dict[str, Any], overrides: list[str], field: str, tmp_path: Path
) -> None:
    """``edgetwin.run`` of a file, and of a Scenario in memory, raises the InputError
    before anything runs (the run went on to horizon_s + drain_s and reported the job
    unfinished)."""
    path = tmp_path / SCENARIO
    path.write_text(crowd_text(**changes))
    with pytest.raises(InputError) as raised:
        edgetwin.run(path, overrides=overrides)
    assert (raised.value.path, raised.value.field) == (str(path), field)
    assert "fits no phone class" in raised.value.problem
    scenario = Scenario.model_validate(yaml.safe_load(path.read_text()))
    with pytest.raises(InputError) as raised:
        edgetwin.run(scenario, overrides=overrides)
    assert raised.value.field == field


CROWD_CITY = Path(__file__).resolve().parents[1] / "scenarios" / "crowd_city.yaml"
TRACE_FIELD = "field 'crowd.availability_trace'"
TRACE_CASES = [  # a name that is no regular file: the scenario's field says so, as a reference's
    ("t" * 300 + ".csv", SCENARIO, (TRACE_FIELD, "File name too long")),
    (".", SCENARIO, (TRACE_FIELD, "a folder, not a file")),
    ("/dev/null", SCENARIO, (TRACE_FIELD, "not a regular file: /dev/null")),
    ("missing.csv", SCENARIO, (TRACE_FIELD, "file not found: ")),
    ("/etc/passwd", "/etc/passwd", ("field 'device'", "line 1: missing column (header: ")),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("trace", "names", "expect"), TRACE_CASES, ids=["long", "folder", "null", "missing", "passwd"]
)
def test_bad_availability_trace(
    trace: str,
    names: str,
    expect: tuple[str, ...],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A crowd scenario's availability trace is checked as a trace before anything runs."""
    raw = yaml.safe_load(CROWD_CITY.read_text())
    raw["crowd"]["availability_trace"] = trace
    (tmp_path / SCENARIO).write_text(yaml.safe_dump(raw))
    before = _listing(tmp_path)
    code = main(["run", str(tmp_path / SCENARIO), "--out", str(tmp_path / "out"), "--quiet"])
    case = Case("trace", None, expect, names=names)
    assert_clean_failure(code, capsys.readouterr().err, case, before, tmp_path)


@pytest.mark.timeout(120)
def test_report_and_compare_check_the_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``report`` rereads DIR/reference.csv and ``compare`` a measured results.csv: both
    are checked as results tables (a row without the key columns was a KeyError)."""
    (tmp_path / SCENARIO).write_text(scenario_text())
    run = tmp_path / "run"
    assert main(["run", str(tmp_path / SCENARIO), "--out", str(run), "--quiet"]) == 0
    capsys.readouterr()
    (run / "reference.csv").write_text("strategy,devices,total_ms\nsingle,1,80\n")
    measured = tmp_path / "measured"
    measured.mkdir()
    shutil.copyfile(run / "reference.csv", measured / "results.csv")
    expect = ("is not a results table", "no column batch, bandwidth_mbps")
    for argv, names in (
        (["report", str(run)], "reference.csv"),
        (["compare", str(run), str(measured)], "results.csv"),
    ):
        before = _listing(tmp_path)
        code = main(argv)
        case = Case(argv[0], None, expect, names=names)
        assert_clean_failure(code, capsys.readouterr().err, case, before, tmp_path)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("table", "expect"),
    [
        (
            "scenario,mode\nx,twin\n",
            ("field 'strategy'", "no such column (header: scenario, mode)"),
        ),
        ("{header}\n{bad_row}\n", ("field 'devices'", "line 2", "'many' is not a number")),
        (b"\xff\xfe\x00bad", ("cannot read",)),
        ("{header}\n", ("no rows",)),  # wrote a page with nothing on it, exit 0
    ],
    ids=["missing-columns", "bad-number", "not-text", "header-only"],
)
def test_report_checks_the_results_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], table: str | bytes, expect: tuple[str, ...]
) -> None:
    """``report DIR`` on a results.csv that is not a results table: one line, exit 2 (it
    was a KeyError or ValueError traceback from ``read_results``)."""
    (tmp_path / SCENARIO).write_text(scenario_text())
    run = tmp_path / "run"
    assert main(["run", str(tmp_path / SCENARIO), "--out", str(run), "--quiet"]) == 0
    capsys.readouterr()
    results = run / "results.csv"
    if isinstance(table, bytes):
        results.write_bytes(table)
    else:
        header, first = results.read_text().splitlines()[:2]
        bad_row = first.split(",")
        bad_row[header.split(",").index("devices")] = "many"
        results.write_text(table.format(header=header, bad_row=",".join(bad_row)))
    before = _listing(tmp_path)
    code = main(["report", str(run)])
    case = Case("report-results", None, expect, names="results.csv")
    assert_clean_failure(code, capsys.readouterr().err, case, before, tmp_path)


def test_out_is_an_existing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / SCENARIO).write_text(scenario_text())
    (tmp_path / "out").write_text("not a folder\n")
    before = _listing(tmp_path)
    code = main(["run", str(tmp_path / SCENARIO), "--out", str(tmp_path / "out"), "--quiet"])
    case = Case("out-file", None, ("not a folder",), names="out")
    assert_clean_failure(code, capsys.readouterr().err, case, before, tmp_path)


def test_out_below_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / SCENARIO).write_text(scenario_text())
    (tmp_path / "blocker").write_text("a file where a folder should be\n")
    out = tmp_path / "blocker" / "out"
    before = _listing(tmp_path)
    code = main(["run", str(tmp_path / SCENARIO), "--out", str(out), "--quiet"])
    case = Case("out-below-file", None, ("cannot create the output folder",), names="out")
    assert_clean_failure(code, capsys.readouterr().err, case, before, tmp_path)


# ---------------------------------------------------------------- mutation testing

SMALL: dict[str, Any] = {
    "name": "mutant",
    "seed": 0,
    "devices": [
        {"name": "a", "profile": "jetson_orin_nano"},
        {"name": "b", "profile": "jetson_orin_nano", "count": 1},
    ],
    "network": {"bandwidth_mbps": 400, "latency_ms": 0},
    "strategies": [{"name": "single"}, {"name": "voltage"}, {"name": "prism", "cr": [9.9]}],
    "sweeps": [{"batch": [1, 2]}],
}

# Values of a wrong type, or out of range for (nearly) every field of SMALL. Large positive
# numbers are left out on purpose: they are valid, and only make the run slow.
WRONG_VALUES = st.one_of(
    st.sampled_from([-1, 0, -0.5, 1.5, 2, -1e9, float("nan"), float("inf"), True, None]),
    st.text(max_size=6),
    st.lists(st.integers(-2, 2), max_size=2),
    st.dictionaries(st.sampled_from(["a", "kind", "name"]), st.integers(-1, 1), max_size=2),
)
UNKNOWN_KEYS = st.sampled_from(["colour", "bandwith_mbps", "nme", "Name", "cr_", "extra"])

Mutation = Callable[[st.DataObject, dict[str, Any]], None]


def _nodes(tree: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path below the root of a scenario tree."""
    found: list[tuple[Any, ...]] = []
    children: list[tuple[Any, Any]] = []
    if isinstance(tree, dict):
        children = list(tree.items())
    elif isinstance(tree, list):
        children = list(enumerate(tree))
    for key, child in children:
        found.append((*path, key))
        found.extend(_nodes(child, (*path, key)))
    return found


def _get(tree: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def _parent(tree: Any, path: tuple[Any, ...]) -> Any:
    return _get(tree, path[:-1])


def _replace(data: st.DataObject, tree: dict[str, Any]) -> None:
    path = data.draw(st.sampled_from(_nodes(tree)), label="replace at")
    _parent(tree, path)[path[-1]] = data.draw(WRONG_VALUES, label="with")


def _delete(data: st.DataObject, tree: dict[str, Any]) -> None:
    path = data.draw(st.sampled_from(_nodes(tree)), label="delete")
    del _parent(tree, path)[path[-1]]


def _add_key(data: st.DataObject, tree: dict[str, Any]) -> None:
    mappings = [()] + [p for p in _nodes(tree) if isinstance(_get(tree, p), dict)]
    path = data.draw(st.sampled_from(mappings), label="add key in")
    _get(tree, path)[data.draw(UNKNOWN_KEYS, label="key")] = data.draw(WRONG_VALUES, label="value")


MUTATIONS: list[Mutation] = [_replace, _replace, _delete, _add_key]


def _run_quietly(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def test_the_keys_of_a_place_are_those_of_every_form_that_can_stand_there() -> None:
    assert "bandwidth_mbps" in keys_at(Scenario, ("network",))
    assert {"name", "profile", "count", "ram_mb"} <= keys_at(Scenario, ("devices", 0))
    assert keys_at(Scenario, ("devices", 0, "availability", "up", "exponential")) == {
        "kind",
        "mean_s",
    }  # the tag names one form of the distribution
    assert {"layers", "kv_heads"} <= keys_at(Scenario, ("model", "decoder"))
    assert "kv_heads" not in keys_at(Scenario, ("model", "encoder"))


def test_an_unknown_key_close_to_no_key_of_its_place_gets_no_hint() -> None:
    raw = yaml.safe_load(scenario_text(network__colour="red"))
    with pytest.raises(InputError) as error:
        validate_model(Scenario, raw, SCENARIO)
    assert error.value.field == "network.colour"
    assert error.value.problem == "unknown key"


def test_small_scenario_is_valid() -> None:
    """The mutation test's starting point runs cleanly (else every mutant would fail)."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / SCENARIO).write_text(yaml.safe_dump(SMALL))
        code, _, err = _run_quietly(["run", str(root / SCENARIO), "--out", str(root / "out")])
        assert code == 0, err
        assert all((root / "out" / name).is_file() for name in OUTPUTS)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(data=st.data())
def test_mutated_scenarios_succeed_or_fail_cleanly(data: st.DataObject) -> None:
    tree = copy.deepcopy(SMALL)
    for _ in range(data.draw(st.integers(1, 2), label="mutations")):
        if not _nodes(tree):
            break
        data.draw(st.sampled_from(MUTATIONS), label="mutation")(data, tree)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        scenario, out = root / SCENARIO, root / "out"
        scenario.write_text(yaml.safe_dump(tree))
        before = _listing(root)
        code, stdout, stderr = _run_quietly(["run", str(scenario), "--out", str(out), "--quiet"])
        event(f"exit {code}")
        if code == 0:
            assert all((out / name).is_file() for name in OUTPUTS), stdout
            assert stderr == ""
        else:
            case = Case("mutant", None, ())
            assert_clean_failure(code, stderr, case, before, root)
            assert not out.exists()
