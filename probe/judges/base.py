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


FAILED_REQUEST = "<http error after "
"""How a chat backend's reply starts when the request itself failed (timeouts, connection
errors, HTTP errors after the retries): the text that follows says why, up to a closing `>`."""


def failed_request(reply: str) -> str | None:
    """Why the request behind `reply` failed (`http error after 2 attempt(s): no complete
    response within 60 s`), or None for a reply the model wrote."""
    if reply.startswith(FAILED_REQUEST) and reply.endswith(">"):
        return reply[1:-1]
    return None
