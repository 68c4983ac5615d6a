"""Bench-independent metric primitives, vectorised over leading (bootstrap) axes.

Conventions: every function takes arrays whose *last* axis is the distribution or vector and
broadcasts over the others; `0 · log 0 = 0`; a NaN entry marks a category absent from this
(re)sample, e.g. a group no resampled item shows, and is left out, exactly as if the data had
never contained it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np

from probe.config import Ge, Gt, Le, Seed, ZeroOrGe
from probe.probs import choice_probs, greedy_onehot, ratio  # noqa: F401 - the metric modules import it from here


MAX_BOOT = 1_000_000
"""Most bootstrap resamples: the replicate weights are a `[n_boot, items]` float64 array (17 GB
at this bound for CCD-Bench's 2,182 items), and the 2.5 % tails settle long before."""

MIN_BOOT = 10
"""Fewest bootstrap resamples behind a 95% interval (`analysis.n_boot`; 0: no intervals): the
percentile interval interpolates between the smallest and largest few resamples, and one or a
handful of resamples give an "interval" that need not contain its own estimate."""

SMALL_N = 20
"""Below this many resampled units (items; LocQA: templates) a percentile bootstrap resamples the
same handful: its intervals are too narrow and its p-values too small (under-coverage), so the
reports and `probe compare` say so."""


@dataclass(frozen=True)
class AnalysisOptions:
    """How stored log-probs become metrics (the metric options of the `analysis:` block)."""

    temperature: Annotated[float, Gt(0)] = 1.0
    """Expected metrics at sampling temperature T; greedy (T → 0) is always reported too."""
    n_boot: Annotated[int, ZeroOrGe(MIN_BOOT), Le(MAX_BOOT)] = 5000
    """Bootstrap resamples behind every ci95 interval (0: no intervals; else 10 to 1,000,000)."""
    seed: Seed = 0
    """Bootstrap seed."""
    letter_prior_ratio: Annotated[float, Gt(1)] = 2.0
    """Warn that the letter drives the answers when the largest letter prior or pick share exceeds
    this multiple of uniform (1/K), capped at halfway to certainty, (1 + 1/K)/2; the warning also
    fires when the common letter effect explains more log-prob variance than the content
    (`probe.metrics.letter_warnings`)."""
    min_letter_mass: Annotated[float, Ge(0), Le(1)] = 0.5
    """Prompt factors: a variant whose median letter mass (the probability on the letters its
    prompts show) is below this is a letter reading of a model that does not answer with a
    letter; it is listed and left out of the split and the verdicts (0: keep every variant)."""


def kl_to_uniform(p: np.ndarray) -> np.ndarray:
    """KL(p ‖ uniform) in nats: `Σ p ln(p n)`, n = number of present (non-NaN) categories."""
    n = (~np.isnan(p)).sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * np.log(p * n), 0.0)
    return terms.sum(axis=-1)


def gini(x: np.ndarray) -> np.ndarray:
    """Gini of non-negative values on the last axis (CCD-Bench eq. 4).

    `G = (n + 1 − 2 Σ_i (n + 1 − i) x_(i) / Σ x) / n` with x ascending, i = 1..n;
    0 for equal values, (n − 1)/n when one value holds everything; NaN if the sum is 0.
    n counts present (non-NaN) values only.
    """
    n = (~np.isnan(x)).sum(axis=-1, keepdims=True)
    xs = np.sort(np.where(np.isnan(x), np.inf, x), axis=-1)  # absent values sort last...
    i = np.arange(1, x.shape[-1] + 1)
    ranks = np.where(i <= n, n + 1 - i, 0)  # ...and get rank weight 0
    xs = np.where(np.isinf(xs), 0.0, xs)
    total = xs.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = (n[..., 0] + 1 - 2 * (xs * ranks).sum(axis=-1) / total) / n[..., 0]
    return np.where(total == 0, np.nan, g)


