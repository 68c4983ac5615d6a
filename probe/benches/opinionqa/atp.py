"""OpinionQA's `human_resp/<wave>/` folder (the schema of tatsu-lab/opinions_qa), read and validated.

- `info.csv`: one row per question: `key`, `question`, `references` (the options as asked, a
  Python list literal), `option_mapping` (a dict literal, code → option), `option_ordinal` (a list
  literal: the ordinal position of the first len(option_ordinal) references; the references after
  them are the non-answers, `Refused`). Positions are kept as the file states them (`1.5` for a
  middle option such as "A mix of both").
- `metadata.csv` (optional; some waves lack it): `key` (an attribute) and `options` (a list
  literal of its groups). Groups a data file has beyond these (respondents who refused the
  demographic question) are left out.
- `<ATTRIBUTE>_data.json`: question key → `{"MC_options": [...], "question_text": str, group:
  {option: weighted count}}`. `MC_options` is not read: in the published files it splits options
  at their commas (`"Yes, likely"` → `"Yes"`, `"likely"`) while the counts use the whole option,
  so the counts are checked against info.csv's `references`.
- `NONE_data.json`: the whole panel, the sum over every group entry it holds.

Every literal is read with `ast.literal_eval` only. Errors name the file, the key and the field.
"""

from __future__ import annotations

import ast
import csv
import json
import math
from pathlib import Path
from typing import Any

from probe.benches.opinionqa.survey import OVERALL, Question, by_option
from probe.errors import ProbeInputError, bounded_repr
from probe.files import utf8_error, wide_csv_fields

INFO_COLUMNS = ("key", "question", "references", "option_mapping", "option_ordinal")
DATA_SUFFIX = "_data.json"


def read_folder(folder: Path, attributes: tuple[str, ...]) -> tuple[list[Question], list[Path]]:
    """Every question of `info.csv` with the counts of `attributes` (empty: those metadata.csv
    lists, else every data file) and of the whole panel; and the files read, in the order read."""
    if not folder.is_dir():
        raise ProbeInputError(f"{folder}: not a folder (bench.path names one human_resp/<wave>/ folder of OpinionQA)")
    info = folder / "info.csv"
    if not info.is_file():
        raise ProbeInputError(f"{info}: missing (an OpinionQA wave folder holds info.csv, metadata.csv, "
                              "<ATTRIBUTE>_data.json and NONE_data.json)")
    questions = _info(info)
    groups = _metadata(folder / "metadata.csv")
    files = {p.name[:-len(DATA_SUFFIX)]: p for p in sorted(folder.glob(f"*{DATA_SUFFIX}"))}
    if OVERALL not in files:
        raise ProbeInputError(f"{folder / (OVERALL + DATA_SUFFIX)}: missing (the whole panel's counts)")
    known = [a for a in files if a != OVERALL and (groups is None or a in groups)]
    unknown = [a for a in attributes if a not in known]
    if unknown:
        raise ProbeInputError(f"bench.attributes: {unknown} not in {folder} (it has {known})")
    counts: dict[str, list[tuple[str, str, tuple[float, ...]]]] = {k: [] for k in questions}
    read = [info, *([folder / "metadata.csv"] if groups is not None else [])]
    for attribute in (*(attributes or tuple(known)), OVERALL):
        read.append(files[attribute])
        wanted = None if groups is None or attribute == OVERALL else groups[attribute]
        for key, group, values in _data(files[attribute], questions, wanted):
            counts[key].append((attribute, group, values))
    return [Question(key=k, text=q.text, options=q.options, refusal=q.refusal, positions=q.positions,
                     counts=_whole_panel(counts[k])) for k, q in questions.items()], read


def _whole_panel(rows: list[tuple[str, str, tuple[float, ...]]]) -> tuple[tuple[str, str, tuple[float, ...]], ...]:
    """The groups' rows, then one `OVERALL` row: the sum of NONE_data.json's entries."""
    panel = [v for a, _, v in rows if a == OVERALL]
    out = tuple(r for r in rows if r[0] != OVERALL)
    if panel:
        out += ((OVERALL, "Overall", tuple(math.fsum(c) for c in zip(*panel))),)
    return out


def _literal(text: str, where: str) -> Any:
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
        raise ProbeInputError(f"{where}: not a Python literal ({type(e).__name__}), got {bounded_repr(text)}") from None


def _rows(path: Path) -> list[dict[str, str]]:
    try:
        with wide_csv_fields(), path.open(encoding="utf-8-sig", newline="") as f:
            return list(csv.DictReader(f, strict=True))
    except UnicodeDecodeError:
        raise ProbeInputError(f"{path}: not valid UTF-8 ({utf8_error(path)})") from None
    except csv.Error as e:
        raise ProbeInputError(f"{path}: malformed CSV ({e})") from None


