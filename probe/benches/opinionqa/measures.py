"""How close a model's answer distribution is to a group's, and how noisy the group's own is.

On the last axis of their arguments (leading axes broadcast: survey draws).
"""

from __future__ import annotations

import numpy as np

from probe.metrics.core import jsd_bits


def representativeness(p: np.ndarray, h: np.ndarray, positions: np.ndarray, scale: str) -> np.ndarray:
    """`1 − W1(p, h) / (N − 1)` (Santurkar et al. 2023) on the options' ordinal `positions` as
    stated (unsorted, ties and midpoints such as 1.5 allowed): W1 = Σ_j |P(x ≤ x_j) − H(x ≤ x_j)|
    (x_{j+1} − x_j) over the sorted positions. `scale` "options": N − 1 with N options (the
    paper's formula); "range": max − min of the positions (the paper's code; NaN when all
    positions are equal). p and h each sum to 1 over these options."""
    order = np.argsort(positions, kind="stable")
    x = positions[order]
    gaps = np.diff(x)
    cdf = np.cumsum(p[..., order], axis=-1) - np.cumsum(h[..., order], axis=-1)
    w1 = (np.abs(cdf[..., :-1]) * gaps).sum(axis=-1)
    norm = len(positions) - 1 if scale == "options" else float(x[-1] - x[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 - w1 / norm if norm > 0 else np.full(np.shape(w1), np.nan)


def jsd_similarity(p: np.ndarray, h: np.ndarray) -> np.ndarray:
    """`1 − sqrt(JSD_2(p, h))` (base 2, in [0, 1]), GlobalOpinionQA's similarity."""
    return 1.0 - np.sqrt(np.clip(jsd_bits(p, h), 0.0, 1.0))


def redraw(counts: np.ndarray, n_draws: int, rng: np.random.Generator) -> np.ndarray:
    """`[n_draws, K]` shares of a new survey of the same group: multinomial draws of
    `round(Σ counts)` respondents (the weighted counts' sum as effective n, at least 1) from the
    observed shares. Counts are weighted, so this n is the panel's weighted size, not Kish's
    effective n (the individual weights are not in the files)."""
    n = max(int(round(float(counts.sum()))), 1)
    return rng.multinomial(n, counts / counts.sum(), size=n_draws) / n
