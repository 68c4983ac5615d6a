"""A run as flat per-prompt records (`probe export RUN --format jsonl`): one JSON object per
prompt with its rendered text, options, letter probabilities, every reading's pick and the
judge's verdicts — the per-sample log other tools read line by line.

Each line holds the prompt's stored columns (`prompt_id`, `item_id`, `condition`, …, `prompt`),
then `options` (`{letter: {"group", "option"}}`), `probabilities` (`{letter: p}` at the run's
analysis temperature; generation runs: none), `readings` (`expected`: the most probable letter,
`greedy`: the argmax pick, with `valid` whether the full-vocabulary argmax is a letter, `debiased`: the most probable letter with the letter prior removed
and its distribution, `text`: the answer-text reading where scored; each `{"letter", "group"}`),
and `verdicts` (`{"<task>.<field>": value}`, judged runs). Undefined numbers are null.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import IO, Any

import numpy as np
import pandas as pd

from probe.report.stored_run import StoredRun

FORMATS = ("jsonl",)
"""The export formats (`--format`)."""

_PER_LETTER = re.compile(r"^(group|option|p|text_p)_([A-Z])$")


def records(run: StoredRun) -> Iterator[dict[str, Any]]:
    """One record per prompt, in prompt-id order (see the module docstring)."""
    frame = run.run.samples()
    debiased = _debiased(run)
    for row in frame.to_dict(orient="records"):
        yield _record({k: _plain(v) for k, v in row.items()}, debiased)


def _debiased(run: StoredRun) -> dict[int, list[float]]:
    """`{prompt_id: debiased distribution}` of a letter run whose design estimates it, else {}."""
    if run.task.answers != "letters":
        return {}
    probs = run.task.debiased(run.run, run.options().temperature)
    if probs is None:  # the design cannot separate letter from content: no such reading
        return {}
    return {int(p): [float(x) for x in q] for p, q in zip(run.run.table().prompt_id, probs)}


def _record(row: dict[str, Any], debiased: Mapping[int, list[float]]) -> dict[str, Any]:
    """One samples row regrouped: per-letter columns into `options` and `probabilities`, the
    greedy columns and the other readings into `readings`, `<task>.<field>` into `verdicts`."""
    out: dict[str, Any] = {}
    per_letter: dict[str, dict[str, Any]] = {}
    verdicts = {}
    for key, value in row.items():
        if m := _PER_LETTER.match(key):
            per_letter.setdefault(m.group(1), {})[m.group(2)] = value
        elif "." in key:
            verdicts[key] = value
        elif not key.startswith("greedy_"):
            out[key] = value
    groups = per_letter.get("group", {})
    out["options"] = {x: {"group": g, "option": per_letter.get("option", {}).get(x)} for x, g in groups.items()}
    probs = per_letter.get("p", {})
    out["probabilities"] = probs if any(v is not None for v in probs.values()) else None
    readings: dict[str, Any] = {}
    if out["probabilities"]:
        readings["expected"] = _pick(probs, groups)
    if row.get("greedy_letter") is not None:
        readings["greedy"] = {"letter": row["greedy_letter"], "group": row.get("greedy_group"),
                              "valid": row.get("greedy_valid")}
    q = debiased.get(int(row["prompt_id"]))
    if q is not None:
        dist = dict(zip(groups, q))  # letter → debiased probability
        readings["debiased"] = {**_pick(dist, groups), "probabilities": dist}
    if any(v is not None for v in per_letter.get("text_p", {}).values()):
        readings["text"] = _pick(per_letter["text_p"], groups)
    out["readings"] = readings
    out["verdicts"] = verdicts
    return out


def _pick(probs: Mapping[str, float | None], groups: Mapping[str, Any]) -> dict[str, Any]:
    """The most probable letter of a distribution and the group it shows (ties: the first)."""
    shown = {x: p for x, p in probs.items() if p is not None}
    if not shown:
        return {"letter": None, "group": None}
    letter = max(shown, key=lambda x: shown[x])
    return {"letter": letter, "group": groups.get(letter)}


def _plain(value: Any) -> Any:
    """A JSON-ready value: numpy scalars as Python's, NaN and missing as null."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    return None if value is None or value is pd.NA or value is pd.NaT else value


def write_jsonl(run: StoredRun, stream: IO[str]) -> int:
    """Write the run's records to `stream`, one JSON object a line; returns how many."""
    n = 0
    for record in records(run):
        stream.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")
        n += 1
    return n
