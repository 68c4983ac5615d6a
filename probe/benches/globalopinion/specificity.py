"""Is the country cue specific? Whether naming country X moves the model toward X rather than
toward the question's other countries (Durmus et al. warn that cross-national prompts may move
models toward a stereotype, not toward the named country).

Per question q with at least two countries and per cued country X of q, with `sim` the
similarity (`metrics.similarity`), `p_X` the model's distribution under the cue naming X,
`p_0` under `default` and `h_Y` country Y's answer shares:

    spec(q, X) = [sim(p_X, h_X) − mean_{Y≠X} sim(p_X, h_Y)] − [sim(p_0, h_X) − mean_{Y≠X} sim(p_0, h_Y)]

Above 0: the cue brought the model closer to X than to the others, beyond the closeness to X it
had unprompted. A question asked without `default` or with one country adds nothing. Per cued
country: the mean over its questions; overall: the mean over every (question, X) pair — both
ratios of sums over questions, so their intervals resample questions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from probe.benches.globalopinion.measures import similarity

Human = Mapping[str, Mapping[str, np.ndarray]]
Dists = Mapping[tuple[str, str, str | None], np.ndarray]
"""(item, condition, cued country) → the model's distribution over the item's options."""


@dataclass(frozen=True)
class Specificity:
    """Per (question, cued country) sums (first axis: the sorted items of `Sums`)."""

    value: np.ndarray
    """`[item, country]` spec(q, X) (0 where not defined)."""
    present: np.ndarray
    """`[item, country]` 1 where spec(q, X) is defined."""


def cue_specificity(dists: Dists, human: Human, items: Sequence[str], countries: Sequence[str]) -> Specificity:
    """spec(q, X) for every question with `default` and ≥ 2 countries and every country cued on it."""
    cidx = {c: k for k, c in enumerate(countries)}
    value = np.zeros((len(items), len(countries)))
    present = np.zeros_like(value)
    for ii, item in enumerate(items):
        shares = human[item]
        base = dists.get((item, "default", None))
        if base is None or len(shares) < 2:
            continue
        names = list(shares)
        h = np.stack([shares[c] for c in names])
        k = h.shape[1]
        s0 = similarity(base[:k], h)
        for xi, x in enumerate(names):
            cue = dists.get((item, "cross_national", x))
            if cue is None:
                continue
            s1 = similarity(cue[:k], h)
            value[ii, cidx[x]] = _contrast(s1, xi) - _contrast(s0, xi)
            present[ii, cidx[x]] = 1.0
    return Specificity(value=value, present=present)


def _contrast(sims: np.ndarray, x: int) -> float:
    """sims[x] − the mean of the other entries."""
    others = np.delete(sims, x)
    return float(sims[x] - others.mean())


def cue_matrix(dists: Dists, human: Human) -> dict[str, dict[str, dict[str, float]]]:
    """The cue × country similarity matrix: for each cued country X and each country Y asked with it
    on some question, the mean over those questions of sim(p_cue X, h_Y) (`similarity`) and their
    number (`questions`). Point values of one reading; the diagonal is each cue's own similarity."""
    sums: dict[str, dict[str, list[float]]] = {}
    for (item, cond, x), dist in dists.items():
        if cond != "cross_national" or x is None:
            continue
        shares = human[item]
        k = len(next(iter(shares.values())))
        row = sums.setdefault(x, {})
        for y, h in shares.items():
            row.setdefault(y, []).append(float(similarity(dist[:k], np.asarray(h))))
    return {"similarity": {x: {y: float(np.mean(v)) for y, v in sorted(row.items())} for x, row in sorted(sums.items())},
            "questions": {x: {y: len(v) for y, v in sorted(row.items())} for x, row in sorted(sums.items())}}
