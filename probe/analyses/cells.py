"""A run's `metrics.json` as a table's cells: a column's value with its 95% interval, or `–`
marked with why (the sweep's tables, `probe runs`, the steering table)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe.benches.task import Column, Task
from probe.metrics.core import get_path
from probe.viz.markdown import Footnotes

NOT_COMPUTED = "not computed for this run: its condition was not run (`bench.conditions`), or the metric does not apply"
UNDEFINED = "undefined for this run's items (its report.md says why)"



def metric_cell(task: Task, metrics: Mapping[str, Any], column: Column, notes: Footnotes | None = None) -> str:
    """A column of a run's `metrics.json` as `value [lo, hi]`, `–` when absent or undefined —
    with `notes`, a `–` carries the mark of why (the column's own reason where it has one)."""
    tree, ci_tree = task.scoring.headline(metrics)
    text = column.cell(metrics) if column.cell is not None else _value_text(tree, ci_tree, column.path)
    if text != "–" or notes is None:
        return text
    head, _, leaf = column.path.rpartition(".")
    node = get_path(tree, head) if head else tree
    computed = isinstance(node, Mapping) and leaf in node
    if column.cell is not None or computed:
        return notes.gap(column.undefined or UNDEFINED)
    return notes.gap(NOT_COMPUTED)


def _value_text(tree: Any, ci_tree: Any, path: str) -> str:
    value, ci = get_path(tree, path), get_path(ci_tree, path)
    if not is_number(value):  # absent, or NaN (undefined for this run, e.g. no low-resource group)
        return "–"
    if ci and is_number(ci[0]):
        return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
    return f"{value:.3f}"


def is_number(v: object) -> bool:
    """A metric value that is a finite-or-infinite number (not None, not NaN, not a dict)."""
    return isinstance(v, (int, float)) and v == v
