"""A run as per-prompt records (`probe export RUN --format jsonl|csv|parquet`): one record per
prompt with its rendered text, options, letter probabilities, every reading's pick and the
judge's verdicts — the per-sample log other tools read line by line.

Each record holds the prompt's stored columns (`prompt_id`, `item_id`, `condition`, …, `prompt`;
a bench's JSON-object fields, such as GlobalOpinionQA's `human`, as objects), a factor run's
`variant` as `{"index", "name", "levels"}`, then `options` (`{label: {"group", "option"}}`),
`probabilities` (`{label: p}` at the run's analysis temperature; generation runs: none) — keyed
by the labels the prompt showed (`1`…`4` under `labels=digits`; the run's letters otherwise) —
`readings` (`expected`: the most probable letter,
`greedy`: the argmax pick, with `valid` whether the full-vocabulary argmax is a letter, `debiased`: the most probable letter with the letter prior removed
and its distribution, `text`: the answer-text reading where scored; each `{"letter", "group"}`),
and `verdicts` (`{"<task>.<field>": value}`, judged runs). Undefined numbers are null.

`jsonl` writes one JSON object a line; `csv` and `parquet` one row per record with the nested
keys flattened (`probabilities.A`, `readings.expected.group`, `variant.levels.labels`) and what
stays a list or an object (a `human` country's shares) as JSON text. In `csv`, a text cell a
spreadsheet would run as a formula (starting `=`, `+`, `-`, `@`, a tab or a carriage return) gets
a leading `'` (`probe.escape.spreadsheet_cell`); `jsonl` and `parquet` keep every text as stored.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import IO, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from probe.analyses.view import StoredRun
from probe.benches.task import Answers
from probe.bounded import loads_json
from probe.errors import ProbeInputError
from probe.escape import spreadsheet_cell

FORMATS = ("jsonl", "csv", "parquet")
"""The export formats (`--format`)."""

_PER_LETTER = re.compile(r"^(group|option|p|text_p|label)_([A-Z])$")
_VARIANT = ("variant", "variant_name", "variant_levels")


def records(run: StoredRun) -> Iterator[dict[str, Any]]:
    """One record per prompt, in prompt-id order (see the module docstring)."""
    frame = run.samples()
    debiased = _debiased(run)
    structured = [c for c in run.task.design.structured if c in frame.columns]
    for row in frame.to_dict(orient="records"):
        plain = {k: _plain(v) for k, v in row.items()}
        for column in structured:
            plain[column] = _decoded(plain[column], column, plain["prompt_id"])
        yield _relabelled(_record(plain, debiased))


def _decoded(value: Any, column: str, prompt_id: int) -> Any:
    """A JSON-object field's value as the object it holds (None stays None)."""
    if value is None:
        return None
    try:
        return loads_json(value, f"prompts.parquet, prompt {prompt_id}, field {column!r}")
    except (TypeError, json.JSONDecodeError) as e:
        raise ProbeInputError(f"prompts.parquet, prompt {prompt_id}, field {column!r}: expected JSON text, got "
                              f"{str(value)[:40]!r} ({e})") from None


def _debiased(run: StoredRun) -> dict[int, list[float]]:
    """`{prompt_id: debiased distribution}` of a letter run whose design estimates it, else {}."""
    debias = run.task.scoring.debiased
    if run.task.answers is not Answers.LETTERS or debias is None:
        return {}
    probs = debias(run, run.options().temperature)
    if probs is None:  # the design cannot separate letter from content: no such reading
        return {}
    return {int(p): [float(x) for x in q] for p, q in zip(run.table().prompt_id, probs)}


def _record(row: dict[str, Any], debiased: Mapping[int, list[float]]) -> dict[str, Any]:
    """One samples row regrouped: per-letter columns into `options` and `probabilities`, the
    greedy columns and the other readings into `readings`, `<task>.<field>` into `verdicts`."""
    out: dict[str, Any] = {}
    per_letter: dict[str, dict[str, Any]] = {}
    verdicts = {}
    if "variant" in row and "variant_name" in row:
        out["variant"] = {"index": row["variant"], "name": row["variant_name"], "levels": row["variant_levels"]}
    for key, value in row.items():
        if key in _VARIANT:
            continue
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
    out["_labels"] = {x: v for x, v in per_letter.get("label", {}).items() if v is not None}
    return out


def _relabelled(record: dict[str, Any]) -> dict[str, Any]:
    """`record` with its letter keys and picks renamed to the labels the prompt showed (a factor
    run's `labels` level); a run without factors shows its letters and keeps them."""
    labels = record.pop("_labels")
    if not labels or all(k == v for k, v in labels.items()):
        return record

    def rename(per_letter: Mapping[str, Any] | None) -> dict[str, Any] | None:
        return None if per_letter is None else {labels.get(x, x): v for x, v in per_letter.items()}

    record["options"] = rename(record["options"])
    record["probabilities"] = rename(record["probabilities"])
    for reading in record["readings"].values():
        if reading.get("letter") is not None:
            reading["letter"] = labels.get(reading["letter"], reading["letter"])
        if "probabilities" in reading:
            reading["probabilities"] = rename(reading["probabilities"])
    return record


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


def flat_table(run: StoredRun) -> pd.DataFrame:
    """The records as one flat table (csv, parquet): nested keys joined by dots, leftover lists
    and objects as JSON text (see the module docstring)."""
    frame = pd.json_normalize(list(records(run)), sep=".")
    for column in frame.columns:
        if frame[column].map(lambda v: isinstance(v, (list, dict))).any():
            frame[column] = frame[column].map(
                lambda v: json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v)
    return frame


def export_bytes(run: StoredRun, fmt: str) -> tuple[bytes, int]:
    """The run exported in `fmt` (one of `FORMATS`) and how many prompts it holds."""
    if fmt == "jsonl":
        stream = io.StringIO()
        n = write_jsonl(run, stream)
        return stream.getvalue().encode("utf-8"), n
    frame = flat_table(run)
    if fmt == "csv":
        # no cell a spreadsheet runs (an option `=cmd|…`); every text quoted: a prompt may hold a
        # bare carriage return, which unquoted ends a row
        frame = frame.map(lambda v: spreadsheet_cell(v) if isinstance(v, str) else v)
        return frame.to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC).encode("utf-8"), len(frame)
    if fmt == "parquet":
        sink = pa.BufferOutputStream()
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), sink)
        return sink.getvalue().to_pybytes(), len(frame)
    raise ProbeInputError(f"--format: expected one of {list(FORMATS)}, got {fmt!r}")
