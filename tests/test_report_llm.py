"""The page of a decoder run: TTFT and TPOT vs prompt length, tokens/s vs bandwidth and the
memory per device vs context with the RAM line, traces named per strategy."""

from __future__ import annotations

from html import escape
from pathlib import Path

import pytest

import edgetwin
from edgetwin.cli import main
from edgetwin.models import registry
from edgetwin.profile import load_profile
from edgetwin.reports.html import read_run, run_figures
from edgetwin.reports.llm import device_ram_mb
from tests.conftest import REPO

SMOKE = REPO / "scenarios" / "llm_smoke.yaml"
SWEEP = "sweeps=[{batch: [1], prompt_tokens: [32, 64], bandwidth_mbps: [200, 400], devices: [2]}]"


def llm_run(out: Path) -> Path:
    """llm_smoke in the twin over two prompt lengths and two bandwidths."""
    assert main(["run", str(SMOKE), "--out", str(out), "--quiet", "--set", SWEEP]) == 0
    return out


@pytest.mark.timeout(120)
def test_decoder_page_has_its_figures_with_a_line_per_strategy(tmp_path: Path) -> None:
    data = read_run(llm_run(tmp_path / "run"))
    figures = run_figures(data)
    titles = [fig.layout.title.text for fig in figures]
    assert [t.split(" vs ")[0] for t in titles] == [
        "TTFT and TPOT",
        "Tokens/s",
        "Memory per device",
    ]
    strategies = {row.strategy for row in data.rows}
    assert strategies == set(registry.decoder_names())
    for fig in figures:
        named = {trace.legendgroup for trace in fig.data if trace.legendgroup != "RAM"}
        assert named == strategies
    ttft, tokens, memory = figures
    single = next(r for r in data.rows if r.strategy == "single" and r.prompt_tokens == 64)
    line = next(t for t in ttft.data if t.name == "single" and t.xaxis == "x")
    assert list(line.x) == [32, 64] and line.y[1] == pytest.approx(single.ttft_ms)
    rate = next(t for t in tokens.data if t.name == "single")
    prompt = int(tokens.layout.title.text.split("prompt ")[1].split(",")[0])
    expected = [
        r.tokens_per_s
        for bw in (200, 400)
        for r in data.rows
        if (r.strategy, r.prompt_tokens, r.bandwidth_mbps) == ("single", prompt, bw)
    ]
    assert list(rate.x) == [200, 400] and list(rate.y) == pytest.approx(expected)
    assert tokens.layout.xaxis.ticktext == ("200", "400")  # the swept ones (not 200, 300)
    memory_line = next(t for t in memory.data if t.name == "single")
    assert memory_line.y[1] == pytest.approx(single.weights_mb + single.kv_cache_mb)
    ram = [t for t in memory.data if t.legendgroup == "RAM"]
    profile_ram_mb = load_profile("jetson_orin_nano").ram_mb
    assert len(ram) == 1 and set(ram[0].y) == {profile_ram_mb}
    assert device_ram_mb(tmp_path / "run") == ({"jetson": profile_ram_mb}, [])
    # a hover names what x is, with its unit (it gave a bare "64: 19.2 ms")
    assert line.hovertemplate.startswith("prompt %{x:g} tokens: ")
    assert rate.hovertemplate.startswith("%{x:g} Mbit/s: ")
    assert memory_line.hovertemplate.startswith("context %{x:g} tokens: ")


