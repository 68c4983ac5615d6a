"""Is the country cue specific? Whether naming country X moves the model toward X rather than
toward the question's other countries (Durmus et al. warn that cross-national prompts may move
models toward a stereotype, not toward the named country).

Per question q with at least two cued countries and per cued country X of q, with `sim` the
similarity (`metrics.similarity`), `p_X` the model's distribution under the cue naming X and
`h_Y` country Y's answer shares, the placebo comparison

    spec(q, X) = sim(p_X, h_X) − mean_{Y≠X} sim(p_Y, h_X)

asks whether naming X brings the model closer to X's people than naming another of the
question's countries does: the same target X, another country named. A cue that moves the model
alike whatever it names gives exactly 0, so a generic pull (toward the question's mean answer, a
stereotype of "a foreign respondent") cannot pass for specificity.

The older contrast, kept as `relative_closeness` (`p_0` the distribution under `default`):

    rel(q, X) = [sim(p_X, h_X) − mean_{Y≠X} sim(p_X, h_Y)] − [sim(p_0, h_X) − mean_{Y≠X} sim(p_0, h_Y)]

is how much closer the cued model is to X than to the question's other countries, beyond where it
stood unprompted; a generic cue toward the centre makes central countries score above 0 on it, so
it is not a test of specificity. Per cued country: the mean over its questions; overall: the mean
over every (question, X) pair — ratios of sums over questions, so their intervals resample questions.
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
    """`[item, country]` spec(q, X), the placebo comparison (0 where not defined)."""
    present: np.ndarray
    """`[item, country]` 1 where spec(q, X) is defined."""
    relative: np.ndarray
    """`[item, country]` rel(q, X), the contrast with the other countries (0 where not defined)."""
    relative_present: np.ndarray


def cue_specificity(dists: Dists, human: Human, items: Sequence[str], countries: Sequence[str]) -> Specificity:
    """spec(q, X) for every country cued on a question with another cued country; rel(q, X) where
    the question also has `default`."""
    cidx = {c: k for k, c in enumerate(countries)}
    value = np.zeros((len(items), len(countries)))
    present, relative, rel_present = np.zeros_like(value), np.zeros_like(value), np.zeros_like(value)
    for ii, item in enumerate(items):
        shares = human[item]
        if len(shares) < 2:
            continue
        names = list(shares)
        h = np.stack([shares[c] for c in names])
        k = h.shape[1]
        cued = {xi: dists[(item, "cross_national", x)][:k] for xi, x in enumerate(names)
                if (item, "cross_national", x) in dists}
        sims = {xi: similarity(p, h) for xi, p in cued.items()}  # sims[y][x] = sim(p_y, h_x)
        base = dists.get((item, "default", None))
        s0 = None if base is None else similarity(base[:k], h)
        for xi, x in enumerate(names):
            if xi not in cued:
                continue
            others = [sims[y][xi] for y in cued if y != xi]
            if others:
                v = float(sims[xi][xi] - np.mean(others))
                # a cue that moves the model alike whatever it names gives 0 up to rounding: exactly 0
                value[ii, cidx[x]] = 0.0 if abs(v) <= 1e-12 else v
                present[ii, cidx[x]] = 1.0
            if s0 is not None:
                relative[ii, cidx[x]] = _contrast(sims[xi], xi) - _contrast(s0, xi)
                rel_present[ii, cidx[x]] = 1.0
    return Specificity(value=value, present=present, relative=relative, relative_present=rel_present)


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


def specificity_tests(m: Mapping[str, object], replicates: Mapping[str, object], min_questions: int
                      ) -> dict[str, dict[str, object]]:
    """`p.<reading>.cross_national.specificity.<country>`: per country cued on at least
    `min_questions` questions, the two-sided bootstrap p of its specificity against 0,
    `min(1, 2·min(P*(≤ 0), P*(≥ 0)))`, Holm-adjusted over those countries (a country called
    specific by chance among a hundred would otherwise be the rule). A cue that moves the model
    alike whatever it names has specificity exactly 0 in every resample: p = 1."""
    from probe.metrics.core import get_path
    from probe.metrics.format_inference import holm

    asked = get_path(m, "n_questions", "cross_national") or {}
    out: dict[str, dict[str, object]] = {}
    for block in ("expected", "debiased"):
        point = get_path(m, block, "cross_national", "specificity") or {}
        reps = get_path(replicates, block, "cross_national", "specificity") or {}
        names = [c for c in point if c in reps and asked.get(c, 0) >= min_questions]
        if not names:
            continue
        raw = []
        for c in names:
            r = np.asarray(reps[c], dtype=np.float64)
            r = r[~np.isnan(r)]
            raw.append(1.0 if not len(r) else min(1.0, 2 * min(float((r <= 0).mean()), float((r >= 0).mean()))))
        out[block] = {"cross_national": {"specificity": dict(zip(names, (float(v) for v in holm(np.array(raw)))))}}
    return out
