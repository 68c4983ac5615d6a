"""Does a group preference survive a change of wording? The analysis of a prompt-factor design.

Input: each item's selection shares of the G groups under each prompt variant, and which groups
each item shows (`ShareCube`), and the variants' factor levels, a balanced full factorial
(`Factorial`). A variant × group share `S[v, g]` is exposure-normalised — each group's mean over
the items that show it, renormalised over the groups — in the point and in every bootstrap
replicate; 1/G is what no preference would give. Output (`FormatRobustness`):

- every `S[v, g]` with its 95% item-bootstrap interval;
- per group: its pooled main effect `mean_v S[v, g] − 1/G` with an interval; its interaction with
  the wording tested with the items as replicates (variant labels permuted within each item),
  Holm-adjusted over the groups; a simultaneous band over the variants; the verdict:
  `robust` (main effect clear of 0, no significant interaction), `format-reverses` (significant
  interaction, and the band puts the group above 1/G in one wording and below it in another),
  `format-dependent` (significant interaction without a reversal: the effect grows, shrinks or
  vanishes with the wording), `none` (neither);
- the **variance split**: the deviations `S[v, g] − 1/G` split (balanced ANOVA on the factorial)
  into the group's main effect, its interaction with each factor and the higher-order rest —
  shares of the observed sum of squares, adding to 1 (these include item-sampling noise);
- the **components** net of that noise: each term's sum of squares minus its expected size
  under item sampling alone (`format_inference.noise_floor`), per cell (share² units), with an
  interval, and as an RMS effect in share units;
- Kendall's W of the group rankings over variants, with its value under the permutation null.

All intervals come from one set of item-bootstrap replicates (`probe.metrics.core.bootstrap_weights`,
deterministic from the seed), re-centred on their estimates (`format_inference.centred_interval`);
without replicates (`n_boot=0`) intervals and verdicts are None. Calibration (coverage, false
alarms, power) is measured by `probe.metrics.format_calibration`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from probe.metrics.core import bootstrap_weights
from probe.metrics.factorial_shares import Factorial, FactorialError, ShareCube, aligned, exposure_means
from probe.metrics.format_inference import (
    centred_interval,
    holm,
    noise_floor,
    permutation_test,
    simultaneous_band,
)
from probe.metrics.variance_split import kendall_w, term_sums_of_squares, terms

Verdict = Literal["robust", "format-reverses", "format-dependent", "none"]
VERDICTS: tuple[Verdict, ...] = ("robust", "format-reverses", "format-dependent", "none")
ALPHA = 0.05
"""Family-wise error rate of the interaction tests over the groups (Holm)."""
N_PERM = 1999
"""Permutations behind each interaction p-value (the smallest p is 1/2000)."""
CHUNK = 256
"""Bootstrap replicates evaluated at once (bounds memory: Kendall's W compares every pair of groups)."""
NEGLIGIBLE = 1e-9
"""An interaction share below this is no interaction: no factor is named for that group."""

Interval = tuple[float, float]


@dataclass(frozen=True)
class Split:
    """Shares of the sum of squares of the deviations from 1/G; they add to 1 (NaN when every
    share is exactly 1/G: nothing to split). Observed sums of squares: item noise included."""

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
class Component:
    """One term's variance net of item-sampling noise, per variant × group cell (share² units)."""

    term: str
    """`group`, a factor's name (group × that factor), or `rest`."""
    variance: float
    """`(SS_T − noise_T) / (V·G)`: unbiased to first order, so it may fall below 0 (smaller than noise)."""
    ci95: Interval | None
    noise: float
    """The noise floor `noise_T / (V·G)` that was removed."""

    @property
    def rms(self) -> float:
        """The effect's size in share units: `sqrt(max(variance, 0))`."""
        return float(np.sqrt(max(self.variance, 0.0))) if np.isfinite(self.variance) else float("nan")


@dataclass(frozen=True)
class CellShare:
    """One variant × group selection share."""

    variant: str
    group: str
    share: float
    ci95: Interval | None


@dataclass(frozen=True)
class GroupAcross:
    """One group's shares across the variants, its tests and its verdict."""

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
    effect: float = float("nan")
    """Pooled main effect: `mean_v S[v, g] − 1/G`."""
    effect_ci95: Interval | None = None
    p_interaction: float | None = None
    """Permutation p-value of its interaction with the wording (unadjusted)."""
    p_holm: float | None = None
    """Holm-adjusted over the groups: the verdict's `format…` reads this against `ALPHA`."""
    n_over_band: int | None = None
    """Variants whose simultaneous band lies above 1/G (a reversal needs one above and one below)."""
    n_under_band: int | None = None
    moves_with: str | None = None
    """The factor with its largest interaction net of noise (None: none above its noise)."""

    @property
    def largest_factor(self) -> str | None:
        """The factor its share moves with most, net of item noise (`moves_with`)."""
        return self.moves_with


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
    """How many groups have each verdict (all listed; empty without replicates)."""
    components: tuple[Component, ...] = ()
    """`group`, each factor, `rest`: variance net of item noise."""
    p_interaction: float | None = None
    """Permutation p-value of the whole table's group × wording interaction."""
    kendall_w_null: float | None = None
    """Kendall's W expected if the wording did not matter (mean over the permutations)."""
    kendall_w_p: float | None = None
    n_perm: int = 0
    spread_p: float | None = None
    own_p_holm: tuple[float, ...] | None = None
    """Per group (in `groups` order), the Holm-adjusted p of its interaction with the wording on
    the own-term scale (`format_inference.own_terms`: its log-ratio against the others' geometric
    mean): what the *In short* counts, never a group moved only by another's move."""
    """Permutation p-value of the range over the wordings of the shares' KL from uniform
    (`format_inference.kl_range`): the published divergence moves with the wording beyond item noise."""

    def cell(self, variant: str, group: str) -> CellShare:
        """The share of `group` under `variant`."""
        return next(c for c in self.cells if c.variant == variant and c.group == group)

    def group(self, group: str) -> GroupAcross:
        """The summary of one group."""
        return next(a for a in self.across if a.group == group)

    def component(self, term: str) -> Component:
        """The net component of `term` (`group`, a factor, `rest`)."""
        return next(c for c in self.components if c.term == term)

    @property
    def largest_factor(self) -> str | None:
        """The factor with the largest group × factor variance net of noise (None: none above 0)."""
        inter = [c for c in self.components if c.term in self.factors and c.variance > 0]
        return max(inter, key=lambda c: c.variance).term if inter else None


@dataclass(frozen=True)
class _Boot:
    """Replicates of every statistic, and their intervals."""

    shares: np.ndarray
    """`[B, V, G]`."""
    table_ss: np.ndarray
    """`[B, m + 2]` the table's sums of squares by term (group, factors, rest)."""
    table_shares: np.ndarray
    kendall_w: np.ndarray
    n_units: int
    """Items resampled."""


def analyse(cube: ShareCube, factorial: Factorial, n_boot: int = 5000, seed: int = 0,
            n_perm: int = N_PERM) -> FormatRobustness:
    """The format-robustness analysis of `cube` under the variant design `factorial`.

    Replicate b resamples the items with replacement (`bootstrap_weights(n_items, n_boot, seed)`:
    the same seed and items give the same replicates as every other metric of the run); every
    interval is the re-centred percentile interval of its statistic over those shared replicates.
    The interaction tests permute variant labels within items (`n_perm` permutations, seeded from
    `seed`); without replicates (`n_boot=0`) no test, interval or verdict is computed.
    """
    if n_boot < 0:
        raise FactorialError(f"n_boot: expected ≥ 0, got {n_boot}")
    shares, shown = aligned(cube, factorial), cube.exposure()
    point = _statistics(exposure_means(np.ones((1, len(cube.items))), shares, shown), factorial)
    noise = noise_floor(shares, shown, factorial.shape)  # [G, terms]
    boot = _bootstrap(shares, shown, factorial, n_boot, seed) if n_boot > 0 else None
    test = permutation_test(shares, shown, n_perm, seed) if boot is not None else None
    ref, n = 1 / len(cube.groups), len(cube.items)
    s = point["shares"][0]
    share_ci = np.clip(centred_interval(boot.shares, s, n), 0, 1) if boot else None  # shares live in [0, 1]
    cells = tuple(CellShare(v, g, float(s[i, j]), _pair(share_ci, i, j) if boot else None)
                  for i, v in enumerate(factorial.variants) for j, g in enumerate(cube.groups))
    p_holm = holm(test.p_group) if test else None
    table = _Table(shares=s, reference=ref, boot=boot, share_ci=share_ci, factorial=factorial)
    across = tuple(_across(table, j, g, (point["group_ss"][0, j], _collapse(noise[j], len(factorial.factors))),
                           None if test is None or p_holm is None else (float(test.p_group[j]), float(p_holm[j])))
                   for j, g in enumerate(cube.groups))
    counts = tuple((v, sum(a.verdict == v for a in across)) for v in VERDICTS) if boot else ()
    split_ci = np.clip(centred_interval(boot.table_shares, point["table_shares"][0], n), 0, 1) if boot else None
    w = float(point["kendall_w"][0])
    w_ci = np.clip(centred_interval(boot.kendall_w, np.array(w), n), 0, 1) if boot else None
    return FormatRobustness(
        factors=factorial.factors, variants=factorial.variants, groups=cube.groups, reference=ref,
        n_items=len(cube.items), n_boot=n_boot, seed=seed, cells=cells, across=across,
        split=_split(point["table_shares"][0], factorial.factors),
        split_ci95=(_split(split_ci[0], factorial.factors), _split(split_ci[1], factorial.factors))
        if split_ci is not None else None,
        kendall_w=w, kendall_w_ci95=(float(w_ci[0]), float(w_ci[1])) if w_ci is not None else None,
        verdict_counts=counts,
        components=_components(point["group_ss"][0].sum(axis=0), _collapse(noise.sum(axis=0), len(factorial.factors)),
                               boot, factorial, s.size),
        p_interaction=test.p_table if test else None, kendall_w_null=test.kendall_w_null if test else None,
        kendall_w_p=test.kendall_w_p if test else None, n_perm=test.n_perm if test else 0,
        spread_p=test.spread_p if test else None,
        own_p_holm=tuple(float(v) for v in test.p_own) if test and test.p_own is not None else None)


def _collapse(by_term: np.ndarray, n_factors: int) -> np.ndarray:
    """`[..., terms]` → `[..., 1 + m + 1]`: group, each factor, and the higher-order terms summed."""
    return np.concatenate([by_term[..., :1 + n_factors], by_term[..., 1 + n_factors:].sum(axis=-1, keepdims=True)],
                          axis=-1)


def _components(ss: np.ndarray, noise: np.ndarray, boot: _Boot | None, factorial: Factorial,
                cells: int) -> tuple[Component, ...]:
    """Each term's net variance per cell, its interval (the spread of its bootstrap sums of
    squares, re-centred on the net value) and its noise floor."""
    net = (ss - noise) / cells
    ci = centred_interval(boot.table_ss / cells, net, boot.n_units) if boot else None
    names = ("group", *factorial.factors, "rest")
    return tuple(Component(term=t, variance=float(net[k]), ci95=_pair(ci, k) if ci is not None else None,
                           noise=float(noise[k] / cells)) for k, t in enumerate(names))


def _statistics(means: np.ndarray, factorial: Factorial) -> dict[str, np.ndarray]:
    """Every statistic of `[B, variant, group]` variant × group shares, each with leading axis B:
    the shares; per group, the sums of squares of the group term, each group × factor term and
    the higher-order rest (`group_ss [B, G, m + 2]`); summed over the groups (`table_ss`) and as
    shares of their total (`table_shares [B, m + 2]`); Kendall's W (`[B]`). A replicate with a NaN
    share (a group no resampled item shows) is NaN throughout."""
    b, n_groups = means.shape[0], means.shape[-1]
    k = len(factorial.factors)
    bad = np.isnan(means).any(axis=(-2, -1))
    d = (np.where(bad[:, None, None], 1 / n_groups, means) - 1 / n_groups).reshape(b, *factorial.shape, n_groups)
    ss = term_sums_of_squares(np.moveaxis(d, -1, 1), k)  # d: [B, G, L_1..L_m]
    group_ss = _collapse(np.stack([ss[t] for t in terms(k)], axis=-1), k)
    group_ss[bad] = np.nan
    table_ss = group_ss.sum(axis=1)
    return {"shares": means, "group_ss": group_ss, "table_ss": table_ss, "table_shares": _shares_of(table_ss),
            "kendall_w": np.where(bad, np.nan, kendall_w(means))}


def _shares_of(ss: np.ndarray) -> np.ndarray:
    """Sums of squares `[..., parts]` as shares of their total (NaN where the total is 0)."""
    total = ss.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, ss / np.where(total > 0, total, 1), np.nan)


