"""Two checks of the letter decomposition on its own terms (`probe.metrics.letters`): how much
probability the letter moves, and whether the debiased distribution is signal or rotation noise.

The variance split reads log-probs, where an improbable letter (log p of −12 against −1) weighs
as much as a probable one; `mass_moved` reads probabilities: the mean total variation between
each prompt's letter distribution and its debiased one — the share of a prompt's choice that
the letter moves. `content_reliability` asks how much of the debiased content effects would
come back from other rotations: in a complete group (K rotations × K letters, a Latin square of
options) the content sum of squares holds the true content effects plus `(K − 1)σ²` of rotation
noise, and the residual estimates σ² on `(K − 1)(K − 2)` degrees of freedom, so
`1 − Σ residual / ((K − 2) Σ content)` is the share of the content variation that is not noise
(1: stable; near 0 or below: the debiased reading is noise).

Why not split the rotations into even and odd halves: half of the rotations does not balance
the letters (each half's content carries the letter effects with opposite signs), and removing
each group's letter effects first makes the halves correlate under pure noise (r ≈ 0.21 at K = 4,
measured) — the ANOVA form has neither problem.
"""

from __future__ import annotations

import numpy as np

RELIABLE = 0.5
"""Below this content reliability the report calls the debiased reading mostly noise."""


def mass_moved(log_choice: np.ndarray, debiased: np.ndarray) -> float:
    """Mean over prompts of `½ Σ_j |p_j − q_j|`: `log_choice [prompt, letter]` the renormalised
    letter log-probs (p = their exp), `debiased [prompt, letter]` the debiased distribution q.
    0: the letter moves nothing; 1: all of it. NaN without prompts."""
    if not len(log_choice):
        return float("nan")
    p = np.exp(log_choice)
    p = p / p.sum(axis=1, keepdims=True)
    return float(0.5 * np.abs(p - debiased).sum(axis=1).mean())


def content_reliability(content_ss: float, residual_ss: float, m: float) -> float:
    """`1 − residual / ((m − 2) · content)` over the complete groups' pooled sums of squares
    (`letters.split_sums`), `m` the orderings per group (K under rotations: the residual has
    `(m − 2)(K − 1)` degrees of freedom, the content noise `K − 1`): the share of the debiased
    content variation that ordering noise does not explain. NaN for m < 3 (no residual degrees
    of freedom) or no content variation."""
    if m < 3 or not content_ss > 0:
        return float("nan")
    return float(1 - residual_ss / ((m - 2) * content_ss))
