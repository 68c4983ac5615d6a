"""Is a choice the content or the letter? The letter-prior decomposition of a forced-choice run
(docs/concepts/letter-prior.md), computed from the stored letter log-probs alone.

A *prompt group* is one item under one value of every design field but the ordering (the
prompts that differ only in the option order; `probe.types.Design`). With letters renormalised over the K letters, write

    L[r, j] = log p_r(j) = μ_r + a_j + c(o[r, j]) + e[r, j]

(μ_r = −log Z_r of ordering r, a_j the letter effect, c the content effect of the option
shown at letter j). When a group's orderings put every option equally often at every letter (a
Latin square — the cyclic rotations of DiSCo and CCD-Bench are one —, all K! permutations, a
Williams design: `probe.metrics.balance`), ordering, letter and content are orthogonal, so the
least-squares fit is closed-form:

- content: `c(o) = mean_r L[r, letter showing o]`, the debiased distribution of the group is
  `q(o) ∝ exp c(o)` (the geometric mean of the option's probabilities over the orderings);
- letter prior: `π_j ∝ exp(mean over groups and orderings of L[r, j] − c(o[r, j]))`; within a
  complete group `mean_r c(o[r, j])` is the same for every j, so this is
  `π_j ∝ exp(mean over the condition's prompts of L[r, j])`;
- variance split: after removing each ordering's mean, the sums of squares of letter means,
  content means and the residual, pooled over groups; the letter part split again into what is
  common to the condition (π) and the letter × group interaction (item-specific letter
  preferences, DiSCo C3's primacy) — four shares that add to 1.

Adding a constant to one letter's logit adds it to `a_j` only: `q` is exactly unchanged.

Designs with one ordering per item (CCD's Latin square) have no complete group; the same π
formula then relies on the design balancing labels across letters over items (`label_balance`,
refused below `BALANCE_MIN`), and each prompt is debiased as `p / π` renormalised (PriDe's form,
Zheng et al., ICLR 2024). Generated (one-hot) choices have zeros: π comes from the pairwise
conditional likelihood (`probe.metrics.pairfit`), the contents from a log-linear fit with π held
(`probe.metrics.ipf`). Every run also reports the model-free pick shares per letter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from probe.metrics.balance import position_balanced
from probe.metrics.core import bootstrap_weights, percentile_ci, ratio, to_scalars, wsum
from probe.metrics.ipf import fit_choices
from probe.metrics.letter_effect import content_reliability, mass_moved
from probe.metrics.letter_warnings import warnings_of
from probe.metrics.pairfit import fit_prior, pair_data, separated
from probe.results.scores import ScoreTable
from probe.types import LETTERS, Design

ROTATIONS, PRIOR, MIXED, COUNTS, NONE = "rotations", "prior_division", "mixed", "count_fit", "none"
"""Estimators: the closed form over complete groups; PriDe's `p / π` where no group is complete;
both in one condition; the fit of one-hot choices; none possible (the design cannot separate
letter from content — the estimator block says why)."""

BALANCE_MIN = 0.9
"""PriDe's `p / π` pools π over a design that must put every label equally often at every letter;
below this `label_balance` no π is estimated. 1 = exact; CCD's Latin square reads ≥ 0.99 on the
full set and ≈ 0.95 at 100 items over 7 domains (partial squares), while one 10 × 10 square short
of a row reads 0.89 and half a square 0.44 — where `bench.limit` cuts the design."""


LOG_FLOOR = -1e4
"""Letter log-probs (renormalised) below this are read as this: finite, and negligible in a
probability; a group with a letter at the floor is left out of the variance split (counted in
`letter_effect.n_floored`), where its −10⁴ would dominate every pooled sum of squares."""


@dataclass(frozen=True)
class LetterOptions:
    """What the decomposition needs from the analysis options."""

    temperature: float = 1.0
    n_boot: int = 5000
    seed: int = 0
    prior_ratio: float = 2.0
    """Warn when the largest letter prior exceeds this multiple of uniform (1/K)."""
    fit_boot: int = 200
    """Bootstrap replicates of the count fit's prior (each refits the model, so fewer)."""


@dataclass(frozen=True)
class PromptGroups:
    """The prompt groups of a table."""

    index: np.ndarray
    """`[prompt]` group of each prompt."""
    condition: np.ndarray
    """`[group]` condition label."""
    conditions: np.ndarray
    """`[prompt]` condition label."""
    cells: list[tuple[Any, ...]]
    """Per prompt, its design values besides the condition and the ordering (`ScoreTable.cells`)."""
    item: np.ndarray
    """`[group]` item index into the sorted item ids."""
    complete: np.ndarray
    """`[group]` K orderings that show every option once at every letter."""


