"""Two checks of a factor run beside its format-robustness analysis: whether each wording is a
letter reading at all (its letter mass), and how far the bench's published number moves over
the wordings compared with its own interval.

A variant whose median letter mass (the probability, over the full vocabulary, of the letters a
prompt shows) is below `analysis.min_letter_mass` (default 0.5) is a letter reading of a model that does not answer
with a letter there: it is flagged, listed with its reason and left out of the split and the
verdicts. Leaving a cell out breaks the balanced factorial, so the analysis then splits by the
remaining wordings as one factor (`design: one-way`). When no variant passes, every variant is
analysed and the block says so (`validity.all_below`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from probe.benches.forced_metrics import shown_mass
from probe.benches.task import Task
from probe.metrics.core import get_path
from probe.results.scores import ScoreTable

def variant_validity(table: ScoreTable, variant: np.ndarray, n_variants: int, letters_read: bool,
                     min_letter_mass: float) -> list[dict[str, Any]]:
    """Per variant index: median and mean letter mass, greedy validity rate (the argmax over the
    full vocabulary is a shown letter), and whether it is analysed (`valid`: its median mass is at
    least `min_letter_mass`, `analysis.min_letter_mass`; a `reason` when not). A run that read no letter (text scores only) has no mass: every variant is valid."""
    out = []
    mass, valid = shown_mass(table) if letters_read else (None, None)
    for v in range(n_variants):
        rows = variant == v
        if mass is None or not rows.any():
            out.append({"letter_mass_median": None, "letter_mass_mean": None, "greedy_valid_rate": None,
                        "valid": True, "reason": None})
            continue
        median = float(np.median(mass[rows]))
        ok = median >= min_letter_mass
        out.append({"letter_mass_median": median, "letter_mass_mean": float(mass[rows].mean()),
                    "greedy_valid_rate": float(valid[rows].mean()), "valid": ok,
                    "reason": None if ok else f"median letter mass {median:.3f} < {min_letter_mass:g}"})
    return out


def kept_variants(names: Sequence[str], checks: Sequence[Mapping[str, Any]]) -> tuple[list[str], bool]:
    """The variants the analysis reads, and whether every variant fell below the threshold (then
    all are read, and the report says the analysis is of letter readings that are not answers)."""
    kept = [n for n, c in zip(names, checks) if c["valid"]]
    return (kept, False) if kept else (list(names), True)


def headline_column(task: Task) -> tuple[str, str] | None:
    """`(label, path)` of the bench's headline number: its first plain pair column (the number
    `probe compare` leads with), else its first plain sweep column; None when it has none."""
    columns = (*task.presentation.pair_columns, *task.presentation.sweep_columns)
    first = next((c for c in columns if c.numeric), None)
    return (first.label, first.path) if first else None


def headline_spread(task: Task, per_variant: Sequence[Mapping[str, Any]],
                    valid: Sequence[bool]) -> dict[str, Any] | None:
    """The headline number of each analysed variant with its own 95% interval, and its spread over
    them (min, median, max, max − min, as FormatSpread reports it) beside the protocol's interval
    width: a spread wider than that interval means the wording moves the published number more
    than item sampling does. None when the bench has no plain headline column."""
    column = headline_column(task)
    if column is None:
        return None
    label, path = column
    values, intervals = [], []
    for rec, ok in zip(per_variant, valid):
        head = task.scoring.headline(rec)
        value = get_path(head.values, path)
        interval = get_path(head.ci95, path)
        rec_out = {"name": rec["name"], "value": value, "ci95": interval, "analysed": ok}
        intervals.append(rec_out)
        if ok and isinstance(value, (int, float)) and np.isfinite(value):
            values.append(float(value))
    protocol = intervals[0]["ci95"] if intervals else None
    width = float(protocol[1] - protocol[0]) if protocol and None not in protocol else None
    spread = {"min": min(values), "median": float(np.median(values)), "max": max(values),
              "range": max(values) - min(values)} if values else None
    return {"metric": label, "path": path, "per_variant": intervals, "spread": spread,
            "protocol_ci_width": width,
            "spread_exceeds_ci": None if spread is None or width is None else spread["range"] > width}
