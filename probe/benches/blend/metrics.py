"""BLEnD short-answer metrics (docs/benchmarks/blend.md), from the stored prompts and verdicts only.

A prompt scores 1 when its verdict is `correct`, 0 when not; a verdict that failed
(`judge_error`) is left out and counted. With `s(c, L)` the share of correct answers of country c
in language L ∈ {local, en} (all templates pooled):
- `by_country[c] = {local, en, gap}`, `gap = local − en` (NaN for countries asked only in English,
  whose `en` is NaN too: their local language is English);
- `score[L]` = mean over countries of `s(c, L)` (countries without L left out);
- `gap` = mean over countries of their gap;
- `resource_gap[L]` = mean `s(c, L)` over the high-resource countries − mean over the low-resource
  ones (NaN when a group has no country with L);
- `by_topic[t][L]` and `by_template[t][L]`: pooled shares of the prompts of that topic / template.
Each is given over all (question, country) pairs (`all`, the paper's short-answer tables use
every question) and over the pairs the source's multiple-choice rule keeps (`kept`). 95% CIs are
percentile intervals of a bootstrap over question ids: one resample serves every country, so
gaps between countries and languages are paired.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from probe.metrics.core import (AnalysisOptions, Measured, bootstrap_weights, nanmean, percentile_ci, ratio,
                                to_scalars, wsum)

SUBSETS: tuple[str, ...] = ("all", "kept")
LANGS: tuple[str, ...] = ("local", "en")


@dataclass(frozen=True)
class Verdict:
    """One judged prompt."""

    question_id: str
    country: str
    language: str
    template: str
    topic: str
    kept: bool
    correct: bool | None
    """None: the judge failed on it."""


Cell = tuple[str, str, str]
"""(dimension, key, language): `("country", "Spain", "en")`, `("topic", "Food", "local")`."""


def _sums(verdicts: Sequence[Verdict], index: dict[str, int]) -> dict[Cell, tuple[np.ndarray, np.ndarray]]:
    """Per question id: correct answers and judged prompts of every cell."""
    out: dict[Cell, tuple[np.ndarray, np.ndarray]] = {}
    for v in verdicts:
        if v.correct is None:
            continue
        for cell in (("country", v.country, v.language), ("topic", v.topic, v.language),
                     ("template", v.template, v.language)):
            num, den = out.setdefault(cell, (np.zeros(len(index)), np.zeros(len(index))))
            num[index[v.question_id]] += float(v.correct)
            den[index[v.question_id]] += 1.0
    return out


def _evaluate(sums: dict[Cell, tuple[np.ndarray, np.ndarray]], w: np.ndarray, countries: Sequence[str],
              groups: tuple[Sequence[str], Sequence[str]]) -> dict[str, Any]:
    """The metric tree for question weights `w` (`[n]`: point estimates; `[B, n]`: replicates)."""
    shape = w.shape[:-1]
    nan = np.full(shape, np.nan)

    def rate(cell: Cell) -> np.ndarray:
        if cell not in sums:
            return nan
        num, den = sums[cell]
        return ratio(wsum(w, num), wsum(w, den))

    by_country = {c: {L: rate(("country", c, L)) for L in LANGS} for c in countries}
    for c in countries:
        by_country[c]["gap"] = by_country[c]["local"] - by_country[c]["en"]
    score = {L: nanmean(np.stack([by_country[c][L] for c in countries] or [nan]), axis=0) for L in LANGS}
    high, low = groups

    def group_mean(names: Sequence[str], L: str) -> np.ndarray:
        present = [by_country[c][L] for c in names if c in by_country]
        return nanmean(np.stack(present), axis=0) if present else nan

    return {
        "score": score,
        "gap": nanmean(np.stack([by_country[c]["gap"] for c in countries] or [nan]), axis=0),
        "resource_gap": {L: group_mean(high, L) - group_mean(low, L) for L in LANGS},
        "by_country": by_country,
        "by_topic": {t: {L: rate(("topic", t, L)) for L in LANGS}
                     for t in sorted({k for d, k, _ in sums if d == "topic"})},
        "by_template": {t: {L: rate(("template", t, L)) for L in LANGS}
                        for t in sorted({k for d, k, _ in sums if d == "template"})},
    }


def compute(verdicts: Sequence[Verdict], countries: Sequence[str], groups: tuple[Sequence[str], Sequence[str]],
            opts: AnalysisOptions) -> Measured:
    """`{"metrics": {"all", "kept"}, "ci95": {"all", "kept"}}` (intervals `{}` when n_boot = 0).

    The replicates are returned as block `metrics` (`Measured`): question ids are
    resampled in sorted order, so two runs over the same questions pair (`probe compare`)."""
    qids = sorted({v.question_id for v in verdicts})
    index = {q: i for i, q in enumerate(qids)}
    boot = bootstrap_weights(len(qids), opts.n_boot, opts.seed) if opts.n_boot > 0 and qids else None
    metrics, replicates = {}, {}
    for subset in SUBSETS:
        sums = _sums([v for v in verdicts if subset == "all" or v.kept], index)
        metrics[subset] = to_scalars(_evaluate(sums, np.ones(len(qids)), countries, groups))
        if boot is not None:
            replicates[subset] = _evaluate(sums, boot, countries, groups)
    cis = percentile_ci(replicates) if replicates else {}
    return Measured({"metrics": metrics, "ci95": cis}, {"metrics": replicates} if replicates else {})
