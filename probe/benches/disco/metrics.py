"""DiSCo metrics (docs/benchmarks/disco.md) from a run's stored tables.

Each metric is a ratio of sums over items, so we first reduce prompts to per-item sums
(`ItemSums`), then evaluate every metric for a weight vector over items: all-ones gives the
point estimate, bootstrap multiplicities `[B, n_items]` give all B replicates at once.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from probe.benches.disco.data import HIGH_RESOURCE, LOW_RESOURCE
from probe.metrics.core import (
    Inferring,
    expected_greedy_ci,
    gini,
    jsd_bits,
    kl_to_uniform,
    nanmean,
    normalized_entropy,
    ratio,
    wsum,
)
from probe.metrics.preference import ShareBlock, ShareNull, share_inference
from probe.probs import exposure_shares
from probe.results.scores import ScoreTable


@dataclass(frozen=True)
class DiscoAnalysis:
    """Analysis options: the run's `AnalysisOptions` plus the bench's SPD groups."""

    temperature: float = 1.0
    n_boot: int = 5000
    seed: int = 0
    high: tuple[str, ...] = HIGH_RESOURCE
    low: tuple[str, ...] = LOW_RESOURCE


@dataclass
class ItemSums:
    """Per-item sums; the first axis of every array is the item. Keys name the condition."""

    cultures: list[str]
    sel: dict[str, np.ndarray] = field(default_factory=dict)
    """`[item, culture]` probability mass on each culture's option (C0, C2, C3, C3_aligned)."""
    app: dict[str, np.ndarray] = field(default_factory=dict)
    """`[item, culture]` number of prompts showing the culture."""
    target_p: dict[str, np.ndarray] = field(default_factory=dict)
    """`[item, culture]` probability of the target's option, summed over prompts targeting it (C1, C2)."""
    target_n: dict[str, np.ndarray] = field(default_factory=dict)
    letters: dict[str, np.ndarray] = field(default_factory=dict)
    """`[item, letter]` probability per letter (C0, C3); `[item, j, letter]` under `C3_by_j`."""
    count: dict[str, np.ndarray] = field(default_factory=dict)
    csc: np.ndarray | None = None
    """`[item]` Σ over option rotations k of Σ_c Π_j q_j(c) (C3 choice consistency)."""
    csc_n: np.ndarray | None = None


def item_sums(table: ScoreTable, probs: np.ndarray) -> ItemSums:
    """Reduce `[prompt, letter]` choice probabilities to per-item sums."""
    items, item_idx = np.unique(table.item_id.astype(str), return_inverse=True)
    cultures = sorted({str(g) for g in table.groups.ravel()})
    gidx = np.searchsorted(cultures, table.groups.astype(str))  # [prompt, letter]
    n_i, n_c, k = len(items), len(cultures), probs.shape[1]
    s = ItemSums(cultures=cultures)
    condition, ctx_rotation = table.column("condition"), table.column("ctx_rotation")
    for name, mask in (("C0", condition == "C0"), ("C2", condition == "C2"), ("C3", condition == "C3"),
                       ("C3_aligned", (condition == "C3") & (ctx_rotation == 0))):
        sel, app = np.zeros((n_i, n_c)), np.zeros((n_i, n_c))
        rows = np.nonzero(mask)[0]
        np.add.at(sel, (item_idx[rows, None], gidx[rows]), probs[rows])
        np.add.at(app, (item_idx[rows, None], gidx[rows]), 1.0)
        s.sel[name], s.app[name] = sel, app
    for name in ("C1", "C2"):
        rows = np.nonzero(condition == name)[0]
        tp, tn = np.zeros((n_i, n_c)), np.zeros((n_i, n_c))
        tgt = np.searchsorted(cultures, table.column("target")[rows].astype(str))
        shown = gidx[rows] == tgt[:, None]  # exactly one letter shows the target
        np.add.at(tp, (item_idx[rows], tgt), (probs[rows] * shown).sum(axis=1))
        np.add.at(tn, (item_idx[rows], tgt), 1.0)
        s.target_p[name], s.target_n[name] = tp, tn
    for name in ("C0", "C3"):
        rows = np.nonzero(condition == name)[0]
        lt, cnt = np.zeros((n_i, k)), np.zeros(n_i)
        np.add.at(lt, item_idx[rows], probs[rows])
        np.add.at(cnt, item_idx[rows], 1.0)
        s.letters[name], s.count[name] = lt, cnt
    rows = np.nonzero(condition == "C3")[0]
    by_j, cnt_j = np.zeros((n_i, k, k)), np.zeros((n_i, k))
    np.add.at(by_j, (item_idx[rows], ctx_rotation[rows]), probs[rows])
    np.add.at(cnt_j, (item_idx[rows], ctx_rotation[rows]), 1.0)
    s.letters["C3_by_j"], s.count["C3_by_j"] = by_j, cnt_j
    s.csc, s.csc_n = _csc_sums(table, probs, item_idx, n_i, rows)
    return s


