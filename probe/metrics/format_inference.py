"""Inference for the format-robustness analysis, vectorised: intervals that hold their estimate,
the item-sampling noise floor of each sum of squares, the permutation test of a group's
interaction with the wording, Holm's adjustment, and a simultaneous band over the variants.

Conventions: `shares [item, variant, group]` (0 where the item does not show the group),
`shown [item, group]` as 1/0 floats, variant × group shares `S` from
`probe.metrics.factorial_shares.exposure_means`. The calibration of all of it — coverage, false
alarms, power — is measured by `probe.metrics.format_calibration` and asserted by the test suite.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from probe.metrics.factorial_shares import exposure_means
from probe.probs import exposure_shares
from probe.metrics.variance_split import kendall_w, term_sums_of_squares, terms

LEVEL = 0.95
"""Every interval's nominal coverage."""
ALPHA = 0.05
"""Level of the stepwise own-term tests (`stepwise_own`)."""
PERM_CHUNK = 128
"""Permutations evaluated at once (bounds memory: a chunk holds `[chunk, item, variant, group]`)."""


def centred_interval(replicates: np.ndarray, point: np.ndarray, n_units: int) -> np.ndarray:
    """95% interval `[2, ...]` of a statistic from its replicates `[B, ...]`, re-centred on the
    estimate: `[θ̂ − (m* − q*_2.5), θ̂ + (q*_97.5 − m*)]`, m* the replicates' median.

    The percentile interval shifted by the replicates' median bias: for a statistic whose
    bootstrap distribution is centred on it (a share) it is the percentile interval; for one that
    the resampling itself inflates (a sum of squares, Kendall's W) it corrects that first-order
    bias. It always holds its estimate. Both half-widths are scaled by `sqrt(n/(n − 1))`, n the
    resampled units: the bootstrap's variance is the plug-in one, short by that factor (with
    24 items, coverage 0.92 → 0.93, measured). NaN replicates are left out; all NaN gives NaN ends."""
    with warnings.catch_warnings():  # a statistic undefined in every replicate has a NaN interval
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, mid, hi = np.nanpercentile(replicates, [100 * (1 - LEVEL) / 2, 50, 100 * (1 + LEVEL) / 2], axis=0)
    inflate = np.sqrt(n_units / (n_units - 1)) if n_units > 1 else 1.0
    return np.stack([point - inflate * (mid - lo), point + inflate * (hi - mid)])


def interaction_statistic(means: np.ndarray) -> np.ndarray:
    """Per group, the sum over variants of the squared deviation of its share from its own mean
    over the variants (its group × wording sum of squares): `[..., variant, group]` → `[..., group]`."""
    return ((means - means.mean(axis=-2, keepdims=True)) ** 2).sum(axis=-2)


@dataclass(frozen=True)
class PermutationTest:
    """The group × wording interaction tested with the items as replicates."""

    p_group: np.ndarray
    """`[group]` p-value of each group's interaction (`(1 + #{T* ≥ T}) / (1 + n_perm)`)."""
    p_table: float
    """The whole table's interaction (the statistic summed over the groups)."""
    kendall_w_null: float
    """Kendall's W expected when the wording does not matter: its mean over the permutations."""
    kendall_w_p: float
    """How often a permutation's W is at most the observed one (a low W: the wordings disagree)."""
    n_perm: int
    p_own: np.ndarray | None = None
    """`[group]` Holm-adjusted p of each group's interaction on the own-term scale, stepwise
    (`stepwise_own`)."""
    spread_p: float = float("nan")
    """How often a permutation's range over the variants of the shares' KL from uniform is at least
    the observed one: the spread of the published divergence over wordings, beyond item noise."""


OWN_FLOOR = 1e-9
"""Shares are floored here before their logarithm (a greedy reading can give a group share 0)."""


