"""Whether a prompt group's orderings balance the options across the letters: the condition
for the letter prior's closed form (`probe.metrics.letters`) and the carry-over decomposition
(`probe.metrics.carry_over`), read from the stored `order` column alone."""

from __future__ import annotations

import numpy as np

__all__ = ["position_balanced"]


def position_balanced(rows: np.ndarray, k: int) -> bool:
    """Whether orderings `rows` `[n, k]` (each a permutation of 0..k-1) show every option equally
    often at every letter: the K cyclic rotations (once each), all K! permutations, a Williams
    design ((n / k) times each) — the designs whose letter and content effects are orthogonal."""
    n = rows.shape[0]
    if n == 0 or n % k or not (np.sort(rows, axis=1) == np.arange(k)[None, :]).all():
        return False
    if n == k:  # the Latin-square case, read as it always was
        return bool((np.sort(rows, axis=0) == np.arange(k)[:, None]).all())
    counts = np.zeros((k, k), dtype=np.int64)
    np.add.at(counts, (rows, np.broadcast_to(np.arange(k), rows.shape)), 1)
    return bool((counts == n // k).all())