@pytest.mark.timeout(120)
def test_report_names_a_resolved_scenario_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The RAM line comes from the run's ``scenario.resolved.yaml``: one that is there but
    does not load left the line out unsaid; report names it (exit 2). A folder without
    one still reports, without the line."""
    out = llm_run(tmp_path / "run")
    resolved = out / "scenario.resolved.yaml"
    resolved.write_text(resolved.read_text().replace("seed: 0", "seed: -1"))
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{resolved}: field 'seed'" in err and len(err.strip().splitlines()) == 1
    resolved.unlink()
    assert main(["report", str(out)]) == 0
    assert not [t for t in run_figures(read_run(out))[-1].data if t.legendgroup == "RAM"]


@pytest.mark.timeout(120)
def test_report_names_a_profile_it_cannot_read_and_draws_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A profile that ``scenario.resolved.yaml`` names and that is gone (a folder from
    another machine) left the RAM line out unsaid; the page is still written, without that
    class's line, and it and stderr say which file and why."""
    out = tmp_path / "run"
    devices = (
        "devices=[{name: jetson, profile: jetson_orin_nano, count: 1},"
        " {name: gpu, profile: h200_loopback, count: 1}]"
    )
    run = ["run", str(SMOKE), "--out", str(out), "--quiet", "--set", devices]
    assert main([*run, "--set", "strategies=[{name: single}, {name: pipeline}]"]) == 0
    capsys.readouterr()
    resolved = out / "scenario.resolved.yaml"
    gone = tmp_path / "elsewhere" / "jetson.yaml"
    text = resolved.read_text()
    resolved.write_text(text.replace("profile: jetson_orin_nano", f"profile: {gone}", 1))
    assert main(["report", str(out)]) == 0
    (warning,) = capsys.readouterr().err.strip().splitlines()
    assert warning.startswith("edgetwin: warning: no RAM line for jetson: ")
    # InputError cuts a long path's middle: the ends name the files
    assert "scenario.resolved.yaml: field 'devices.0.profile': profile file '" in warning
    assert "/elsewhere/jetson.yaml' does not exist" in warning
    page = (out / "report.html").read_text()
    assert escape(warning.removeprefix("edgetwin: warning: ")) in page
    assert edgetwin.load_results(out).warnings == (warning.removeprefix("edgetwin: warning: "),)
    # the page is the same wherever it is written: it names the folder's own file, not
    # the staging folder write() drew it in, which is gone
    copies = [edgetwin.load_results(out).write(tmp_path / name) for name in ("a", "b")]
    assert (copies[0] / "report.html").read_bytes() == (copies[1] / "report.html").read_bytes()
    memory = run_figures(read_run(out))[-1]
    ram = [t.name for t in memory.data if t.legendgroup == "RAM"]
    assert ram == [f"RAM of gpu ({load_profile('h200_loopback').ram_mb:g} MB)"]
    gone.parent.mkdir()
    gone.write_text("name: jetson\nram_mb: -1\n")  # there, but not a profile: it names itself
    assert main(["report", str(out)]) == 0
    (warning,) = capsys.readouterr().err.strip().splitlines()
    assert warning.startswith("edgetwin: warning: no RAM line for jetson: ")
    assert "/elsewhere/jetson.yaml: field '" in warning


def test_the_ram_line_follows_the_device_spec(tmp_path: Path) -> None:
    out = tmp_path / "run"
    sweep = "sweeps=[{batch: [1], prompt_tokens: [32, 64], devices: [2]}]"
    run = ["run", str(SMOKE), "--out", str(out), "--quiet", "--set", sweep]
    assert (
        main([*run, "--set", "devices.0.ram_mb=3000", "--set", "strategies=[{name: single}]"]) == 0
    )
    memory = run_figures(read_run(out))[-1]
    assert [set(t.y) for t in memory.data if t.legendgroup == "RAM"] == [{3000.0}]


def test_the_ram_line_shows_with_one_context(tmp_path: Path) -> None:
    """llm_smoke runs one prompt length: its RAM line ran from that context to itself,
    drawn as nothing while the legend named it."""
    out = tmp_path / "run"
    assert main(["run", str(SMOKE), "--out", str(out), "--quiet"]) == 0
    memory = run_figures(read_run(out))[-1]
    (ram,) = [t for t in memory.data if t.legendgroup == "RAM"]
    contexts = {x for t in memory.data if t.legendgroup != "RAM" for x in t.x}
    (context,) = contexts
    assert ram.x[0] < context < ram.x[1]


@pytest.mark.timeout(120)
def test_one_output_token_has_no_tpot_and_still_a_page(tmp_path: Path) -> None:
    """With one output token no row has a TPOT: the page was a TypeError in fmean."""
    out = tmp_path / "run"
    argv = ["run", str(SMOKE), "--out", str(out), "--quiet", "--set", SWEEP]
    assert main([*argv, "--set", "workload.output_tokens=1"]) == 0
    data = read_run(out)
    assert data.rows and all(row.tpot_ms is None for row in data.rows)
    assert run_figures(data)
