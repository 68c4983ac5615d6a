"""A factor run's analysis from its stored tables (`factors=…`, `probe.prompts.variants`): the
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
from typing import Any

import numpy as np

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
)
from probe.report.format_checks import headline_spread, kept_variants, variant_validity
from probe.results.run import Run
from probe.viz.markdown import value_ci


def variant_records(run: Run) -> list[dict[str, Any]]:
    """The manifest's `variants` (empty: not a factor run)."""
    return list(run.manifest.raw.get("variants") or [])


def variant_mask(run: Run, index: int) -> np.ndarray:
    """`[prompt_id]` whether each prompt belongs to variant `index`."""
    return np.asarray(run.prompts.column(VARIANT).to_numpy(zero_copy_only=False) == index)


def format_block(run: Run, task: Task, opts: AnalysisOptions) -> dict[str, Any]:
    """`metrics.json`'s `format`: each variant's levels and the bench's headline on its prompts, the
    condition the shares read, and the format-robustness analysis (`robustness_json`)."""
    records = variant_records(run)
    per_variant = []
    for rec in records:
        tree = task.metrics(run, variant_mask(run, int(rec["index"])), opts)
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
    cube = task.factor_cube(table, task.design, names, opts.temperature)  # the bench's groups and response
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
    }


def summary_line(block: Mapping[str, Any]) -> str:
    """The end-of-run summary's line: the verdict counts, the interaction test, the factor that
    moves the shares most net of noise, and the variants left out."""
    counts = block.get("verdict_counts") or {}
    verdicts = ", ".join(f"{k} {v}" for k, v in counts.items()) or "no verdicts (no bootstrap)"
    spent = block.get("cost") or {}
    if spent.get("per_variant_vs_protocol") is not None:
        verdicts += (f"; tokens computed {spent['tokens_computed']} ({spent['computed_per_limit']:.3f}× the trie limit"
                     f", {spent['per_variant_vs_protocol']:.2f}× the protocol's per variant)")
    n, kept = len(block.get("variants") or []), len(block.get("analysed_variants") or [])
    threshold = (block.get("validity") or {}).get("min_letter_mass", 0.5)
    left_out = "" if kept in (0, n) else f" ({n - kept} left out: letter mass below {threshold:g})"
    return (f"format: {n} variants{left_out}; group × wording interaction p {_num(block.get('p_interaction'))} "
            f"(largest factor net of noise: {block.get('largest_factor') or 'none'}); verdicts: {verdicts}")


def _num(x: Any) -> str:
    return "–" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{float(x):.3g}"


def summary_leaves(block: Mapping[str, Any]) -> list[tuple[str, Any, Any, Any]]:
    """`(metric, value, lo, hi)` of a format block for the sweep's long summary table: the variance
    split (group, each interaction, rest) and Kendall's W with their 95% intervals, the verdict
    counts (no interval)."""
    split, bounds = block.get("split") or {}, block.get("split_ci95") or ()

    def parts(s: Mapping[str, Any] | None) -> dict[str, Any]:
        s = s or {}
        return {"group": s.get("group"), **{f"interactions.{k}": v for k, v in (s.get("interactions") or {}).items()},
                "rest": s.get("rest")}

    lows, highs = (parts(bounds[0]), parts(bounds[1])) if len(bounds) == 2 else ({}, {})
    out = [(f"split.{k}", v, lows.get(k), highs.get(k)) for k, v in parts(split).items()]
    w_ci = block.get("kendall_w_ci95") or (None, None)
    out.append(("kendall_w", block.get("kendall_w"), w_ci[0], w_ci[1]))
    out += [(f"verdict_counts.{k}", v, None, None) for k, v in (block.get("verdict_counts") or {}).items()]
    return out


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
