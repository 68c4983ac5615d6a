"""The per-prompt sample browser (`samples.html`): one static, self-contained page over the
samples tables (`Run.samples()`) of one or more runs.

Each prompt becomes one record (its prompt text, the group and probability at each letter, the
pick, the full-vocabulary argmax token, the generation, every stored field and verdict); the
records travel gzip-compressed and base64-encoded inside the page (a full run's prompt texts are
tens of MB, and they repeat one another), decompressed by the browser's own
`DecompressionStream`, and every text reaches the page through `textContent`, never as markup:
prompts and generations are data, not HTML. The page needs no network and no other file.

Filters (bench, condition, variant, group, verdict, letter mass, the keys of a bench's JSON-object
fields — GlobalOpinionQA's countries —, and one per other low-cardinality text column) can be set in the URL fragment, e.g. `samples.html#condition=C0&group=Assam&mass_max=0.5` (`variant=35`: a factor run's variant
by index);
after filtering the page records `data-rows`, `data-matching` and `data-shown` on `<body>`.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from probe.bounded import loads_json
from probe.files import atomic_write_bytes
from probe.results.run import Run
from probe.types import Design
from probe.viz.samples_page import CSS, SCRIPT

PROMPT_TEXT = "text"
"""The prompts table's column of the prompt as the model saw it: shown, never a filter."""
MAX_FACET_VALUES = 50
"""A text column with more distinct values than this gets no filter of its own."""
MAX_VERDICT_LABELS = 30
"""A list-valued verdict with more distinct elements than this filters as `some` / `none`."""

_LETTER_PREFIXES = ("group_", "option_", "p_", "label_")
_SHOWN = {"prompt_id", "prompt", "letter_mass", "greedy_letter", "greedy_group", "greedy_valid", "argmax_token_id",
          "argmax_token", "argmax_prob", "generation", "parsed_letter", "parsed_group", "variant", "variant_name",
          "variant_levels"}
"""Samples columns the page shows in their own places (with the design's condition and target
columns); every other column is listed as a field."""


@dataclass(frozen=True)
class SampleSet:
    """The samples of one run, labelled for the page."""

    label: str
    """How the page names the run (its directory)."""
    bench: str
    model: str
    letters: tuple[str, ...]
    frame: pd.DataFrame
    """`Run.samples()`."""
    temperature: float = 1.0
    """The analysis temperature of the `p_L` columns."""
    facets: tuple[str, ...] = ()
    """Text columns to offer a filter for, when they have a few distinct values (the prompts
    table's: category, language, …)."""
    design: Design = Design()
    """Which prompts columns are the condition and the cue's target the page shows in their places."""


def sample_set(run: Run, label: str, design: Design) -> SampleSet:
    """A run's samples at its analysis temperature, named `label`; `design` is its bench's."""
    facets = tuple(f.name for f in run.prompts.schema if f.type == pa.string()
                   and f.name not in (PROMPT_TEXT, design.condition, design.target, *design.structured))
    temperature = run.manifest.temperature
    return SampleSet(label=label, bench=str(run.manifest.bench.name), model=str(run.manifest.model.name),
                     letters=run.manifest.letters, frame=run.samples(temperature),
                     temperature=temperature, facets=facets, design=design)


def write_samples_html(path: Path, title: str, sets: Sequence[SampleSet]) -> Path:
    """Write the sample browser over `sets` to `path` (never through a link); returns `path`."""
    atomic_write_bytes(Path(path), render_samples_html(title, sets).encode("utf-8"))
    return Path(path)


def render_samples_html(title: str, sets: Sequence[SampleSet]) -> str:
    """The complete page as a string (see the module docstring)."""
    records = [r for k, s in enumerate(sets) for r in _records(k, s)]
    facets = _facets(records, {c for s in sets for c in s.facets})
    meta = {"runs": [{"label": s.label, "bench": s.bench, "model": s.model, "letters": list(s.letters),
                      "temperature": s.temperature} for s in sets], "facets": facets}
    payload = gzip.compress(json.dumps(records, ensure_ascii=False, separators=(",", ":")).encode("utf-8"),
                            mtime=0)  # no timestamp: the same run gives the same page
    meta_json = json.dumps(meta, ensure_ascii=False).replace("<", "\\u003c")  # no `</script>` inside
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(title)}</title>\n<style>{CSS}</style>\n</head>\n"
            f'<body data-ready="0">\n<h1>{html.escape(title)}</h1>\n'
            f'<p id="status">Loading {len(records)} samples…</p>\n'
            f'<script id="meta" type="application/json">{meta_json}</script>\n'
            f'<script id="data" type="application/octet-stream">{base64.b64encode(payload).decode("ascii")}</script>\n'
            f"<script>{SCRIPT}</script>\n</body>\n</html>\n")


