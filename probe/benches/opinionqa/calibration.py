"""The naming rule (`naming.py`) on planted worlds, through the same code.

A world: G groups, Q questions; group g's representativeness on question q is
`0.8 + a_q + shift·[g = 0] + e_qg` (a_q ~ N(0, 0.05²) shared by the groups, as a question's
difficulty is; e_qg ~ N(0, 0.03²)). Questions are resampled as the bench resamples them. With
`shift = 0` every group is equally close and any name is a false one; with `shift > 0` group 0
is closer and naming it is power. `scripts/calibrate_opinionqa.py` runs the full sweep (numbers on
the bench page); the test suite a small one.
"""

from __future__ import annotations

import numpy as np

from probe.benches.opinionqa.naming import name_extremes
from probe.metrics.core import bootstrap_weights


def one_world(rng: np.random.Generator, groups: int, questions: int, shift: float, n_boot: int) -> dict:
    """The naming of one planted world."""
    values = 0.8 + rng.normal(0, 0.05, (questions, 1)) + rng.normal(0, 0.03, (questions, groups))
    values[:, 0] += shift
    w = bootstrap_weights(questions, n_boot, int(rng.integers(1 << 31)))
    point = values.mean(axis=0)
    reps = (w @ values) / w.sum(axis=1, keepdims=True)
    return name_extremes([f"g{k}" for k in range(groups)], point, reps)


def false_naming_rate(worlds: int, shift: float, seed: int, groups: int = 6, questions: int = 40,
                      n_boot: int = 400) -> float:
    """shift 0: the share of worlds in which some group is named (closest or furthest);
    shift > 0: the share in which group 0 is named closest."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(worlds):
        named = one_world(rng, groups, questions, shift, n_boot)
        hits += (named["closest"] is not None or named["furthest"] is not None) if shift == 0 else (
            named["closest"] == "g0")
    return hits / worlds


def survey_coverage(worlds: int, respondents: int, seed: int, questions: int = 40, draws: int = 100,
                    n_boot: int = 400, noise: bool = True, items: bool = True, basic: bool = True) -> float:
    """Coverage of the 95% interval of a group's mean representativeness, questions resampled and
    the group's answers redrawn as the bench does (`measures.redraw`, replicate b reads draw
    b mod `draws`; `noise` False: questions only; `items` False: survey draws only, the interval
for these questions; `basic` False: the redraws as they are, not reflected). A world: 4-point questions, a fixed model
    distribution and the group's true shares per question (Dirichlet(2)), the survey's counts a
    multinomial sample of `respondents`; the truth is the mean over questions of the model's
    representativeness toward the true shares."""
    from probe.benches.opinionqa.measures import redraw, representativeness
    from probe.benches.opinionqa.metrics import _wsum_noisy, reflect

    rng = np.random.default_rng(seed)
    positions = np.arange(4.0)
    hits = 0
    for _ in range(worlds):
        p = rng.dirichlet(np.full(4, 2.0), questions)
        h = rng.dirichlet(np.full(4, 2.0), questions)
        truth = representativeness(p, h, positions, "options").mean()
        counts = np.array([rng.multinomial(respondents, x) for x in h], np.float64)
        point = representativeness(p, counts / counts.sum(1, keepdims=True), positions, "options")
        sampled = np.stack([redraw(c, draws, rng) if noise else np.broadcast_to(c / c.sum(), (draws, 4))
                            for c in counts], axis=1)
        per_draw = representativeness(p[None], sampled, positions, "options")
        per_draw = reflect(point, per_draw) if basic else per_draw
        w = bootstrap_weights(questions, n_boot, int(rng.integers(1 << 31))) if items else np.ones((n_boot, questions))
        reps = _wsum_noisy(w, point[:, None], per_draw[:, :, None])[:, 0] / w.sum(axis=1)
        lo, hi = np.quantile(reps, [0.025, 0.975])
        hits += lo <= truth <= hi
    return hits / worlds
