"""Judges: turn free text into validated, structured verdicts, chosen by `judge.name`.

This package is the mechanism: the interface, the LLM judge, the HTTP client and the registry.
What a judge is asked (judge tasks) and the deterministic judges belong to the benches, which
register them in `probe.judges.registry` when imported.

A judge answers `JudgeRequest`s with `JudgeResult`s in the same order. Every result is kept:
an output that stays invalid after the retries becomes `error` (stored as `judge_error`),
never a dropped row.
"""

from __future__ import annotations

from probe.judges.base import Judge, JudgeRequest, JudgeResult
from probe.judges.spec import JudgeKind, JudgeSpec, judge_kind, make_judge

__all__ = ["Judge", "JudgeKind", "JudgeRequest", "JudgeResult", "JudgeSpec", "judge_kind", "make_judge"]
