"""The survey records both readers (`atp.py`, `table.py`) produce, and their stored form.

A question is asked with every option the survey offered, refusal codes included (the paper's
prompt shows `Refused`); which options are compared, and where each sits on the scale, travels
with the run in `prompts.parquet` (design column `human`), so every metric is recomputed from the
run's own files.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from probe.errors import ProbeInputError, bounded_repr

OVERALL = "NONE"
"""The attribute name of the whole panel (the dataset's `NONE_data.json`)."""


@dataclass(frozen=True)
class Question:
    """One survey question with each group's weighted answer counts (or shares)."""

    key: str
    text: str
    """The question verbatim (no whitespace stripped)."""
    options: tuple[str, ...]
    """Every option as asked, in survey order, non-answers included."""
    refusal: tuple[bool, ...]
    """Per option: a non-answer (refused, don't know), left out of the distributions by default."""
    positions: tuple[float, ...] | None
    """Per option: its ordinal position as the file states it (a refusal's is NaN); None: no
    positions, so no W1 for this question."""
    counts: tuple[tuple[str, str, tuple[float, ...]], ...]
    """(attribute, group, weighted count per option); the whole panel under `OVERALL`."""
    sized: bool = True
    """Whether the counts are counts (their sum the effective n); False: shares of unknown n."""


def to_json(q: Question) -> str:
    """The question's survey side as `prompts.parquet` stores it."""
    groups: dict[str, dict[str, list[float]]] = {}
    for attribute, group, values in q.counts:
        groups.setdefault(attribute, {})[group] = list(values)
    return json.dumps({"options": list(q.options), "refusal": list(q.refusal),
                       "positions": None if q.positions is None else [None if math.isnan(p) else p
                                                                      for p in q.positions],
                       "counts": groups, "sized": q.sized}, separators=(",", ":"))


@dataclass(frozen=True)
class Stored:
    """A question's survey side read back from a run."""

    refusal: tuple[bool, ...]
    positions: tuple[float, ...] | None
    counts: Mapping[str, Mapping[str, tuple[float, ...]]]
    """attribute → group → weighted counts per option."""
    sized: bool


def from_json(text: str) -> Stored:
    """`to_json`'s value back (as stored by this bench)."""
    raw: dict[str, Any] = json.loads(text)
    pos = raw["positions"]
    return Stored(refusal=tuple(bool(r) for r in raw["refusal"]),
                  positions=None if pos is None else tuple(math.nan if p is None else float(p) for p in pos),
                  counts={a: {g: tuple(float(v) for v in vs) for g, vs in by.items()} for a, by in raw["counts"].items()},
                  sized=bool(raw["sized"]))


def count_value(value: Any, where: str) -> float:
    """One weighted count: a finite number ≥ 0 (not a bool, not a string)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProbeInputError(f"{where}: expected a number ≥ 0, got {bounded_repr(value)}")
    out = float(value)
    if not math.isfinite(out) or out < 0:
        raise ProbeInputError(f"{where}: expected a finite number ≥ 0, got {bounded_repr(value)}")
    return out


def by_option(answers: Any, options: tuple[str, ...], where: str) -> tuple[float, ...]:
    """A group's `{option: count}` as counts in option order (absent options 0); an option the
    question does not have, or a count that is no number, stops with `where` and the option."""
    if not isinstance(answers, dict):
        raise ProbeInputError(f"{where}: expected an object of option → count, got {bounded_repr(answers)}")
    index = {o: i for i, o in enumerate(options)}
    out = [0.0] * len(options)
    for option, value in answers.items():
        if option not in index:
            raise ProbeInputError(f"{where}: option {bounded_repr(option)} is not an option of the question "
                                  f"(its options: {bounded_repr(list(options))})")
        out[index[option]] = count_value(value, f"{where}, option {option!r}")
    return tuple(out)
