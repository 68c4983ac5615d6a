"""The whose-answer metrics: a distribution over the 16 countries per question and condition, read
from each candidate answer's score (`probe.benches.blend.whose`), in DiSCo's terms.

Per prompt row, with `s_a` the score of candidate answer `a` (its continuation log-prob) and T
the temperature, the answer distribution is `p_a = softmax_a(s_a / T)` over the *distinct*
candidates (a shared answer is scored and counted once); greedy puts 1 on the first best. The
**credit rule**: a shared answer's mass is split equally among the countries whose top answer it
is, so `P(c) = p_{a(c)} / n_{a(c)}` and the 16 country masses sum to 1; the *answer mass* of a
country is `p_{a(c)}`, its answer's whole probability.

- `neutral`: the mean over questions of `P` under the neutral form; `KL` from uniform (nats),
  `gini`, and `spd` = mean share of the high-resource countries − mean share of the low-resource ones;
- `compliance`: under the cue naming country c, the answer mass of c (mean over questions;
  `by_country` and the mean over countries); `compliance_gain`: that minus c's answer mass under
  the neutral form;
- `stickiness`: the answer mass, under each cue whose country's answer differs, of the neutral
  form's argmax answer (mean over those cues, then over questions; NaN where every country shares
  that answer).

Everything is a ratio of per-question sums, so the 95% intervals resample questions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from probe.metrics.core import (
    Measured,
    bootstrap_weights,
    gini,
    kl_to_uniform,
    percentile_ci,
    ratio,
    to_scalars,
    wsum,
)


@dataclass(frozen=True)
class Masses:
    """`[prompt, country]` masses of one row each: `country` (the credit rule) and `answer` (whole)."""

    country: np.ndarray
    answer: np.ndarray


def masses(scores: np.ndarray, order: np.ndarray, temperature: float | None) -> Masses:
    """Country and answer masses from `[prompt, country]` scores and candidate indices (`order`:
    the candidate each country's letter shows; equal indices = one shared answer). `temperature`
    None: greedy (1 on the first best distinct answer)."""
    same = order[:, :, None] == order[:, None, :]  # [prompt, country, country']
    first = ~np.tril(same, k=-1).any(axis=2)  # the first country showing each candidate
    z = np.where(first, scores, -np.inf)
    if temperature is None:
        p = np.zeros_like(z, dtype=np.float64)
        p[np.arange(len(z)), np.argmax(z, axis=1)] = 1.0
    else:
        z = z / temperature
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
    answer = (same * p[:, None, :]).sum(axis=2)  # the candidate's mass, read at each of its countries
    return Masses(country=answer / same.sum(axis=2), answer=answer)


@dataclass(frozen=True)
class Sums:
    """Per-question sums the metrics are ratios of."""

    neutral: np.ndarray
    """`[question, country]` country masses of the neutral rows."""
    n_neutral: np.ndarray
    neutral_answer: np.ndarray
    """`[question, country]` answer masses of the neutral rows."""
    comply: np.ndarray
    """`[question, country]` the cued country's answer mass under its own cue."""
    n_comply: np.ndarray
    stick: np.ndarray
    """`[question]` neutral argmax answer's mass summed over cues of another answer."""
    n_stick: np.ndarray


def sums(m: Masses, item: np.ndarray, n_items: int, target: np.ndarray, order: np.ndarray) -> Sums:
    """Per-question sums; `target` is the cued country's column (−1: neutral)."""
    k = m.country.shape[1]
    neutral_rows = target < 0
    out = {name: np.zeros((n_items, k)) for name in ("neutral", "n_neutral", "neutral_answer", "comply", "n_comply")}
    np.add.at(out["neutral"], item[neutral_rows], m.country[neutral_rows])
    np.add.at(out["neutral_answer"], item[neutral_rows], m.answer[neutral_rows])
    np.add.at(out["n_neutral"], item[neutral_rows], 1.0)
    cued = np.nonzero(~neutral_rows)[0]
    np.add.at(out["comply"], (item[cued], target[cued]), m.answer[cued, target[cued]])
    np.add.at(out["n_comply"], (item[cued], target[cued]), 1.0)
    top = np.argmax(ratio(out["neutral_answer"], out["n_neutral"]), axis=1)  # first best: a country showing it
    stick, n_stick = np.zeros(n_items), np.zeros(n_items)
    other = order[cued, target[cued]] != order[cued, top[item[cued]]]
    rows = cued[other]
    np.add.at(stick, item[rows], m.answer[rows, top[item[rows]]])
    np.add.at(n_stick, item[rows], 1.0)
    return Sums(out["neutral"], out["n_neutral"], out["neutral_answer"], out["comply"], out["n_comply"],
                stick, n_stick)


def evaluate(s: Sums, w: np.ndarray, countries: Sequence[str], high: Sequence[str],
             low: Sequence[str]) -> dict[str, Any]:
    """The metric tree for question weights `w` (`[n]` → point, `[B, n]` → replicates)."""
    shares = ratio(wsum(w, s.neutral), wsum(w, s.n_neutral))
    comply = ratio(wsum(w, s.comply), wsum(w, s.n_comply))
    gain = comply - ratio(wsum(w, s.neutral_answer), wsum(w, s.n_neutral))
    hi = [countries.index(c) for c in high if c in countries]
    lo = [countries.index(c) for c in low if c in countries]
    return {"neutral": {"shares": {c: shares[..., i] for i, c in enumerate(countries)}, "KL": kl_to_uniform(shares),
                        "gini": gini(shares), "spd": shares[..., hi].mean(axis=-1) - shares[..., lo].mean(axis=-1)},
            "compliance": {"mean": comply.mean(axis=-1),
                           "by_country": {c: comply[..., i] for i, c in enumerate(countries)}},
            "compliance_gain": {"mean": gain.mean(axis=-1)},
            "stickiness": ratio(wsum(w, s.stick), wsum(w, s.n_stick))}


@dataclass(frozen=True)
class Reading:
    """One run's scores in the shape the metrics read."""

    scores: np.ndarray
    """`[prompt, country]` candidate scores (each country's letter shows its answer)."""
    order: np.ndarray
    item: np.ndarray
    """`[prompt]` question index."""
    target: np.ndarray
    """`[prompt]` cued country's column; −1 for the neutral form."""
    n_items: int


def compute(r: Reading, countries: Sequence[str], groups: tuple[Sequence[str], Sequence[str]], temperature: float,
            n_boot: int, seed: int) -> Measured:
    """`expected` (at T), `greedy` and their question-bootstrap `ci95` (with their replicates)."""
    boot = bootstrap_weights(r.n_items, n_boot, seed) if n_boot > 0 else None
    out = Measured({"ci95": {}})
    for flavour, t in (("expected", temperature), ("greedy", None)):
        s = sums(masses(r.scores, r.order, t), r.item, r.n_items, r.target, r.order)
        out[flavour] = to_scalars(evaluate(s, np.ones(r.n_items), countries, *groups))
        if boot is not None:
            out.replicates[flavour] = evaluate(s, boot, countries, *groups)
            out["ci95"][flavour] = percentile_ci(out.replicates[flavour])
    return out