def _bootstrap(shares: np.ndarray, shown: np.ndarray, factorial: Factorial, n_boot: int, seed: int) -> _Boot:
    """`_statistics` of every bootstrap replicate (items resampled; chunks of `CHUNK` replicates)."""
    weights = bootstrap_weights(shares.shape[0], n_boot, seed)
    parts = [_statistics(exposure_means(weights[i:i + CHUNK], shares, shown), factorial)
             for i in range(0, n_boot, CHUNK)]
    joined = {k: np.concatenate([p[k] for p in parts]) for k in ("shares", "table_ss", "table_shares", "kendall_w")}
    return _Boot(**joined, n_units=shares.shape[0])


def _pair(interval: np.ndarray, *index: int) -> Interval:
    return float(interval[(0, *index)]), float(interval[(1, *index)])


def _split(share: np.ndarray, factors: tuple[str, ...]) -> Split:
    """The `Split` of `[group, factor 1..m, rest]` values."""
    return Split(group=float(share[0]), interactions=tuple((f, float(share[1 + i])) for i, f in enumerate(factors)),
                 rest=float(share[-1]))


@dataclass(frozen=True)
class _Table:
    """What every group's summary reads: the point shares and their replicates and intervals."""

    shares: np.ndarray
    """`[V, G]`."""
    reference: float
    boot: _Boot | None
    share_ci: np.ndarray | None
    """`[2, V, G]`."""
    factorial: Factorial


