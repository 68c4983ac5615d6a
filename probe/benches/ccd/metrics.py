"""CCD-Bench metrics (docs/benchmarks/ccd.md, docs/results/contract.md) from a run's stored tables.

Every metric is a function of a few sums over items, so prompts are first reduced to per-item
sums (`ItemSums`); `evaluate` then computes all metrics for a weight vector over items: all-ones
gives the point estimate, bootstrap multiplicities `[B, n_items]` give all B replicates at once.
Nothing assumes a design: the cluster shown at each letter is read from `table.groups`, so
cyclic (10 rotations per item) and Latin-square (one ordering per item) runs share one path.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from probe.benches.ccd.data import CLUSTERS, DOMAINS
from probe.errors import ProbeInputError
from probe.metrics.core import AnalysisOptions, Inferring, expected_greedy_ci, gini, ratio, symmetric_kl, wsum
from probe.metrics.preference import ShareBlock, ShareNull, share_inference
from probe.results.layout import METRICS
from probe.results.scores import ScoreTable

"""Display order of the published domains; other domain labels follow, sorted."""


@dataclass
class ItemSums:
    """Per-item sums; the first axis of every array is the item (sorted item ids)."""

    clusters: list[str]
    """Clusters shown anywhere in the table, in canonical order."""
    domains: list[str]
    """Item domains present in the table; empty when the table has no categories."""
    chosen: np.ndarray
    """`[item, cluster, position]` probability mass on position ℓ while it shows cluster c."""
    shown: np.ndarray
    """`[item, cluster, position]` number of prompts showing cluster c at position ℓ."""
    domain: np.ndarray
    """`[item, domain]` one-hot of the item's domain (all zeros when there are none)."""


def item_sums(table: ScoreTable, probs: np.ndarray) -> ItemSums:
    """Reduce `[prompt, letter]` choice probabilities (or one-hots) to per-item sums.

    Fails on a group label that is not a GLOBE cluster and on an item whose prompts disagree
    on the domain, or a table where only some prompts carry one.
    """
    items, item_idx = np.unique(table.item_id.astype(str), return_inverse=True)
    labels = np.asarray(table.groups).astype(str)
    present = set(np.unique(labels))
    unknown = sorted(present - set(CLUSTERS))
    if unknown:
        raise ProbeInputError(f"CCD metrics, field 'groups': expected GLOBE clusters {list(CLUSTERS)}, "
                              f"got {unknown}")
    clusters = [c for c in CLUSTERS if c in present]
    cidx = np.vectorize({c: i for i, c in enumerate(clusters)}.__getitem__, otypes=[np.int64])(labels)
    n_i, n_c, k = len(items), len(clusters), probs.shape[1]
    pos = np.broadcast_to(np.arange(k), cidx.shape)
    rows = np.broadcast_to(item_idx[:, None], cidx.shape)
    chosen, shown = np.zeros((n_i, n_c, k)), np.zeros((n_i, n_c, k))
    np.add.at(chosen, (rows, cidx, pos), probs)
    np.add.at(shown, (rows, cidx, pos), 1.0)
    domains, onehot = _item_domains(table, item_idx, n_i)
    return ItemSums(clusters=clusters, domains=domains, chosen=chosen, shown=shown, domain=onehot)


def _item_domains(table: ScoreTable, item_idx: np.ndarray, n_i: int) -> tuple[list[str], np.ndarray]:
    cat = table.category
    if cat is None or all(c is None for c in cat):
        return [], np.zeros((n_i, 0))
    missing = [i for i, c in enumerate(cat) if c is None]
    if missing:
        raise ProbeInputError(f"CCD metrics, field 'category': prompt {table.prompt_id[missing[0]]} has no "
                              f"domain while others do ({len(missing)} prompts without one)")
    cat = np.asarray(cat).astype(str)
    found = set(np.unique(cat))
    domains = [d for d in DOMAINS if d in found] + sorted(found - set(DOMAINS))
    didx = np.vectorize({d: i for i, d in enumerate(domains)}.__getitem__, otypes=[np.int64])(cat)
    onehot = np.zeros((n_i, len(domains)))
    onehot[item_idx, didx] = 1.0
    if (onehot.sum(axis=1) != 1).any():
        bad = int(np.nonzero(onehot.sum(axis=1) != 1)[0][0])
        item = np.unique(table.item_id.astype(str))[bad]
        raise ProbeInputError(f"CCD metrics, field 'category': item {item!r} has prompts in several domains")
    return domains, onehot


