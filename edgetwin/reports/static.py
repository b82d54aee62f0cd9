"""Static figure files (SVG, PDF, PNG) of a run's report, drawn by kaleido in the system
Chromium, offline: no browser is downloaded and no script is fetched (no MathJax)."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path

import plotly
import plotly.graph_objects as go

from edgetwin.atomic import output_kind, publish_folder, staged_folder
from edgetwin.errors import InputError, RunFailed
from edgetwin.reports.html import figure_name, read_run, run_figures
from edgetwin.reports.style import WIDTH_PX, styled

STATIC_FORMATS = ("svg", "pdf", "png")
FIGURES_DIR = "figures"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
_PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"  # not the CDN


def browser_path() -> str:
    """The Chromium kaleido drives: ``BROWSER_PATH`` if set, else the first on ``PATH``."""
    path = os.environ.get("BROWSER_PATH") or next(filter(None, map(shutil.which, BROWSERS)), None)
    if path is None or not Path(path).is_file():
        problem = (
            "static figures need Chromium (scripts/setup.sh installs it), set BROWSER_PATH "
            f"or put one of {', '.join(BROWSERS)} on PATH; none found"
        )
        raise InputError(path, None, problem)
    return path


def write_figures(figures: Sequence[go.Figure], out_dir: Path, fmt: str) -> list[Path]:
    """Each figure as ``out_dir/<name>.<fmt>``, in one Chromium session. A stop (Ctrl-C)
    waits for kaleido's export thread, which closes the browser and removes its profile
    folder: left to run past the command's end, it left that folder in /tmp."""
    import kaleido  # deferred: only a static export starts a browser
    from choreographer.errors import BrowserClosedError, BrowserFailedError, ChannelClosedError

    if fmt not in STATIC_FORMATS:
        raise InputError(None, "--static", f"unknown format {fmt!r}: {', '.join(STATIC_FORMATS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = []
    for index, fig in enumerate(figures, start=1):
        fig = styled(fig)
        path = out_dir / f"{figure_name(index, fig)}.{fmt}"
        opts = {"format": fmt, "width": WIDTH_PX, "height": fig.layout.height}
        jobs.append({"fig": fig, "path": path, "opts": opts})
    browser = browser_path()
    kopts = {"path": browser, "plotlyjs": str(_PLOTLY_JS), "mathjax": False}
    started = set(threading.enumerate())
    try:
        kaleido.write_fig_from_object_sync(jobs, kopts=kopts)
    except KeyboardInterrupt:
        for thread in set(threading.enumerate()) - started:
            thread.join()
        raise
    except (BrowserFailedError, BrowserClosedError, ChannelClosedError) as exc:
        raise RunFailed(f"static figures: the browser {browser} failed: {exc.args[0]}") from None
    return [job["path"] for job in jobs]


def check_figures_folder(run_dir: Path) -> Path:
    """``run_dir/figures``, which must be a folder or absent (else an InputError)."""
    final = run_dir / FIGURES_DIR
    if output_kind(final) not in (None, "folder"):
        raise InputError(final, None, "exists and is not a folder")
    return final


def write_static_figures(run_dir: Path, fmt: str) -> list[Path]:
    """The figures of ``run_dir``'s report as ``run_dir/figures/<name>.<fmt>``; the folder
    is replaced whole, and only once every file is written."""
    figures = run_figures(read_run(run_dir))
    final = check_figures_folder(run_dir)
    with staged_folder(final) as staging:
        names = [path.name for path in write_figures(figures, staging, fmt)]
        publish_folder(staging, final)  # the old figures stay if this fails
    return [final / name for name in names]
