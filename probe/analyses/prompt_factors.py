"""Prompt factors, a factor run's analysis from its stored tables (`factors=…`, `probe.prompts.variants`): the
bench's own metrics per variant, and the format-robustness analysis of its group shares.

A factor run stores every variant's prompts (`prompts.parquet` column `variant`) and each
variant's levels (the manifest's `variants`). Its top-level metrics are the protocol's variant's
(variant 0), equal to a run without factors; `format` (in `metrics.json`) holds, per variant,
the bench's headline (`expected`, `debiased`) and its letter prior (`letter_prior`, `letter_split`:
the same decomposition as the run's own, on that variant's prompts and labels), and the analysis of
`probe.metrics.format_robustness` on the per item × variant × group shares
(`probe.metrics.variant_shares`). A full factorial splits the variance by factor; explicit
variants that are not one (`design: one-way`) split it by the wording as a whole (one factor,
`variant`, a level per variant).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from probe.analyses.base import Analysis
from probe.analyses.format_checks import headline_spread, kept_variants, variant_validity
from probe.analyses.view import StoredRun
from probe.backends.trie import unique_token_count
from probe.benches.forced_metrics import is_generation_run, is_text_only_run
from probe.benches.task import Column, Task
from probe.metrics.core import AnalysisOptions
from probe.metrics.factorial_shares import FactorialError
from probe.metrics.format_robustness import ALPHA, FormatRobustness, analyse
from probe.metrics.variant_shares import (
    VARIANT,
    analysed_condition,
    factorial_of,
    share_cube,
    variant_mask,
    variant_records,
)
from probe.results.run import Run
from probe.viz.figures import Figure
from probe.viz.format_report import format_section, plot_format_shares, with_wording_answer
from probe.viz.markdown import value_ci


def format_block(run: Run, task: Task, opts: AnalysisOptions) -> dict[str, Any]:
    """`metrics.json`'s `format`: each variant's levels and the bench's headline on its prompts, the
    condition the shares read, and the format-robustness analysis (`robustness_json`)."""
    records = variant_records(run)
    per_variant = []
    for rec in records:
        tree = task.scoring.metrics(run, variant_mask(run, int(rec["index"])), opts)
        per_variant.append({"index": rec["index"], "name": rec["name"], "levels": rec["levels"],
                            "labels": rec["labels"], "expected": tree.get("expected"),
                            "debiased": tree.get("debiased"), "letter_prior": tree.get("letter_prior"),
                            "letter_split": tree.get("letter_split"),
                            "ci95": {k: v for k, v in (tree.get("ci95") or {}).items()
                                     if k in ("expected", "debiased", "letter_prior", "letter_split")}})
    names = [str(rec["name"]) for rec in records]
    table = run.table()
    letters_read = not (is_text_only_run(run) or is_generation_run(run))
    checks = variant_validity(table, np.asarray(table.column(VARIANT)), len(records), letters_read,
                              opts.min_letter_mass)
    for rec, check in zip(per_variant, checks):
        rec.update(check)
    kept, all_below = kept_variants(names, checks)
    levels = [rec["levels"] for rec, n in zip(records, names) if n in kept]
    try:
        factorial, design = factorial_of(levels, kept), "factorial"
    except FactorialError:  # explicit variants (or some left out), not every combination: the wording as one factor
        factorial, design = factorial_of([{"variant": n} for n in kept], kept), "one-way"
    response = share_cube if task.factors is None else task.factors.cube  # the bench's groups and response
    cube = response(table, task.design, names, opts.temperature)
    result = analyse(cube.only(kept), factorial, n_boot=opts.n_boot, seed=opts.seed)
    excluded = [{"name": n, "reason": c["reason"]} for n, c in zip(names, checks) if n not in kept]
    return {"condition": analysed_condition(table, task.design), "design": design, "variants": per_variant,
            "cost": cost(run),
            "validity": {"min_letter_mass": opts.min_letter_mass, "excluded": excluded, "all_below": all_below},
            "headline": headline_spread(task, per_variant, [n in kept for n in names]),
            **robustness_json(result)}


def cost(run: Run) -> dict[str, Any]:
    """What scoring every variant in one plan cost against the protocol's variant alone: prompt
    tokens, the trie limits (unique tokens) of all variants and of the protocol's, the tokens the
    scorer computed, and per variant the share of the protocol's limit it needed."""
    ids = run.prompts.column("token_ids").to_pylist()
    variant = run.prompts.column(VARIANT).to_pylist()
    seqs = [np.asarray(t, dtype=np.int64) for t in ids]
    limit = unique_token_count(seqs)
    protocol = unique_token_count([t for t, v in zip(seqs, variant) if v == 0])
    computed = run.manifest.raw.get("backend", {}).get("tokens_computed")
    n = len(set(variant))
    return {"prompt_tokens": int(sum(len(t) for t in seqs)), "trie_limit": limit, "protocol_trie_limit": protocol,
            "tokens_computed": computed,
            "computed_per_limit": None if computed is None else computed / limit,
            "per_variant_vs_protocol": None if computed is None else computed / n / protocol}