def _across(table: _Table, j: int, group: str, ss_noise: tuple[np.ndarray, np.ndarray],
            p: tuple[float, float] | None) -> GroupAcross:
    """Group j's summary over the variants: shares, effect, tests, verdict (from its sums of
    squares and noise floor by term, and its raw and Holm p)."""
    shares, ref, boot, share_ci, factorial = (table.shares[:, j], table.reference, table.boot, table.share_ci,
                                              table.factorial)
    q1, q3 = np.percentile(shares, [25, 75])
    over, under = int((shares > ref).sum()), int((shares < ref).sum())
    ss, noise = ss_noise
    net = (ss - noise)[1:1 + len(factorial.factors)]
    moves = factorial.factors[int(np.argmax(net))] if len(net) and net.max() > 0 else None
    base = GroupAcross(group=group, mean=float(shares.mean()), min=float(shares.min()), max=float(shares.max()),
                       iqr=float(q3 - q1), n_over=over, n_over_ci=None, n_under=under, n_under_ci=None, verdict=None,
                       split=_split(_shares_of(ss), factorial.factors), effect=float(shares.mean() - ref),
                       moves_with=moves)
    if boot is None or share_ci is None or p is None:
        return base
    effect_ci = centred_interval(boot.shares[:, :, j].mean(axis=1) - ref, np.array(base.effect), boot.n_units)
    band = simultaneous_band(shares, boot.shares[:, :, j])
    up, down = int((band[0] > ref).sum()), int((band[1] < ref).sum())
    verdict = _verdict((float(effect_ci[0]), float(effect_ci[1])), p[1], up, down)
    return GroupAcross(**{**base.__dict__, "n_over_ci": int((share_ci[0, :, j] > ref).sum()),
                          "n_under_ci": int((share_ci[1, :, j] < ref).sum()), "verdict": verdict,
                          "effect_ci95": (float(effect_ci[0]), float(effect_ci[1])), "p_interaction": p[0],
                          "p_holm": p[1], "n_over_band": up, "n_under_band": down})


def _verdict(effect_ci: Interval, p_holm: float, up: int, down: int) -> Verdict:
    """`format-reverses` / `format-dependent`: the interaction is significant (Holm) with / without
    a variant band above 1/G and another below it; `robust`: no significant interaction and the
    main effect's interval excludes 0; `none` otherwise."""
    if p_holm <= ALPHA:
        return "format-reverses" if up and down else "format-dependent"
    if effect_ci[0] > 0 or effect_ci[1] < 0:
        return "robust"
    return "none"


__all__ = ["ALPHA", "N_PERM", "VERDICTS", "CellShare", "Component", "Factorial", "FactorialError", "FormatRobustness",
           "GroupAcross", "ShareCube", "Split", "Verdict", "analyse"]
