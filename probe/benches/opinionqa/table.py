"""probe's survey table (`bench.format=table`): any survey of OpinionQA's shape, as a file.

One row per (question, group): a JSON Lines file (`.jsonl`, one object a line) or a CSV file
(`.csv`, list and object cells written as JSON). Fields:

| field | required | what |
|---|---|---|
| `question_id` | yes | the question's id (rows of one id repeat the question's own fields alike) |
| `question` | yes | the question text, verbatim |
| `options` | yes | its options in survey order (a JSON list of strings) |
| `positions` | no | per option its ordinal position, `null` for a non-answer; absent: no W1 for the question |
| `refusal` | no | the options that are non-answers (a JSON list; default: those whose position is `null`) |
| `attribute` | yes | the attribute the group belongs to (`NONE`: the whole panel) |
| `group` | yes | the group |
| `counts` | one of | `{option: weighted count}` (absent options 0) |
| `shares` | one of | `{option: share}`, with `n` (effective size) when known |
| `n` | no | with `shares`: the group's effective n (without it the survey error is unknown) |
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from probe.benches.opinionqa.survey import OVERALL, Question, by_option, count_value
from probe.errors import ProbeInputError, bounded_repr
from probe.files import utf8_error, wide_csv_fields

REQUIRED = ("question_id", "question", "options", "attribute", "group")
JSON_CELLS = ("options", "positions", "refusal", "counts", "shares", "n")
"""CSV cells parsed as JSON (a CSV cell is text; these hold lists, objects and numbers)."""


def read_table(path: Path, attributes: tuple[str, ...]) -> list[Question]:
    """The questions of a survey table, with the groups of `attributes` (empty: all) and the whole panel."""
    if not path.is_file():
        raise ProbeInputError(f"{path}: missing (bench.format=table reads a .csv or .jsonl survey table)")
    shape: dict[str, tuple[str, tuple[str, ...], tuple[bool, ...], tuple[float, ...] | None]] = {}
    counts: dict[str, list[tuple[str, str, tuple[float, ...]]]] = {}
    sized: dict[str, bool] = {}
    seen_attributes: list[str] = []
    for where, row in _rows(path):
        key = _text(row, "question_id", where)
        where = f"{where} (question_id {key!r})"
        this = _shape(row, where)
        if shape.setdefault(key, this) != this:
            raise ProbeInputError(f"{where}: question, options, positions or refusal differ from the question's "
                                  "first row")
        attribute, group = _text(row, "attribute", where), _text(row, "group", where)
        values, known = _counts(row, this[1], f"{where}, group {group!r}")
        if any((a, g) == (attribute, group) for a, g, _ in counts.setdefault(key, [])):
            raise ProbeInputError(f"{where}: group {group!r} of attribute {attribute!r} given twice")
        counts[key].append((attribute, group, values))
        sized[key] = sized.get(key, True) and known
        if attribute not in seen_attributes and attribute != OVERALL:
            seen_attributes.append(attribute)
    if not shape:
        raise ProbeInputError(f"{path}: no rows")
    unknown = [a for a in attributes if a not in seen_attributes]
    if unknown:
        raise ProbeInputError(f"bench.attributes: {unknown} not in {path} (it has {seen_attributes})")
    keep = set(attributes or seen_attributes) | {OVERALL}
    return [Question(key=k, text=t, options=o, refusal=r, positions=p, sized=sized[k],
                     counts=tuple(c for c in counts[k] if c[0] in keep)) for k, (t, o, r, p) in shape.items()]


def _rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, row) per data row; CSV cells of `JSON_CELLS` parsed as JSON."""
    try:
        if path.suffix == ".jsonl":
            with path.open(encoding="utf-8") as f:
                for n, line in enumerate(f, start=1):
                    if line.strip():
                        yield f"{path}: line {n}", _object(line, f"{path}: line {n}")
        elif path.suffix == ".csv":
            with wide_csv_fields(), path.open(encoding="utf-8-sig", newline="") as f:
                for n, row in enumerate(csv.DictReader(f, strict=True), start=1):
                    yield f"{path}: row {n}", {k: _cell(k, v, f"{path}: row {n}") for k, v in row.items()
                                               if v not in (None, "")}
        else:
            raise ProbeInputError(f"{path}: expected a .csv or .jsonl survey table, got {path.suffix or 'no suffix'!r}")
    except UnicodeDecodeError:
        raise ProbeInputError(f"{path}: not valid UTF-8 ({utf8_error(path)})") from None
    except csv.Error as e:
        raise ProbeInputError(f"{path}: malformed CSV ({e})") from None