def _records(run: int, s: SampleSet) -> list[dict[str, Any]]:
    frame, letters = s.frame, s.letters
    has = set(frame.columns)
    groups = [f"group_{L}" for L in letters if f"group_{L}" in has]
    options = [f"option_{L}" for L in letters if f"option_{L}" in has]
    probs = [f"p_{L}" for L in letters if f"p_{L}" in has]
    labels = [f"label_{L}" for L in letters if f"label_{L}" in has]
    verdicts = [c for c in frame.columns if "." in c]
    cond, target = s.design.condition, s.design.target
    objects = [c for c in s.design.structured if c in has]
    fields = [c for c in frame.columns if c not in _SHOWN and c not in (cond, target, *objects) and c not in verdicts
              and not (c.startswith(_LETTER_PREFIXES) and c.split("_", 1)[1] in letters)]
    lists = _collapsed_lists(frame, verdicts)
    out = []
    for row in frame.to_dict("records"):
        pick = _clean(row.get("greedy_letter", row.get("parsed_letter")))
        shown = [_clean(row[c]) for c in labels] or None
        out.append({
            "vi": _clean(row.get("variant")), "var": _variant_label(row), "lv": _levels(row), "labels": shown,
            "obj": [[c, _object(row[c], c)] for c in objects if _clean(row[c]) is not None],
            "r": run, "id": int(row["prompt_id"]), "cond": _clean(row.get(cond) if cond else None),
            "target": _clean(row.get(target) if target else None), "prompt": _clean(row.get("prompt")),
            "groups": [_clean(row[c]) for c in groups] or None, "opts": [_clean(row[c]) for c in options] or None,
            "p": [_clean(row[c]) for c in probs] or None, "mass": _clean(row.get("letter_mass")),
            "pick": pick, "pg": _clean(row.get("greedy_group", row.get("parsed_group"))),
            "valid": _clean(row.get("greedy_valid")), "ai": _clean(row.get("argmax_token_id")),
            "at": _clean(row.get("argmax_token")), "ap": _clean(row.get("argmax_prob")),
            "gen": _clean(row.get("generation")),
            "f": [[c, _text(row[c])] for c in fields if _clean(row[c]) is not None],
            "v": [[c, _text(row[c])] for c in verdicts if _clean(row[c]) is not None],
            "vl": _verdict_labels(row, verdicts, lists, "parsed_letter" in has),
        })
    return out


def _variant_label(row: dict[str, Any]) -> str | None:
    """A factor run's variant as the page names it: index and name (its levels other than the
    protocol's, `labels=digits,cue=bare`)."""
    if _clean(row.get("variant_name")) is None:
        return None
    return f"{int(row['variant'])} · {row['variant_name']}"


def _levels(row: dict[str, Any]) -> str | None:
    """Every factor's level of a factor run's prompt, protocol ones included."""
    levels = row.get("variant_levels")
    return ", ".join(f"{k}={v}" for k, v in levels.items()) if isinstance(levels, dict) else None


def _object(value: Any, column: str) -> list[list[str]]:
    """A JSON-object field as `[key, value text]` rows (a list value's numbers at 3 decimals)."""
    try:
        parsed = loads_json(value, f"prompts.parquet, column {column!r}") if isinstance(value, str) else value
    except json.JSONDecodeError:
        return [["(not JSON)", str(value)]]
    if not isinstance(parsed, dict):
        return [["(value)", str(parsed)]]
    return [[str(k), " · ".join(f"{x:.3f}" if isinstance(x, float) else str(x) for x in v)
             if isinstance(v, list) else str(v)] for k, v in parsed.items()]


def _verdict_labels(row: dict[str, Any], verdicts: Sequence[str], collapsed: set[str], parsed: bool) -> list[str]:
    """What the verdict filter matches a row by: each verdict field's value (each element of a
    list; `none` for an empty one), a failed verdict, an argmax that is no letter, an answer that
    did not parse."""
    labels = []
    for c in verdicts:
        value = _clean(row[c])
        task, field = c.split(".", 1)
        if field == "judge_error":
            labels += [f"{task}: judge error"] if value is not None else []
        elif isinstance(value, list):
            labels += [f"{c}: none"] if not value else [f"{c}: some"] if c in collapsed else \
                [f"{c}: {v}" for v in value]
        elif isinstance(value, bool):
            labels.append(f"{c}: {'yes' if value else 'no'}")
        elif value is not None:
            labels.append(f"{c}: {value}")
    if _clean(row.get("greedy_valid")) is False:
        labels.append("argmax is not a letter")
    if parsed and _clean(row.get("parsed_letter")) is None:
        labels.append("answer did not parse")
    return labels


def _collapsed_lists(frame: pd.DataFrame, verdicts: Sequence[str]) -> set[str]:
    """List-valued verdict columns with too many distinct elements to filter by each."""
    out = set()
    for c in verdicts:
        values = {str(v) for cell in frame[c] if isinstance(cell, (list, np.ndarray)) for v in cell}
        if len(values) > MAX_VERDICT_LABELS:
            out.add(c)
    return out


def _facets(records: Sequence[dict[str, Any]], columns: set[str]) -> list[dict[str, Any]]:
    """The facet `columns` with two to `MAX_FACET_VALUES` distinct values: a filter each."""
    values: dict[str, set[str]] = {}
    for r in records:
        for name, value in r["f"]:
            if name in columns:
                values.setdefault(name, set()).add(value)
    return [{"name": n, "values": sorted(v)} for n, v in values.items() if 2 <= len(v) <= MAX_FACET_VALUES]


def _clean(value: Any) -> Any:
    """JSON-ready: numpy scalars and arrays to Python, NaN / NA to None."""
    if isinstance(value, np.ndarray):
        return [_clean(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _text(value: Any) -> str:
    value = _clean(value)
    if isinstance(value, list):
        return ", ".join(map(str, value)) if value else "(none)"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
