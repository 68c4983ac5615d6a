"""GlobalOpinionQA's country labels: the names a cue uses and the kind of sample behind each.

The survey labels are abbreviated (`S. Korea`, `Palest. ter.`, `Czech Rep.`) and some carry a
sampling note (`Nigeria (Non-national sample)`, `India (Old national sample)`). The label stays
the key everywhere (metrics, tables, `bench.countries`); the cross-national cue and the report's
text show the display name: the sampling note removed and the abbreviation spelled out. A label
the map does not list is shown less its sampling note, with the surveys' abbreviations (`S.`,
`N.`, `Rep.`, `ter.`, `Is.`) spelled out.
"""

from __future__ import annotations

import re
from typing import Literal

Sample = Literal["national", "non-national", "old national"]

DISPLAY_NAMES: dict[str, str] = {
    "S. Korea": "South Korea",
    "S. Africa": "South Africa",
    "Palest. ter.": "the Palestinian territories",
    "Czech Rep.": "the Czech Republic",
    "Bosnia Herzegovina": "Bosnia and Herzegovina",
    "Hong Kong SAR": "Hong Kong",
    "Macau SAR": "Macau",
    "Taiwan ROC": "Taiwan",
    "United States": "the United States",
    "U.S.": "the United States",
    "Netherlands": "the Netherlands",
    "Philippines": "the Philippines",
    "Dominican Rep.": "the Dominican Republic",
    "Dominican Republic": "the Dominican Republic",
    "UAE": "the United Arab Emirates",
    "Ivory Coast": "Côte d'Ivoire",
}
"""Survey label (sampling note removed) → the name a cue says; the article where English needs
one ("someone from the Netherlands")."""

_NOTE = re.compile(r"\s*\(([^()]*\bsample)\)\s*\Z", re.IGNORECASE)
"""A trailing sampling note: `(Non-national sample)`, `(Old national sample)`, `(Current national sample)`."""


def _split(label: str) -> tuple[str, str]:
    """The label without its sampling note, and the note (lower case; "" when none)."""
    match = _NOTE.search(label)
    return (label[: match.start()].strip(), match.group(1).lower()) if match else (label.strip(), "")


_ABBREVIATIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\AS\. "), "South "), (re.compile(r"\AN\. "), "North "), (re.compile(r"\bRep\.(?=\s|\Z)"), "Republic"),
    (re.compile(r"\bter\.(?=\s|\Z)"), "territories"), (re.compile(r"\bIs\.(?=\s|\Z)"), "Islands"),
)
"""Survey abbreviations spelled out in a label the map does not list."""


def display_name(label: str) -> str:
    """The name the cue and the report's sentences use for a survey label."""
    base, _ = _split(label)
    if base in DISPLAY_NAMES:
        return DISPLAY_NAMES[base]
    for pattern, word in _ABBREVIATIONS:
        base = pattern.sub(word, base)
    return base


def table_name(label: str) -> str:
    """A display name without a leading article, for table cells (`the Netherlands` → `Netherlands`)."""
    return display_name(label).removeprefix("the ")


def sample(label: str) -> Sample:
    """What the label's respondents are: a national sample (also `Current national sample`), a
    non-national one (urban or otherwise not representative, Pew's note) or an older national
    sample kept beside a current one."""
    _, note = _split(label)
    if "non-national" in note:
        return "non-national"
    if note.startswith("old"):
        return "old national"
    return "national"
