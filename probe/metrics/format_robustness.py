"""Does a group preference survive a change of wording? The analysis of a prompt-factor design.

Input: each item's selection shares of the G groups under each prompt variant (`ShareCube`) and
the variants' factor levels, a balanced full factorial (`Factorial`). A variant × group share
`S[v, g]` is the item mean; 1/G is what no preference would give. Output (`FormatRobustness`):

- every `S[v, g]` with its 95% item-bootstrap interval;
- per group across variants: mean, min, max, IQR, in how many variants it is over-selected
  (`S > 1/G`) and in how many its interval lies above 1/G (and the under-selected counterparts);
- the **variance split**: the deviations `S[v, g] − 1/G` split (balanced ANOVA on the factorial)
  into the group's main effect, its interaction with each factor and the higher-order rest —
  shares of the sum of squares, adding to 1. The factors' own main effects vanish: a variant's
  shares sum to 1, so averaging over the groups leaves 0 in every variant;
- Kendall's W of the group rankings over variants;
- a verdict per group — `robust`: over-selected with its interval above 1/G in every variant, or
  under-selected with its interval below 1/G in every variant; `none`: its interval holds 1/G in
  every variant; `format-dependent`: anything else — and the count of each verdict.

All intervals come from one set of item-bootstrap replicates (`probe.metrics.core.bootstrap_weights`,
deterministic from the seed), so they are consistent with one another; without replicates
(`n_boot=0`) intervals, interval counts and verdicts are None.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Literal

import numpy as np

from probe.metrics.core import bootstrap_weights, wsum
from probe.metrics.factorial_shares import Factorial, FactorialError, ShareCube, aligned
from probe.metrics.variance_split import kendall_w, term_sums_of_squares, terms

Verdict = Literal["robust", "format-dependent", "none"]
VERDICTS: tuple[Verdict, ...] = ("robust", "format-dependent", "none")
CHUNK = 256
"""Bootstrap replicates evaluated at once (bounds memory: Kendall's W compares every pair of groups)."""
NEGLIGIBLE = 1e-9
"""An interaction share below this is no interaction: no factor is named for that group."""

Interval = tuple[float, float]


@dataclass(frozen=True)
class Split:
    """Shares of the sum of squares of the deviations from 1/G; they add to 1 (NaN when every
    share is exactly 1/G: nothing to split)."""

    group: float
    """The group's main effect: what every variant agrees on."""
    interactions: tuple[tuple[str, float], ...]
    """Per factor, the group × factor interaction: how much the groups' shares move with that factor."""
    rest: float
    """Interactions of the group with two or more factors together (in a one-variant-per-cell
    factorial this holds the noise too)."""

    def interaction(self, factor: str) -> float:
        """The group × `factor` share."""
        return dict(self.interactions)[factor]

    @property
    def largest_factor(self) -> str | None:
        """The factor with the largest interaction share (None: no factor, or none above `NEGLIGIBLE`)."""
        if not self.interactions:
            return None
        factor, share = max(self.interactions, key=lambda kv: kv[1])
        return factor if share > NEGLIGIBLE else None


@dataclass(frozen=True)
class CellShare:
    """One variant × group selection share."""

    variant: str
    group: str
    share: float
    ci95: Interval | None


@dataclass(frozen=True)
class GroupAcross:
    """One group's shares across the variants, and its verdict."""

    group: str
    mean: float
    min: float
    max: float
    iqr: float
    """Interquartile range over the variants (linear interpolation)."""
    n_over: int
    """Variants where its share is above 1/G."""
    n_over_ci: int | None
    """Variants where its 95% interval lies above 1/G."""
    n_under: int
    n_under_ci: int | None
    verdict: Verdict | None
    split: Split
    """This group's own deviations split the same way (its row of the table)."""

    @property
    def largest_factor(self) -> str | None:
        """The factor its share moves with most (its largest interaction share)."""
        return self.split.largest_factor


@dataclass(frozen=True)
class FormatRobustness:
    """The whole analysis of one factorial run."""

    factors: tuple[str, ...]
    variants: tuple[str, ...]
    """In factorial order; the first is the protocol's when every factor lists it first."""
    groups: tuple[str, ...]
    reference: float
    """1/G: each group's share with no preference."""
    n_items: int
    n_boot: int
    seed: int
    cells: tuple[CellShare, ...]
    across: tuple[GroupAcross, ...]
    split: Split
    split_ci95: tuple[Split, Split] | None
    """Lower and upper interval ends of every share of `split`."""
    kendall_w: float
    kendall_w_ci95: Interval | None
    verdict_counts: tuple[tuple[Verdict, int], ...]
    """How many groups have each verdict (all three listed; empty without replicates)."""

    def cell(self, variant: str, group: str) -> CellShare:
        """The share of `group` under `variant`."""
        return next(c for c in self.cells if c.variant == variant and c.group == group)

    def group(self, group: str) -> GroupAcross:
        """The summary of one group."""
        return next(a for a in self.across if a.group == group)


def analyse(cube: ShareCube, factorial: Factorial, n_boot: int = 5000, seed: int = 0) -> FormatRobustness:
    """The format-robustness analysis of `cube` under the variant design `factorial`.

    Replicate b resamples the items with replacement (`bootstrap_weights(n_items, n_boot, seed)`:
    the same seed and items give the same replicates as every other metric of the run); every
    interval is the percentile interval of its statistic over those shared replicates.
    """
    if n_boot < 0:
        raise FactorialError(f"n_boot: expected ≥ 0, got {n_boot}")
    shares = aligned(cube, factorial)
    point = _statistics(shares.mean(axis=0)[None], factorial)
    boot = _bootstrap(shares, factorial, n_boot, seed) if n_boot > 0 else None
    ci = {k: _percentiles(v) for k, v in boot.items()} if boot is not None else None
    ref = 1 / len(cube.groups)
    s = point["shares"][0]
    cells = tuple(CellShare(v, g, float(s[i, j]), _pair(ci["shares"], i, j) if ci else None)
                  for i, v in enumerate(factorial.variants) for j, g in enumerate(cube.groups))
    across = tuple(_across(g, s[:, j], ref, ci["shares"][:, :, j] if ci else None,
                           _split(_shares_of(point["group_ss"][0, j]), factorial.factors))
                   for j, g in enumerate(cube.groups))
    counts = tuple((v, sum(a.verdict == v for a in across)) for v in VERDICTS) if ci else ()
    return FormatRobustness(
        factors=factorial.factors, variants=factorial.variants, groups=cube.groups, reference=ref,
        n_items=len(cube.items), n_boot=n_boot, seed=seed, cells=cells, across=across,
        split=_split(point["table_shares"][0], factorial.factors),
        split_ci95=(_split(ci["table_shares"][0], factorial.factors),
                    _split(ci["table_shares"][1], factorial.factors)) if ci else None,
        kendall_w=float(point["kendall_w"][0]),
        kendall_w_ci95=(float(ci["kendall_w"][0]), float(ci["kendall_w"][1])) if ci else None,
        verdict_counts=counts)


def _statistics(means: np.ndarray, factorial: Factorial) -> dict[str, np.ndarray]:
    """Every statistic of `[B, variant, group]` variant × group shares, each with leading axis B:
    the shares; per group, the sums of squares of the group term, each group × factor term and
    the higher-order rest (`group_ss [B, G, m + 2]`); the table's split, those summed over the
    groups as shares of their total (`table_shares [B, m + 2]`); Kendall's W (`[B]`)."""
    b, n_groups = means.shape[0], means.shape[-1]
    k = len(factorial.factors)
    d = (means - 1 / n_groups).reshape(b, *factorial.shape, n_groups)
    d = np.moveaxis(d, -1, 1)  # [B, G, L_1..L_m]
    ss = term_sums_of_squares(d, k)
    by_term = np.stack([ss[t] for t in terms(k)], axis=-1)
    group_ss = np.concatenate([by_term[..., :1 + k], by_term[..., 1 + k:].sum(axis=-1, keepdims=True)], axis=-1)
    return {"shares": means, "group_ss": group_ss, "table_shares": _shares_of(group_ss.sum(axis=1)),
            "kendall_w": kendall_w(means)}


def _shares_of(ss: np.ndarray) -> np.ndarray:
    """Sums of squares `[..., parts]` as shares of their total (NaN where the total is 0)."""
    total = ss.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, ss / np.where(total > 0, total, 1), np.nan)


