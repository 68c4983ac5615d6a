"""Numeric kernels of the format-robustness analysis, vectorised over leading (bootstrap) axes:
the balanced-ANOVA split of a group × factorial table and Kendall's W of rankings.

Conventions: the table's deviations `d` have shape `[..., G, L_1, …, L_m]` — the groups, then one
axis per factor with its levels — and sum to 0 over the group axis (shares of a closed
composition, centred at 1/G); a result that is 0/0 (no variation at all) is NaN.
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np

Term = tuple[int, ...]
"""A term of the split: the indices of the factors it crosses with the group (`()`: the group's
main effect, `(k,)`: group × factor k, longer: a higher-order interaction)."""


def terms(n_factors: int) -> list[Term]:
    """Every subset of the factors, by size then index: `()`, `(0,)`, …, `(0, 1)`, …"""
    return [t for r in range(n_factors + 1) for t in combinations(range(n_factors), r)]


def term_sums_of_squares(d: np.ndarray, n_factors: int) -> dict[Term, np.ndarray]:
    """Sum of squares of each group term, per group: `d [..., G, L_1..L_m]` → `{term: [..., G]}`.

    The effect of term T (group × the factors in T) is `d` with every factor in T centred and
    every other factor averaged out (its marginal mean, broadcast back over that factor's
    levels): in a balanced factorial these effects are orthogonal, so their sums of squares add
    up to `Σ d²`. Terms without the group — the factors' own main effects and interactions —
    are not returned: they average `d` over the groups, which is 0 when every variant's shares
    sum to 1 (the caller checks that), so they vanish identically.
    """
    axes = tuple(range(d.ndim - n_factors, d.ndim))
    out: dict[Term, np.ndarray] = {}
    for term in terms(n_factors):
        x = d
        for k, axis in enumerate(axes):
            mean = x.mean(axis=axis, keepdims=True)
            x = x - mean if k in term else mean
        copies = math.prod(d.shape[a] for k, a in enumerate(axes) if k not in term)  # cells each mean stands for
        out[term] = (x ** 2).sum(axis=axes) * copies
    total = (d ** 2).sum(axis=axes)
    parts = sum(out.values())
    assert np.allclose(parts, total, rtol=1e-9, atol=1e-12), "the terms of a balanced split add up to the total"
    return out


def average_ranks(scores: np.ndarray) -> np.ndarray:
    """Ranks 1..n of the last axis (ascending), ties sharing their average rank: `[..., n]` → `[..., n]`."""
    below = (scores[..., None, :] < scores[..., :, None]).sum(axis=-1)
    tied = (scores[..., None, :] == scores[..., :, None]).sum(axis=-1)  # itself included
    return below + (tied + 1) / 2


def kendall_w(scores: np.ndarray) -> np.ndarray:
    """Kendall's coefficient of concordance of m rankings of n objects: `[..., m, n]` → `[...]`.

    Each of the m raters (here: variants) ranks the n objects (groups) by score, ties at their
    average rank. With `R_j` the rank sum of object j,
    `W = 12 Σ_j (R_j − m(n+1)/2)² / (m²(n³ − n) − m Σ_ties (t³ − t))` — 1 when every rater ranks
    alike, near 0 when the rankings are unrelated. NaN with fewer than 2 raters or 2 objects, or
    when every rater ties every object (nothing is ranked).
    """
    m, n = scores.shape[-2], scores.shape[-1]
    ranks = average_ranks(scores)
    tied = (scores[..., None, :] == scores[..., :, None]).sum(axis=-1)
    rank_sums = ranks.sum(axis=-2)
    spread = ((rank_sums - m * (n + 1) / 2) ** 2).sum(axis=-1)
    ties = (tied ** 2 - 1).sum(axis=(-2, -1))  # Σ over a tie of size t of (t² − 1), t times: t³ − t
    denominator = m ** 2 * (n ** 3 - n) - m * ties
    if m < 2 or n < 2:
        return np.full(scores.shape[:-2], np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, 12 * spread / np.where(denominator > 0, denominator, 1), np.nan)
