"""The kaleido session that draws static figures, with every file it and its Chromium write
in one folder of the caller's: kaleido's page, Chromium's profile and what Chromium puts
in the temporary folder (its singleton socket's folder, its shared memory). A Chromium
killed leaves them all; the caller removes that one folder, however the browser ended.

Imported only by a static export: it imports kaleido, which starts a browser."""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path

import kaleido
from choreographer.browsers import Chromium

PAGE_FILE = "index.html"  # kaleido's page, which loads plotly.js and draws the figures


class _ChromiumInFolder(Chromium):
    """Chromium whose temporary folder (``TMPDIR``) is the one its profile is made in."""

    def get_env(self) -> MutableMapping[str, str]:
        env = super().get_env()
        env["TMPDIR"] = str(self.tmp_dir.path.parent)
        return env


def kaleido_in(
    folder: Path, browser: str, plotly_js: Path, render_timeout_s: float
) -> kaleido.Kaleido:
    """A kaleido session (not yet open) that drives ``browser`` with ``plotly_js`` and no
    MathJax, each figure within ``render_timeout_s``, writing only into ``folder``."""
    page = folder / PAGE_FILE
    html = kaleido.PageGenerator(plotly=str(plotly_js), mathjax=False).generate_index()
    page.write_text(html, encoding="utf-8")
    return kaleido.Kaleido(
        path=browser,
        page_generator=page,
        timeout=render_timeout_s,
        tmp_dir=str(folder),
        browser_cls=_ChromiumInFolder,
    )