def own_terms(means: np.ndarray, exclude: np.ndarray | None = None) -> np.ndarray:
    """`[..., variant, group]` shares → each group's log-ratio against the geometric mean of the
    others, `log S_g − mean_{h≠g, h∉exclude} log S_h` (absent groups, NaN, left out). Shares are
    compositional: when one group's share moves under a wording the others' move with it, through
    the common normaliser, which cancels in a log-ratio; another group's move reaches it only as
    1/(G − 1) of that move, and not at all once that group is in `exclude` (`[group]` bool)."""
    logs = np.log(np.maximum(np.nan_to_num(means, nan=1.0), OWN_FLOOR))
    present = ~np.isnan(means)
    ref = present if exclude is None else present & ~np.asarray(exclude, bool)
    total = np.where(ref, logs, 0.0).sum(axis=-1, keepdims=True)
    n = ref.sum(axis=-1, keepdims=True)
    own_total, own_n = total - np.where(ref, logs, 0.0), n - ref
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(present & (own_n > 0), logs - own_total / np.maximum(own_n, 1), np.nan)


def own_statistic(means: np.ndarray, exclude: np.ndarray | None = None) -> np.ndarray:
    """`interaction_statistic` on the own-term scale (`own_terms`), NaN-safe: `[..., group]`."""
    lr = own_terms(means, exclude)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nansum((lr - np.nanmean(lr, axis=-2, keepdims=True)) ** 2, axis=-2)


def stepwise_own(observed: np.ndarray, null: np.ndarray, alpha: float) -> np.ndarray:
    """`[group]` Holm-adjusted p of each group's own-term interaction, found step by step: the
    most significant group is taken as a driver, then the others are tested again on log-ratios
    that leave the drivers out of their reference (so a group that moved only because a driver
    did is not counted), until none is significant. `observed [1, V, G]`, `null [P, V, G]` the
    shares of the within-item permutations. The first step controls the family-wise error; the
    later ones name further drivers given the earlier ones."""
    n_groups = observed.shape[-1]
    drivers = np.zeros(n_groups, bool)
    out = np.ones(n_groups)
    while not drivers.all():
        t_obs, t_null = own_statistic(observed, drivers)[0], own_statistic(null, drivers)
        rest = np.nonzero(~drivers)[0]
        p = (1 + (t_null[:, rest] >= t_obs[rest] - 1e-12 * np.maximum(1.0, t_obs[rest])).sum(axis=0)) / (1 + len(null))
        adjusted = holm(p)
        best = int(np.argmin(adjusted))
        if adjusted[best] >= alpha:
            out[rest] = adjusted
            break
        out[rest[best]], drivers[rest[best]] = adjusted[best], True
    return out


def kl_range(means: np.ndarray) -> np.ndarray:
    """`[..., variant, group]` shares → `[...]` max − min over the variants of KL(shares ‖ uniform)."""
    n = (~np.isnan(means)).sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = np.where(means > 0, means * np.log(means * n), 0.0).sum(axis=-1)
    return kl.max(axis=-1) - kl.min(axis=-1)