def _bootstrap(shares: np.ndarray, factorial: Factorial, n_boot: int, seed: int) -> dict[str, np.ndarray]:
    """`_statistics` of every bootstrap replicate (items resampled; chunks of `CHUNK` replicates)."""
    n_items = shares.shape[0]
    weights = bootstrap_weights(n_items, n_boot, seed)
    parts = [_statistics(wsum(weights[i:i + CHUNK], shares) / n_items, factorial)  # each row of weights sums to n_items
             for i in range(0, n_boot, CHUNK)]
    return {k: np.concatenate([p[k] for p in parts]) for k in ("shares", "table_shares", "kendall_w")}


def _percentiles(replicates: np.ndarray) -> np.ndarray:
    """`[lo, hi]` 95% percentile interval over the replicate axis: `[B, ...]` → `[2, ...]` (NaN replicates ignored)."""
    tail = 2.5
    if not np.isnan(replicates).any():  # the usual case, and much faster than nanpercentile
        return np.percentile(replicates, [tail, 100 - tail], axis=0)
    with warnings.catch_warnings():  # a statistic undefined in every replicate has a NaN interval
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanpercentile(replicates, [tail, 100 - tail], axis=0)


def _pair(interval: np.ndarray, *index: int) -> Interval:
    return float(interval[(0, *index)]), float(interval[(1, *index)])


