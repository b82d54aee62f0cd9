"""The page of a decoder run: TTFT and TPOT vs prompt length, tokens/s vs bandwidth and the
memory per device vs context with the RAM line, traces named per strategy."""

from __future__ import annotations

from html import escape
from pathlib import Path
from statistics import fmean

import pytest

import edgetwin
from edgetwin.cli import main
from edgetwin.configuration import decoder_plan
from edgetwin.models import registry
from edgetwin.number_text import exact_text
from edgetwin.profile import MB, load_profile
from edgetwin.reports.html import read_run, run_figures
from edgetwin.reports.llm import ttft_tpot_figure
from edgetwin.resolved_scenario import RESOLVED_FILE, load_resolved
from edgetwin.sweep_points import configurations
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
    assert (data.device_ram_mb, data.ram_warnings) == ({"jetson": profile_ram_mb}, [])
    # a hover names what x is, with its unit (it gave a bare "64: 19.2 ms")
    assert line.hovertemplate.startswith("prompt %{x:,} tokens: ")
    assert rate.hovertemplate.startswith("%{x:,} Mbit/s: ")
    assert memory_line.hovertemplate.startswith("context %{x:,} tokens: ")


@pytest.mark.timeout(120)
def test_the_ttft_figure_draws_the_highest_bandwidth_of_a_tie(tmp_path: Path) -> None:
    """Two bandwidths with two prompt lengths each: the TTFT and TPOT figure drew the first
    slice in the table (200 Mbit/s, or 400 with the rows reversed) where the ViT page draws
    the highest bandwidth of a tie; it draws 400 Mbit/s either way, and its title says so."""
    rows = read_run(llm_run(tmp_path / "run")).rows
    assert {(r.bandwidth_mbps, r.prompt_tokens) for r in rows} == {
        (bw, prompt) for bw in (200, 400) for prompt in (32, 64)
    }
    for ordered in (rows, rows[::-1]):
        figure = ttft_tpot_figure(ordered)
        assert figure is not None
        assert ", 400 Mbit/s, 16 output tokens" in figure.layout.title.text
        for strategy in ("pipeline", "tensor_parallel"):  # their TTFT moves with the link
            line = next(t for t in figure.data if t.name == strategy and t.xaxis == "x")
            at_400 = [
                fmean(
                    r.ttft_ms
                    for r in rows
                    if (r.strategy, r.prompt_tokens, r.bandwidth_mbps) == (strategy, prompt, 400)
                )
                for prompt in (32, 64)
            ]
            assert list(line.x) == [32, 64] and list(line.y) == pytest.approx(at_400)


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
    assert ram == [f"RAM of gpu ({exact_text(load_profile('h200_loopback').ram_mb)} MB)"]
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


@pytest.mark.timeout(120)
def test_the_memory_figure_shows_the_peak_that_ran_out(tmp_path: Path) -> None:
    """A row out of memory in its prefill drew its weights + KV cache under the RAM line:
    the prefill's activations, what ran out, were not on the figure. Each point now has its
    peak with them, above the RAM line where the row ran out and under it where it fit."""
    out = tmp_path / "run"
    sets = [
        "strategies=[{name: single}, {name: voltage}]",
        "workload.output_tokens=2",
        "sweeps=[{batch: [1], prompt_tokens: [8192, 40000], devices: [2]}]",
    ]
    argv = ["run", str(REPO / "scenarios/llm_jetson.yaml"), "--out", str(out), "--quiet"]
    assert main([*argv, *(a for s in sets for a in ("--set", s))]) == 0
    data = read_run(out)
    failed = next(r for r in data.rows if not r.ok)
    assert (failed.strategy, failed.prompt_tokens) == ("single", 40000)
    assert failed.status.endswith("(prefill)")
    memory = run_figures(data)[-1]
    (ram,) = [t.y[0] for t in memory.data if t.legendgroup == "RAM"]
    single = next(t for t in memory.data if t.name == "single")
    assert max(single.y) < ram  # weights + KV cache alone: under the line
    peaks = {t.name: t for t in memory.data if t.name.endswith(" peak")}
    assert set(peaks) == {"single peak", "voltage peak"}
    assert peaks["single peak"].y[1] > ram > peaks["single peak"].y[0] > single.y[0]
    assert max(peaks["voltage peak"].y) < ram  # voltage splits the rows: it fit
    assert [words[1] for words in peaks["single peak"].customdata] == ["prefill", "prefill"]
    assert "activations" in memory.layout.title.text
    # the page's other runs draw a peak for each point too
    smoke = run_figures(read_run(llm_run(tmp_path / "smoke")))[-1]
    lines = [t for t in smoke.data if t.legendgroup != "RAM" and not t.name.endswith(" peak")]
    for line in lines:
        peak = next(t for t in smoke.data if t.name == f"{line.name} peak")
        assert list(peak.x) == list(line.x)
        assert all(p > m for p, m in zip(peak.y, line.y, strict=True))


