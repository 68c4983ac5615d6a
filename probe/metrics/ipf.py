"""A log-linear model of one-hot choices, fitted by iterative proportional fitting.

Generated (or greedy) choices are counts with zeros, so the geometric mean of the letter-prior
decomposition is undefined. Instead fit, for prompts r and letters j,

    μ[r, j] = R_r · A_j · C_key[r, j]

(each prompt's total fixed to its weight, a letter factor A, a content factor C for the option
or label shown at j) by maximum likelihood: IPF matches the three margins in turn — prompt
totals, letter totals, content totals — and each step can only raise the likelihood. Zero
margins are handled by the boundary: a letter (or content) never chosen gets factor 0. The
letter prior is `A / Σ A`; a prompt's debiased distribution is `C[key[r]] / Σ_j C[key[r, j]]`.

Written here rather than taken from a library: statsmodels' GLM would fit one replicate at a
time, while this fits all bootstrap replicates at once (a leading axis on every array).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ChoiceFit:
    """Fitted factors, normalised to sum to 1 per replicate."""

    prior: np.ndarray
    """`[B, K]` letter prior A / Σ A."""
    content: np.ndarray
    """`[B, n_keys]` content factors C / Σ C."""
    iterations: int
    margin_error: float
    """Largest absolute gap between fitted and observed totals at the end (letter totals only
    when the letter factor was fitted)."""


def _scatter(values: np.ndarray, perm: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """`[B, P·K]` values summed by content key (`perm` sorts the flat cells by key)."""
    return np.add.reduceat(values[:, perm], starts, axis=1)


def fit_choices(counts: np.ndarray, weights: np.ndarray, key: np.ndarray, max_iter: int = 2000,
                tol: float = 1e-9, prior: np.ndarray | None = None) -> ChoiceFit:
    """Fit the model to `counts` `[P, K]` (one-hot choices), for each row of prompt weights
    `weights` `[B, P]` (1 = the data; bootstrap multiplicities for replicates).

    `key` `[P, K]` is the content index (0..n_keys−1, every index used) of the option at each
    letter. `prior` `[B, K]`, when given, holds the letter factor fixed (estimated elsewhere,
    `probe.metrics.pairfit`) and only the contents are fitted. Stops when every fitted margin is
    within `tol` (relative to the total) or at `max_iter`.
    """
    b, (p, k) = weights.shape[0], counts.shape
    flat = key.ravel()
    perm = np.argsort(flat, kind="stable")
    starts = np.nonzero(np.r_[True, np.diff(flat[perm]) != 0])[0]
    wn = weights[:, :, None] * counts[None]  # [B, P, K]
    letter_obs = wn.sum(axis=1)
    content_obs = _scatter(wn.reshape(b, -1), perm, starts)
    total = weights.sum(axis=1, keepdims=True)
    fixed = prior is not None
    a, c = (np.array(prior, dtype=np.float64) if fixed else np.ones((b, k))), np.ones((b, len(starts)))

    def fitted() -> np.ndarray:
        ac = a[:, None, :] * c[:, key]  # [B, P, K]
        rows = ac.sum(axis=-1, keepdims=True)
        return np.where(rows > 0, ac * (weights[:, :, None] / np.where(rows > 0, rows, 1.0)), 0.0)

    def step(factor: np.ndarray, obs: np.ndarray, fit: np.ndarray) -> np.ndarray:
        return factor * np.where(fit > 0, obs / np.where(fit > 0, fit, 1.0), 0.0)

    it, err = 0, np.inf
    for it in range(1, max_iter + 1):
        if not fixed:
            a = step(a, letter_obs, fitted().sum(axis=1))
        mu = fitted()
        c = step(c, content_obs, _scatter(mu.reshape(b, -1), perm, starts))
        mu = fitted()
        err = float(np.abs(_scatter(mu.reshape(b, -1), perm, starts) - content_obs).max(initial=0.0))
        if not fixed:
            err = max(err, float(np.abs(mu.sum(axis=1) - letter_obs).max(initial=0.0)))
        if err <= tol * float(total.max(initial=1.0)):
            break
        # keep the factors on a fixed scale: only their ratios are identified
        a = a / np.maximum(a.sum(axis=1, keepdims=True), 1e-300)
        c = c / np.maximum(c.max(axis=1, keepdims=True), 1e-300)
    return ChoiceFit(prior=a / a.sum(axis=1, keepdims=True), content=c / c.sum(axis=1, keepdims=True),
                     iterations=it, margin_error=err)
