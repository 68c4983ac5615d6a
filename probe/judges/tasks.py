"""Judge tasks: the prompt an LLM judge sees and the validator every judge's output must pass."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from probe.judges import rules as _locqa

GLOBE_DIMENSIONS: tuple[str, ...] = (
    "Performance Orientation", "Future Orientation", "Institutional Collectivism", "In-Group Collectivism",
    "Humane Orientation", "Power Distance", "Uncertainty Avoidance", "Gender Egalitarianism", "Assertiveness",
)


@dataclass(frozen=True)
class Task:
    prompt: Callable[[Mapping[str, Any]], str]
    validate: Callable[[Any, Mapping[str, Any]], dict[str, Any]]
    """Returns the cleaned verdict or raises ValueError saying what is wrong."""


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


TASKS: dict[str, Task] = {
    "globe_dimensions": Task(prompt=_dimensions_prompt, validate=_dimensions_validate),
    # LocQA (SPEC §4); prompts and validators live with the rules judge in probe.judges.rules.
    "semantic_match": Task(prompt=_locqa.semantic_match_prompt, validate=_locqa.semantic_match_validate),
    "implicit": Task(prompt=_locqa.implicit_prompt, validate=_locqa.implicit_validate),
    "explicit": Task(prompt=_locqa.explicit_prompt, validate=_locqa.explicit_validate),
}


def extract_json(text: str) -> Any:
    """The first JSON object in a judge's text (models wrap JSON in prose or code fences)."""
    for match in re.finditer(r"\{", text):
        try:
            obj, _ = json.JSONDecoder().raw_decode(text[match.start():])
        except json.JSONDecodeError:
            continue
        return obj
    raise ValueError("no JSON object in the output")
