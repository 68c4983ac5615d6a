"""The letter prior of one-hot choices, free of the content parameters: a pairwise conditional
likelihood over the orderings of each prompt group.

A group's orderings r each yield one pick. Under `P_r(letter j) = π_j q(o_rj) / Z_r` (π the
letter prior, q the group's content, `ℓ_r(o)` the letter showing option o in ordering r), take
two orderings r, r' that picked different options o ≠ o'. Conditional on the pair of picks being
{o, o'} in some order, the probability that r took o and r' took o' is

    π_ℓr(o) π_ℓr'(o') / (π_ℓr(o) π_ℓr'(o') + π_ℓr(o') π_ℓr'(o)) = σ(a · x),
    x = e_ℓr(o) + e_ℓr'(o') − e_ℓr(o') − e_ℓr'(o),   a = log π,

in which q and both normalisers cancel. Every such pair is a logistic observation with known
features, so maximising their product (a composite likelihood) estimates π consistently as
groups grow with K fixed. The joint maximum-likelihood fit of π and every group's q (IPF) does
not: with K picks and K − 1 free contents per group it is biased away from uniform (incidental
parameters; a true prior of 0.40 reads about 0.48 at K = 4).

The likelihood reads picks as *sampled*. Deterministic picks (greedy decoding) can be separable —
some direction of `a` wins every pair, e.g. each item locked onto a letter of its own and one
letter never picked — and then no maximum exists: the fit runs to the ridge and its π says
nothing. `separated` detects that with a small linear programme, so callers report the pick
shares instead.

Pairs are counted per (item, feature pattern), so bootstrap replicates over items are one matrix
product and Newton's method runs for all replicates at once — the reason it is written here
rather than with a GLM library, which would refit one replicate at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

RIDGE = 1e-6
"""`λ/2 ‖a‖²` added to the negative log-likelihood: it fixes the free constant of `a` (the pairs
only see differences) and keeps a letter that always loses finite (its π ≈ λ / n_pairs ≈ 0)."""


@dataclass(frozen=True)
class PairData:
    """Informative pairs of one condition, counted per item and feature pattern."""

    patterns: np.ndarray
    """`[U, K]` distinct feature vectors x (entries in {−2, …, 2})."""
    counts: np.ndarray
    """`[n_items, U]` how many pairs of each item have each pattern."""


def pair_data(picks: np.ndarray, order: np.ndarray, group: np.ndarray, item: np.ndarray,
              n_items: int) -> PairData:
    """The informative pairs of one-hot choices.

    `picks` `[P]` letter chosen per prompt, `order` `[P, K]` option shown at each letter, `group`
    `[P]` prompt group, `item` `[P]` item index (< n_items). Pairs are taken within a group, over
    orderings that picked different options; a pair whose features cancel (x = 0) says nothing.
    """
    k = order.shape[1]
    letter_of = np.argsort(order, axis=1)  # [P, option] → letter showing it
    picked = order[np.arange(len(picks)), picks]
    rows: list[np.ndarray] = []
    items: list[np.ndarray] = []
    perm = np.argsort(group, kind="stable")
    bounds = np.r_[0, np.nonzero(np.diff(group[perm]))[0] + 1, len(perm)]
    for s, e in zip(bounds[:-1], bounds[1:]):
        m = perm[s:e]
        if len(m) < 2:
            continue
        i, j = np.triu_indices(len(m), 1)
        r, r2 = m[i], m[j]
        keep = picked[r] != picked[r2]
        r, r2 = r[keep], r2[keep]
        x = np.zeros((len(r), k))
        np.add.at(x, (np.arange(len(r)), picks[r]), 1.0)
        np.add.at(x, (np.arange(len(r)), picks[r2]), 1.0)
        np.add.at(x, (np.arange(len(r)), letter_of[r, picked[r2]]), -1.0)
        np.add.at(x, (np.arange(len(r)), letter_of[r2, picked[r]]), -1.0)
        rows.append(x)
        items.append(item[r])
    x = np.concatenate(rows) if rows else np.zeros((0, k))
    it = np.concatenate(items) if items else np.zeros(0, np.int64)
    informative = np.abs(x).sum(axis=1) > 0
    x, it = x[informative], it[informative]
    patterns, inverse = np.unique(x, axis=0, return_inverse=True)
    counts = np.zeros((n_items, len(patterns)))
    np.add.at(counts, (it, inverse.reshape(-1)), 1.0)
    return PairData(patterns=patterns, counts=counts)


def fit_prior(data: PairData, weights: np.ndarray, max_iter: int = 100, tol: float = 1e-10) -> np.ndarray:
    """`[B, K]` letter prior π = softmax(a) maximising the weighted pairwise likelihood, for
    each row of item weights `weights` `[B, n_items]` (1 = the data; bootstrap multiplicities).

    Newton's method on the strictly convex `−Σ n_u log σ(a · x_u) + λ/2 ‖a‖²`, each step capped
    at 2 in max-norm (a letter that always loses moves toward −∞ by at most that per step).
    Uniform when no pair is informative.
    """
    x = data.patterns
    k = x.shape[1]
    n = weights @ data.counts  # [B, U]
    a = np.zeros((weights.shape[0], k))
    for _ in range(max_iter):
        z = a @ x.T
        s = 1.0 / (1.0 + np.exp(z))  # σ(−z): the gradient weight of each pattern
        grad = -(n * s) @ x + RIDGE * a
        h = np.einsum("bu,ui,uj->bij", n * s * (1.0 - s), x, x) + RIDGE * np.eye(k)
        step = np.linalg.solve(h, grad[..., None])[..., 0]
        scale = np.maximum(np.abs(step).max(axis=1, keepdims=True) / 2.0, 1.0)
        a = a - step / scale
        if float(np.abs(grad).max(initial=0.0)) < tol * max(float(n.sum(axis=1).max(initial=1.0)), 1.0):
            break
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def separated(data: PairData) -> bool:
    """Whether the pairs are (quasi-)separable: some `d` with `d · x_u ≥ 0` for every observed
    pattern and `> 0` for one, so the likelihood grows without bound along `d` and has no
    maximum. Solved as `max Σ_u d · x_u` over `−1 ≤ d ≤ 1`, `Σ d = 0`, `d · x_u ≥ 0`."""
    x = data.patterns[data.counts.sum(axis=0) > 0]
    if len(x) == 0:
        return False
    k = x.shape[1]
    res = linprog(-x.sum(axis=0), A_ub=-x, b_ub=np.zeros(len(x)), A_eq=np.ones((1, k)), b_eq=[0.0],
                  bounds=[(-1.0, 1.0)] * k, method="highs")
    assert res.status == 0, res.message  # d = 0 is always feasible and the box bounds it
    return bool(-res.fun > 1e-9)
