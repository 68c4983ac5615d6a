"""Is a choice the content or the letter? The letter-prior decomposition of a forced-choice run
(SPEC §8), computed from the stored letter log-probs alone.

A *prompt group* is one item under one condition, target and context rotation (the prompts
that differ only in the option order). With letters renormalised over the K letters, write

    L[r, j] = log p_r(j) = μ_r + a_j + c(o[r, j]) + e[r, j]

(μ_r = −log Z_r of ordering r, a_j the letter effect, c the content effect of the option
shown at letter j). When a group's orderings put every option once at every letter (a Latin
square: the cyclic rotations of DiSCo and CCD-Bench are one), rotation, letter and content are
orthogonal, so the least-squares fit is closed-form:

- content: `c(o) = mean_r L[r, letter showing o]`, the debiased distribution of the group is
  `q(o) ∝ exp c(o)` (the geometric mean of the option's probabilities over the orderings);
- letter prior: `π_j ∝ exp(mean over groups and orderings of L[r, j] − c(o[r, j]))`; within a
  complete group `mean_r c(o[r, j])` is the same for every j, so this is
  `π_j ∝ exp(mean over the condition's prompts of L[r, j])`;
- variance split: after removing each ordering's mean, the sums of squares of letter means,
  content means and the residual, pooled over groups (shares that add to 1).

Adding a constant to one letter's logit adds it to `a_j` only: `q` is exactly unchanged.

Designs with one ordering per item (CCD's Latin square) have no complete group; the same π
formula then relies on the design balancing content across letters over items, and each
prompt is debiased as `p / π` renormalised (PriDe's form, Zheng et al., ICLR 2024). Generated
(one-hot) choices have zeros, so instead a log-linear model `log μ = row + letter + content` is
fitted by iterative proportional fitting (`probe.metrics.ipf`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from probe.metrics.core import bootstrap_weights, percentile_ci, ratio, to_scalars, wsum
from probe.metrics.ipf import fit_choices
from probe.results.scores import ScoreTable
from probe.types import LETTERS

ROTATIONS, PRIOR, MIXED, COUNTS = "rotations", "prior_division", "mixed", "count_fit"
"""Estimators: the closed form over complete groups; PriDe's `p / π` where no group is complete;
both in one condition; the log-linear fit of one-hot choices."""


LOG_FLOOR = -1e4
"""Letter log-probs (renormalised) below this are read as this: finite, and negligible."""


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
    item: np.ndarray
    """`[group]` item index into the sorted item ids."""
    complete: np.ndarray
    """`[group]` K orderings that show every option once at every letter."""


@dataclass(frozen=True)
class LetterAnalysis:
    """The decomposition of one table: debiased choice probabilities and the metric blocks."""

    debiased: np.ndarray
    """`[prompt, letter]` debiased choice distribution at the analysis temperature."""
    blocks: dict[str, Any]
    """`letter_prior`, `letter_split`, `letter_prior_estimator`, `letter_warnings`."""
    ci: dict[str, Any]
    """`letter_prior`, `letter_split` intervals (empty without a bootstrap)."""


def prompt_groups(table: ScoreTable) -> PromptGroups:
    """Group prompts by (item, condition, target, context rotation); mark complete groups."""
    items, item_idx = np.unique(table.item_id.astype(str), return_inverse=True)
    keys: dict[tuple[Any, ...], int] = {}
    index = np.empty(len(table.prompt_id), dtype=np.int64)
    for r in range(len(index)):
        key = (item_idx[r], table.condition[r], table.target[r], int(table.ctx_rotation[r]))
        index[r] = keys.setdefault(key, len(keys))
    cond = np.array([k[1] for k in keys], dtype=object)
    item = np.array([k[0] for k in keys], dtype=np.int64)
    k = table.logprobs.shape[1]
    order = np.asarray(table.order) if table.order is not None else None
    complete = np.zeros(len(keys), dtype=bool)
    if order is not None:
        for g, members in enumerate(members_of(index, len(keys))):
            rows = order[members]
            complete[g] = rows.shape[0] == k and bool(
                (np.sort(rows, axis=0) == np.arange(k)[:, None]).all() and
                (np.sort(rows, axis=1) == np.arange(k)[None, :]).all())
    return PromptGroups(index=index, condition=cond, item=item, complete=complete)


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


def analyse(table: ScoreTable, opts: LetterOptions, generated: bool = False) -> LetterAnalysis:
    """Letter prior, variance split, debiased probabilities and warnings of a forced-choice table.

    `generated`: the table holds one-hot generated choices (log p ∈ {0, −inf}), fitted by counts.
    """
    groups = prompt_groups(table)
    n_items = len(np.unique(table.item_id.astype(str)))
    boot = bootstrap_weights(n_items, opts.n_boot, opts.seed) if opts.n_boot > 0 else None
    conditions = sorted({str(c) for c in groups.condition})
    debiased = np.zeros(table.logprobs.shape, dtype=np.float64)
    blocks: dict[str, Any] = {"letter_prior": {}, "letter_split": {}, "letter_prior_estimator": {}}
    ci: dict[str, Any] = {"letter_prior": {}, "letter_split": {}}
    for cond in conditions:
        rows = np.nonzero(groups.condition[groups.index] == cond)[0]
        if generated:
            part = _count_condition(table, groups, rows, opts, boot)
        else:
            part = _logprob_condition(table, groups, rows, opts, boot)
        debiased[rows] = part.debiased
        for key in ("letter_prior", "letter_split", "letter_prior_estimator"):
            if part.blocks.get(key) is not None:
                blocks[key][cond] = part.blocks[key]
        for key in ("letter_prior", "letter_split"):
            if part.ci.get(key) is not None:
                ci[key][cond] = part.ci[key]
    blocks["letter_warnings"] = warnings_of(blocks, table, opts, "generated" if generated else "greedy")
    return LetterAnalysis(debiased=debiased, blocks=blocks, ci=ci if boot is not None else {})


def _letters(k: int) -> list[str]:
    return list(LETTERS[:k])


def _logprob_condition(table: ScoreTable, groups: PromptGroups, rows: np.ndarray, opts: LetterOptions,
                       boot: np.ndarray | None) -> LetterAnalysis:
    """One condition of a letter-scored run: closed form on complete groups, `p / π` elsewhere."""
    lc = log_choice(table.logprobs[rows], opts.temperature)  # [row, letter]
    k = lc.shape[1]
    g = groups.index[rows]
    n_items = int(groups.item.max()) + 1
    item = groups.item[g]
    # π: per-item sums of L and prompt counts, so the bootstrap resamples items.
    l_sum, n = np.zeros((n_items, k)), np.zeros(n_items)
    np.add.at(l_sum, item, lc)
    np.add.at(n, item, 1.0)
    prior = softmax(l_sum.sum(axis=0) / n.sum())
    order = np.asarray(table.order)[rows]
    whole = groups.complete[g]
    # Complete groups: c(o) = mean over orderings of L at the letter showing o.
    local = np.unique(g[whole], return_inverse=True)[1] if whole.any() else np.zeros(0, np.int64)
    content = np.zeros((len(np.unique(g[whole])), k))
    np.add.at(content, (local[:, None], order[whole]), lc[whole] / k)
    out = np.zeros_like(lc)
    out[whole] = np.take_along_axis(softmax(content)[local], order[whole], axis=1)
    with np.errstate(divide="ignore"):
        out[~whole] = softmax(lc[~whole] - np.log(prior))
    estimator = ROTATIONS if whole.all() else PRIOR if not whole.any() else MIXED
    letters = _letters(k)
    blocks: dict[str, Any] = {"letter_prior": dict(zip(letters, map(float, prior))),
                              "letter_prior_estimator": {"estimator": estimator,
                                                         "n_groups": int(len(np.unique(g))),
                                                         "n_complete": int(len(np.unique(g[whole])))}}
    ci: dict[str, Any] = {}
    if boot is not None:
        reps = softmax(ratio(wsum(boot, l_sum), wsum(boot, n)[..., None]))
        ci["letter_prior"] = percentile_ci({x: reps[:, i] for i, x in enumerate(letters)})
    if whole.any():
        ss = split_sums(lc[whole], order[whole], g[whole], item[whole], n_items)
        blocks["letter_split"] = to_scalars(_shares(ss, np.ones(n_items)))
        if boot is not None:
            ci["letter_split"] = percentile_ci(_shares(ss, boot))
    return LetterAnalysis(debiased=out, blocks=blocks, ci=ci)


def split_sums(lc: np.ndarray, order: np.ndarray, group: np.ndarray, item: np.ndarray,
               n_items: int) -> np.ndarray:
    """`[item, 3]` letter, content and residual sums of squares of complete groups, per item.

    Each group's K × K table (ordering × letter, the option fixed by both) is centred per
    ordering; then `SS_letter = K Σ_j ā_j²` (letter means), `SS_content = K Σ_o c̄_o²` (option
    means), `SS_residual = Σ (Y − ā_j − c̄_o)²`. Groups with a non-finite log-prob are left out.
    """
    out = np.zeros((n_items, 3))
    local = np.unique(group, return_inverse=True)[1]
    for rows in members_of(local, int(local.max(initial=-1)) + 1):
        y, o = lc[rows], order[rows]
        if not np.isfinite(y).all():
            continue
        k = y.shape[1]
        y = y - y.mean(axis=1, keepdims=True)
        a = y.mean(axis=0)
        c = np.zeros(k)
        np.add.at(c, o, y / k)
        resid = y - a[None, :] - c[o]
        out[item[rows][0]] += (k * (a ** 2).sum(), k * (c ** 2).sum(), (resid ** 2).sum())
    return out


def _shares(ss: np.ndarray, w: np.ndarray) -> dict[str, np.ndarray]:
    """Pooled sums of squares → shares of the total (NaN when the total is 0)."""
    pooled = wsum(w, ss)  # [..., 3]
    total = pooled.sum(axis=-1)
    return {name: ratio(pooled[..., i], total) for i, name in enumerate(("letter", "content", "residual"))}


def _count_condition(table: ScoreTable, groups: PromptGroups, rows: np.ndarray, opts: LetterOptions,
                     boot: np.ndarray | None) -> LetterAnalysis:
    """One condition of a generation run: the log-linear count fit.

    Content is keyed by (group, option) where every group of the condition is complete, else by
    the group label shown (a culture, a cluster) pooled over the condition's items."""
    onehot = np.isfinite(table.logprobs[rows]).astype(np.float64)
    k = onehot.shape[1]
    g = groups.index[rows]
    whole = bool(groups.complete[np.unique(g)].all())
    # Content per (group, option) wherever a group has several orderings (IPF handles incomplete
    # ones, e.g. after invalid outputs); a one-ordering group keys its content by the label shown
    # within its condition, target and context rotation, so the target is never pooled away.
    sizes = np.bincount(g)[g]
    labels = np.asarray(table.groups)[rows].astype(str)
    context = np.array([f"{table.target[r]}|{table.ctx_rotation[r]}" for r in rows], dtype=object)
    per_group = np.char.add("g", (g[:, None] * k + np.asarray(table.order)[rows]).astype(str))
    per_label = np.char.add(np.char.add("l", context.astype(str)[:, None]), np.char.add("|", labels))
    raw = np.where((sizes > 1)[:, None], per_group, per_label)
    key = np.unique(raw, return_inverse=True)[1].reshape(onehot.shape)
    item = groups.item[g]
    fit = fit_choices(onehot, np.ones((1, len(rows))), key)
    letters = _letters(k)
    blocks: dict[str, Any] = {
        "letter_prior": dict(zip(letters, map(float, fit.prior[0]))),
        "letter_prior_estimator": {"estimator": COUNTS, "content": "option per group" if whole else "option per group; label where one ordering",
                                   "n_groups": int(len(np.unique(g))), "iterations": fit.iterations,
                                   "max_margin_error": fit.margin_error}}
    ci: dict[str, Any] = {}
    if boot is not None:
        reps = boot[: opts.fit_boot]
        prior = fit_choices(onehot, reps[:, item], key, max_iter=200).prior
        ci["letter_prior"] = percentile_ci({x: prior[:, i] for i, x in enumerate(letters)})
        blocks["letter_prior_estimator"]["n_boot"] = int(len(reps))
    debiased = ratio(fit.content[0][key], fit.content[0][key].sum(axis=1, keepdims=True))
    return LetterAnalysis(debiased=np.nan_to_num(debiased, nan=1.0 / k), blocks=blocks, ci=ci)


