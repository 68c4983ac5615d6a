"""One self-contained HTML page from a probe markdown report and its figures.

The converter covers the markdown probe writes: `#`..`######` headings, paragraphs, `- ` lists,
pipe tables (header row, then a `|---|` separator row), fenced code blocks, inline `code`,
`**bold**` and `*italic*`. All text is HTML-escaped. Figures are embedded as base64 data URIs,
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

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_NUMBER = re.compile(r"^[-+−]?[\d.,]+%?$|^\[[-\d.,\s]+\]$")


def inline(text: str) -> str:
    """Escape `text` and render inline `code`, `**bold**` and `*italic*` spans."""
    out = []
    for i, part in enumerate(re.split(r"(`[^`]*`)", text)):
        if i % 2:
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
            continue
        part = html.escape(part)
        part = re.sub(r"\*\*(\S(?:.*?\S)?)\*\*", r"<strong>\1</strong>", part)
        part = re.sub(r"(?<![\w*])\*(\S(?:.*?\S)?)\*(?![\w*])", r"<em>\1</em>", part)
        out.append(part)
    return "".join(out)


def _cells(line: str) -> list[str]:
    """A pipe-table row's cells (outer pipes optional; `\\|` is a literal pipe)."""
    line = line.strip()
    line = line[1:] if line.startswith("|") else line
    line = line[:-1] if line.endswith("|") and not line.endswith("\\|") else line
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)]


def _table(header: str, rows: list[str]) -> str:
    head = "".join(f"<th>{inline(c)}</th>" for c in _cells(header))
    body = []
    for row in rows:
        tds = "".join(f'<td class="num">{inline(c)}</td>' if _NUMBER.match(c) else f"<td>{inline(c)}</td>"
                      for c in _cells(row))
        body.append(f"<tr>{tds}</tr>")
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(body) + "\n</tbody>\n</table>"


def markdown_to_html(markdown: str) -> str:
    """HTML body for the simple markdown probe writes (see the module docstring)."""
    lines = markdown.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    para: list[str] = []
    i = 0

    def flush() -> None:
        if para:
            out.append(f"<p>{inline(' '.join(s.strip() for s in para))}</p>")
            para.clear()

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            out.append(f"<pre><code>{html.escape(chr(10).join(lines[i + 1:j]))}</code></pre>")
            i = j + 1
            continue
        if not stripped:
            flush()
        elif m := _HEADING.match(stripped):
            flush()
            level = len(m.group(1))
            out.append(f"<h{level}>{inline(m.group(2))}</h{level}>")
        elif "|" in stripped and i + 1 < len(lines) and _SEPARATOR.match(lines[i + 1]):
            flush()
            j = i + 2
            while j < len(lines) and lines[j].strip() and "|" in lines[j]:
                j += 1
            out.append(_table(stripped, [s.strip() for s in lines[i + 2:j]]))
            i = j
            continue
        elif stripped.startswith("- "):
            flush()
            items = []
            while i < len(lines) and lines[i].strip().startswith("- "):
                text = [lines[i].strip()[2:]]
                i += 1
                while (i < len(lines) and lines[i].startswith((" ", "\t")) and lines[i].strip()
                       and not lines[i].strip().startswith("- ")):  # wrapped continuation line
                    text.append(lines[i].strip())
                    i += 1
                items.append(f"<li>{inline(' '.join(text))}</li>")
            out.append("<ul>\n" + "\n".join(items) + "\n</ul>")
            continue
        else:
            para.append(line)
        i += 1
    flush()
    return "\n".join(out)


def figure_html(figure: Figure) -> str:
    """`<figure>` with the PNG inlined as a base64 data URI and its caption."""
    data = base64.b64encode(Path(figure.path).read_bytes()).decode("ascii")
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(figure.name)}">'
            f"<figcaption>{html.escape(figure.caption)}</figcaption></figure>")


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