@dataclass(frozen=True)
class LetterAnalysis:
    """The decomposition of one table: debiased choice probabilities and the metric blocks."""

    debiased: np.ndarray | None
    """`[prompt, letter]` debiased choice distribution at the analysis temperature; None when
    some condition has no estimate (`letter_prior_estimator` says why)."""
    blocks: dict[str, Any]
    """`letter_prior`, `letter_split`, `letter_prior_estimator`, `letter_pick_shares`,
    `letter_warnings`."""
    ci: dict[str, Any]
    """`letter_prior`, `letter_split` intervals (empty without a bootstrap)."""


def prompt_groups(table: ScoreTable, design: Design) -> PromptGroups:
    """Group prompts by item, condition and the other design values but the ordering (`design`);
    mark complete groups."""
    items, item_idx = np.unique(table.item_id.astype(str), return_inverse=True)
    conditions, cells = table.conditions(design), table.cells(design)
    keys: dict[tuple[Any, ...], int] = {}
    index = np.empty(len(table.prompt_id), dtype=np.int64)
    for r in range(len(index)):
        key = (item_idx[r], conditions[r], *cells[r])
        index[r] = keys.setdefault(key, len(keys))
    cond = np.array([k[1] for k in keys], dtype=object)
    item = np.array([k[0] for k in keys], dtype=np.int64)
    k = table.logprobs.shape[1]
    order = np.asarray(table.order) if table.order is not None else None
    complete = np.zeros(len(keys), dtype=bool)
    if order is not None:
        for g, members in enumerate(members_of(index, len(keys))):
            complete[g] = position_balanced(order[members], k)
    return PromptGroups(index=index, condition=cond, conditions=conditions, cells=cells, item=item, complete=complete)


def members_of(index: np.ndarray, n: int) -> list[np.ndarray]:
    """Row indices of each of the `n` groups (`index[r]` = group of row r), in row order."""
    perm = np.argsort(index, kind="stable")
    return np.split(perm, np.searchsorted(index[perm], np.arange(1, n)))