def warnings_of(blocks: Mapping[str, Any], table: ScoreTable, opts: LetterOptions,
                picks_kind: str = "greedy") -> list[dict[str, Any]]:
    """Conditions where the letter drives the answer: its variance share exceeds the content's,
    or the largest prior exceeds `prior_ratio / K`. Each names the letter, its prior, the shares
    and how many greedy (or generated, `picks_kind`) picks it took."""
    out = []
    k = table.logprobs.shape[1]
    picks = np.asarray(table.logprobs).argmax(axis=1)
    for cond, prior in blocks["letter_prior"].items():
        letter = max(prior, key=prior.get)
        split = blocks["letter_split"].get(cond) or {}
        reasons = []
        if split and split["letter"] > split["content"]:
            reasons.append("letter_share")
        if prior[letter] > opts.prior_ratio / k:
            reasons.append("prior")
        if not reasons:
            continue
        mine = np.asarray(table.condition) == cond
        out.append({"condition": cond, "letter": letter, "prior": prior[letter], "uniform": 1.0 / k,
                    "letter_share": split.get("letter"), "content_share": split.get("content"),
                    "greedy_picks": int((picks[mine] == LETTERS.index(letter)).sum()),
                    "n_prompts": int(mine.sum()), "picks": picks_kind, "reasons": reasons})
    return out