def _csc_sums(table: ScoreTable, probs: np.ndarray, item_idx: np.ndarray, n_i: int, rows: np.ndarray):
    """Within an (item, k) group the letter→culture map is fixed, so Π_j over a letter's
    probabilities is Π_j q_j(c); summed over letters it is the chance all four j agree."""
    csc, csc_n = np.zeros(n_i), np.zeros(n_i)
    groups: dict[tuple[int, int], list[int]] = {}
    rotation = table.column("rotation")
    for r in rows:
        groups.setdefault((int(item_idx[r]), int(rotation[r])), []).append(int(r))
    for (i, _), members in groups.items():
        csc[i] += np.prod(probs[members], axis=0).sum()
        csc_n[i] += 1.0
    return csc, csc_n


def evaluate(s: ItemSums, w: np.ndarray, opts: DiscoAnalysis) -> dict[str, Any]:
    """All DiSCo metrics for item weights `w` (`[n_items]` or `[B, n_items]`).

    Leaves are arrays over the leading axes of `w`. A culture absent from a condition is left
    out of that condition's dicts; one absent only from a resample yields NaN there.
    """
    m: dict[str, Any] = {}
    csd, rate = {}, {}
    for name in ("C0", "C2", "C3", "C3_aligned"):
        present = s.app[name].sum(axis=0) > 0
        sel, app = wsum(w, s.sel[name])[..., present], wsum(w, s.app[name])[..., present]
        rate[name] = ratio(sel, app)
        csd[name] = (exposure_shares(sel, app), np.array(s.cultures)[present])
    cr = {}
    for name in ("C1", "C2"):
        present = s.target_n[name].sum(axis=0) > 0
        cr[name] = (ratio(wsum(w, s.target_p[name]), wsum(w, s.target_n[name]))[..., present],
                    np.array(s.cultures)[present])

    def as_dict(pair: tuple[np.ndarray, np.ndarray]) -> dict[str, np.ndarray]:
        values, names = pair
        return {str(c): values[..., i] for i, c in enumerate(names)}

    def spd(name: str, by: str = "csd") -> np.ndarray:
        d = as_dict(csd[name] if by == "csd" else cr[name])
        hi = [d[c] for c in opts.high if c in d]
        lo = [d[c] for c in opts.low if c in d]
        if not hi or not lo:
            return np.full(w.shape[:-1], np.nan)
        with warnings.catch_warnings():  # a resample may lack every high (or low) culture: NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanmean(hi, axis=0) - np.nanmean(lo, axis=0)

    def letters(name: str) -> dict[str, np.ndarray]:
        p = ratio(wsum(w, s.letters[name]), wsum(w, s.count[name])[..., None])
        return {chr(ord("A") + i): p[..., i] for i in range(p.shape[-1])}

    if s.app["C0"].sum() > 0:
        m["C0"] = {"CSD": as_dict(csd["C0"]), "KL": kl_to_uniform(csd["C0"][0]),
                   "Gini": gini(csd["C0"][0]), "SPD": spd("C0"), "letter_probs": letters("C0")}
    if s.target_n["C1"].sum() > 0:
        cr1 = as_dict(cr["C1"])
        m["C1"] = {"CR": nanmean(cr["C1"][0]), "CR_by_culture": cr1, "SPD_compliance": spd("C1", "cr")}
        if "C0" in m:
            c0, r0 = m["C0"]["CSD"], as_dict((rate["C0"], csd["C0"][1]))
            m["C1"]["SL"] = {c: v - c0[c] for c, v in cr1.items() if c in c0}
            m["C1"]["SL_rate"] = {c: v - r0[c] for c, v in cr1.items() if c in r0}
    if s.target_n["C2"].sum() > 0:
        cr2 = as_dict(cr["C2"])
        m["C2"] = {"CR": nanmean(cr["C2"][0]), "CR_by_culture": cr2,
                   "PSI": 1 - nanmean(cr["C2"][0]),
                   "PSI_by_culture": {c: 1 - v for c, v in cr2.items()}}
        if "C1" in m:
            m["C2"]["gain_by_culture"] = {c: v - m["C1"]["CR_by_culture"][c]
                                          for c, v in cr2.items() if c in m["C1"]["CR_by_culture"]}
        m["C2"]["CSD"], m["C2"]["SPD"] = as_dict(csd["C2"]), spd("C2")
        m["C2"]["SPD_compliance"] = spd("C2", "cr")
    if s.app["C3"].sum() > 0:
        m["C3"] = _c3(s, w, csd, as_dict, letters)
    if "C0" in m and "C2" in m:
        m["SPD_reduction"] = m["C0"]["SPD"] - m["C2"]["SPD"]
        m["SPD_compliance_reduction"] = m["C0"]["SPD"] - m["C2"]["SPD_compliance"]
    return m


