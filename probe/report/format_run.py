"""A factor run's `metrics.json["format"]` (`probe.analyses.prompt_factors`) in the end-of-run
summary and the sweep's long summary table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


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
