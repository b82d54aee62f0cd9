"""plotly.js inlined once per page, gzip-compressed (4.8 MB of script becomes 2.0 MB of
base64): the browser inflates it (``DecompressionStream``), then draws the figures.

A figure's script waits as ``type='text/x-edgetwin-figure'`` until plotly.js is defined;
nothing is fetched, so a page works offline from a file.
"""

from __future__ import annotations

import base64
import gzip
import re
from functools import cache

from plotly.offline import get_plotlyjs

FIGURE_SCRIPT = "text/x-edgetwin-figure"
_SCRIPT_TAG = re.compile(r'<script(?: type="text/javascript")?>')
_LOADER = """<script>
(async function () {
  try {
    var packed = document.getElementById("plotly-js-gzip").textContent;
    var bytes = Uint8Array.from(atob(packed), function (c) { return c.charCodeAt(0); });
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    (0, eval)(await new Response(stream).text());
    if (document.readyState === "loading") {
      await new Promise(function (done) {
        document.addEventListener("DOMContentLoaded", done);
      });
    }
    document.querySelectorAll("script[type='FIGURE_SCRIPT']").forEach(function (s) {
      (0, eval)(s.textContent);
    });
  } catch (e) {
    document.body.insertAdjacentHTML("afterbegin", "<p class='warning'>The figures need a " +
      "browser with DecompressionStream (Chrome 80, Firefox 113, Safari 16.4): " + e + "</p>");
    throw e;
  }
})();
</script>""".replace("FIGURE_SCRIPT", FIGURE_SCRIPT)


@cache
def plotly_js_html() -> str:
    """The compressed plotly.js and the script that inflates it and draws the figures."""
    packed = gzip.compress(get_plotlyjs().encode(), compresslevel=9, mtime=0)
    return (
        "<script id='plotly-js-gzip' type='application/octet-stream'>"
        f"{base64.b64encode(packed).decode()}</script>{_LOADER}"
    )


def deferred(figure_html: str) -> str:
    """A figure's HTML from ``plotly.io.to_html`` with its script waiting for plotly.js."""
    waiting, found = _SCRIPT_TAG.subn(f'<script type="{FIGURE_SCRIPT}">', figure_html, count=1)
    if not found:
        raise ValueError("plotly.io.to_html wrote no <script> tag for the figure")
    return waiting
