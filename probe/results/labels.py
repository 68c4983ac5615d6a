"""A run's label (`run.label=…`): free text that names a run for people — in `probe runs`, the
report's header, sweep tables and the run directory's name. Presentation only: it is recorded in
`manifest.json` (key `label`, only when given) and never enters `run_key.json`, so relabelling a
run never forces it to be scored again."""

from __future__ import annotations

import re

from probe.errors import ProbeInputError, printable

MAX_LABEL = 80
"""The longest label, in characters: it must fit a `probe runs` column and a directory name."""
SLUG_CHARS = 40
"""The most characters of the label that the run directory's name carries."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def check_label(value: str | None, key: str = "run.label") -> str | None:
    """`value` stripped of surrounding blanks if it can label a run: 1 to `MAX_LABEL` printable
    characters (no control character, newline or tab: it is printed in one terminal line and one
    table cell); None stays None (no label). Else a one-line `ProbeInputError` naming `key`."""
    if value is None:
        return None
    text = value.strip()
    shown = printable(value if len(value) <= 60 else value[:60] + "…")
    if not text:
        raise ProbeInputError(f"{key}: expected a non-empty label (or null for none), got {value!r}")
    if not text.isprintable():
        raise ProbeInputError(f"{key}: expected printable text (no control character, newline or tab), got '{shown}'")
    if len(text) > MAX_LABEL:
        raise ProbeInputError(f"{key}: expected at most {MAX_LABEL} characters, got {len(text)} ('{shown}')")
    return text


def label_slug(value: object) -> str:
    """What the run directory's name gains from a label: `_` and the label's first `SLUG_CHARS`
    characters with every run of characters other than letters, digits, `.`, `_`, `+`, `-`
    replaced by one `-` (so `"base, T=0.5"` gives `_base-T-0.5`); empty without a label."""
    if value is None:
        return ""
    slug = _UNSAFE.sub("-", str(value).strip()[:SLUG_CHARS]).strip("-.")
    return f"_{slug}" if slug else ""


def read_label(raw: object) -> str | None:
    """The label stored in a manifest's JSON object (None: none given, or a run from before labels)."""
    value = raw.get("label") if isinstance(raw, dict) else None
    return value if isinstance(value, str) and value else None
