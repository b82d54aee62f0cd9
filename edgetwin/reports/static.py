"""Static figure files (SVG, PDF, PNG) of a run's report, drawn by kaleido in the system
Chromium, offline: no browser is downloaded and no script is fetched (no MathJax).

The same figures give the same files, byte for byte: plotly.js names an SVG's clip paths
after a random uid and its traces after random ones, and Chromium dates a PDF; the
traces get their numbers as uids, the figure's uid becomes its number and a PDF's dates
are blanked.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import plotly
import plotly.graph_objects as go

from edgetwin.atomic import publish_folder, staged_folder
from edgetwin.errors import InputError, RunFailed
from edgetwin.number_text import counted, exact_text
from edgetwin.output_folder import output_kind
from edgetwin.reports.html import figure_names, read_run, run_figures
from edgetwin.reports.narrow import at_width
from edgetwin.reports.style import WIDTH_PX, styled

StaticFormat = Literal["svg", "pdf", "png"]
STATIC_FORMATS: tuple[StaticFormat, ...] = get_args(StaticFormat)
FIGURES_DIR = "figures"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
_PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"  # not the CDN
_SVG_UID = re.compile(r'<defs id="defs-([0-9a-z]+)"')  # plotly.js's uid of the figure
_SVG_NAME = re.compile(r'( id="|url\([^#)]*#|href="#)([^"()]+)')  # a name, a reference to one
_PDF_DATE = re.compile(rb"/(?:CreationDate|ModDate) *\(D:[0-9][^)]*\)")
DEADLINE_ENV = "EDGETWIN_STATIC_TIMEOUT_S"  # overrides the export's deadline, in seconds
DEADLINE_BASE_S = 30.0  # the browser's start, with room for a busy machine
DEADLINE_PER_FIGURE_S = 10.0  # a figure takes about 1 s on an idle machine
DEADLINE_MAX_S = 300.0
RENDER_TIMEOUT_S = 30.0  # one figure in a live browser; one that runs over is drawn again
_STOP_WAIT_S = 10.0  # how long a stopped export may take to close its browser session
PX_PER_UNIT = {"in": 96.0, "cm": 96 / 2.54, "mm": 96 / 25.4, "pt": 96 / 72, "px": 1.0}  # CSS
PNG_DPI = 300  # a PNG of a width in a length unit is drawn at this resolution
WIDTH_RANGE_PX = (150.0, 4000.0)  # the widths a figure is drawn at (1.6 to 42 in)
_WIDTH = re.compile(r"\s*([0-9]*\.?[0-9]+)\s*([a-z]+)\s*")


@dataclass(frozen=True)
class FigureWidth:
    """How wide static figures are drawn: ``px`` CSS pixels (96 an inch: an SVG's width,
    0.75 pt each in a PDF), a PNG at ``png_scale`` device pixels each."""

    px: float = WIDTH_PX
    png_scale: float = 1.0
    given: str = ""  # as the user gave it (``3.5in``); empty: the default


def figure_width(text: str, option: str = "--width") -> FigureWidth:
    """A width given with its unit, ``3.5in``, ``7in``, ``88mm``, ``8.9cm``, ``252pt`` or
    ``1000px``; a length unit draws a PNG at ``PNG_DPI``. Anything else, or a width outside
    ``WIDTH_RANGE_PX``, is an InputError naming ``option``."""
    found = _WIDTH.fullmatch(text.lower()) if isinstance(text, str) else None
    units = ", ".join(PX_PER_UNIT)
    if found is None or found.group(2) not in PX_PER_UNIT:
        problem = f"a width with its unit ({units}: 3.5in, 88mm, 1000px), not {text!r}"
        raise InputError(None, option, problem)
    unit = found.group(2)
    px = float(found.group(1)) * PX_PER_UNIT[unit]
    low, high = WIDTH_RANGE_PX
    if not low <= px <= high:
        problem = (
            f"{text!r} is {exact_text(px)} px wide; a figure is {exact_text(low)} to "
            f"{exact_text(high)} px (96 an inch)"
        )
        raise InputError(None, option, problem)
    return FigureWidth(px, 1.0 if unit == "px" else PNG_DPI / PX_PER_UNIT["in"], text.strip())


DEFAULT_WIDTH = FigureWidth()  # 1000 px, as a page's figures


def export_deadline_s(figures: int) -> float:
    """The seconds an export of ``figures`` figures may take, both tries and the browser's
    start included: ``EDGETWIN_STATIC_TIMEOUT_S`` if set, else 30 s and 10 s a figure, at
    most 300 s. A value that is not a number of seconds above 0 is an InputError."""
    given = os.environ.get(DEADLINE_ENV)
    if given is None:
        return min(DEADLINE_BASE_S + DEADLINE_PER_FIGURE_S * figures, DEADLINE_MAX_S)
    try:
        seconds = float(given)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        problem = f"a number of seconds above 0, not {given!r}"
        raise InputError(None, f"{DEADLINE_ENV} (environment)", problem)
    return seconds


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


def export_ready() -> str:
    """The Chromium to draw with, looked for before the work whose figures it draws, and the
    deadline's setting checked then too (an InputError for either)."""
    export_deadline_s(1)
    return browser_path()


