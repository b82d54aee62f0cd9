"""The kaleido session that draws static figures, with every file it and its Chromium write
in one folder of the caller's: kaleido's page, Chromium's profile and what Chromium puts
in the temporary folder (its singleton socket's folder, its shared memory). A Chromium
killed leaves them all; the caller removes that one folder, however the browser ended.

Imported only by a static export: it imports kaleido, which starts a browser."""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import kaleido
from choreographer.browsers import Chromium

PAGE_FILE = "index.html"  # kaleido's page, which loads plotly.js and draws the figures


class _ChromiumInFolder(Chromium):
    """Chromium whose temporary folder (``TMPDIR``) is the one its profile is made in."""

    def get_env(self) -> MutableMapping[str, str]:
        env = super().get_env()
        env["TMPDIR"] = str(self.tmp_dir.path.parent)
        return env


class KaleidoKeepingItsLastTab(kaleido.Kaleido):  # type: ignore[misc]  # kaleido is untyped
    """A session that reloads its tab after each figure but the last: kaleido reloads the
    tab a figure was drawn in so that the next is drawn on a clean page; after the last
    there is none, and that reload (plotly.js parsed again) held the browser open 0.2-0.9 s.
    """

    def __init__(self, figures: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._figures_left = figures

    async def _return_kaleido_tab(self, tab: Any) -> None:
        self._figures_left -= 1
        if self._figures_left > 0:
            await super()._return_kaleido_tab(tab)
        else:
            await self.tabs_ready.put(tab)


def kaleido_in(
    folder: Path, browser: str, plotly_js: Path, render_timeout_s: float, figures: int
) -> kaleido.Kaleido:
    """A kaleido session (not yet open) that drives ``browser`` with ``plotly_js`` and no
    MathJax to draw ``figures`` figures, each within ``render_timeout_s``, writing only into
    ``folder``."""
    page = folder / PAGE_FILE
    html = kaleido.PageGenerator(plotly=str(plotly_js), mathjax=False).generate_index()
    page.write_text(html, encoding="utf-8")
    return KaleidoKeepingItsLastTab(
        figures,
        path=browser,
        page_generator=page,
        timeout=render_timeout_s,
        tmp_dir=str(folder),
        browser_cls=_ChromiumInFolder,
    )
