"""One self-contained HTML page from a probe markdown report and its figures.

The markdown is rendered by `markdown-it-py` (CommonMark plus pipe tables, raw HTML, links and
images off), so every name and value from the data is HTML-escaped, never a link (a country
named `[Evil](https://evil.example)` reads as that text), and quotes, lists and tables read as
the markdown means them (the page's own links, `links`, are written here, not from markdown). Figures are embedded as base64 data URIs,
so the page needs no other file, no network and no JavaScript to show its content; one tiny
inline script only records, after load, how many images decoded (`data-images-loaded` on
`<body>`), which the render test reads.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from pathlib import Path

from markdown_it import MarkdownIt

from probe.files import atomic_write_bytes
from probe.viz.figures import Figure

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; line-height: 1.45; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code { background: #f4f4f4; padding: 0 0.2em; border-radius: 3px; }
pre { background: #f4f4f4; padding: 0.6em; overflow-x: auto; }
figure { margin: 1.5em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #555; margin-top: 0.3em; }
nav.links { margin: 0.5em 0; padding: 0.4em 0.6em; background: #eef3ff; border: 1px solid #cdd9f5; }
"""

_SCRIPT = """window.addEventListener("load", function () {
  var n = 0, imgs = document.getElementsByTagName("img");
  for (var i = 0; i < imgs.length; i++) { if (imgs[i].complete && imgs[i].naturalWidth > 0) n++; }
  document.body.dataset.imagesLoaded = String(n);
});"""

_NUMBER = re.compile(r"^[-+−]?[\d.,]+%?$|^\[[-\d.,\s]+\]$")


def _parser() -> MarkdownIt:
    """CommonMark with pipe tables and raw HTML off (`js-default`): every `<`, `>` and `&` of the
    data is escaped, never read as markup; links, autolinks and images are off too, so no
    markdown can put a link on the page or make it load anything (probe's reports hold none)."""
    return MarkdownIt("js-default").disable(["image", "link", "autolink"])


def markdown_to_html(markdown: str) -> str:
    """HTML body for a probe markdown report (see the module docstring); table cells holding a
    number (or an interval of numbers) are right-aligned (`class="num"`)."""
    parser = _parser()
    tokens = parser.parse(markdown)
    for cell, content in zip(tokens, tokens[1:]):
        if cell.type == "td_open" and content.type == "inline" and _NUMBER.match(content.content.strip()):
            cell.attrSet("class", "num")
    return parser.renderer.render(tokens, parser.options, {}).rstrip("\n")


def figure_html(figure: Figure) -> str:
    """`<figure>` with the PNG inlined as a base64 data URI and its caption."""
    data = base64.b64encode(Path(figure.path).read_bytes()).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(figure.name)}">'
            f"<figcaption>{caption_html(figure.caption)}</figcaption></figure>")


def caption_html(caption: str) -> str:
    """A figure's caption rendered as inline markdown (`` `code` ``, *emphasis*), raw HTML off as in
    the page, so a caption shows `labels` as code, not literal backticks."""
    return _parser().renderInline(caption)


def render_html(title: str, markdown: str, figures: Sequence[Figure],
                links: Sequence[tuple[str, str]] = ()) -> str:
    """The complete page as a string; `links` (relative href, text) open it."""
    nav = "".join(f'<a href="{html.escape(href)}">{html.escape(text)}</a>' for href, text in links)
    parts = ([f'<nav class="links">{nav}</nav>'] if links else []) + [markdown_to_html(markdown)]
    if figures:
        parts.append("<h2>Figures</h2>")
        parts.extend(figure_html(f) for f in figures)
    body = "\n".join(parts)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n{body}\n"
            f"<script>{_SCRIPT}</script>\n</body>\n</html>\n")


def write_html(path: Path, title: str, markdown: str, figures: Sequence[Figure],
               links: Sequence[tuple[str, str]] = ()) -> None:
    """Write one self-contained HTML file: `links` to its companion pages, the markdown report,
    then every figure inlined."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, render_html(title, markdown, figures, links).encode("utf-8"))