@pytest.mark.timeout(120)
def test_a_layer_split_the_scenario_cannot_run_has_no_peak_and_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An edited table's layer split that the model cannot run (or that is not one) leaves
    its points without a peak marker, said once per split; the page is still drawn."""
    out = tmp_path / "run"
    assert main(["run", str(SMOKE), "--out", str(out), "--quiet"]) == 0
    table = out / "results.csv"
    text = table.read_text()
    assert text.count(",3+1\n") == 2  # the pipeline's rows (batch 1 and 2)
    table.write_text(text.replace(",3+1\n", ",3+3\n", 1).replace(",3+1\n", ",a+b\n", 1))
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    warnings = capsys.readouterr().err.strip().splitlines()
    assert warnings == [
        "edgetwin: warning: no memory peak for pipeline x2 (1 point): its layer_split '3+3' "
        "does not run on scenario.resolved.yaml's model: its layers [3, 3] are not 2 sizes "
        "adding up to 4",
        "edgetwin: warning: no memory peak for pipeline x2 (1 point): its layer_split 'a+b' "
        "does not run on scenario.resolved.yaml's model: not whole numbers of layers joined "
        "by '+'",
    ]
    said = [w.removeprefix("edgetwin: warning: ") for w in warnings]
    assert list(edgetwin.load_results(out).warnings) == said
    memory = run_figures(read_run(out))[-1]
    peaks = {t.name for t in memory.data if t.name.endswith(" peak")}
    assert "single peak" in peaks and "pipeline peak" not in peaks


@pytest.mark.timeout(120)
def test_a_mixed_fleets_memory_is_the_device_closest_to_its_own_ram(tmp_path: Path) -> None:
    """Llama-3.2-1B fp16 on an 8 GB board and a 3 GB one (a pipeline). The rows gave the
    fullest device's weights + KV cache and the peak marker the largest peak: at a
    16,000-token prompt the run fit, yet the marker (the 8 GB board's, 3916 MB) stood over
    the 3 GB board's RAM line; at 30,000 the small board ran out, yet the marker (7284 MB)
    stood under the 8 GB line. Both now are the device whose memory takes the largest
    share of its own RAM, the marker naming it with its room or shortfall."""
    out = tmp_path / "run"
    sets = [
        "devices=[{name: big, profile: jetson_orin_nano, count: 1}, "
        "{name: small, profile: jetson_orin_nano, ram_mb: 3000, count: 1}]",
        "strategies=[{name: pipeline}]",
        "workload.output_tokens=16",
        "sweeps=[{batch: [1], prompt_tokens: [16000, 30000], devices: [2]}]",
    ]
    argv = ["run", str(REPO / "scenarios/llm_jetson.yaml"), "--out", str(out), "--quiet"]
    assert main([*argv, *(a for s in sets for a in ("--set", s))]) == 0
    data = read_run(out)
    fit, short = sorted(data.rows, key=lambda r: r.prompt_tokens or 0)
    assert fit.status == "ok" and short.status.startswith("out of memory on small (prefill)")
    assert fit.layer_split == "11+5"
    assert fit.weights_mb is not None and fit.kv_cache_mb is not None
    scenario = load_resolved(out / RESOLVED_FILE)
    config = next(c for c in configurations(scenario) if c.prompt_tokens == 16000)
    plan = decoder_plan(scenario, config, (11, 5))
    small = plan.weight_bytes[1] + plan.kv_bytes(1, 16000 + 15)
    big = plan.weight_bytes[0] + plan.kv_bytes(0, 16000 + 15)
    assert small / 3000 < big / 3000 and small / 3000 > big / 8192  # the 3 GB board's
    assert fit.weights_mb + fit.kv_cache_mb == pytest.approx(small / MB)
    memory = run_figures(data)[-1]
    (peak,) = [t for t in memory.data if t.name == "pipeline peak"]
    assert [words[0] for words in peak.customdata] == ["small", "small"]
    assert peak.y[0] < 3000 < peak.y[1]  # it fit, then it ran out, on the 3 GB board
    assert peak.customdata[0][2].startswith("its RAM 3,000 MB, ")
    assert peak.customdata[0][2].endswith(" MB left")
    assert peak.customdata[1][2].endswith(" MB short")
    assert "closest to its own RAM" in memory.layout.title.text
