"""Which countries a GlobalOpinionQA run ranks, and by what: by `lift` (similarity minus that of a
uniform model over the same questions), never by raw similarity, which mostly tracks how evenly a
country's respondents split and which questions it answered (a uniform model already spreads the
countries over 0.40–0.74 on the shared subset).

A country is ranked when it has at least `bench.min_questions` questions under the ranked
condition and, with `bench.rank_samples=national`, is a national sample; the others are listed
apart with the reason, never named in the headline. Rank agreements (Kendall's τ-b) are taken
over the ranked countries only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from probe.benches.globalopinion.countries import sample, table_name
from probe.benches.globalopinion.data import GlobalOpinionSpec
from probe.metrics.core import get_path

RANK_BY = "lift"
"""The per-country value the ranking sorts on (descending)."""


def condition_of(m: Mapping[str, Any]) -> str:
    """The condition the report ranks countries under: `default` when the run has it."""
    return "default" if get_path(m, "expected", "default") else "cross_national"


def countries_block(m: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """`metrics.json`'s `countries`: per survey label, its display name, its sample and its
    questions under each condition."""
    asked = m.get("n_questions") or {}
    labels = sorted({c for per in asked.values() for c in per})
    return {c: {"name": table_name(c), "sample": sample(c),
                "questions": {cond: per.get(c, 0) for cond, per in asked.items()}} for c in labels}


def ranking_block(m: Mapping[str, Any], spec: GlobalOpinionSpec) -> dict[str, Any]:
    """`metrics.json`'s `ranking`: the ranked labels (highest expected lift first) and the
    countries listed apart with why."""
    cond = condition_of(m)
    lift = get_path(m, "expected", cond, RANK_BY) or {}
    n = get_path(m, "n_questions", cond) or {}
    apart: dict[str, str] = {}
    ranked = []
    for c, v in lift.items():
        if n.get(c, 0) < spec.min_questions:
            apart[c] = f"{n.get(c, 0)} question{'s' * (n.get(c, 0) != 1)} (< {spec.min_questions})"
        elif spec.rank_samples == "national" and sample(c) != "national":
            apart[c] = f"{sample(c)} sample"
        elif v is None or not np.isfinite(v):
            apart[c] = f"{RANK_BY} undefined"
        else:
            ranked.append(c)
    ranked.sort(key=lambda c: -lift[c])
    return {"by": RANK_BY, "condition": cond, "min_questions": spec.min_questions, "samples": spec.rank_samples,
            "ranked": ranked, "apart": dict(sorted(apart.items()))}


def tau_over(ranked: list[str], a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> float | None:
    """Kendall's τ-b of two country → value maps over the ranked countries both define (None below 2)."""
    from scipy.stats import kendalltau

    if not a or not b:
        return None
    keys = [c for c in ranked if _finite(a.get(c)) and _finite(b.get(c))]
    if len(keys) < 2:
        return None
    tau = kendalltau([a[k] for k in keys], [b[k] for k in keys]).statistic
    return None if tau is None or not np.isfinite(tau) else float(tau)


def agreements(m: Mapping[str, Any], ranked: list[str]) -> dict[str, float | None]:
    """τ between the expected lift ranking and: the debiased one (`ranking_tau`), the survey-order
    reading's (`survey_order_tau`), the uniform model's similarity (`uniform_tau`: near 0 when the
    ranking is not the uniform model's), and the raw-similarity ranking (`similarity_tau`); and
    `ordinal_tau`, the ordinal similarity's ranking against 1 − JS distance's on the same scale
    questions."""
    cond = condition_of(m)

    def tree(*path: str) -> Mapping[str, Any] | None:
        return get_path(m, *path)

    exp = tree("expected", cond, RANK_BY)
    return {"ranking_tau": tau_over(ranked, exp, tree("debiased", cond, RANK_BY)),
            "survey_order_tau": tau_over(ranked, exp, tree("expected", cond, "survey_order", RANK_BY)),
            "uniform_tau": tau_over(ranked, exp, tree("expected", cond, "uniform")),
            "similarity_tau": tau_over(ranked, exp, tree("expected", cond, "similarity")),
            "ordinal_tau": tau_over(ranked, tree("expected", cond, "ordinal", "similarity"),
                                    tree("expected", cond, "ordinal", "jsd_similarity"))}


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and bool(np.isfinite(v))


def ranking_tests(m: Mapping[str, Any], replicates: Mapping[str, Any], ranked: list[str]) -> dict[str, Any]:
    """`p` and `sim95` entries of the ranking: per reading (`expected`, `debiased`), the test that
    the ranked countries' lifts are all equal (`p.<reading>.<condition>.lift`: no country stands
    out) and their simultaneous 95% band (`sim95.<reading>.<condition>.lift.<country>`), from the
    bootstrap replicates behind `ci95` (`probe.metrics.preference.equal_values`)."""
    from probe.metrics.preference import equal_values

    cond = condition_of(m)
    p: dict[str, Any] = {}
    sim: dict[str, Any] = {}
    for block in ("expected", "debiased"):
        lift, reps = get_path(m, block, cond, RANK_BY) or {}, get_path(replicates, block, cond, RANK_BY) or {}
        names = [c for c in ranked if c in lift and c in reps and lift[c] is not None and np.isfinite(lift[c])]
        if len(names) < 2:
            continue
        value, band = equal_values(np.array([lift[c] for c in names]),
                                   np.stack([np.asarray(reps[c], dtype=np.float64) for c in names], axis=-1))
        p[block] = {cond: {RANK_BY: value}}
        sim[block] = {cond: {RANK_BY: {c: [float(band[0, i]), float(band[1, i])] for i, c in enumerate(names)}}}
    return {"p": p, "sim95": sim}
