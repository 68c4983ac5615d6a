"""Paired-bootstrap differences between two runs of one benchmark, and Holm's adjustment.

Every run of a benchmark answers the same items, so the difference of a metric between two
runs is best judged by resampling the *same* items for both: per-item variation common to
both runs (hard items, one group's unusual item) cancels in the difference, and the interval
is narrower than two independent bootstraps would give, and right. The runs' own metric code
computes the replicates and returns them with the metrics (`probe.metrics.core.Measured`): each
bench resamples its units (items; LocQA's templates) in sorted-id order from one seed, so two
runs with the same units and seed see identical resamples, and `a − b` per replicate is the
paired bootstrap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from probe.errors import ProbeInputError
from probe.metrics.core import get_path


@dataclass(frozen=True)
class Difference:
    """`a − b` of one metric, its 95% bootstrap interval and two-sided bootstrap p-value."""

    metric: str
    block: str
    """The metrics.json block the metric is read from (`expected`, `greedy`, `metrics`)."""
    a: float
    b: float
    delta: float
    ci95: tuple[float, float]
    p_value: float
    """`min(1, 2 · min(P*(Δ ≤ 0), P*(Δ ≥ 0)))` over the replicates (NaN replicates left out)."""
    p_holm: float = float("nan")
    """Holm-adjusted over the metrics compared together."""


@dataclass(frozen=True)
class Comparison:
    """What was compared and how; `differences` in the order asked."""

    run_a: str
    run_b: str
    unit: str
    n_units: int
    n_boot: int
    seed: int
    temperature: float
    paired: bool
    differences: tuple[Difference, ...]
    orders: tuple[str, str] | None = None
    """The two runs' option-ordering designs (`bench.orders`) where they differ: the Δ then compares
    two readings of the same items, not one measurement twice. None: one design."""
    dropped: tuple[int, int] | None = None
    """`--common-items`: how many units of A and of B were left out (compared on those both have);
    None: the runs have the same units."""


def difference(path: str, block: str, ma: Mapping[str, Any], mb: Mapping[str, Any], ra: Mapping[str, Any],
               rb: Mapping[str, Any]) -> Difference:
    """`a − b` of the metric at `path` in `block` of two runs' metrics (`ma`, `mb`) with its 95%
    percentile interval and two-sided p-value over the per-replicate differences of their bootstrap
    replicates (`ra`, `rb`: `Measured.replicates` trees); a replicate NaN in either run is left out,
    and no replicate left gives NaN interval and p-value."""
    a, b = get_path(ma.get(block), path), get_path(mb.get(block), path)
    rep_a, rep_b = get_path(ra[block], path), get_path(rb[block], path)
    if a is None or b is None or rep_a is None or rep_b is None or isinstance(a, Mapping):
        raise ProbeInputError(f"metric {path!r} is not a number in block {block!r} of both runs")
    reps = np.asarray(rep_a, dtype=np.float64) - np.asarray(rep_b, dtype=np.float64)
    reps = reps[~np.isnan(reps)]
    if not len(reps):
        nan = float("nan")
        return Difference(path, block, float(a), float(b), float(a) - float(b), (nan, nan), nan)
    lo, hi = np.percentile(reps, [2.5, 97.5])
    p = min(1.0, 2.0 * min(float((reps <= 0).mean()), float((reps >= 0).mean())))
    return Difference(path, block, float(a), float(b), float(a) - float(b), (float(lo), float(hi)), p)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment (family-wise error over the metrics compared together);
    NaN p-values stay NaN and do not count."""
    order = sorted((p, i) for i, p in enumerate(pvalues) if not np.isnan(p))
    out = [float("nan")] * len(pvalues)
    running, m = 0.0, len(order)
    for rank, (p, i) in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out
