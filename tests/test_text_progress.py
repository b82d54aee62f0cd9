"""``edgetwin.progress.text_progress``, the Python API's progress for a notebook or a
script: one line rewritten in place (``\\r``) on a terminal and in a Jupyter kernel, ended
with a newline; a line per step to a file or a pipe (the command's lines off a terminal)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import nbformat
import pytest
from ipykernel.kernelspec import write_kernel_spec
from nbclient import NotebookClient

import edgetwin
from edgetwin.cli.console import print_warnings
from edgetwin.progress import text_progress

JETSON = Path(__file__).resolve().parents[1] / "scenarios" / "prism_jetson.yaml"


def test_in_place_it_rewrites_one_line_and_ends_it() -> None:
    """Each step redraws the line, padded over a longer text before it; one newline at the
    end, however many steps."""
    stream = io.StringIO()
    with text_progress(stream, in_place=True)("twin x", 3) as advance:
        advance("single, rep 0")
        advance()
        advance("prism, rep 0")
    assert stream.getvalue() == (
        "\rtwin x: 0/3"
        "\rtwin x: 1/3 (single, rep 0)"
        "\rtwin x: 2/3" + " " * len(" (single, rep 0)") + "\rtwin x: 3/3 (prism, rep 0)\n"
    )
    many = io.StringIO()
    with text_progress(many, in_place=True)("twin y", 65) as advance:
        for _ in range(65):
            advance()
    assert many.getvalue().count("\n") == 1
    assert many.getvalue().endswith("\rtwin y: 65/65\n")


def test_off_a_terminal_it_writes_a_line_per_step() -> None:
    stream = io.StringIO()
    with text_progress(stream)("twin x", 3) as advance:
        advance("single, rep 0")
        advance()
        advance()
    assert stream.getvalue().splitlines() == [
        "twin x: 1/3 (single, rep 0)",
        "twin x: 2/3",
        "twin x: 3/3",
    ]


class _Writes(io.StringIO):
    """A stream that keeps each ``write`` call's text."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def write(self, text: str) -> int:
        self.calls.append(text)
        return super().write(text)


def test_each_line_is_one_write_so_a_stop_cannot_leave_it_open() -> None:
    """CI saw ``twin prism_jetson: 3/13000 (...)edgetwin: interrupted; ...``: ``print``
    wrote the step's text and its newline in two writes, and the Ctrl-C landed between.
    Each line a step writes, and each warning line a command prints, is one write."""
    stream = _Writes()
    with text_progress(stream, in_place=False)("twin x", 2) as advance:
        advance("single, rep 0")
        advance()
    assert stream.calls == ["twin x: 1/2 (single, rep 0)\n", "twin x: 2/2\n"]
    errors = _Writes()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stderr", errors)
        print_warnings(["one", "two"])
    assert errors.calls == ["edgetwin: warning: one\n", "edgetwin: warning: two\n"]


def test_a_step_s_own_steps_take_the_line_for_as_long_as_they_last() -> None:
    """An emulator run's link checks, opened within a run's step: shown on the same line,
    then the run's count again; still one newline."""
    stream = io.StringIO()
    show = text_progress(stream, in_place=True)
    with show("emu x", 2) as run_done:
        with show("link checks", 1) as checked:
            checked()
        run_done()
        run_done()
    assert stream.getvalue() == (
        "\remu x: 0/2\rlink checks: 0/1\rlink checks: 1/1\remu x: 0/2"
        + " " * 6
        + "\remu x: 1/2\remu x: 2/2\n"
    )


def test_a_terminal_gets_the_line_in_place() -> None:
    """A real terminal (a pseudo-terminal): ``\\r`` between the steps, one line end."""
    leader, follower = os.openpty()
    with (
        open(follower, "w", encoding="utf-8") as terminal,
        text_progress(terminal)("twin x", 2) as advance,
    ):
        advance()
        advance()
    shown = _all_read(leader).decode()
    assert shown.replace("\r\n", "\n") == "\rtwin x: 0/2\rtwin x: 1/2\rtwin x: 2/2\n"


def _all_read(leader: int) -> bytes:
    """All a closed pseudo-terminal's follower wrote: the kernel hands it to the leader in
    pieces, later on a busy machine (one read got part of it), until EIO says it is all."""
    chunks = []
    try:
        while chunk := os.read(leader, 4096):
            chunks.append(chunk)
    except OSError:  # EIO: the follower is closed and everything it wrote was read
        pass
    finally:
        os.close(leader)
    return b"".join(chunks)


@pytest.mark.timeout(120)
def test_a_run_in_a_jupyter_kernel_shows_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a notebook stderr is no terminal, and a run printed a line per run (65 for
    prism_jetson): in a real kernel (nbclient, as tests/test_tutorial.py) it is one line
    rewritten in place."""
    write_kernel_spec(tmp_path / "jupyter" / "kernels" / "edgetwin-test")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    code = (
        "import edgetwin\n"
        "from edgetwin.progress import text_progress\n"
        f"edgetwin.run({str(JETSON)!r}, overrides=['sweeps=[{{batch: [1, 8]}}]'], "
        "progress=text_progress())\n"
    )
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    NotebookClient(notebook, timeout=60, kernel_name="edgetwin-test").execute()
    stderr = "".join(
        o.get("text", "") for o in notebook.cells[0].outputs if o.get("name") == "stderr"
    )
    runs = len(edgetwin.run(JETSON, overrides=["sweeps=[{batch: [1, 8]}]"]).rows)
    assert stderr.count("\n") == 1 and stderr.count("\r") == runs + 1
    assert stderr.endswith(
        f"\rtwin prism_jetson: {runs}/{runs} (prism cr 3.3 x2, batch 8, 400 Mbps, rep 0)\n"
    )
