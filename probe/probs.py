"""The choice distribution read from letter log-probs (docs/concepts/exact-distributions.md): the
quantity every metric and the run API start from, and the exposure-normalised group share (CSD)
read from it. Pure numpy, shared by the results API and the metrics.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

import numpy as np


def choice_probs(logprobs: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """`softmax(lp / T)` over the K letters: the choice distribution at temperature T.

    `logprobs` is `[prompt, letter]` full-vocabulary log-probs; renormalising over the letters
    conditions on the model answering with a valid letter. T → 0 is `greedy_onehot`.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}; use greedy_onehot for T=0")
    z = logprobs.astype(np.float64) / temperature
    z -= z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def greedy_onehot(logprobs: np.ndarray) -> np.ndarray:
    """One-hot of the argmax letter (first letter on ties), `[prompt, letter]`."""
    out = np.zeros(logprobs.shape, dtype=np.float64)
    np.put_along_axis(out, logprobs.argmax(axis=-1)[..., None], 1.0, axis=-1)
    return out


def unscorable(logprobs: np.ndarray) -> np.ndarray:
    """`[prompt]` mask of rows whose letter log-probs give no choice distribution.

    A NaN or +inf anywhere is a broken forward pass (a non-finite weight, steering vector or
    overflowing activation): log-probs are never > 0. A −inf at *some* letters is legitimate (a
    letter of probability 0 in float32) and kept; −inf at *every* letter is letter mass 0, where
    `softmax(lp / T)` over the letters is 0/0 and the greedy pick would be an arbitrary first
    letter, so such a row is unscorable too.
    """
    lp = np.asarray(logprobs, dtype=np.float64)
    return np.isnan(lp).any(axis=-1) | np.isposinf(lp).any(axis=-1) | np.isneginf(lp).all(axis=-1)


def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """`num / den`, NaN where `den` is 0 (a category with no exposure in this (re)sample)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def group_sums(probs: np.ndarray, groups: np.ndarray, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per group of `names`: `sel` = the choice probability summed over every (prompt, letter)
    showing it, and `app` = the number of prompts showing it (float), from `[prompt, letter]`
    probabilities and the `[prompt, letter]` groups shown; the inputs of `exposure_shares`."""
    sel = np.array([probs[groups == c].sum() for c in names])
    app = np.array([(groups == c).any(axis=1).sum() for c in names], dtype=np.float64)
    return sel, app


def exposure_shares(sel: np.ndarray, shown: np.ndarray) -> np.ndarray:
    """The exposure-normalised group shares (CSD) on the last axis:
    `CSD(c) = (sel_c / app_c) / Σ_c' (sel_c' / app_c')`, `sel_c` the choice probability that went
    to group c, `app_c` its exposure (how often it was shown); leading axes broadcast (bootstrap
    replicates).

    A group never shown (`app_c = 0`) has a NaN share and is left out of the sum; a NaN
    selection of a shown group (a broken reading) makes every share NaN, as does a sum of 0.
    """
    rate = ratio(sel, shown)
    total = np.sum(np.where(shown > 0, rate, 0.0), axis=-1, keepdims=True)
    return ratio(rate, total)


K = TypeVar("K", bound=Hashable)


def source_option_means(cells: Sequence[K], order: np.ndarray, probs: np.ndarray) -> tuple[list[K], np.ndarray]:
    """Per distinct cell (first-seen order), the mean over its prompts of the probability each
    source option got: `order[prompt, position]` is the source option shown at that position
    (−1: padding), `probs[prompt, position]` its probability. `[cell, K_max]`, for the readings
    that compare a model's answer distribution with a survey's over the same options."""
    keys: dict[K, int] = {}
    index = np.array([keys.setdefault(c, len(keys)) for c in cells], dtype=np.int64)
    acc = np.zeros((len(keys), order.shape[1]))
    shown = order >= 0
    rows = np.broadcast_to(index[:, None], order.shape)
    np.add.at(acc, (rows[shown], order[shown]), probs[shown])
    n = np.bincount(index, minlength=len(keys)).astype(np.float64)
    return list(keys), acc / n[:, None]
