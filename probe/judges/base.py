"""The judge interface: requests in, validated verdicts out, in the same order.

Every result is kept: an output that stays invalid after the retries becomes `error` (stored
as `judge_error`), never a dropped row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class JudgeRequest:
    task: str
    """A judge task registered in `probe.judges.registry` (by the bench that asks it)."""
    payload: Mapping[str, Any]


@dataclass(frozen=True)
class JudgeResult:
    output: dict[str, Any] | None
    """The validated verdict, or None when the judge failed."""
    error: str | None
    judge: str


class Judge(Protocol):
    name: str

    def judge(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """One result per request, in order."""
        ...
