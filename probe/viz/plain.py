"""Markdown made for a file, as a terminal should show it: plain text with no markup."""

from __future__ import annotations

import re

_SEPARATOR = re.compile(r"^\|(\s*:?-+:?\s*\|)+$")
_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_STRONG = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`\n]*)`")
_ESCAPED = re.compile(r"\\([\\`*_\[\]<>#|~])")


def plain_text(markdown: str) -> str:
    """`markdown` without its markup: tables as columns aligned with spaces (the separator row
    dropped), `**strong**` and `` `code` `` as their text, `#` headings as `Heading:`, the two
    trailing spaces of a line break removed and backslash escapes undone."""
    out: list[str] = []
    rows: list[list[str]] = []
    for line in markdown.split("\n"):
        if line.startswith("|") and line.rstrip().endswith("|"):
            if not _SEPARATOR.match(line.strip()):
                rows.append([_inline(c.strip()) for c in _CELL_SPLIT.split(line.strip()[1:-1])])
            continue
        out += _aligned(rows)
        rows = []
        heading = re.match(r"^#{1,6}\s+(.*)$", line)
        out.append(_inline(heading.group(1)) + ":" if heading else _inline(line.rstrip()))
    return "\n".join(out + _aligned(rows))


def _inline(text: str) -> str:
    return _ESCAPED.sub(r"\1", _CODE.sub(r"\1", _STRONG.sub(r"\1", text)))


def _aligned(rows: list[list[str]]) -> list[str]:
    if not rows:
        return []
    widths = [max(len(r[i]) if i < len(r) else 0 for r in rows) for i in range(max(map(len, rows)))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
