"""The shape of `metrics.json`: a tree of named values, and the headline a task reads from it.

Leaves are numbers (NaN where a metric is undefined), strings, booleans or None; inner nodes
are dicts by name and lists (a `[lo, hi]` interval, a per-layer series).
"""

from __future__ import annotations

from typing import NamedTuple, Union

MetricValue = Union[float, int, str, bool, None, list["MetricValue"], dict[str, "MetricValue"]]
"""One node of a metric tree: a leaf, a list of nodes or a dict of named nodes."""

MetricsTree = dict[str, MetricValue]
"""A metric tree by name: what a task's metrics hook returns and `metrics.json` holds."""


class Headline(NamedTuple):
    """The block of `metrics.json` a bench's tables and figures read (`Column.path`s index it),
    and the tree of its 95% intervals; None where the run has none."""

    values: MetricValue
    """Point estimates (`expected` of a forced-choice run, `metrics` of an open-answer one)."""
    ci95: MetricValue
    """`[lo, hi]` per leaf of `values` (None or `{}` without a bootstrap)."""
