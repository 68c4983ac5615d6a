"""Is there a preference at all? Tests of "no preference" over groups, intervals for divergences
from uniform that cover at zero, and simultaneous bands that say which group is most or least chosen.

A bench gets all of it by declaring its null (`ShareNull`): the per-unit sums behind an
exposure-normalised share vector (`sel [unit, group]` chosen mass, `app [unit, group]` times shown,
as `probe.probs.exposure_shares` reads them) and the statistics of that vector to test
(`{name: shares [..., G] → [...]}`, each ≥ 0 and 0 at uniform: KL, Gini, |SPD|, …).

- **Test** (`no_preference`): a randomisation test that exchanges, within each unit, which of
  the groups it shows carries which label, keeping every prompt's letters and the unit's option
  masses. Under "no preference" (the group label does not move the model) the labels are
  exchangeable within a unit, so the test holds its size whatever the letter prior and the item
  structure. `p = (1 + #{T* ≥ T}) / (1 + P)`.
- **Interval** (`floor_interval`): a divergence from uniform estimated by plug-in is biased
  upward (about (G − 1)/(2 n) for KL) and its percentile bootstrap is shifted up again, so it
  misses 0 exactly when 0 is the truth. The basic (reflected) bootstrap
  `[2θ̂ − q*₉₇.₅, 2θ̂ − q*₂.₅]` corrects that bias to first order; it is clipped at the floor (0)
  and widened to hold both the plug-in and the corrected estimate `max(0, 2θ̂ − mean θ*)`. Its
  lower end is 0 whenever the test of no preference does not reject (test inversion: the
  divergence 0 is then not excluded), which makes its coverage at 0 that of the test, ≥ 95%,
  for statistics of first order in the deviation (Gini) as for second-order ones (KL).
- **Band** (`simultaneous`): the max-statistic bootstrap band over the groups,
  `Ŝ_g ± c`, c the 95% quantile of `max_g |S*_g − Ŝ_g|`: every group's share at once, what a
  "most X, least Y" sentence needs.
- **Enclosure** (`enclose`): every stored interval holds its own stored estimate.

The calibration of all of it (size, power, coverage) is `probe.metrics.preference_calibration`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from probe.metrics.core import Inferring
from probe.probs import exposure_shares

LEVEL = 0.95
"""Nominal coverage of every interval and band; tests reject at `1 − LEVEL`."""
N_PERM = 2000
"""Within-unit exchanges behind each p-value (its resolution is 1/2001)."""
PERM_CHUNK = 250
"""Exchanges drawn at once (bounds memory: a chunk holds `[chunk, unit, group]`)."""
SEED_SALT = 0x9E37
"""Added to the analysis seed for the exchanges: their stream is apart from the bootstrap's, so
every existing interval's resamples stay as they were."""

PARALLEL_TREES = ("p", "sim95")
"""The top-level trees beside `ci95` that this module fills, by reading (`p.expected.C0.KL`)."""

Statistic = Callable[[np.ndarray], np.ndarray]
"""`shares [..., G]` (NaN: a group absent) → `[...]`, ≥ 0 and 0 when every share is equal."""


@dataclass(frozen=True)
class ShareNull:
    """A bench's declaration of one share vector whose null is "no preference"."""

    sel: np.ndarray
    """`[unit, group]` chosen probability mass of each group's option(s) in the unit."""
    app: np.ndarray
    """`[unit, group]` times the group was shown in the unit (0: not shown there)."""
    statistics: Mapping[str, Statistic]
    """The statistics to test, by their metric name (`KL`, `Gini`, …)."""


