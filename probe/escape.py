"""Where data becomes text: one escaping rule per kind of output, so a country, option, label,
model or run label is always shown as the text it is, never run as a formula, read as markup or
sent to the terminal as a command (docs/results/contract.md, "Text from data").

- CSV (`spreadsheet_cell`): a cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return
  is read as a formula by spreadsheet programs (OWASP, "CSV Injection"); it gets a leading `'`.
- Markdown (`markdown_cell`, `inert_markdown`): no raw HTML (`<` that opens a tag becomes
  `&lt;`), no link (`](` becomes `]\\(`), no control character; the HTML pages render the
  markdown with raw HTML, links and images off (`probe.viz.html`), so neither can hold one.
- Terminal (`probe.errors.printable`, `terminal_text`): every control character written as its
  escape, so an escape sequence in data never clears the screen or sets the title.

Ordinary names pass every rule unchanged.
"""

from __future__ import annotations

import re

from probe.errors import printable

FORMULA_START = r"^[=+\-@\t\r]"
"""A text cell starting with one of these is read as a formula by spreadsheet programs (OWASP,
"CSV Injection")."""
_FORMULA = re.compile(FORMULA_START)

_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_LINK = re.compile(r"\]\(")
_CODE_SPAN = re.compile(r"(`[^`\n]*`)")


def spreadsheet_cell(text: str) -> str:
    """`text` as a CSV cell no spreadsheet runs: a leading `=`, `+`, `-`, `@`, tab or carriage
    return gets a `'` before it (`=HYPERLINK(…)` → `'=HYPERLINK(…)`); anything else unchanged."""
    return f"'{text}" if _FORMULA.match(text) else text


def terminal_text(text: str) -> str:
    """Lines for the terminal: each line `printable` (control characters escaped), the line
    breaks kept (for multi-line summaries; a one-line message uses `printable` itself)."""
    return "\n".join(printable(line) for line in text.split("\n"))


def markdown_cell(value: object) -> str:
    """A table cell or a name inside a sentence: one line (a newline or control character
    escaped, so data never starts a row or a block), `|` escaped (it never shifts a column)."""
    return printable(str(value)).replace("|", "\\|")


def inert_markdown(markdown: str) -> str:
    """`markdown` with no raw HTML and no link made of data, outside code spans (where a renderer
    shows text as typed): every `<` that could open an HTML tag or comment written `&lt;` (a `<`
    before a digit or a space, `p < 0.001`, stays), every `](` written `]\\(` (so `[Evil](https://…)`
    shows as text), and every control character but a newline or tab escaped."""
    return "".join(part if _CODE_SPAN.fullmatch(part) else _inert(part) for part in _CODE_SPAN.split(markdown))


def _inert(text: str) -> str:
    text = _LINK.sub("]\\\\(", _TAG_START.sub("&lt;", text))
    return "\n".join("\t".join(printable(piece) for piece in line.split("\t")) for line in text.split("\n"))