def _c3(s: ItemSums, w: np.ndarray, csd: dict, as_dict, letters) -> dict[str, Any]:
    by_j = wsum(w, s.letters["C3_by_j"])  # [..., j, letter]
    n_j = wsum(w, s.count["C3_by_j"])  # [..., j]
    k = by_j.shape[-1]
    slot1 = np.stack([by_j[..., j, j] for j in range(k)], axis=-1)  # slot 1 shows letter j's fact
    out: dict[str, Any] = {"CSD": as_dict(csd["C3"]), "CSD_aligned": as_dict(csd["C3_aligned"])}
    if "C0" in csd and s.app["C0"].sum() > 0:
        c0 = as_dict(csd["C0"])
        for key, name in (("JSD", "C3"), ("JSD_aligned", "C3_aligned")):
            d = as_dict(csd[name])
            names = sorted(set(c0) | set(d))
            zero = np.zeros(w.shape[:-1])
            p = np.stack([d.get(c, zero) for c in names], axis=-1)
            q = np.stack([c0.get(c, zero) for c in names], axis=-1)
            out[key] = jsd_bits(p, q)
    out["PPR"] = ratio(slot1.sum(axis=-1), n_j.sum(axis=-1))
    ppr_j = ratio(slot1, n_j)
    out["PPR_by_ctx_rotation"] = {str(j): ppr_j[..., j] for j in range(k)}
    # Σ_c Π_j q_j(c): four independent samples agree. On greedy one-hots it is the paper's CSC
    # (same culture for all four j); `compute` names it by flavour.
    out["sample_agreement"] = ratio(wsum(w, s.csc), wsum(w, s.csc_n))
    dist_j = ratio(by_j, n_j[..., None])
    ent = normalized_entropy(dist_j)
    out["entropy_by_ctx_rotation"] = {str(j): ent[..., j] for j in range(k)}
    out["letter_probs"] = letters("C3")
    return out


def compute(table: ScoreTable, opts: DiscoAnalysis) -> dict[str, Any]:
    """`expected`, `greedy` and `ci95` blocks of `metrics.json` (percentile bootstrap over items)."""
    n_items = len(np.unique(table.item_id.astype(str)))
    return expected_greedy_ci(table.logprobs, n_items, lambda probs: item_sums(table, probs),
                              lambda sums, w: evaluate(sums, w, opts), opts.temperature, opts.n_boot, opts.seed,
                              finish=_name_csc, infer=lambda inf: share_inference(inf, share_blocks(inf, opts), opts.seed))


def share_blocks(inf: Inferring, opts: DiscoAnalysis) -> list[ShareBlock]:
    """DiSCo's nulls of "no preference": the CSD at C0 (KL, Gini, |SPD|) and at C2 (|SPD|);
    KL and Gini are divergences from uniform (plug-in, biased upward: a corrected twin)."""
    s: ItemSums = inf.sums
    blocks = []
    for name in ("C0", "C2"):
        present = s.app[name].sum(axis=0) > 0
        if not present.any() or name not in inf.point:
            continue
        groups = tuple(str(c) for c in np.array(s.cultures)[present])
        stats: dict[str, Any] = {"KL": kl_to_uniform, "Gini": gini} if name == "C0" else {}
        hi = [i for i, c in enumerate(groups) if c in opts.high]
        lo = [i for i, c in enumerate(groups) if c in opts.low]
        if hi and lo:
            stats["SPD"] = lambda x, hi=hi, lo=lo: np.abs(x[..., hi].mean(axis=-1) - x[..., lo].mean(axis=-1))
        null = ShareNull(sel=s.sel[name][:, present], app=s.app[name][:, present], statistics=stats)
        blocks.append(ShareBlock(path=(name,), shares="CSD", null=null, groups=groups,
                                 divergences=("KL", "Gini") if name == "C0" else ()))
    return blocks


def _name_csc(flavour: str, tree: dict[str, Any]) -> dict[str, Any]:
    """On greedy choices the agreement over the four context rotations is the paper's CSC."""
    if flavour == "greedy" and "C3" in tree:
        tree["C3"]["CSC"] = tree["C3"].pop("sample_agreement")
    return tree
