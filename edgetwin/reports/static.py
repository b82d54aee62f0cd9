"""Static figure files (SVG, PDF, PNG) of a run's report, drawn by kaleido in the system
Chromium, offline: no browser is downloaded and no script is fetched (no MathJax).

The same figures give the same files, byte for byte: plotly.js names an SVG's clip paths
after a random uid and its traces after random ones, and Chromium dates a PDF; the
traces get their numbers as uids, the figure's uid becomes its number and a PDF's dates
are blanked.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

import plotly
import plotly.graph_objects as go

from edgetwin.atomic import publish_folder, staged_folder
from edgetwin.errors import InputError, RunFailed
from edgetwin.output_folder import output_kind
from edgetwin.reports.html import figure_names, read_run, run_figures
from edgetwin.reports.style import WIDTH_PX, styled

StaticFormat = Literal["svg", "pdf", "png"]
STATIC_FORMATS: tuple[StaticFormat, ...] = get_args(StaticFormat)
FIGURES_DIR = "figures"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
_PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"  # not the CDN
_SVG_UID = re.compile(r'<defs id="defs-([0-9a-z]+)"')  # plotly.js's uid of the figure
_SVG_NAME = re.compile(r'( id="|url\([^#)]*#|href="#)([^"()]+)')  # a name, a reference to one
_PDF_DATE = re.compile(rb"/(?:CreationDate|ModDate) *\(D:[0-9][^)]*\)")


def browser_path() -> str:
    """The Chromium kaleido drives: ``BROWSER_PATH`` if set, else the first on ``PATH``."""
    chosen = os.environ.get("BROWSER_PATH")
    path = chosen or next(filter(None, map(shutil.which, BROWSERS)), None)
    if path is None or not Path(path).is_file():
        missing = (
            "BROWSER_PATH names no file"
            if chosen
            else f"none of {', '.join(BROWSERS)} is on PATH; set BROWSER_PATH to one"
        )
        problem = f"static figures need Chromium (scripts/setup.sh installs it): {missing}"
        raise InputError(path, None, problem)
    return path


def write_figures(figures: Sequence[go.Figure], out_dir: Path, fmt: str) -> list[Path]:
    """Each figure as ``out_dir/<name>.<fmt>``, in one Chromium session; the figures it
    failed to draw are drawn once more in a new one, and a figure that fails again is a
    RunFailed. (On a busy machine kaleido 1.5 may call its page's script before the page
    has loaded it, "kaleido_scopes is not defined": it reports the figure's error and
    writes no file.)"""
    if fmt not in STATIC_FORMATS:
        raise InputError(None, "--static", f"unknown format {fmt!r}: {', '.join(STATIC_FORMATS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = []
    for fig, name in zip(figures, figure_names(figures), strict=True):
        fig = styled(fig)
        for number, trace in enumerate(fig.data):  # else plotly.js draws random ones
            trace.uid = str(number)
        path = out_dir / f"{name}.{fmt}"
        opts = {"format": fmt, "width": WIDTH_PX, "height": fig.layout.height}
        jobs.append({"fig": fig, "path": path, "opts": opts})
    if not jobs:  # a page without a figure: no browser to start
        return []
    browser = browser_path()
    failed = jobs
    for _ in range(2):
        errors = _draw(failed, browser)
        failed = [job for job in failed if not job["path"].is_file()]
        if not failed:
            break
    else:
        problem = f"{errors[0]}" if errors else "no file written"
        names = ", ".join(job["path"].name for job in failed)
        raise RunFailed(f"static figures: {browser} did not draw {names}: {problem}")
    for index, job in enumerate(jobs, start=1):
        path = job["path"]
        if fmt == "svg":
            path.write_text(numbered_svg(path.read_text(encoding="utf-8"), index), "utf-8")
        elif fmt == "pdf":
            path.write_bytes(undated_pdf(path.read_bytes()))
    return [job["path"] for job in jobs]


def _draw(jobs: list[dict[str, Any]], browser: str) -> tuple[Exception, ...]:
    """Draw ``jobs`` in one Chromium session; the errors of the figures it failed to draw.
    A stop (Ctrl-C) waits for kaleido's export thread, which closes the browser and removes
    its profile folder: left to run past the command's end, it left that folder in /tmp."""
    import kaleido  # deferred: only a static export starts a browser
    from choreographer.errors import BrowserClosedError, BrowserFailedError, ChannelClosedError

    kopts = {"path": browser, "plotlyjs": str(_PLOTLY_JS), "mathjax": False}
    started = set(threading.enumerate())
    try:
        errors = kaleido.write_fig_from_object_sync(jobs, kopts=kopts)
    except KeyboardInterrupt:
        for thread in set(threading.enumerate()) - started:
            thread.join()
        raise
    except (BrowserFailedError, BrowserClosedError, ChannelClosedError) as exc:
        raise RunFailed(f"static figures: the browser {browser} failed: {exc.args[0]}") from None
    return tuple(errors or ())


def numbered_svg(svg: str, index: int) -> str:
    """``svg`` with plotly.js's random uid of the figure (in the names of its clip paths
    and other definitions, and the references to them) replaced by ``index`` as six hex
    digits: the figures of one report keep names apart, should one page inline them."""
    found = _SVG_UID.search(svg)
    if found is None:
        return svg
    drawn, uid = found.group(1), f"{index:06x}"
    return _SVG_NAME.sub(lambda name: name.group(1) + name.group(2).replace(drawn, uid), svg)


def undated_pdf(pdf: bytes) -> bytes:
    """``pdf`` without the dates Chromium writes in its information (when it was drawn):
    each entry becomes spaces of its length, so the cross-reference offsets stay right."""
    return _PDF_DATE.sub(lambda entry: b" " * len(entry.group()), pdf)


def check_figures_folder(run_dir: Path) -> Path:
    """``run_dir/figures``, which must be a folder or absent (else an InputError)."""
    final = run_dir / FIGURES_DIR
    if output_kind(final) not in (None, "folder"):
        raise InputError(final, None, "exists and is not a folder")
    return final


def _keep_other_files(old: Path, new: Path, fmt: str) -> None:
    """Copy into ``new`` what ``old`` (if it exists) holds besides its ``.<fmt>`` files:
    an SVG export followed by a PDF one keeps both."""
    if not old.is_dir():
        return
    for entry in old.iterdir():
        if entry.is_file() and entry.suffix == f".{fmt}":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, new / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, new / entry.name, follow_symlinks=False)


def write_static_figures(
    run_dir: Path, fmt: str, figures: Sequence[go.Figure] | None = None
) -> list[Path]:
    """``figures`` (default: those of ``run_dir``'s run report) as
    ``run_dir/figures/<name>.<fmt>``, in place of the folder's ``.<fmt>`` files, once every
    file is written; its other files (another format's figures, a user's) are kept."""
    if figures is None:
        figures = run_figures(read_run(run_dir))
    final = check_figures_folder(run_dir)
    with staged_folder(final) as staging:
        names = [path.name for path in write_figures(figures, staging, fmt)]
        _keep_other_files(final, staging, fmt)
        publish_folder(staging, final)  # the old figures stay if this fails
    return [final / name for name in names]