def exchanged_sums(sel: np.ndarray, app: np.ndarray, n_perm: int, rng: np.random.Generator
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Pooled sums `[n_perm, group]` of `sel` and `app` after exchanging, in each unit
    independently, the labels of the groups it shows (a uniformly random permutation of them; an
    absent group stays absent). Vectorised: random keys sort the shown groups of every unit."""
    n_units, n_groups = sel.shape
    shown = app > 0
    cols = np.broadcast_to(np.arange(n_groups, dtype=np.float64), (n_units, n_groups))
    # absent groups sort last in both orders, in their own order: they map to themselves
    key_absent = n_groups + cols
    orig = np.argsort(np.where(shown, cols, key_absent), axis=-1)  # [unit, G]
    keys = np.where(shown, rng.random((n_perm, n_units, n_groups)), key_absent)
    new = np.argsort(keys, axis=-1)  # [P, unit, G]
    source = np.empty_like(new)
    np.put_along_axis(source, np.broadcast_to(orig, new.shape), new, axis=-1)
    units = np.arange(n_units)[None, :, None]
    return sel[units, source].sum(axis=1), app[units, source].sum(axis=1)


def no_preference(null: ShareNull, n_perm: int, seed: int) -> dict[str, float]:
    """p-value of each of `null.statistics` under the within-unit exchange (see the module
    docstring); NaN where the statistic is undefined on the data."""
    rng = np.random.default_rng([seed, SEED_SALT])
    observed = {k: float(f(exposure_shares(null.sel.sum(0), null.app.sum(0)))) for k, f in null.statistics.items()}
    exceed = {k: 0 for k in observed}
    done = 0
    while done < n_perm:
        size = min(PERM_CHUNK, n_perm - done)
        sel, app = exchanged_sums(null.sel, null.app, size, rng)
        shares = exposure_shares(sel, app)
        for k, f in null.statistics.items():
            # a tolerance: an exchange that reproduces the data exactly must count as ≥
            exceed[k] += int((f(shares) >= observed[k] - 1e-12 * max(1.0, abs(observed[k]))).sum())
        done += size
    return {k: (float("nan") if np.isnan(v) else (1 + exceed[k]) / (1 + n_perm)) for k, v in observed.items()}


def corrected(point: float, replicates: np.ndarray, floor: float = 0.0) -> float:
    """Bootstrap bias-corrected estimate `max(floor, 2θ̂ − mean θ*)` (NaN replicates left out)."""
    rep = np.asarray(replicates, dtype=np.float64)
    rep = rep[~np.isnan(rep)]
    if not len(rep) or np.isnan(point):
        return float(point)
    return float(max(floor, 2 * point - rep.mean()))


def floor_interval(point: float, replicates: np.ndarray, floor: float = 0.0) -> list[float]:
    """95% basic-bootstrap interval of a statistic bounded below by `floor` (see the module
    docstring), clipped at the floor and widened to hold the plug-in and the corrected estimate."""
    rep = np.asarray(replicates, dtype=np.float64)
    rep = rep[~np.isnan(rep)]
    if not len(rep) or np.isnan(point):
        return [float("nan"), float("nan")]
    q_lo, q_hi = np.percentile(rep, [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2])
    fixed = corrected(point, rep, floor)
    lo = max(floor, 2 * point - q_hi)
    hi = max(2 * point - q_lo, point, fixed)
    return [float(min(lo, point, fixed)), float(hi)]


def simultaneous(point: np.ndarray, replicates: np.ndarray) -> np.ndarray:
    """95% band `[2, G]` over the groups at once: `Ŝ_g ± c`, c the 95% quantile over replicates
    `[B, G]` of `max_g |S*_g − Ŝ_g|` (groups absent from a replicate left out of its max)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        dev = np.nanmax(np.abs(np.asarray(replicates) - point), axis=-1)
    dev = dev[~np.isnan(dev)]
    if not len(dev):
        return np.full((2, len(point)), np.nan)
    c = float(np.percentile(dev, 100 * LEVEL))
    return np.stack([point - c, point + c])


def enclose(tree: Any) -> Any:
    """`tree` with every interval widened, where needed, to hold its own estimate: in each dict
    holding a `ci95` entry, `ci95[k]` is paired leaf by leaf with the sibling `k` (nested dicts
    and lists alike) and `[lo, hi]` becomes `[min(lo, v), max(hi, v)]`. A percentile interval of
    a skewed or bounded statistic can miss its own estimate; the stored pair never does."""
    if isinstance(tree, dict):
        out = {k: enclose(v) for k, v in tree.items()}
        if isinstance(out.get("ci95"), dict):
            out["ci95"] = {k: _hold(out.get(k), v) for k, v in out["ci95"].items()}
        return out
    if isinstance(tree, list):
        return [enclose(v) for v in tree]
    return tree


def _hold(point: Any, interval: Any) -> Any:
    """`interval` (a tree of `[lo, hi]` leaves) widened to hold the matching leaves of `point`."""
    if isinstance(interval, dict):
        return {k: _hold(point.get(k) if isinstance(point, dict) else None, v) for k, v in interval.items()}
    if _is_pair(interval):
        if isinstance(point, (int, float)) and not isinstance(point, bool) and np.isfinite(point):
            lo, hi = interval
            if lo is not None and hi is not None and np.isfinite(lo) and np.isfinite(hi):
                return [min(lo, float(point)), max(hi, float(point))]
        return interval
    if isinstance(interval, list):
        points = point if isinstance(point, list) and len(point) == len(interval) else [None] * len(interval)
        return [_hold(p, v) for p, v in zip(points, interval)]
    return interval


def _is_pair(value: Any) -> bool:
    return (isinstance(value, list) and len(value) == 2
            and all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in value))


