"""How close a model distribution is to a country's answer shares: the bench's similarity
measures, on the last axis of their arguments."""

from __future__ import annotations

import numpy as np

from probe.metrics.core import jsd_bits


def similarity(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """`1 − sqrt(JSD_2(p, q))` on the last axis (1: identical, 0: disjoint supports). Base-2
    logs: natural-log reproductions (scipy's `jensenshannon` default) give distances √ln 2 ≈ 0.83
    times these (higher similarities), so the two are not comparable."""
    return 1.0 - np.sqrt(np.clip(jsd_bits(p, q), 0.0, 1.0))


def ordinal_similarity(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """`1 − W1(p, q) / (K − 1)` on the last axis, the options in their order on the scale at
    positions 0 … K−1 (Santurkar et al. 2023): W1 is the sum of |CDF_p − CDF_q| over the first
    K − 1 positions, so the value is 1 for identical distributions and 0 for all mass at
    opposite ends. K = 1 gives 1."""
    k = p.shape[-1]
    w1 = np.abs(np.cumsum(p, axis=-1) - np.cumsum(q, axis=-1))[..., :-1].sum(axis=-1)
    return 1.0 - w1 / max(k - 1, 1)