def goodness_of_fit(obs: np.ndarray, shown: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """χ² of counts `obs` against `E = N·shown/Σ shown` on the last axis, and Cramér's V.

    `N = Σ obs`; categories with `shown = 0` are left out and `k` is the number used, so
    `V = sqrt(χ² / (N (k − 1)))` (≤ 1 when `shown` is uniform). NaN when N = 0 or k < 2.
    """
    used = shown > 0
    n = obs.sum(axis=-1)
    e = ratio(n[..., None] * shown, shown.sum(axis=-1, keepdims=True))
    with np.errstate(divide="ignore", invalid="ignore"):
        chi2 = np.where(used, (obs - e) ** 2 / np.where(used, e, 1.0), 0.0).sum(axis=-1)
    k = used.sum(axis=-1)
    v = np.sqrt(ratio(chi2, n * (k - 1)))
    return np.where(n > 0, chi2, np.nan), v


def contingency(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pearson χ² of a `[..., D, C]` table and standardized residuals `(T − E)/sqrt(E)`.

    `E = row·col/N`; cells with E = 0 (an empty row or column: a domain absent from the
    resample, a cluster never chosen) are left out of χ² and get a NaN residual.
    """
    n = t.sum(axis=(-2, -1))[..., None, None]
    e = ratio(t.sum(axis=-1, keepdims=True) * t.sum(axis=-2, keepdims=True), n)
    used = e > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        resid = np.where(used, (t - e) / np.sqrt(np.where(used, e, 1.0)), np.nan)
    chi2 = np.where(used, resid ** 2, 0.0).sum(axis=(-2, -1))
    return np.where(n[..., 0, 0] > 0, chi2, np.nan), resid


def entropy_bits(p: np.ndarray) -> np.ndarray:
    """Shannon entropy `−Σ p log2 p` on the last axis, `0 · log 0 = 0`; NaN if p has a NaN."""
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(p > 0, p * np.log2(np.where(p > 0, p, 1.0)), 0.0).sum(axis=-1)
    return np.where(np.isnan(p).any(axis=-1), np.nan, h)


def evaluate(s: ItemSums, w: np.ndarray, opts: AnalysisOptions) -> dict[str, Any]:
    """All CCD-Bench metrics for item weights `w` (`[n_items]` or `[B, n_items]`).

    Leaves are arrays shaped `w.shape[:-1]` (`position_shares` is a list of K of them). With
    `p` the per-prompt choice distribution (expected) or argmax one-hot (greedy) and
    `g[ℓ]` the cluster shown at letter ℓ:

    - `f_c = Σ_prompts Σ_ℓ p[ℓ]·1[g[ℓ] = c]`; `shares[c] = f_c / Σ f` (clusters shown anywhere).
    - χ² statistics count per item, not per prompt: each item's choice mass is divided by its
      number of prompts (one unit per item), so the cyclic design (10 prompts per item) and the
      Latin square (1) give the same χ² for the same per-item choices; V is unchanged.
    - `O[ℓ] = Σ_items p̄_i[ℓ]`, `N = Σ O` (the number of items); `position_shares = O/N`
      (A..J); `position_chi2 = Σ (O − N/k)²/(N/k)`, `position_V = sqrt(χ²/(N(k − 1)))`, k = K.
    - Per cluster, `O_c[ℓ] = Σ_prompts p[ℓ]·1[g[ℓ] = c]` against `E_c[ℓ] = N_c·S_c[ℓ]/Σ S_c`,
      where `S_c[ℓ]` counts prompts showing c at ℓ and `N_c = Σ O_c` (uniform `N_c/k` under a
      balanced design); positions with `S_c = 0` are left out and k is the number used;
      `cluster_position_V[c] = sqrt(χ²_c/(N_c(k − 1)))`, NaN when `N_c = 0` (never chosen,
      e.g. greedy). `mean_cluster_position_V` averages the non-NaN V_c.
    - `T[d, c]` = the per-item-unit f_c restricted to items of domain d; `domain_chi2 = Σ (T − E)²/E` over cells
      with `E = row·col/N > 0`; `domain_residuals[d][c] = (T − E)/sqrt(E)`, NaN where E = 0.
      Without domains: `domain_chi2` NaN and `domain_residuals` empty.
    - `entropy_bits = −Σ shares log2 shares` (0·log 0 = 0); `gini = core.gini(f)`.
    """
    del opts  # no option changes the formulas; kept for the shared evaluate(sums, w, opts) shape
    chosen = wsum(w, s.chosen)  # [..., cluster, position]
    f = chosen.sum(axis=-1)
    total = f.sum(axis=-1, keepdims=True)
    shares = ratio(f, total)
    # χ² tests count each item once, whatever the design: per-item counts divided by the
    # item's prompts (cyclic: 10, Latin square: 1), so both designs report on one scale.
    per_item = s.chosen.sum(axis=(1, 2))[:, None, None]
    unit = ratio(s.chosen, per_item)
    chosen_u, shown_u = wsum(w, unit), wsum(w, ratio(s.shown, per_item))
    o = chosen_u.sum(axis=-2)
    pos_chi2, pos_v = goodness_of_fit(o, np.ones_like(o))
    v_c = goodness_of_fit(chosen_u, shown_u)[1]
    with warnings.catch_warnings():  # an all-NaN row (nothing chosen) is meant to give NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        mean_v = np.nanmean(v_c, axis=-1)
    m: dict[str, Any] = {
        "shares": {c: shares[..., i] for i, c in enumerate(s.clusters)},
        "position_shares": list(np.moveaxis(ratio(o, o.sum(axis=-1, keepdims=True)), -1, 0)),
        "position_chi2": pos_chi2,
        "position_V": pos_v,
        "cluster_position_V": {c: v_c[..., i] for i, c in enumerate(s.clusters)},
        "mean_cluster_position_V": mean_v,
    }
    if s.domains:
        f_items = unit.sum(axis=-1)  # [item, cluster], one unit per item
        t = wsum(w, s.domain[:, :, None] * f_items[:, None, :])  # [..., domain, cluster]
        m["domain_chi2"], resid = contingency(t)
        m["domain_residuals"] = {d: {c: resid[..., j, i] for i, c in enumerate(s.clusters)}
                                 for j, d in enumerate(s.domains)}
    else:
        m["domain_chi2"], m["domain_residuals"] = np.full(w.shape[:-1], np.nan), {}
    m["entropy_bits"] = entropy_bits(shares)
    m["gini"] = gini(f)
    return m


def compute(table: ScoreTable, opts: AnalysisOptions) -> dict[str, Any]:
    """`expected`, `greedy` and `ci95` blocks of `metrics.json` (percentile bootstrap over items).

    `ci95` mirrors `M` with `[lo, hi]` leaves (`position_shares` becomes a list of pairs); it is
    `{}` when `opts.n_boot == 0`.
    """
    n_items = len(np.unique(table.item_id.astype(str)))
    return expected_greedy_ci(table.logprobs, n_items, lambda probs: item_sums(table, probs),
                              lambda sums, w: evaluate(sums, w, opts), opts.temperature, opts.n_boot, opts.seed,
                              infer=lambda inf: share_inference(inf, [share_block(inf)], opts.seed))


def share_block(inf: Inferring) -> ShareBlock:
    """CCD-Bench's null of "no preference": the cluster shares, tested by their Gini and their
    entropy's shortfall from log2 G (both 0 when every cluster gets 1/G); the Gini is a
    divergence from uniform (plug-in, biased upward: a corrected twin). With one ordering per
    item (Latin square) the within-item exchange also moves clusters between letters, so under a
    letter prior the test is conservative (its size stays below 0.05)."""
    s: ItemSums = inf.sums
    sel, app = s.chosen.sum(axis=-1), s.shown.sum(axis=-1)
    stats = {"gini": gini, "entropy_bits": lambda x: np.log2(x.shape[-1]) - entropy_bits(x)}
    return ShareBlock(path=(), shares="shares", null=ShareNull(sel=sel, app=app, statistics=stats),
                      groups=tuple(s.clusters), divergences=("gini",))


def pluralism(judgements: Sequence[Mapping[str, Any]], top: int = 10) -> dict[str, Any]:
    """Share of judged rationales citing ≥ 2 GLOBE dimensions, and the most frequent pairs.

    `judgements` are `judgements.parquet` rows; rationales the judge failed on are excluded from
    the rate and counted in `n_judge_errors`."""
    rows = [r for r in judgements if r["task"] == "globe_dimensions"]
    judged = [r["dimensions"] for r in rows if r["judge_error"] is None]
    pairs: dict[tuple[str, str], int] = {}
    for dims in judged:
        for i, a in enumerate(dims):
            for b in dims[i + 1:]:
                pairs[(a, b)] = pairs.get((a, b), 0) + 1
    ranked = sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return {"rate": float(np.mean([len(d) >= 2 for d in judged])) if judged else float("nan"),
            "n_rationales": len(judged), "n_judge_errors": len(rows) - len(judged),
            "top_pairs": [[a, b, n] for (a, b), n in ranked]}


def run_shares(run_dir: Path, flavour: str = "expected") -> dict[str, float]:
    """A CCD run's cluster shares from its `metrics.json`."""
    path = Path(run_dir) / METRICS
    if not path.is_file():
        raise ProbeInputError(f"{run_dir}: no metrics.json; is this a finished probe run?")
    metrics = json.loads(path.read_text())
    block = metrics.get(flavour) or {}
    if "shares" not in block:
        why = "its letter prior could not be estimated (see `letter_prior_estimator` in metrics.json)" if (
            flavour == "debiased" and "debiased" in metrics and metrics["debiased"] is None) else "not a CCD-Bench run?"
        raise ProbeInputError(f"{path}: no `{flavour}.shares` ({why})")
    return block["shares"]


def sym_kl_between_runs(run_a: Path, run_b: Path, flavour: str = "expected", eps: float = 1e-10) -> float:
    """Symmetrized KL (paper eq. 5: ½[KL(p‖q) + KL(q‖p)], ε added) between two runs' cluster
    distributions; the distance behind the sweep's average-linkage dendrogram."""
    return symmetric_kl(run_shares(run_a, flavour), run_shares(run_b, flavour), eps)