def jsd_bits(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen–Shannon divergence in bits (the divergence, not scipy's distance = its sqrt).

    An absent (NaN) category has probability 0 in that distribution.
    """
    p, q = np.nan_to_num(p), np.nan_to_num(q)
    m = 0.5 * (p + q)

    def kl(a: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(a > 0, a * np.log2(a / m), 0.0).sum(axis=-1)

    return 0.5 * kl(p) + 0.5 * kl(q)


def normalized_entropy(p: np.ndarray) -> np.ndarray:
    """`H(p) / ln n` on the last axis: 1 for uniform, 0 for a point mass."""
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=-1)
    return h / np.log(p.shape[-1])


def bootstrap_weights(n_items: int, n_boot: int, seed: int) -> np.ndarray:
    """`[n_boot, n_items]` multiplicities of a with-replacement resample of items.

    A metric written as sums over items with weight 1 becomes its bootstrap replicate when
    the weights are these counts, so all B replicates are one matrix product.
    """
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_items, size=(n_boot, n_items))
    w = np.zeros((n_boot, n_items), dtype=np.float64)
    np.add.at(w, (np.arange(n_boot)[:, None], draws), 1.0)
    return w


class Measured(dict[str, Any]):
    """Metric entries — what `metrics.json` holds: they read, compare and are written as a plain
    dict — returned with the bootstrap replicate trees behind their intervals (`replicates`,
    leaves `[B]`) by the name of the block they belong to (`expected`, `greedy`, LocQA's
    `metrics`, …). Paired comparisons subtract two runs' replicates: with the same seed and the
    same units, both runs are resampled identically."""

    def __init__(self, entries: Mapping[str, Any] | None = None, replicates: Mapping[str, Any] | None = None) -> None:
        super().__init__(entries or {})
        self.replicates: dict[str, Any] = dict(replicates or {})


def replicates_of(entries: Mapping[str, Any]) -> dict[str, Any]:
    """The replicate trees returned with `entries` (none for a plain mapping: no bootstrap ran)."""
    return dict(entries.replicates) if isinstance(entries, Measured) else {}


def merged(*parts: Mapping[str, Any]) -> Measured:
    """The entries of `parts` in order (a later key wins), with the replicates of each."""
    out = Measured()
    for part in parts:
        out.update(part)
        out.replicates.update(replicates_of(part))
    return out


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    """Apply `fn` to every leaf of nested dicts and lists."""
    if isinstance(tree, dict):
        return {k: tree_map(fn, v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [tree_map(fn, v) for v in tree]
    return fn(tree)


def to_scalars(tree: Any) -> Any:
    """Point-estimate tree (0-d arrays) → plain floats."""
    return tree_map(lambda a: float(np.asarray(a)), tree)


def percentile_ci(tree: Any, level: float = 0.95) -> Any:
    """Bootstrap tree (leaves `[B]`) → `[lo, hi]` percentile intervals, NaN replicates ignored."""
    lo, hi = 100 * (1 - level) / 2, 100 * (1 + level) / 2

    def ci(a: Any) -> list[float]:
        a = np.asarray(a, dtype=np.float64)
        if np.isnan(a).all():
            return [float("nan"), float("nan")]
        return [float(np.nanpercentile(a, lo)), float(np.nanpercentile(a, hi))]

    return tree_map(ci, tree)


def expected_greedy_ci(
    logprobs: np.ndarray,
    n_items: int,
    reduce: Callable[[np.ndarray], Any],
    evaluate: Callable[[Any, np.ndarray], Any],
    temperature: float,
    n_boot: int,
    seed: int,
    finish: Callable[[str, Any], Any] | None = None,
    infer: Infer | None = None,
) -> Measured:
    """The `expected`, `greedy` and `ci95` blocks of a forced-choice `metrics.json`.

    `reduce(probs)` turns `[prompt, letter]` choice probabilities into per-item sums (once per
    flavour); `evaluate(sums, w)` gives the metric tree for item weights `w` (`[n_items]` → point
    estimate, `[B, n_items]` → the B bootstrap replicates). `finish(flavour, tree)`, when given,
    adjusts both trees of a flavour alike (e.g. names a metric by flavour), so point estimates,
    intervals and replicates keep one shape. `ci95` holds percentile intervals over items, `{}`
    when n_boot = 0; the replicates behind them are returned with the blocks (`Measured`).
    `infer`, when given and n_boot > 0, adds a bench's inference (`Infer`): its parallel trees
    (`p`, `sim95`) land under their own top-level keys by flavour, like `ci95`.
    """
    out = Measured()
    boot_w = bootstrap_weights(n_items, n_boot, seed) if n_boot > 0 else None
    ci: dict[str, Any] = {}

    def tree(flavour: str, sums: Any, w: np.ndarray) -> Any:
        t = evaluate(sums, w)
        return finish(flavour, t) if finish else t

    for flavour, probs in (("expected", choice_probs(logprobs, temperature)), ("greedy", greedy_onehot(logprobs))):
        sums = reduce(probs)
        out[flavour] = to_scalars(tree(flavour, sums, np.ones(n_items)))
        if boot_w is not None:
            out.replicates[flavour] = tree(flavour, sums, boot_w)
            ci[flavour] = percentile_ci(out.replicates[flavour])
            if infer is not None:
                for key, part in infer(Inferring(flavour, sums, out[flavour], out.replicates[flavour],
                                                 ci[flavour])).items():
                    out.setdefault(key, {})[flavour] = part
    out["ci95"] = ci
    return out


@dataclass(frozen=True)
class Inferring:
    """What a bench's `Infer` hook sees for one flavour; it may add entries to `point`,
    `replicates` and `ci` in place (a bias-corrected estimate and its interval)."""

    flavour: str
    sums: Any
    """The per-item sums (`reduce`'s result) of this flavour."""
    point: dict[str, Any]
    replicates: dict[str, Any]
    ci: dict[str, Any]


Infer = Callable[[Inferring], dict[str, Any]]
"""A bench's inference beyond the percentile intervals: `{tree name: tree}` for this flavour
(e.g. `{"p": {...}, "sim95": {...}}`, see `probe.metrics.preference`)."""


def wsum(w: np.ndarray, a: np.ndarray) -> np.ndarray:
    """`Σ_i w[..., i] a[i, ...]`: item weights `[..., n_items]` × per-item sums `[n_items, *rest]`
    → `[..., *rest]` (the point estimate for all-ones weights, B replicates for `[B, n_items]`)."""
    return np.tensordot(w, a, axes=([-1], [0]))


def nanmean(a: np.ndarray, axis: int = -1) -> np.ndarray:
    """Mean over the present (non-NaN) entries; NaN, without a warning, when none is present."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(a, axis=axis)


def get_path(tree: Any, *path: str) -> Any:
    """`tree["a"]["b"]` for the metric path `"a.b"` (or the parts `"a", "b"`); None where a level
    is missing or null."""
    for key in (k for part in path for k in part.split(".")):
        if not isinstance(tree, Mapping) or tree.get(key) is None:
            return None
        tree = tree[key]
    return tree


def symmetric_kl(p: Mapping[str, float], q: Mapping[str, float], eps: float = 1e-10) -> float:
    """Symmetrized KL between two distributions given as `{category: share}`, in nats.

    `D_sym(P, Q) = ½ Σ_c [P_c ln(P_c/Q_c) + Q_c ln(Q_c/P_c)] = ½ (KL(P‖Q) + KL(Q‖P))` over the
    union of keys (a missing key is 0), after adding `eps` to every entry and renormalising, so
    a category one run never chose gives a large but finite value; NaN if either has a NaN.
    0 iff P = Q; symmetric. The ½ is CCD-Bench's (eq. 5); the between-model matrix of these
    feeds average-linkage clustering.
    """
    keys = sorted(set(p) | set(q))
    a = np.array([float(p.get(k, 0.0)) for k in keys]) + eps
    b = np.array([float(q.get(k, 0.0)) for k in keys]) + eps
    a, b = a / a.sum(), b / b.sum()
    return 0.5 * float(np.sum((a - b) * np.log(a / b)))  # P ln P/Q + Q ln Q/P = (P − Q) ln(P/Q)
