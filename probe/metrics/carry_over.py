"""Order effects beyond the letter: how much of a choice moves with the option shown just before
(docs/concepts/orders.md), from the stored letter log-probs of a design balanced for first-order
carry-over (all permutations, a Williams design).

Within a prompt group (one item under one condition and context, every ordering of its design),
with letters renormalised and each ordering centred, the letter-prior decomposition
(`probe.metrics.letters`) leaves the residual `e[r, j] = y[r, j] − a_j − c(o[r, j])`. The
carry-over effect b(p) of option p shifts the log-prob of whatever option sits right after it; fitted
by least squares beside the letter and content effects, its sum of squares `SS_carry` is the part
of the residual the preceding option explains. Pooled over
a condition's groups:

- `share`: `SS_carry / SS_total` (SS_total = letter + content + residual, as the letter split);
- `ratio`: `(SS_carry / df_carry) / ((SS_residual − SS_carry) / df_rest)`, the F ratio of adding
  the preceding option to the fit (df from the fits' ranks) — about 1 when the preceding option
  carries nothing beyond noise, above 1 when it does.

Both get percentile intervals from the item bootstrap. Under rotations every option always follows
the same one, so the carry-over is part of the content effect and is not estimated; with K < 3
the preceding option is the other option, likewise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from probe.metrics.core import percentile_ci, ratio, to_scalars, wsum
from probe.metrics.balance import position_balanced
from probe.metrics.letters import log_choice, members_of


@dataclass(frozen=True)
class CarrySums:
    """Per-item sums (items on the first axis) of a condition's carry-over balanced groups."""

    carry: np.ndarray
    """`[item]` Σ of SS_carry."""
    residual: np.ndarray
    """`[item]` Σ of the residual SS."""
    total: np.ndarray
    """`[item]` Σ of letter + content + residual SS."""
    df_carry: np.ndarray
    df_rest: np.ndarray
    n_groups: np.ndarray


def carry_balanced(rows: np.ndarray, k: int) -> bool:
    """Whether orderings `rows` `[m, k]` are position balanced and put every option immediately
    after every other equally often (K ≥ 3: with two options the predecessor is fixed by content)."""
    if k < 3 or not position_balanced(rows, k):
        return False
    after = np.zeros((k, k), dtype=np.int64)
    np.add.at(after, (rows[:, :-1], rows[:, 1:]), 1)
    off = after[~np.eye(k, dtype=bool)]
    return bool((off == off[0]).all() and off[0] > 0)


def carry_sums(lc: np.ndarray, order: np.ndarray, group: np.ndarray, item: np.ndarray, n_items: int) -> CarrySums:
    """`CarrySums` of the rows of carry-over balanced groups: `lc` `[row, K]` renormalised letter
    log-probs, `order` the option at each letter, `group`/`item` each row's group and item index.

    Per group, a least-squares fit after centring each ordering (which removes the ordering
    effects exactly): letter and content indicators (the base), then the preceding option's
    indicators added; SS_carry is the residual SS the latter remove, with their rank as df."""
    k = lc.shape[1]
    out = {name: np.zeros(n_items) for name in ("carry", "residual", "total", "df_carry", "df_rest", "n_groups")}
    local = np.unique(group, return_inverse=True)[1]
    for rows in members_of(local, int(local.max(initial=-1)) + 1):
        y, o, m = lc[rows], order[rows], len(rows)
        if not np.isfinite(y).all():
            continue
        base, full = _design(o, k)
        yc = (y - y.mean(axis=1, keepdims=True)).ravel()
        ss_base, rank_base = _fit(base, yc)
        ss_full, rank_full = _fit(full, yc)
        i = item[rows][0]
        out["carry"][i] += ss_base - ss_full
        out["residual"][i] += ss_base
        out["total"][i] += (yc ** 2).sum()
        out["df_carry"][i] += rank_full - rank_base
        out["df_rest"][i] += yc.size - m - rank_full
        out["n_groups"][i] += 1
    return CarrySums(**out)


def _design(order: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Row-centred indicator columns of one group's `[m, K]` table, flattened row-major: letter and
    content (the base), and those plus the option at the letter before (none at the first letter)."""
    m = order.shape[0]
    letter = np.broadcast_to(np.eye(k)[None, :, :], (m, k, k))
    content = np.eye(k)[order]
    before = np.zeros((m, k, k))
    before[:, 1:, :] = np.eye(k)[order[:, :-1]]
    cols = [x - x.mean(axis=1, keepdims=True) for x in (letter, content, before)]
    base = np.concatenate(cols[:2], axis=2).reshape(m * k, 2 * k)
    return base, np.concatenate([base, cols[2].reshape(m * k, k)], axis=1)


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[float, int]:
    """Residual SS and rank of the least-squares fit of `y` on `x`."""
    coef, _, rank, _ = np.linalg.lstsq(x, y, rcond=None)
    return float(((y - x @ coef) ** 2).sum()), int(rank)


def _evaluate(s: CarrySums, w: np.ndarray) -> dict[str, np.ndarray]:
    carry, rest = wsum(w, s.carry), wsum(w, s.residual) - wsum(w, s.carry)
    return {"share": ratio(carry, wsum(w, s.total)),
            "ratio": ratio(ratio(carry, wsum(w, s.df_carry)), ratio(rest, wsum(w, s.df_rest)))}


def carry_over(lp: np.ndarray, order: np.ndarray, group: np.ndarray, item: np.ndarray, n_items: int,
               temperature: float, boot: np.ndarray | None) -> tuple[dict[str, float], dict[str, list[float]]] | None:
    """The carry-over `share` and `ratio` of one condition's prompts (`lp` `[row, K]` letter
    log-probs, `order`, `group`, `item` per row) and their intervals over the item resamples `boot`;
    None when no group is carry-over balanced."""
    k = lp.shape[1]
    keep = np.zeros(len(group), dtype=bool)
    for rows in members_of(np.unique(group, return_inverse=True)[1], len(np.unique(group))):
        keep[rows] = carry_balanced(order[rows], k)
    if not keep.any():
        return None
    sums = carry_sums(log_choice(lp[keep], temperature), order[keep], group[keep], item[keep], n_items)
    point = to_scalars(_evaluate(sums, np.ones(n_items)))
    point["n_groups"] = int(sums.n_groups.sum())
    return point, (percentile_ci(_evaluate(sums, boot)) if boot is not None else {})