def write_figures(
    figures: Sequence[go.Figure],
    out_dir: Path,
    fmt: str,
    *,
    deadline_s: float | None = None,
    width: FigureWidth = DEFAULT_WIDTH,
) -> list[Path]:
    """Each figure as ``out_dir/<name>.<fmt>``, ``width`` wide (``narrow.at_width``: a
    narrow one has its legend under the plot), in one Chromium session; the figures it
    failed to draw (an error, or over ``RENDER_TIMEOUT_S``) are drawn once more in a new
    one, and a figure that fails again is a RunFailed. (On a busy machine kaleido 1.5 may
    call its page's script before the page has loaded it, "kaleido_scopes is not defined":
    it reports the figure's error and writes no file.)

    Both tries share one deadline, ``deadline_s`` (default ``export_deadline_s``): past it
    the browser is killed and the export is a RunFailed, whatever it drew left in
    ``out_dir`` (a staging folder: callers publish it whole or not at all)."""
    if fmt not in STATIC_FORMATS:
        raise InputError(None, "--static", f"unknown format {fmt!r}: {', '.join(STATIC_FORMATS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = []
    for fig, name in zip(figures, figure_names(figures), strict=True):
        fig = styled(fig) if width.px == WIDTH_PX else at_width(fig, width.px)
        for number, trace in enumerate(fig.data):  # else plotly.js draws random ones
            trace.uid = str(number)
        path = out_dir / f"{name}.{fmt}"
        opts = {"format": fmt, "width": width.px, "height": fig.layout.height}
        if fmt == "png" and width.png_scale != 1.0:
            opts["scale"] = width.png_scale
        jobs.append({"fig": fig, "path": path, "opts": opts})
    if not jobs:  # a page without a figure: no browser to start
        return []
    browser = browser_path()
    limit_s = export_deadline_s(len(jobs)) if deadline_s is None else deadline_s
    ends_at = time.monotonic() + limit_s
    failed = jobs
    for _ in range(2):
        session = _Session(failed, browser)
        if not session.finished_by(ends_at):
            problem = (
                f"not drawn within {exact_text(limit_s)} s ({counted(len(jobs), 'figure')}; "
                f"{DEADLINE_ENV} "
                "sets the limit in seconds): the browser was stopped"
            )
            raise RunFailed(f"static figures: {problem}")
        failed = [job for job in failed if not job["path"].is_file()]
        if not failed:
            break
    else:
        problem = f"{session.errors[0]}" if session.errors else "no file written"
        names = ", ".join(job["path"].name for job in failed)
        raise RunFailed(f"static figures: {browser} did not draw {names}: {problem}")
    for index, job in enumerate(jobs, start=1):
        path = job["path"]
        if fmt == "svg":
            path.write_text(numbered_svg(path.read_text(encoding="utf-8"), index), "utf-8")
        elif fmt == "pdf":
            path.write_bytes(undated_pdf(path.read_bytes()))
    return [job["path"] for job in jobs]


class _Session:
    """One kaleido session drawing ``jobs`` in a thread of its own, so that it can be
    stopped: at the deadline (and at a second Ctrl-C) every process of its browser is
    killed. Everything the browser writes goes into a folder of the session's, removed
    when it ends, however it ends (a Chromium killed leaves its profile, and its folder in
    the temporary folder, behind)."""

    def __init__(self, jobs: list[dict[str, Any]], browser: str) -> None:
        self.jobs, self.browser = jobs, browser
        self.errors: tuple[Exception, ...] = ()
        self._failure: BaseException | None = None
        self._kaleido: Any = None
        self._killed: set[int] = set()
        # the thread's end (drawn, failed, its browser closed): Thread.join interrupted by
        # Ctrl-C marks a thread that runs on as ended (Python 3.11), an Event is not fooled
        self._ended = threading.Event()

    def finished_by(self, ends_at: float) -> bool:
        """Draw the jobs; False (the browser killed) if they were not drawn by ``ends_at``
        (``time.monotonic``). A browser that failed is a RunFailed."""
        from choreographer.errors import BrowserClosedError, BrowserFailedError, ChannelClosedError

        folder = Path(tempfile.mkdtemp(prefix="edgetwin-browser-"))
        thread = threading.Thread(
            target=self._run, args=(folder,), name="edgetwin-static", daemon=True
        )
        try:
            thread.start()
            try:
                ended = self._ended.wait(max(ends_at - time.monotonic(), 0.0))
            except KeyboardInterrupt:
                self._finish(ends_at)
                raise
        finally:
            self._end(folder)
        if not ended:
            return False
        failure = self._failure
        if isinstance(failure, BrowserFailedError | BrowserClosedError | ChannelClosedError):
            raise RunFailed(
                f"static figures: the browser {self.browser} failed: {failure.args[0]}"
            ) from None
        if failure is not None:
            raise failure
        return True

    def _run(self, folder: Path) -> None:
        try:
            self.errors = tuple(asyncio.run(self._draw(folder)) or ())
        except BaseException as exc:  # raised in the caller's thread
            self._failure = exc
        finally:
            self._ended.set()

    async def _draw(self, folder: Path) -> Any:
        # deferred: only a static export starts a browser
        from edgetwin.reports.kaleido_browser import kaleido_in

        self._kaleido = kaleido_in(
            folder, self.browser, _PLOTLY_JS, RENDER_TIMEOUT_S, len(self.jobs)
        )
        async with self._kaleido as drawing:
            return await drawing.write_fig_from_object(self.jobs)

    def _finish(self, ends_at: float) -> None:
        """After Ctrl-C: let the browser draw its last figures and close as it does when
        done, up to the deadline; a second Ctrl-C cuts that short (``_end`` kills it)."""
        with contextlib.suppress(KeyboardInterrupt):
            self._ended.wait(max(ends_at - time.monotonic(), 0.0))

    def _end(self, folder: Path) -> None:
        """Kill the browser's processes unless the session ended, wait (up to
        ``_STOP_WAIT_S``) for the thread to close it, then remove ``folder``, all the
        browser wrote. A stop meanwhile waits until that is done (a kill and a removal, with
        nothing to cut short), then is raised."""
        gives_up_at = time.monotonic() + _STOP_WAIT_S
        stopped = False
        while True:
            try:
                self._stop(gives_up_at)
                _remove(folder, gives_up_at)
                break
            except KeyboardInterrupt:
                stopped = True
        if stopped:
            raise KeyboardInterrupt

    def _stop(self, gives_up_at: float) -> None:
        """Kill the browser's process group (Chromium and its helpers: choreographer starts
        it in a session of its own) until the thread has closed the session, one started
        meanwhile too; give up waiting at ``gives_up_at``."""
        while not self._ended.is_set() and time.monotonic() < gives_up_at:
            process = getattr(self._kaleido, "subprocess", None)
            if process is not None:
                self._kill(process)
            self._ended.wait(0.1)

    def _kill(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL ``process``'s group, once (its id is not reused while the group lives)."""
        if process.pid in self._killed:
            return
        self._killed.add(process.pid)
        with contextlib.suppress(ProcessLookupError):  # the group is gone already
            os.killpg(process.pid, signal.SIGKILL)


def _remove(folder: Path, gives_up_at: float) -> None:
    """``folder`` removed, again while a browser process that is ending writes into it; given
    up at ``gives_up_at``."""
    shutil.rmtree(folder, ignore_errors=True)
    while folder.exists() and time.monotonic() < gives_up_at:
        time.sleep(0.05)
        shutil.rmtree(folder, ignore_errors=True)


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
    run_dir: Path,
    fmt: str,
    figures: Sequence[go.Figure] | None = None,
    width: FigureWidth = DEFAULT_WIDTH,
) -> list[Path]:
    """``figures`` (default: those of ``run_dir``'s run report) as
    ``run_dir/figures/<name>.<fmt>``, ``width`` wide, in place of the folder's ``.<fmt>``
    files, once every file is written; its other files (another format's figures, a user's)
    are kept."""
    if figures is None:
        figures = run_figures(read_run(run_dir))
    final = check_figures_folder(run_dir)
    with staged_folder(final) as staging:
        names = [path.name for path in write_figures(figures, staging, fmt, width=width)]
        _keep_other_files(final, staging, fmt)
        publish_folder(staging, final)  # the old figures stay if this fails
    return [final / name for name in names]
