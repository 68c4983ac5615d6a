"""CCD's judging: the GLOBE dimensions a rationale cites, as a judge task (LLM prompt and
validator) and the deterministic `keyword` judge; both registered on import.

The keyword judge is the offline baseline, reproducible with no model: it finds a GLOBE
dimension when the rationale uses one of a few cue words for it. Crude by design — it measures
vocabulary, not reasoning — so the LLM judge is the one to report; this one makes runs, tests
and CI possible without a second model.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from probe.judges.base import JudgeRequest, JudgeResult
from probe.judges.registry import JudgeTask, register_judge, register_task

GLOBE_DIMENSIONS: tuple[str, ...] = (
    "Performance Orientation", "Future Orientation", "Institutional Collectivism", "In-Group Collectivism",
    "Humane Orientation", "Power Distance", "Uncertainty Avoidance", "Gender Egalitarianism", "Assertiveness",
)
DIMENSIONS_TASK = "globe_dimensions"


def _dimensions_prompt(payload: Mapping[str, Any]) -> str:
    names = "\n".join(f"- {d}" for d in GLOBE_DIMENSIONS)
    return (
        "Which of these GLOBE cultural dimensions does the rationale below appeal to?\n"
        f"{names}\n\nRationale: {payload['rationale']}\n\n"
        'Reply with JSON only: {"dimensions": [<names from the list, possibly none>]}'
    )


def _dimensions_validate(obj: Any, payload: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(obj, dict) or not isinstance(obj.get("dimensions"), list):
        raise ValueError('expected {"dimensions": [...]}')
    canonical = {d.casefold(): d for d in GLOBE_DIMENSIONS}
    unknown = [d for d in obj["dimensions"] if not isinstance(d, str) or d.strip().casefold() not in canonical]
    if unknown:
        raise ValueError(f"unknown dimension(s) {unknown}; expected names from {list(GLOBE_DIMENSIONS)}")
    found = {canonical[d.strip().casefold()] for d in obj["dimensions"]}
    return {"dimensions": [d for d in GLOBE_DIMENSIONS if d in found]}


DIMENSIONS = register_task(JudgeTask(DIMENSIONS_TASK, _dimensions_prompt, _dimensions_validate,
                                     (pa.field("dimensions", pa.list_(pa.string())),)))

JUDGEMENT_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("template", pa.string()), pa.field("language", pa.string()), *DIMENSIONS.columns,
    pa.field("mentioned_answers", pa.list_(pa.string())), pa.field("framing_style", pa.string()),
    pa.field("matches", pa.list_(pa.string())), pa.field("match_locale", pa.bool_()),
    pa.field("mentions_us_answer", pa.bool_()),
)
"""The `judgements.parquet` columns of a CCD run between `prompt_id, task` and the judge's. Only
`dimensions` is CCD's; the others, always null here, are LocQA's verdict columns: CCD and LocQA
runs have always been written in one shared layout (the README's results contract), kept so that
stored files stay as they were."""


CUES: dict[str, tuple[str, ...]] = {
    "Performance Orientation": ("perform", "achiev", "excellen", "merit", "productiv", "efficien", "improv", "success"),
    "Future Orientation": ("future", "long-term", "long term", "plan", "sustainab", "invest", "next generation"),
    "Institutional Collectivism": ("society", "societal", "institution", "public", "communit", "collective", "policy"),
    "In-Group Collectivism": ("family", "loyal", "kin", "elders", "relatives", "in-group", "belonging", "household"),
    "Humane Orientation": ("care", "compassion", "kind", "empath", "wellbeing", "well-being", "support", "dignity"),
    "Power Distance": ("hierarch", "authority", "status", "senior", "power", "rank", "deference"),
    "Uncertainty Avoidance": ("risk", "rule", "stabil", "predictab", "order", "safety", "secur", "procedure"),
    "Gender Egalitarianism": ("gender", "women", "equal opportunit", "men and women", "equality between"),
    "Assertiveness": ("assert", "direct", "confident", "compet", "bold", "stand up"),
}


def _norm(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


class KeywordJudge:
    """Deterministic CCD judge: GLOBE cue words in the rationale (`CUES`), offline."""

    name = "keyword"

    def judge(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """One verdict per request; a request of another task is a failed verdict."""
        out = []
        for r in requests:
            if r.task != DIMENSIONS_TASK:
                out.append(JudgeResult(None, f"keyword judge has no rules for task {r.task!r}", self.name))
                continue
            text = _norm(str(r.payload.get("rationale") or ""))
            dims = [d for d, cues in CUES.items() if any(re.search(r"\b" + re.escape(c), text) for c in cues)]
            out.append(JudgeResult({"dimensions": dims}, None, self.name))
        return out


register_judge(KeywordJudge.name, KeywordJudge)
