"""Number formatting and tables for the markdown reports: a value, a `[lo, hi]` interval, `–` for
an undefined one — always with a footnote saying why (`Footnotes`) — and table rows whose `|`
never shifts a column."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from probe.escape import inert_markdown, markdown_cell
from probe.metrics.core import SMALL_N

_MARKS = "¹²³⁴⁵⁶⁷⁸⁹"
WIDE_TABLE = 130
"""Characters of a markdown table line that still fit the report page (about 1100 px at the
HTML page's table font); wider sweep tables are split into several."""

NO_BOOT = "no interval: the run was analysed with `analysis.n_boot=0`"
NO_REPLICATE = "no interval: the metric is undefined in every bootstrap resample"


def undefined(v: Any) -> bool:
    """A missing value: None (how JSON stores NaN) or NaN."""
    return v is None or (isinstance(v, float) and math.isnan(v))


OPENING_CONCLUSION = "**In short:**"
"""Opens the paragraph under a report's title that states its conclusion in plain words."""
OPENING_TERMS = "**Terms:**"
"""Opens the paragraph that defines the report's abbreviations, right after the conclusion."""


def opening_paragraphs(parts: Sequence[str], terms: Sequence[tuple[str, str]]) -> list[str]:
    """A report's first two paragraphs: the conclusion's sentences (empty ones left out) and the
    abbreviations they use, each `name = meaning`."""
    defined = "; ".join(f"{name} = {meaning}" for name, meaning in terms)
    return [f"{OPENING_CONCLUSION} {' '.join(p for p in parts if p)}", "", f"{OPENING_TERMS} {defined}.", ""]


def split_opening(markdown: str) -> tuple[str, str]:
    """A report's title line with the conclusion and terms paragraphs that follow it (those that
    start with `OPENING_CONCLUSION` or `OPENING_TERMS`), and the rest: a report's header and
    warnings go between the two, so the conclusion stays its first paragraph."""
    title, _, rest = markdown.partition("\n")
    head = [title]
    paragraphs = rest.lstrip("\n").split("\n\n")
    while paragraphs and paragraphs[0].startswith((OPENING_CONCLUSION, OPENING_TERMS)):
        head += ["", paragraphs.pop(0)]
    return "\n".join(head), "\n\n".join(paragraphs)


def side(value: float, interval: Any, ref: float = 0.0) -> int:
    """Where a value lies from `ref` by its 95% interval: 1 above, -1 below, 0 when the interval
    holds `ref` (the value alone where it has no interval)."""
    lo, hi = (interval[0], interval[1]) if interval and not undefined(interval[0]) else (value, value)
    return 1 if lo > ref else -1 if hi < ref else 0


def fmt(v: Any, digits: int = 3) -> str:
    """A metric value with `digits` decimals, `–` when undefined (None or NaN)."""
    return "–" if undefined(v) else f"{v:.{digits}f}"


def ci(interval: Any) -> str:
    """A `[lo, hi]` interval as text, `–` when absent or undefined."""
    if not interval or undefined(interval[0]):
        return "–"
    return f"[{interval[0]:.3f}, {interval[1]:.3f}]"


def value_ci(v: Any, interval: Any) -> str:
    """`v [lo, hi]`, `v` alone without an interval, `–` when `v` is undefined."""
    if undefined(v):
        return "–"
    return f"{v:.3f} {ci(interval)}" if ci(interval) != "–" else f"{v:.3f}"


class Footnotes:
    """Why cells of one table are empty: each distinct reason gets a mark (¹, ², … in order of
    first use), and `lines()` lists the reasons under the table."""

    def __init__(self) -> None:
        self._reasons: list[str] = []

    def mark(self, reason: str) -> str:
        """The mark of `reason` (a new one at its first use)."""
        if reason not in self._reasons:
            self._reasons.append(reason)
        i = self._reasons.index(reason)
        return _MARKS[i] if i < len(_MARKS) else f"^{i + 1}"

    def gap(self, reason: str) -> str:
        """An empty cell, `–` with the mark of why it is empty."""
        return "–" + self.mark(reason)

    def value(self, v: Any, reason: str, digits: int = 3) -> str:
        """`fmt(v)`, or a marked gap when it is undefined."""
        return self.gap(reason) if undefined(v) else fmt(v, digits)

    def interval(self, interval: Any, value: Any, undefined_reason: str, n_boot: int | None) -> str:
        """`ci(interval)`, or a marked gap: the value's own reason when it is undefined, else why
        the bootstrap gave no interval."""
        if interval and not undefined(interval[0]):
            return ci(interval)
        if undefined(value):
            return self.gap(undefined_reason)
        return self.gap(NO_BOOT if n_boot == 0 else NO_REPLICATE)

    def lines(self) -> list[str]:
        """The footnotes (a blank line first), none when no cell needed one."""
        if not self._reasons:
            return []
        return [""] + [f"- {self.mark(r)} {r}" for r in self._reasons]


def n_boot_of(metrics: Mapping[str, Any]) -> int | None:
    """The run's bootstrap resample count (None when not recorded)."""
    boot = metrics.get("bootstrap") or {}
    return boot.get("n_boot")


def bootstrap_units(metrics: Mapping[str, Any]) -> tuple[int | None, str]:
    """How many units the bootstrap resampled and their name (`item`, `template`); the count
    falls back to `n_items` for runs from before it was recorded, when the unit is items."""
    boot = metrics.get("bootstrap") or {}
    unit = str(boot.get("unit", "item"))
    n = boot.get("n_units")
    if n is None and unit == "item":
        n = metrics.get("n_items")
    return (int(n) if isinstance(n, (int, float)) else None), unit


def small_sample(metrics: Mapping[str, Any]) -> str | None:
    """The warning for intervals that rest on fewer than `SMALL_N` resampled units, else None."""
    n, unit = bootstrap_units(metrics)
    if n is None or n >= SMALL_N or not n_boot_of(metrics):
        return None
    return (f"only {n} {unit}{'s' if n != 1 else ''} (fewer than {SMALL_N}): the bootstrap resamples the same "
            "handful, so its 95% intervals are too narrow and unreliable; read them as descriptive")


def invalid_section(invalid: list[dict[str, Any]], show: int = 20) -> str:
    """Markdown list of unparseable generations (never dropped silently)."""
    lines = ["", f"## Invalid generations ({len(invalid)})", ""]
    for g in invalid[:show]:
        text = g["text"][:120].replace("\n", " ").replace("`", "'")
        lines.append(f"- prompt {g['prompt_id']}: `{text}`")
    if len(invalid) > show:
        lines.append(f"- … {len(invalid) - show} more in generations.parquet (parsed_letter is null)")
    return "\n".join(lines) + "\n"


def row(cells: Sequence[Any]) -> str:
    """One markdown table row; a `|` inside a cell (e.g. the label `|B_R − 1|`, a run named with
    one) is escaped, so it never shifts the columns."""
    return "| " + " | ".join(markdown_cell(c) for c in cells) + " |"


def table(head: Sequence[Any], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A markdown table, every header and cell escaped."""
    return [row(head), "|---" * len(head) + "|", *(row(r) for r in rows)]


TERMINAL_WIDTH = 100
"""Characters of a table line printed to a terminal; wider tables keep their leading columns there
and name the file that holds them whole."""


def terminal_line(text: str, width: int = TERMINAL_WIDTH) -> str:
    """One printed sentence wrapped to `width` characters at spaces, later lines indented by two;
    a word longer than the line (a path) stays whole rather than being cut."""
    return "\n".join(textwrap.wrap(text, width, subsequent_indent="  ", break_long_words=False,
                                   break_on_hyphens=False)) or text


def fit_table(head: Sequence[Any], rows: Sequence[Sequence[Any]], keep: int,
              width: int = TERMINAL_WIDTH) -> tuple[list[str], int]:
    """The table's first `keep` columns and as many of the next ones, in order, as keep every
    line within `width` characters (at least one), and how many columns were left out."""
    def size(cols: Sequence[int]) -> int:
        return max(len(row([r[i] for i in cols])) for r in [head, *rows])

    cols = list(range(min(keep, len(head))))
    for i in range(len(cols), len(head)):
        if len(cols) > keep and size([*cols, i]) > width:
            break
        cols.append(i)
    return table([head[i] for i in cols], [[r[i] for i in cols] for r in rows]), len(head) - len(cols)


def split_table(head: Sequence[Any], rows: Sequence[Sequence[Any]], keep: int, width: int = WIDE_TABLE) -> list[list[str]]:
    """The table as one or more tables no line of which is wider than `width` characters (where
    the columns allow): the first `keep` columns (what names a row) open the first part, its
    first column every later one; the other columns are split in their order."""
    def size(cols: Sequence[int]) -> int:
        return max(len(row([r[i] for i in cols])) for r in [head, *rows])

    parts: list[list[int]] = [list(range(keep))]
    for i in range(keep, len(head)):
        if size(parts[-1] + [i]) > width and len(parts[-1]) > (keep if len(parts) == 1 else 1):
            parts.append([0])
        parts[-1].append(i)
    return [table([head[i] for i in cols], [[r[i] for i in cols] for r in rows]) for cols in parts]


def inert_html(markdown: str) -> str:
    """`markdown` made inert where data could be markup (`probe.escape.inert_markdown`): no raw
    HTML tag, no link, no control character; every report's markdown is written through it."""
    return inert_markdown(markdown)
