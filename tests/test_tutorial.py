"""docs/tutorial.ipynb executes from top to bottom (nbclient, a kernel of the interpreter
running the tests: the venv's, with ipykernel), so it never rots."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
from ipykernel.kernelspec import write_kernel_spec
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "tutorial.ipynb"


def text_of(cell: nbformat.NotebookNode) -> str:
    """What a code cell printed or returned, as plain text."""
    parts = []
    for output in cell.get("outputs", []):
        parts.append(output.get("text", ""))
        parts.append(output.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def test_the_notebook_is_kept_without_outputs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)


@pytest.mark.timeout(600)
def test_the_tutorial_runs_from_top_to_bottom(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    monkeypatch.setenv("EDGETWIN_TUTORIAL_OUT", str(tmp_path))  # the kernel inherits it
    # what an earlier run of the notebook left: Restart & Run All runs it again
    (tmp_path / "jetson").mkdir()
    (tmp_path / "jetson" / "results.csv").write_text("an earlier run's\n")
    (tmp_path / "jetson" / "provenance.json").write_text("{}\n")
    earlier_refit = (ROOT / "edgetwin/calibration/profiles/jetson_orin_nano.yaml").read_text()
    (tmp_path / "jetson_refit.yaml").write_text(f"# an earlier run's\n{earlier_refit}")
    # a kernel of this interpreter, whatever else the machine has registered as python3
    write_kernel_spec(tmp_path / "jupyter" / "kernels" / "edgetwin-test")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    elsewhere = tmp_path / "my-notebooks"
    elsewhere.mkdir()
    client = NotebookClient(
        notebook,
        timeout=300,  # per cell
        kernel_name="edgetwin-test",
        # run where a student keeps a copy of it, outside the checkout: Jupyter runs a
        # notebook in its own folder, and the cells must find the shipped scenarios anyway
        resources={"metadata": {"path": str(elsewhere)}},
    )
    client.execute()
    assert (tmp_path / "jetson" / "results.csv").read_text().startswith("scenario,")
    assert (tmp_path / "jetson" / "report.html").is_file()
    assert not (tmp_path / "jetson_refit.yaml").read_text().startswith("# an earlier run's")
    outputs = [text_of(c) for c in notebook.cells if c.cell_type == "code"]
    assert "twin prism_jetson: 65/65" in outputs[1]  # the run's progress (text_progress)
    calibration = output_of(notebook, "edgetwin.calibrate(")
    assert "held-out refits (by batch): 4/4" in calibration
    assert "total_ms" in calibration  # the calibration's median errors
    traces = output_of(notebook, "px.line(")
    assert "'single, -'" in traces and "'prism, CR 9.85'" in traces  # the CR used
    # the decoder section: what its text says of prefill, decode and memory
    decoder = output_of(notebook, "llm_jetson.yaml")
    assert "twin llm_jetson: 6/6" in decoder
    memory = output_of(notebook, '"status"')
    assert re.search(r"^\d+ +single x1 .* out of memory on jetson-0 \(prefill\)$", memory, re.M)
    assert re.search(r"^\d+ +pipeline x2 .* ok$", memory, re.M)
    assert re.search(r"^\d+ +prism x2 .* ok$", memory, re.M)
    fastest = output_of(notebook, "px.bar(")
    assert "'tpot_ms': 'single x1'" in fastest and "'ttft_ms': 'prism x2'" in fastest


def output_of(notebook: nbformat.NotebookNode, marker: str) -> str:
    """What the one code cell whose source holds ``marker`` printed or returned."""
    (cell,) = (c for c in notebook.cells if c.cell_type == "code" and marker in c.source)
    return text_of(cell)