def _split(share: np.ndarray, factors: tuple[str, ...]) -> Split:
    """The `Split` of `[group, factor 1..m, rest]` values."""
    return Split(group=float(share[0]), interactions=tuple((f, float(share[1 + i])) for i, f in enumerate(factors)),
                 rest=float(share[-1]))


def _across(group: str, shares: np.ndarray, ref: float, interval: np.ndarray | None, split: Split) -> GroupAcross:
    """One group's summary over the variants (`shares [V]`, `interval [2, V]` or None)."""
    q1, q3 = np.percentile(shares, [25, 75])
    over, under = int((shares > ref).sum()), int((shares < ref).sum())
    over_ci = int((interval[0] > ref).sum()) if interval is not None else None
    under_ci = int((interval[1] < ref).sum()) if interval is not None else None
    return GroupAcross(group=group, mean=float(shares.mean()), min=float(shares.min()), max=float(shares.max()),
                       iqr=float(q3 - q1), n_over=over, n_over_ci=over_ci, n_under=under, n_under_ci=under_ci,
                       verdict=_verdict(len(shares), over, over_ci, under, under_ci), split=split)


def _verdict(n: int, over: int, over_ci: int | None, under: int, under_ci: int | None) -> Verdict | None:
    """`robust` when all n variants agree with intervals clear of 1/G on one side; `none` when no
    interval is clear of it; else `format-dependent` (None without intervals)."""
    if over_ci is None or under_ci is None:
        return None
    if (over == over_ci == n) or (under == under_ci == n):
        return "robust"
    if over_ci == under_ci == 0:
        return "none"
    return "format-dependent"


__all__ = ["VERDICTS", "CellShare", "Factorial", "FactorialError", "FormatRobustness", "GroupAcross", "ShareCube",
           "Split", "Verdict", "analyse"]
