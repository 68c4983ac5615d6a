"""A report's *Terms* paragraph lists only the terms the report uses: a bench defines every
abbreviation any of its reports may use (`probe.viz.markdown.opening_paragraphs`), and a run
that has no C3 condition, say, or no letter-prior table, should not be taught words it never shows."""

from __future__ import annotations

import re

from probe.viz.markdown import OPENING_TERMS

_ENTRY = re.compile(r"; (?=[^;=\s][^;=]{0,24} = )")
"""Where one `name = meaning` entry ends and the next begins (a meaning may hold `;` or `=`, but
not `; <short name> = `)."""
_PARTS = re.compile(r"–|, |/")
"""What joins the parts of a composite name (`C0–C3`, `C0, C2`, `B_US/B_R`)."""


def used_terms_only(markdown: str) -> str:
    """`markdown` with its *Terms* paragraph (the one that starts with `OPENING_TERMS`) cut to
    the entries whose name the rest of the report uses (a composite name when one of its parts
    is); the paragraph dropped when none is used; unchanged without one."""
    paragraphs = markdown.split("\n\n")
    at = next((i for i, p in enumerate(paragraphs) if p.startswith(OPENING_TERMS)), None)
    if at is None:
        return markdown
    body = paragraphs[at].removeprefix(OPENING_TERMS).strip().removesuffix(".")
    rest = "\n\n".join(paragraphs[:at] + paragraphs[at + 1:])
    kept = [entry for entry in _ENTRY.split(body) if _used(entry.partition(" = ")[0], rest)]
    if not kept:
        return rest
    paragraphs[at] = f"{OPENING_TERMS} {'; '.join(kept)}."
    return "\n\n".join(paragraphs)


def _used(name: str, text: str) -> bool:
    """Whether `text` shows `name` (or one of its parts) as a term: not inside a longer word or
    number (`K` is not used by `KL`; `SPD` is by `SPD_compliance`)."""
    return any(re.search(rf"(?<![A-Za-z0-9]){re.escape(part)}(?![A-Za-z0-9])", text)
               for part in [name, *_PARTS.split(name)] if part)
