"""Number formatting for the markdown reports (a value, a `[lo, hi]` interval; `–` for null)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def fmt(v: Any, digits: int = 3) -> str:
    """A metric value with `digits` decimals, `–` when undefined."""
    return "–" if v is None else f"{v:.{digits}f}"


def ci(interval: Any) -> str:
    """A `[lo, hi]` interval as text, `–` when absent or undefined."""
    if not interval or interval[0] is None:
        return "–"
    return f"[{interval[0]:.3f}, {interval[1]:.3f}]"


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
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"