def robustness_json(r: FormatRobustness) -> dict[str, Any]:
    """The analysis as JSON: shares per variant × group, per group across variants (its effect,
    tests, own split and verdict), the variance split and the components net of noise with
    intervals, the table's interaction test, Kendall's W with its null value, verdict counts."""
    def split(s: Any) -> dict[str, Any]:
        return {"group": s.group, "interactions": dict(s.interactions), "rest": s.rest}

    def group(a: Any) -> dict[str, Any]:
        keys = ("mean", "min", "max", "iqr", "n_over", "n_over_ci", "n_under", "n_under_ci", "effect", "effect_ci95",
                "p_interaction", "p_holm", "n_over_band", "n_under_band", "verdict")
        return {**{k: getattr(a, k) for k in keys}, "largest_factor": a.largest_factor, "split": split(a.split)}

    return {
        "factors": list(r.factors), "groups": list(r.groups), "reference": r.reference, "n_items": r.n_items,
        "analysed_variants": list(r.variants),
        "shares": {v: {c.group: c.share for c in r.cells if c.variant == v} for v in r.variants},
        "shares_ci95": None if r.n_boot == 0 else
        {v: {c.group: c.ci95 for c in r.cells if c.variant == v} for v in r.variants},
        "across": {a.group: group(a) for a in r.across},
        "split": split(r.split),
        "split_ci95": None if r.split_ci95 is None else [split(s) for s in r.split_ci95],
        "components": {c.term: {"variance": c.variance, "variance_ci95": c.ci95, "noise": c.noise, "rms": c.rms}
                       for c in r.components},
        "largest_factor": r.largest_factor,
        "p_interaction": r.p_interaction, "n_perm": r.n_perm, "alpha": ALPHA,
        "kendall_w": r.kendall_w, "kendall_w_ci95": r.kendall_w_ci95, "kendall_w_null": r.kendall_w_null,
        "kendall_w_p": r.kendall_w_p,
        "verdict_counts": dict(r.verdict_counts),
        "spread_p": r.spread_p,
        "own_term_p_holm": None if r.own_p_holm is None else dict(zip(r.groups, r.own_p_holm)),
    }


NOT_A_FACTOR_RUN = "not a factor run (no `factors`), or no group share (its report says why)"


def _group_share(m: Mapping[str, Any]) -> str:
    """The group's share of the share variance across wordings, with its 95% interval."""
    block = m.get("format") or {}
    bounds = block.get("split_ci95") or ()
    interval = [b.get("group") for b in bounds] if len(bounds) == 2 else None
    return value_ci((block.get("split") or {}).get("group"), interval)


def _verdicts(m: Mapping[str, Any]) -> str:
    """The verdict counts over the groups (`robust 1, format-dependent 3, none 0`)."""
    counts = (m.get("format") or {}).get("verdict_counts")
    return ", ".join(f"{k} {v}" for k, v in counts.items()) if counts else "–"


FORMAT_COLUMNS = (
    Column("format: group share", "format.split.group", cell=_group_share, undefined=NOT_A_FACTOR_RUN, optional=True),
    Column("format: verdicts", "format.verdict_counts", cell=_verdicts, undefined=NOT_A_FACTOR_RUN, optional=True),
)
"""Sweep columns of every bench's factor runs, read from `metrics.json["format"]`: shown only when
some run of the table is a factor run, so other sweeps' tables stay as they were."""


class PromptFactors(Analysis):
    """A factor run's wording analysis: `metrics.json["format"]`, its answer in the report's
    opening, its section (`probe.viz.format_report`) and its share figure; sweep columns."""

    name = "format"
    in_metrics = True
    sweep_columns = FORMAT_COLUMNS

    def applies(self, view: StoredRun) -> bool:
        return bool(variant_records(view))  # a factor run: the manifest lists its variants

    def compute(self, view: StoredRun, opts: AnalysisOptions) -> dict[str, Any] | None:
        return format_block(view, view.task, opts)

    def opening(self, view: StoredRun, result: dict[str, Any] | None, markdown: str) -> str:
        return markdown if result is None else with_wording_answer(markdown, result, view.task.presentation.groups)

    def section(self, view: StoredRun, result: dict[str, Any] | None) -> str:
        return "" if result is None else format_section(result, view.task.presentation.groups)

    def figures(self, view: StoredRun, result: dict[str, Any] | None, figures_dir: Path) -> list[Figure]:
        return [] if result is None else [plot_format_shares(result, figures_dir, view.task.presentation.groups)]