def log_choice(logprobs: np.ndarray, temperature: float) -> np.ndarray:
    """`log softmax(lp / T)` over the letters, float64 (−inf where a letter has probability 0)."""
    z = logprobs.astype(np.float64) / temperature
    z = z - z.max(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        out = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    # A float32 −inf at one letter would make every option of its group −inf (each visits the
    # letter): floor it far below any real log-prob instead.
    return np.maximum(out, LOG_FLOOR)


def softmax(a: np.ndarray) -> np.ndarray:
    """Softmax on the last axis; −inf entries get 0."""
    z = a - np.max(a, axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def analyse(table: ScoreTable, design: Design, opts: LetterOptions, generated: bool = False) -> LetterAnalysis:
    """Letter prior, variance split, debiased probabilities and warnings of a forced-choice table,
    per condition of the bench's `design`, over its prompt groups.

    `generated`: the table holds one-hot generated choices (log p ∈ {0, −inf}), fitted by counts.
    Every run also reports `letter_pick_shares`: the share of greedy (letter runs) or generated
    picks at each letter over the complete groups (all prompts where none is complete) — 1/K
    for a model blind to letters, whatever its content preference, and free of any model.
    """
    groups = prompt_groups(table, design)
    n_items = len(np.unique(table.item_id.astype(str)))
    boot = bootstrap_weights(n_items, opts.n_boot, opts.seed) if opts.n_boot > 0 else None
    conditions = sorted({str(c) for c in groups.condition})
    debiased: np.ndarray | None = np.zeros(table.logprobs.shape, dtype=np.float64)
    blocks: dict[str, Any] = {"letter_prior": {}, "letter_split": {}, "letter_prior_estimator": {},
                              "letter_pick_shares": {}, "letter_effect": {}}
    ci: dict[str, Any] = {"letter_prior": {}, "letter_split": {}}
    for cond in conditions:
        rows = np.nonzero(groups.condition[groups.index] == cond)[0]
        if generated:
            part = _count_condition(table, groups, rows, opts, boot)
        else:
            part = _logprob_condition(table, groups, rows, opts, boot)
        blocks["letter_pick_shares"][cond] = dict(zip(_letters(table.logprobs.shape[1]),
                                                      map(float, pick_shares(table, groups, rows))))
        if part.debiased is None or debiased is None:
            debiased = None
        else:
            debiased[rows] = part.debiased
        for key in ("letter_prior", "letter_split", "letter_prior_estimator", "letter_effect"):
            if part.blocks.get(key) is not None:
                blocks[key][cond] = part.blocks[key]
        for key in ("letter_prior", "letter_split"):
            if part.ci.get(key) is not None:
                ci[key][cond] = part.ci[key]
    blocks["letter_warnings"] = warnings_of(blocks, table, groups.conditions, opts,
                                            "generated" if generated else "greedy")
    return LetterAnalysis(debiased=debiased, blocks=blocks, ci=ci if boot is not None else {})


def _letters(k: int) -> list[str]:
    return list(LETTERS[:k])


def label_balance(labels: np.ndarray) -> float:
    """How evenly a design puts each label (culture, cluster) at each letter, `labels` `[P, K]`
    the label shown at each letter: with A[label, j] the counts and E = row total / K,
    `1 − ‖A − E‖₁ / (2 N (1 − 1/K))`, N = Σ A — 1 for a complete Latin square, 0 when each
    label always sits at one letter (CCD-Bench's balance score BS, generalised to any K)."""
    k = labels.shape[1]
    names, idx = np.unique(labels.astype(str), return_inverse=True)
    counts = np.zeros((len(names), k))
    np.add.at(counts, (idx.reshape(labels.shape), np.broadcast_to(np.arange(k), labels.shape)), 1.0)
    dev = np.abs(counts - counts.sum(axis=1, keepdims=True) / k).sum()
    return float(1.0 - dev / (2.0 * counts.sum() * (1.0 - 1.0 / k)))


def _logprob_condition(table: ScoreTable, groups: PromptGroups, rows: np.ndarray, opts: LetterOptions,
                       boot: np.ndarray | None) -> LetterAnalysis:
    """One condition of a letter-scored run: closed form on complete groups, `p / π` elsewhere.

    π comes from the complete groups alone when there are any (an incomplete group's orderings do
    not balance its content across letters); without any, from the whole condition, provided its
    design is balanced (`BALANCE_MIN`) — otherwise nothing is estimated and the reason is said."""
    lc = log_choice(table.logprobs[rows], opts.temperature)  # [row, letter]
    k = lc.shape[1]
    g = groups.index[rows]
    n_items = int(groups.item.max()) + 1
    item = groups.item[g]
    order = np.asarray(table.order)[rows]
    whole = groups.complete[g]
    letters = _letters(k)
    est: dict[str, Any] = {"n_groups": int(len(np.unique(g))), "n_complete": int(len(np.unique(g[whole])))}
    if not whole.any():
        est["label_balance"] = label_balance(np.asarray(table.groups)[rows])
        if est["label_balance"] < BALANCE_MIN:
            est.update(estimator=NONE, reason=(
                f"no item has all {k} orderings and the design's label balance is {est['label_balance']:.3f} "
                f"< {BALANCE_MIN}: a pooled letter prior would absorb content (e.g. bench.limit cut a Latin "
                "square short)"))
            return LetterAnalysis(debiased=None, blocks={"letter_prior_estimator": est}, ci={})
    use = whole if whole.any() else np.ones_like(whole)
    # π: per-item sums of L and prompt counts, so the bootstrap resamples items.
    l_sum, n = np.zeros((n_items, k)), np.zeros(n_items)
    np.add.at(l_sum, item[use], lc[use])
    np.add.at(n, item[use], 1.0)
    prior = softmax(l_sum.sum(axis=0) / n.sum())
    # Complete groups: c(o) = mean over orderings of L at the letter showing o.
    local = np.unique(g[whole], return_inverse=True)[1] if whole.any() else np.zeros(0, np.int64)
    content = np.zeros((est["n_complete"], k))
    # each option sits once in each of a group's orderings: its mean is over the group's size
    size = np.bincount(local)[local][:, None] if whole.any() else k
    np.add.at(content, (local[:, None], order[whole]), lc[whole] / size)
    out = np.zeros_like(lc)
    out[whole] = np.take_along_axis(softmax(content)[local], order[whole], axis=1)
    out[~whole] = softmax(lc[~whole] - np.log(prior))
    est["estimator"] = ROTATIONS if whole.all() else PRIOR if not whole.any() else MIXED
    blocks: dict[str, Any] = {"letter_prior": dict(zip(letters, map(float, prior))), "letter_prior_estimator": est}
    ci: dict[str, Any] = {}
    if boot is not None:
        reps = softmax(ratio(wsum(boot, l_sum), wsum(boot, n)[..., None]))
        ci["letter_prior"] = percentile_ci({x: reps[:, i] for i, x in enumerate(letters)})
    blocks["letter_effect"] = {"mass_moved": mass_moved(lc, out)}
    if whole.any():
        ss = split_sums(lc[whole], order[whole], g[whole], item[whole], n_items)
        blocks["letter_split"] = to_scalars(_shares(ss, np.ones(n_items)))
        # orderings per complete group: K under rotations and Williams (even K), K! under permutations
        m = float(ss.sizes.sum() / max(ss.n_groups.sum(), 1))
        blocks["letter_effect"].update(content_reliability=content_reliability(float(ss.content.sum()),
                                                                               float(ss.residual.sum()), m),
                                       n_floored=ss.n_floored)
        if boot is not None:
            ci["letter_split"] = percentile_ci(_shares(ss, boot))
    return LetterAnalysis(debiased=out, blocks=blocks, ci=ci)


@dataclass(frozen=True)
class SplitSums:
    """Per-item sums of the complete groups' variance split (items on the first axis)."""

    letter: np.ndarray
    """`[item]` Σ over the item's groups of `K Σ_j a_gj²` (all letter effects)."""
    letter_means: np.ndarray
    """`[item, K]` Σ over the item's groups of `a_gj`."""
    n_groups: np.ndarray
    """`[item]` complete groups of the item."""
    content: np.ndarray
    """`[item]` Σ of `K Σ_o c_go²`."""
    residual: np.ndarray
    """`[item]` Σ of the residual sums of squares."""
    sizes: np.ndarray
    """`[item]` Σ over the item's groups of their orderings (K each under rotations)."""
    n_floored: int = 0
    """Groups left out: a letter log-prob at `LOG_FLOOR`."""


def split_sums(lc: np.ndarray, order: np.ndarray, group: np.ndarray, item: np.ndarray,
               n_items: int) -> SplitSums:
    """Per-item sums of squares of complete groups.

    Each group's m × K table (ordering × letter, the option fixed by both; m = K under rotations)
    is centred per ordering; its letter means `a_gj`, option means `c_go` and the residual
    `Y − a_gj − c_go` give `m Σ_j a_gj²`, `m Σ_o c_go²` and the residual SS. Groups with a log-prob
    at `LOG_FLOOR` (a letter of probability ~0, floored by `log_choice`) are left out and counted."""
    k = lc.shape[1]
    letter, content, resid, n, sizes = (np.zeros(n_items) for _ in range(5))
    floored = 0
    means = np.zeros((n_items, k))
    local = np.unique(group, return_inverse=True)[1]
    for rows in members_of(local, int(local.max(initial=-1)) + 1):
        y, o = lc[rows], order[rows]
        if (y <= LOG_FLOOR).any():
            floored += 1
            continue
        i, m = item[rows][0], len(rows)  # m orderings: K for rotations, K! for permutations
        y = y - y.mean(axis=1, keepdims=True)
        a = y.mean(axis=0)
        c = np.zeros(k)
        np.add.at(c, o, y / m)
        letter[i] += m * (a ** 2).sum()
        means[i] += a
        n[i] += 1
        sizes[i] += m
        content[i] += m * (c ** 2).sum()
        resid[i] += ((y - a[None, :] - c[o]) ** 2).sum()
    return SplitSums(letter=letter, letter_means=means, n_groups=n, content=content, residual=resid, sizes=sizes,
                     n_floored=floored)


def _shares(ss: SplitSums, w: np.ndarray) -> dict[str, np.ndarray]:
    """Pooled sums of squares → shares of the total (NaN when the total is 0).

    The letter SS splits into the part common to every group of the condition, `K n Σ_j ā_j²`
    (ā the mean letter effect over the n groups: the prior π), and the letter × group
    interaction — item-specific letter preferences, and at DiSCo's C3 the primacy of the fact in
    slot 1, whose letter differs between context rotations and so averages out of ā."""
    n = wsum(w, ss.n_groups)
    abar = ratio(wsum(w, ss.letter_means), n[..., None])
    # Σ_g m_g Σ_j ā_j² (m_g the group's orderings; K n under rotations): exact integer counts
    common = np.nan_to_num(wsum(w, ss.sizes) * (abar ** 2).sum(axis=-1))
    parts = {"letter": common, "letter_by_group": wsum(w, ss.letter) - common,
             "content": wsum(w, ss.content), "residual": wsum(w, ss.residual)}
    total = sum(parts.values())
    return {name: ratio(v, total) for name, v in parts.items()}


def pick_shares(table: ScoreTable, groups: PromptGroups, rows: np.ndarray, weights: np.ndarray | None = None
                ) -> np.ndarray:
    """`[K]` (or `[B, K]` for item weights `[B, n_items]`) share of argmax picks at each letter
    over the complete groups among `rows`, or over all of them where none is complete. In a
    complete group every option sits once at every letter, so a letter-blind model's picks
    spread evenly over the letters whatever it prefers."""
    picks = np.asarray(table.logprobs[rows]).argmax(axis=1)
    k = table.logprobs.shape[1]
    g = groups.index[rows]
    use = groups.complete[g] if groups.complete[g].any() else np.ones(len(rows), bool)
    counts = np.zeros((int(groups.item.max()) + 1, k))
    np.add.at(counts, (groups.item[g][use], picks[use]), 1.0)
    w = np.ones(counts.shape[0]) if weights is None else weights
    per = wsum(w, counts)
    return ratio(per, per.sum(axis=-1, keepdims=True))


def _count_condition(table: ScoreTable, groups: PromptGroups, rows: np.ndarray, opts: LetterOptions,
                     boot: np.ndarray | None) -> LetterAnalysis:
    """One condition of generated (one-hot) choices.

    Where some group has several orderings, π is the pairwise conditional fit
    (`probe.metrics.pairfit`, free of the contents) — or, where its pairs are separable (greedy
    picks locked onto letters: no maximum exists), the pick shares in its place — and the
    contents are fitted by IPF with π held, keyed per (group, option). Where every group has one
    ordering (a Latin square across items), π and contents are fitted jointly by IPF with the
    content keyed by the label shown within its condition and prompt-group design values — few
    contents, so no incidental-parameter bias, relying on the design to separate label and letter."""
    picks = np.asarray(table.logprobs[rows]).argmax(axis=1)
    k = table.logprobs.shape[1]
    onehot = np.eye(k)[picks]
    g = groups.index[rows]
    item = groups.item[g]
    n_items = int(groups.item.max()) + 1
    order = np.asarray(table.order)[rows]
    sizes = np.bincount(g)[g]
    labels = np.asarray(table.groups)[rows].astype(str)
    context = np.array(["|".join(map(str, groups.cells[r])) for r in rows], dtype=object)
    per_group = np.char.add("g", (g[:, None] * k + order).astype(str))
    per_label = np.char.add(np.char.add("l", context.astype(str)[:, None]), np.char.add("|", labels))
    key = np.unique(np.where((sizes > 1)[:, None], per_group, per_label), return_inverse=True)[1].reshape(onehot.shape)
    est: dict[str, Any] = {"estimator": COUNTS, "n_groups": int(len(np.unique(g)))}
    reps = boot[: opts.fit_boot] if boot is not None else None
    boot_prior: np.ndarray | None = None
    if (sizes > 1).any():
        pairs = pair_data(picks, order, g, item, n_items)
        est.update(content="option per group", n_pairs=int(pairs.counts.sum()), separated=separated(pairs))
        if est["separated"]:
            est["prior_fit"] = "pick_shares"
            prior = pick_shares(table, groups, rows)[None]
            boot_prior = pick_shares(table, groups, rows, reps) if reps is not None else None
        else:
            est["prior_fit"] = "pairwise_conditional"
            prior = fit_prior(pairs, np.ones((1, n_items)))
            boot_prior = fit_prior(pairs, reps) if reps is not None else None
        fit = fit_choices(onehot, np.ones((1, len(rows))), key, prior=prior)
    else:
        fit = fit_choices(onehot, np.ones((1, len(rows))), key)
        est.update(prior_fit="joint_ipf", content="label")
        if reps is not None:
            boot_prior = fit_choices(onehot, reps[:, item], key, max_iter=200).prior
    est.update(ipf_iterations=fit.iterations, max_margin_error=fit.margin_error)
    ci: dict[str, Any] = {}
    if reps is not None and boot_prior is not None:
        ci["letter_prior"] = percentile_ci({x: boot_prior[:, i] for i, x in enumerate(_letters(k))})
        est["n_boot"] = int(len(reps))
    debiased = ratio(fit.content[0][key], fit.content[0][key].sum(axis=1, keepdims=True))
    blocks = {"letter_prior": dict(zip(_letters(k), map(float, fit.prior[0]))), "letter_prior_estimator": est}
    return LetterAnalysis(debiased=np.nan_to_num(debiased, nan=1.0 / k), blocks=blocks, ci=ci)
