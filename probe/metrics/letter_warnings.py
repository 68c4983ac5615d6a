"""When does the letter drive the answers? The warning criteria of the letter-prior analysis
(`probe.metrics.letters`), read from its blocks and the scored table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np

from probe.results.scores import ScoreTable
from probe.types import LETTERS


class _Options(Protocol):
    prior_ratio: float


def prior_threshold(k: int, ratio_: float) -> float:
    """The largest letter prior above which the letter is said to drive the answers:
    `ratio / K`, but never above halfway from uniform to certainty, `(1 + 1/K) / 2` — so the
    criterion can fire at K = 2 (0.75) too."""
    return min(ratio_ / k, (1.0 + 1.0 / k) / 2.0)


def warnings_of(blocks: Mapping[str, Any], table: ScoreTable, conditions: np.ndarray, opts: _Options,
                picks_kind: str = "greedy") -> list[dict[str, Any]]:
    """Conditions where the letter drives the answer, with the reasons that fired:
    `letter_share` (the common letter effect explains more log-prob variance than the content),
    `prior` (the largest fitted prior exceeds `prior_threshold`), `pick_share` (more than that
    share of the greedy — or generated, `picks_kind` — picks land on one letter). The last needs
    no model, so it fires also where no prior could be estimated. Each names the letter, its
    prior and pick share, the variance shares and how many picks it took; `conditions` is
    `[prompt]` each prompt's condition label."""
    out = []
    k = table.logprobs.shape[1]
    limit = prior_threshold(k, opts.prior_ratio)
    picks = np.asarray(table.logprobs).argmax(axis=1)
    estimators = blocks.get("letter_prior_estimator") or {}
    for cond, shares in blocks["letter_pick_shares"].items():
        prior = blocks["letter_prior"].get(cond) or {}
        fitted = prior and (estimators.get(cond) or {}).get("prior_fit") != "pick_shares"
        split = blocks["letter_split"].get(cond) or {}
        letter = max(prior, key=prior.get) if prior else max(shares, key=shares.get)
        reasons = []
        if split and split["letter"] > split["content"]:
            reasons.append("letter_share")
        if fitted and prior[letter] > limit:
            reasons.append("prior")
        if not reasons:
            letter = max(shares, key=shares.get)
        if shares[letter] > limit:
            reasons.append("pick_share")
        if not reasons:
            continue
        mine = np.asarray(conditions) == cond
        out.append({"condition": cond, "letter": letter, "prior": prior.get(letter), "uniform": 1.0 / k,
                    "threshold": limit, "pick_share": shares[letter],
                    "letter_share": split.get("letter"), "content_share": split.get("content"),
                    "mass_moved": ((blocks.get("letter_effect") or {}).get(cond) or {}).get("mass_moved"),
                    "greedy_picks": int((picks[mine] == LETTERS.index(letter)).sum()),
                    "n_prompts": int(mine.sum()), "picks": picks_kind, "reasons": reasons})
    return out