def _info(path: Path) -> dict[str, Question]:
    rows = _rows(path)
    missing = [c for c in INFO_COLUMNS if not rows or c not in rows[0]]
    if missing:
        raise ProbeInputError(f"{path}: expected the columns {list(INFO_COLUMNS)}, missing {missing}")
    out: dict[str, Question] = {}
    for n, row in enumerate(rows, start=1):
        key = row["key"].strip()
        where = f"{path}: row {n} (key {key!r})"
        if not key or key in out:
            raise ProbeInputError(f"{where}, field 'key': {'empty' if not key else 'given twice'}")
        out[key] = _question(row, key, where)
    if not out:
        raise ProbeInputError(f"{path}: no questions")
    return out


def _question(row: dict[str, str], key: str, where: str) -> Question:
    refs = _literal(row["references"], f"{where}, field 'references'")
    if not isinstance(refs, list) or not all(isinstance(r, str) and r for r in refs) or len(set(refs)) != len(refs):
        raise ProbeInputError(f"{where}, field 'references': expected a list of distinct option texts, "
                              f"got {bounded_repr(refs)}")
    ordinal = _literal(row["option_ordinal"], f"{where}, field 'option_ordinal'")
    if (not isinstance(ordinal, list) or not 2 <= len(ordinal) <= len(refs)
            or not all(isinstance(p, (int, float)) and not isinstance(p, bool) and math.isfinite(p) for p in ordinal)):
        raise ProbeInputError(f"{where}, field 'option_ordinal': expected 2 to {len(refs)} finite numbers (one per "
                              f"answer option; the rest of 'references' are non-answers), got {bounded_repr(ordinal)}")
    mapping = _literal(row["option_mapping"], f"{where}, field 'option_mapping'")
    if not isinstance(mapping, dict) or sorted(map(str, mapping.values())) != sorted(refs):
        raise ProbeInputError(f"{where}, field 'option_mapping': expected code → option for exactly the references "
                              f"{bounded_repr(refs)}, got {bounded_repr(mapping)}")
    if not row["question"].strip():
        raise ProbeInputError(f"{where}, field 'question': empty")
    k = len(ordinal)
    return Question(key=key, text=row["question"], options=tuple(refs),
                    refusal=tuple(i >= k for i in range(len(refs))),
                    positions=tuple(float(p) for p in ordinal) + (math.nan,) * (len(refs) - k), counts=())


def _metadata(path: Path) -> dict[str, tuple[str, ...]] | None:
    """attribute → its groups (None: the wave has no metadata.csv)."""
    if not path.is_file():
        return None
    rows = _rows(path)
    if rows and ("key" not in rows[0] or "options" not in rows[0]):
        raise ProbeInputError(f"{path}: expected the columns ['key', 'options'], got {list(rows[0])}")
    out: dict[str, tuple[str, ...]] = {}
    for n, row in enumerate(rows, start=1):
        where = f"{path}: row {n} (key {row['key']!r}), field 'options'"
        groups = _literal(row["options"], where)
        if not isinstance(groups, list) or not groups or not all(isinstance(g, str) and g for g in groups):
            raise ProbeInputError(f"{where}: expected a non-empty list of group names, got {bounded_repr(groups)}")
        out[row["key"].strip()] = tuple(groups)
    return out


def _data(path: Path, questions: dict[str, Question], wanted: tuple[str, ...] | None
          ) -> list[tuple[str, str, tuple[float, ...]]]:
    """(question key, group, counts) of one data file, the groups in `wanted` order (None: file order)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ProbeInputError(f"{path}: not valid UTF-8 ({utf8_error(path)})") from None
    except json.JSONDecodeError as e:
        raise ProbeInputError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(raw, dict):
        raise ProbeInputError(f"{path}: expected an object of question key → entry, got {type(raw).__name__}")
    out = []
    for key, entry in raw.items():
        if key not in questions:
            raise ProbeInputError(f"{path}: key {key!r}: not a question of info.csv")
        if not isinstance(entry, dict) or not isinstance(entry.get("question_text", ""), str):
            raise ProbeInputError(f"{path}: key {key!r}: expected an object with question_text and group → counts, "
                                  f"got {bounded_repr(entry)}")
        # every group is checked, also those left out (a malformed file stops whatever is asked)
        groups = {g: by_option(v, questions[key].options, f"{path}: key {key!r}, group {g!r}")
                  for g, v in entry.items() if g not in ("MC_options", "question_text")}
        out += [(key, g, groups[g]) for g in (wanted if wanted is not None else tuple(groups)) if g in groups]
    return out