def permutation_test(shares: np.ndarray, shown: np.ndarray, n_perm: int, seed: int) -> PermutationTest:
    """Each item's variant labels permuted at random, independently per item (the null: within an
    item the wordings are exchangeable — the same population shares in every wording, whatever
    the item-level noise); the statistic of `interaction_statistic` on the exposure-normalised
    shares of each permuted table against the observed one. Exposure does not change under the
    permutation (an item shows the same groups in every wording)."""
    n_items, n_variants, _ = shares.shape
    ones = np.ones((1, n_items))
    observed = exposure_means(ones, shares, shown)
    t_obs = interaction_statistic(observed)[0]
    w_obs = float(kendall_w(observed)[0])
    r_obs, r_above = float(kl_range(observed)[0]), 0
    kept: list[np.ndarray] = []
    rng = np.random.default_rng([seed, 47])
    above, above_table, w_sum, w_below, done = np.zeros(shares.shape[-1]), 0, 0.0, 0, 0
    den = shown.sum(axis=0)
    tol = 1e-12 * max(1.0, float(t_obs.max(initial=0.0)))  # ties (a permutation that changes nothing) count as ≥
    while done < n_perm:
        size = min(PERM_CHUNK, n_perm - done)
        order = np.argsort(rng.random((size, n_items, n_variants)), axis=-1)
        permuted = np.take_along_axis(shares[None], order[..., None], axis=2)
        means = exposure_shares(permuted.sum(axis=1), den)
        t = interaction_statistic(means)
        above += (t >= t_obs - tol).sum(axis=0)
        above_table += int((t.sum(axis=-1) >= t_obs.sum() - tol).sum())
        w = kendall_w(means)
        w_sum += float(np.nansum(w))
        w_below += int((w <= w_obs + 1e-12).sum())
        r_above += int((kl_range(means) >= r_obs - 1e-12 * max(1.0, r_obs)).sum())
        kept.append(means)
        done += size
    return PermutationTest(p_group=(1 + above) / (1 + n_perm), p_table=(1 + above_table) / (1 + n_perm),
                           kendall_w_null=w_sum / n_perm, kendall_w_p=(1 + w_below) / (1 + n_perm), n_perm=n_perm,
                           spread_p=(1 + r_above) / (1 + n_perm), p_own=stepwise_own(observed, np.concatenate(kept), ALPHA))


def holm(p: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error control over the entries of `p`)."""
    n = len(p)
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate((n - np.arange(n)) * p[order])
    out = np.empty(n)
    out[order] = np.minimum(stepped, 1.0)
    return out


def simultaneous_band(point: np.ndarray, replicates: np.ndarray) -> np.ndarray:
    """95% band `[2, variant]` holding every variant's share at once: `Ŝ_v ± c·sd_v`, sd_v the
    replicates' standard deviation and c the 95% quantile of `max_v |S*_v − Ŝ_v| / sd_v` (the
    max-t bootstrap band). A variant with no spread has a band of width 0."""
    ok = ~np.isnan(replicates).any(axis=-1)
    rep = replicates[ok]
    if len(rep) < 2:
        return np.full((2, len(point)), np.nan)
    sd = rep.std(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(sd > 0, np.abs(rep - point) / np.where(sd > 0, sd, 1), 0.0).max(axis=-1)
    c = float(np.quantile(t, LEVEL))
    return np.stack([point - c * sd, point + c * sd])


def noise_floor(shares: np.ndarray, shown: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """`[group, term]` the expected sum of squares of each term (`variance_split.terms`) that
    item sampling alone adds: `E[SS_T(Ŝ)] = SS_T(S) + tr(P_T Var(Ŝ))`, with `Var(Ŝ)` the
    jackknife's — `(n − 1)/n Σ_i (Ŝ_(−i) − Ŝ_(·))(…)ᵀ` over the leave-one-item-out shares, all
    computed at once as item weights `1 − I` — so the trace is that sum of each deviation's
    `SS_T`. A leave-one-out table in which some group is never shown is left out; 0 with fewer
    than two usable ones (nothing to estimate it from)."""
    n_items, _, n_groups = shares.shape
    k = len(shape)
    loo = exposure_means(1.0 - np.eye(n_items), shares, shown) if n_items > 1 else np.full((1, 1, 1), np.nan)
    loo = loo[~np.isnan(loo).any(axis=(1, 2))]
    if len(loo) < 2:
        return np.zeros((n_groups, len(terms(k))))
    dev = np.moveaxis((loo - loo.mean(axis=0)).reshape(len(loo), *shape, n_groups), -1, 1)  # [item, G, L_1..L_m]
    ss = term_sums_of_squares(dev, k)
    return np.stack([ss[t].sum(axis=0) for t in terms(k)], axis=-1) * (n_items - 1) / n_items
