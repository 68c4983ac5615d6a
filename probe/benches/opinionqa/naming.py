"""Which groups the model is closest to and furthest from — named only when the data say so.

No winner by chance: with G groups, the highest of G noisy similarities is high partly by
luck. The rule:

1. deviations `d_g = r_g − mean_g r` of each group's representativeness from the groups' mean;
2. their bootstrap replicates (questions resampled, and survey draws where the counts allow);
3. a test that all groups are equally close: `T = max_g |d_g|`, its null distribution the
   replicates' `max_g |d*_g − d_g|` (centred), p = (1 + #{those ≥ T}) / (1 + B);
4. simultaneous intervals `d_g ± c`, c the 95% quantile of that same maximum;
5. the closest group is named only when the test rejects at 5% and its simultaneous interval
   lies above 0 (the furthest: below 0); otherwise none is named, and the report says why.

The maximum is not studentized: dividing each deviation by its bootstrap standard error made
the test liberal with few questions (9.4% false alarms at 40 questions, 20% at 10, in planted
worlds), because the max picks the groups whose error is underestimated; the raw maximum holds
its level (`calibration.py`; numbers on the bench page). The price: one common interval width,
set by the noisiest group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

ALPHA = 0.05


def equal_values(point: np.ndarray, replicates: np.ndarray) -> tuple[float, np.ndarray]:
    """Bootstrap max test that G groups share one value, and the simultaneous 95% band `[2, G]`
    of their values (`θ̂_g ± c_v`, c_v the 95% quantile of `max_g |θ*_g − θ̂_g|`). The shape of a
    generic "no winner by chance" test (point `[G]`, replicates `[B, G]` → p, band); p is the
    raw-maximum test of the module docstring. NaN and a NaN band with fewer than 2 complete
    replicates or groups."""
    test = _max_test(np.asarray(point, np.float64), np.asarray(replicates, np.float64))
    if test is None:
        return float("nan"), np.full((2, np.size(point)), np.nan)
    return test.p, test.band


@dataclass(frozen=True)
class MaxTest:
    """The raw-maximum test's parts."""

    p: float
    deviation: np.ndarray
    """`[G]` d_g = θ̂_g − mean θ̂."""
    c_deviation: float
    """Half-width of the deviations' simultaneous 95% intervals."""
    band: np.ndarray
    """`[2, G]` simultaneous 95% band of the values."""


def _max_test(point: np.ndarray, reps: np.ndarray, alpha: float = ALPHA) -> MaxTest | None:
    reps = reps[np.isfinite(reps).all(axis=1)]
    if len(reps) < 10 or point.size < 2:
        return None
    d = point - point.mean()
    dr = reps - reps.mean(axis=1, keepdims=True)
    t_null = np.max(np.abs(dr - d), axis=1)
    p = float((1 + np.sum(t_null >= float(np.max(np.abs(d))) - 1e-12)) / (1 + len(t_null)))
    c_v = float(np.quantile(np.max(np.abs(reps - point), axis=1), 1 - alpha))
    return MaxTest(p=p, deviation=d, c_deviation=float(np.quantile(t_null, 1 - alpha)),
                   band=np.stack([point - c_v, point + c_v]))


def name_extremes(labels: Sequence[str], point: np.ndarray, reps: np.ndarray | None,
                  alpha: float = ALPHA) -> dict[str, Any]:
    """The test, the deviations' simultaneous intervals and the names (see the module docstring).
    `point`: `[G]`; `reps`: `[B, G]` replicates (None or fewer than 2 groups: nothing named)."""
    none = {"closest": None, "furthest": None, "p_value": None}
    if len(labels) < 2:
        return {**none, "why": "fewer than two groups with enough questions"}
    test = None if reps is None else _max_test(point, reps, alpha)
    if test is None:
        return {**none, "why": "no bootstrap (analysis.n_boot=0) or too few complete replicates"}
    d, c = test.deviation, test.c_deviation
    top, bottom = int(np.argmax(d)), int(np.argmin(d))
    rejects = test.p < alpha
    return {"p_value": test.p, "critical": c, "test": "max over groups of |deviation from the groups' mean|, bootstrap",
            "deviation": {g: {"value": float(d[i]), "simultaneous95": [float(d[i] - c), float(d[i] + c)]}
                          for i, g in enumerate(labels)},
            "sim95": {g: [float(test.band[0, i]), float(test.band[1, i])] for i, g in enumerate(labels)},
            "closest": labels[top] if rejects and d[top] - c > 0 else None,
            "furthest": labels[bottom] if rejects and d[bottom] + c < 0 else None,
            "why": None if rejects else "no group differs from the others beyond chance (test of equal closeness)"}


def flatten(tree: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """`{attribute: {group: v}}` → `{"attribute=group": v}`."""
    return {f"{a}={g}": v for a, by in tree.items() for g, v in by.items()}
