"""Deterministic keyword judge: the offline baseline, reproducible with no model.

It finds a GLOBE dimension when the rationale uses one of a few cue words for it. Crude by
design — it measures vocabulary, not reasoning — so the LLM judge is the one to report;
this one makes runs, tests and CI possible without a second model.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from probe.judges.base import JudgeRequest, JudgeResult

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
    name = "keyword"

    def judge(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        out = []
        for r in requests:
            if r.task != "globe_dimensions":
                out.append(JudgeResult(None, f"keyword judge has no rules for task {r.task!r}", self.name))
                continue
            text = _norm(str(r.payload.get("rationale") or ""))
            dims = [d for d, cues in CUES.items() if any(re.search(r"\b" + re.escape(c), text) for c in cues)]
            out.append(JudgeResult({"dimensions": dims}, None, self.name))
        return out