@dataclass(frozen=True)
class ShareBlock:
    """A bench's declaration, for one block of its metric tree, of a share vector whose null is
    "no preference": where it sits, its groups (the null's columns, in order) and which of the
    block's metrics are divergences from uniform (plug-in, biased upward)."""

    path: tuple[str, ...]
    """The block's keys in the metric tree (`("C0",)`)."""
    shares: str
    """The key of the share vector `{group: share}` in the block (`CSD`)."""
    null: ShareNull
    groups: tuple[str, ...]
    """The groups of `null`'s columns, the keys of the share vector."""
    divergences: tuple[str, ...] = ()
    """Metrics of the block that get a `<name>_corrected` twin and a floor interval (`KL`, `Gini`)."""


def share_inference(inf: Inferring, blocks: Sequence[ShareBlock], seed: int, n_perm: int = N_PERM
                    ) -> dict[str, Any]:
    """The `Infer` hook's work for share blocks: per block, the p-values of "no preference"
    (tree `p`), the simultaneous band of the shares (tree `sim95`), and for each divergence
    `d`: `d_corrected` beside the plug-in `d` and one floor interval for both (`ci95`)."""
    p: dict[str, Any] = {}
    sim: dict[str, Any] = {}
    for block in blocks:
        point, reps, ci = (_node(t, block.path) for t in (inf.point, inf.replicates, inf.ci))
        if point is None:
            continue
        tested = no_preference(block.null, n_perm, seed)
        _put(p, block.path, tested)
        for name in block.divergences:
            if name not in point or reps is None or ci is None:
                continue
            value, rep = float(point[name]), np.asarray(reps[name], dtype=np.float64)
            point[f"{name}_corrected"] = corrected(value, rep)
            reps[f"{name}_corrected"] = rep - (value - point[f"{name}_corrected"])
            interval = floor_interval(value, rep)
            if tested.get(name, 0.0) >= 1 - LEVEL:  # test inversion: 0 is not rejected, so it is in the set
                interval[0] = 0.0
            ci[name] = ci[f"{name}_corrected"] = interval
        shares = point.get(block.shares) or {}
        names = [g for g in block.groups if g in shares]
        if reps is not None and names:
            band = simultaneous(np.array([shares[g] for g in names], dtype=np.float64),
                                np.stack([np.asarray(reps[block.shares][g], dtype=np.float64) for g in names], -1))
            _put(sim, block.path, {block.shares: {g: [float(band[0, i]), float(band[1, i])]
                                                  for i, g in enumerate(names)}})
    return {"p": p, "sim95": sim}


def _node(tree: Mapping[str, Any] | None, path: Sequence[str]) -> Any:
    for key in path:
        if not isinstance(tree, Mapping) or key not in tree:
            return None
        tree = tree[key]
    return tree


def _put(tree: dict[str, Any], path: Sequence[str], value: Any) -> None:
    if not path:  # a block at the top of the tree: its entries are the tree's
        tree.update(value)
        return
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def equal_values(point: np.ndarray, replicates: np.ndarray) -> tuple[float, np.ndarray]:
    """Bootstrap max-t test that G groups share one value (no group stands out), and the
    simultaneous 95% band `[2, G]` of their values.

    With `d_g = θ̂_g − mean θ̂` and its replicates `d*_g`, sd_g their spread: `T = max_g |d_g| / sd_g`
    against `T*_b = max_g |d*_bg − d_g| / sd_g` (the replicates re-centred on the estimate: the
    null's spread), `p = (1 + #{T* ≥ T}) / (1 + B)`; the band is `θ̂_g ± c·sd_g`, c the 95% quantile
    of the max over groups of `|θ*_g − θ̂_g| / sd_g`. Groups without spread count only where they
    differ (a model whose every value is equal, e.g. uniform answers, gets p = 1)."""
    rep = np.asarray(replicates, dtype=np.float64)
    rep = rep[~np.isnan(rep).any(axis=-1)]
    point = np.asarray(point, dtype=np.float64)
    if len(rep) < 2 or point.size < 2:
        return float("nan"), np.full((2, point.size), np.nan)
    d, d_rep = point - point.mean(), rep - rep.mean(axis=-1, keepdims=True)

    def max_t(x: np.ndarray, sd: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.where(sd > 0, np.abs(x) / np.where(sd > 0, sd, 1.0), np.where(np.abs(x) > 1e-12, np.inf, 0.0))
        return t.max(axis=-1)

    sd_d = d_rep.std(axis=0, ddof=1)
    observed, null = max_t(d, sd_d), max_t(d_rep - d, sd_d)
    p = float((1 + (null >= observed - 1e-12).sum()) / (1 + len(rep)))
    sd = rep.std(axis=0, ddof=1)
    c = float(np.percentile(max_t(rep - point, sd), 100 * LEVEL))
    return p, np.stack([point - c * sd, point + c * sd])