def _object(line: str, where: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as e:
        raise ProbeInputError(f"{where}: not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise ProbeInputError(f"{where}: expected a JSON object, got {bounded_repr(value)}")
    return value


def _cell(name: str, text: str, where: str) -> Any:
    if name not in JSON_CELLS:
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise ProbeInputError(f"{where}, field {name!r}: not valid JSON, got {bounded_repr(text)}") from None


def _text(row: dict[str, Any], name: str, where: str) -> str:
    value = row.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ProbeInputError(f"{where}, field {name!r}: expected a non-empty string, got {bounded_repr(value)}")
    return value


def _shape(row: dict[str, Any], where: str) -> tuple[str, tuple[str, ...], tuple[bool, ...], tuple[float, ...] | None]:
    """(question verbatim, options, refusal flags, positions or None) of one row."""
    missing = [c for c in REQUIRED if c not in row]
    if missing:
        raise ProbeInputError(f"{where}: missing the fields {missing} (required: {list(REQUIRED)})")
    options = row["options"]
    if (not isinstance(options, list) or len(options) < 2 or not all(isinstance(o, str) and o for o in options)
            or len(set(options)) != len(options)):
        raise ProbeInputError(f"{where}, field 'options': expected a list of ≥ 2 distinct option texts, "
                              f"got {bounded_repr(options)}")
    positions = row.get("positions")
    if positions is not None and (not isinstance(positions, list) or len(positions) != len(options) or not all(
            p is None or (isinstance(p, (int, float)) and not isinstance(p, bool) and math.isfinite(p)) for p in positions)):
        raise ProbeInputError(f"{where}, field 'positions': expected {len(options)} numbers or nulls (one per "
                              f"option), got {bounded_repr(positions)}")
    refusal = row.get("refusal")
    if refusal is None:
        flags = tuple(positions is not None and p is None for p in positions or options)
    elif isinstance(refusal, list) and all(r in options for r in refusal):
        flags = tuple(o in refusal for o in options)
    else:
        raise ProbeInputError(f"{where}, field 'refusal': expected a list of the question's options, "
                              f"got {bounded_repr(refusal)}")
    if sum(not f for f in flags) < 2:
        raise ProbeInputError(f"{where}: fewer than 2 options left once the non-answers are set aside")
    if positions is not None and any((p is None) != f for p, f in zip(positions, flags)):
        raise ProbeInputError(f"{where}, field 'positions': a position is null exactly at the non-answers, "
                              f"got {bounded_repr(positions)} for refusal {bounded_repr(refusal)}")
    pos = None if positions is None else tuple(math.nan if p is None else float(p) for p in positions)
    return _text(row, "question", where), tuple(options), flags, pos


def _counts(row: dict[str, Any], options: tuple[str, ...], where: str) -> tuple[tuple[float, ...], bool]:
    """The group's weighted counts per option and whether they are counts of a known size."""
    if ("counts" in row) == ("shares" in row):
        raise ProbeInputError(f"{where}: give exactly one of the fields 'counts' and 'shares'")
    if "counts" in row:
        return by_option(row["counts"], options, f"{where}, field 'counts'"), True
    shares = by_option(row["shares"], options, f"{where}, field 'shares'")
    total = math.fsum(shares)
    if total <= 0:
        raise ProbeInputError(f"{where}, field 'shares': all zero")
    if "n" not in row:
        return tuple(s / total for s in shares), False
    n = count_value(row["n"], f"{where}, field 'n'")
    return tuple(s / total * n for s in shares), True
