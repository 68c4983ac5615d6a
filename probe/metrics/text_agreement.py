"""Do the letter reading and the answer-text reading of the same prompts say the same thing?
The agreement audit of a forced-choice run with a text reading (issue 25), from the stored
table alone.

Both readings score the same K options of each prompt: the letters by the log-prob of the
option's letter, the text by the summed log-prob of the option's text as a continuation
(`ScoreTable.text_logprobs`, lm-eval's `acc` score). Per prompt they give

- a pick: the argmax option (first letter on ties, as `probe.probs.greedy_onehot`);
- a ranking of the K options: average ranks (tied scores share the mean of their ranks);
- a choice distribution at the analysis temperature T: `softmax(score / T)` over the K options.

Per condition, over its prompts:

- `argmax`: the share of prompts whose two picks are the same option;
- `spearman`: the mean over prompts of the Spearman correlation of the two rankings (the Pearson
  correlation of the average ranks); a prompt where either reading ties all K options has no
  ranking and is left out (NaN when no prompt has one);
- `JSD`: the Jensen–Shannon divergence in bits between the two readings' exposure-normalised
  group shares (`probe.probs.exposure_shares`) `CSD(c) = (sel_c / app_c) / Σ (sel / app)`, `sel_c` the choice probability summed
  over the letters showing group c, `app_c` how often c is shown (the bench-independent CSD of
  docs/benchmarks/disco.md; for DiSCo's C0 it is its own CSD).

Per group (culture; CCD: cluster) c of the condition:

- `argmax`: among the prompts where either reading picks an option of group c, the share where
  both do (NaN when neither ever does);
- `CSD_letters`, `CSD_text` and `CSD_diff = CSD_letters − CSD_text`: how much more (> 0) or
  less the letters favour c than the text does.

With the letter prior's debiased distribution `q` (`probe.metrics.letters`), `debiased` repeats
`argmax`, `spearman` and `JSD` with `q` as the letter reading. Intervals are percentile
bootstraps over items with the project's seeded weights, `q` held fixed (as the `debiased` tree).

`choice_agreement` puts each reading (letters, debiased, text) against the answers a generation
run of the same design generated, with the same statistics (`argmax`, `JSD`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from probe.errors import ProbeInputError
from probe.metrics.core import AnalysisOptions, bootstrap_weights, jsd_bits, percentile_ci, ratio, to_scalars, wsum
from probe.probs import choice_probs, exposure_shares
from probe.results.scores import ScoreTable
from probe.types import Design


@dataclass(frozen=True)
class Reading:
    """One reading of a table's prompts, `[prompt, letter]` in the prompts' letter order."""

    scores: np.ndarray
    """What the pick and the ranking read (log-probs, or probabilities: only the order counts)."""
    probs: np.ndarray
    """The choice distribution over the K options (rows sum to 1)."""


@dataclass(frozen=True)
class PairSums:
    """Per-item sums of one comparison of two readings over one condition's prompts."""

    n: np.ndarray
    """`[item]` prompts."""
    agree: np.ndarray
    """`[item]` prompts whose two picks are the same option."""
    rho: np.ndarray
    """`[item]` sum of the per-prompt Spearman correlations (where defined)."""
    n_rho: np.ndarray
    """`[item]` prompts where the correlation is defined."""
    sel_a: np.ndarray
    """`[item, group]` choice probability of reading a at each group."""
    sel_b: np.ndarray
    """`[item, group]` the same for reading b."""
    shown: np.ndarray
    """`[item, group]` how often each group is shown."""
    either: np.ndarray
    """`[item, group]` prompts where either reading picks the group."""
    both: np.ndarray
    """`[item, group]` prompts where both do."""


@dataclass(frozen=True)
class Agreement:
    """The `agreement` block of `metrics.json`, its intervals and its bootstrap replicates."""

    block: dict[str, Any]
    """`{condition: {"n_prompts", "argmax", "spearman", "JSD", "by_group": {group: {…}}, "debiased"?}}`."""
    ci: dict[str, Any]
    """The same tree (without `n_prompts`) with `[lo, hi]` leaves; `{}` without a bootstrap."""
    replicates: dict[str, Any] | None
    """The same tree with `[B]` replicate leaves (None without a bootstrap), for paired comparisons."""


def average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks on the last axis, tied values sharing the mean of their ranks:
    `rank_j = #{k: x_k < x_j} + (#{k: x_k = x_j} + 1) / 2`."""
    less = (x[..., None, :] < x[..., :, None]).sum(axis=-1)
    equal = (x[..., None, :] == x[..., :, None]).sum(axis=-1)
    return less + (equal + 1) / 2.0


def spearman(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman correlation on the last axis: the Pearson correlation of the average ranks; NaN
    where either side is constant (all options tied: no ranking to correlate)."""
    ra, rb = average_ranks(a), average_ranks(b)
    ra, rb = ra - ra.mean(axis=-1, keepdims=True), rb - rb.mean(axis=-1, keepdims=True)
    den = np.sqrt((ra ** 2).sum(axis=-1) * (rb ** 2).sum(axis=-1))
    return ratio((ra * rb).sum(axis=-1), den)


def pair_sums(a: Reading, b: Reading, groups: np.ndarray, item: np.ndarray, n_items: int,
              names: list[str]) -> PairSums:
    """Per-item sums of readings `a` and `b` of the same prompts; `groups` `[prompt, letter]` the
    group shown at each letter, `item` `[prompt]` the item index, `names` the groups counted."""
    k = groups.shape[1]
    col = {g: i for i, g in enumerate(names)}
    gidx = np.array([[col[str(g)] for g in row] for row in groups], dtype=np.int64).reshape(groups.shape)
    pick_a, pick_b = a.scores.argmax(axis=1), b.scores.argmax(axis=1)
    rho = spearman(a.scores, b.scores)
    n, agree, rho_sum, n_rho = (np.zeros(n_items) for _ in range(4))
    np.add.at(n, item, 1.0)
    np.add.at(agree, item, (pick_a == pick_b).astype(np.float64))
    np.add.at(rho_sum, item, np.nan_to_num(rho))
    np.add.at(n_rho, item, (~np.isnan(rho)).astype(np.float64))
    shape = (n_items, len(names))
    sel_a, sel_b, shown, either, both = (np.zeros(shape) for _ in range(5))
    rows = np.broadcast_to(item[:, None], (len(item), k))
    np.add.at(sel_a, (rows, gidx), a.probs)
    np.add.at(sel_b, (rows, gidx), b.probs)
    np.add.at(shown, (rows, gidx), 1.0)
    ga = np.take_along_axis(gidx, pick_a[:, None], axis=1)[:, 0]
    gb = np.take_along_axis(gidx, pick_b[:, None], axis=1)[:, 0]
    np.add.at(either, (item, ga), 1.0)
    np.add.at(either, (item[ga != gb], gb[ga != gb]), 1.0)
    np.add.at(both, (item[ga == gb], ga[ga == gb]), 1.0)
    return PairSums(n=n, agree=agree, rho=rho_sum, n_rho=n_rho, sel_a=sel_a, sel_b=sel_b, shown=shown,
                    either=either, both=both)


def evaluate(s: PairSums, w: np.ndarray, names: list[str], by_group: bool = True) -> dict[str, Any]:
    """The comparison's tree for item weights `w` (`[n_items]`: point estimate; `[B, n_items]`:
    the B replicates)."""
    shown = wsum(w, s.shown)
    csd_a, csd_b = exposure_shares(wsum(w, s.sel_a), shown), exposure_shares(wsum(w, s.sel_b), shown)
    out: dict[str, Any] = {"argmax": ratio(wsum(w, s.agree), wsum(w, s.n)),
                           "spearman": ratio(wsum(w, s.rho), wsum(w, s.n_rho)),
                           "JSD": jsd_bits(csd_a, csd_b)}
    if by_group:
        agree = ratio(wsum(w, s.both), wsum(w, s.either))
        out["by_group"] = {g: {"argmax": agree[..., i], "CSD_letters": csd_a[..., i], "CSD_text": csd_b[..., i],
                               "CSD_diff": csd_a[..., i] - csd_b[..., i]} for i, g in enumerate(names)}
    return out


def agreement(table: ScoreTable, design: Design, debiased: np.ndarray | None, opts: AnalysisOptions) -> Agreement:
    """The agreement audit of a table with a text reading (module docstring): per condition of the
    bench's `design`, letters vs text and, when `debiased` (`[prompt, letter]` q) is given, q vs text."""
    if table.text_logprobs is None:
        raise ValueError("agreement needs a table with a text reading (text_logprobs)")
    item = np.unique(table.item_id.astype(str), return_inverse=True)[1]
    n_items = int(item.max(initial=-1)) + 1
    boot = bootstrap_weights(n_items, opts.n_boot, opts.seed) if opts.n_boot > 0 else None
    readings = {"raw": Reading(scores=table.logprobs, probs=choice_probs(table.logprobs, opts.temperature))}
    if debiased is not None:
        readings["debiased"] = Reading(scores=debiased, probs=debiased)
    text = Reading(scores=table.text_logprobs, probs=choice_probs(table.text_logprobs, opts.temperature))
    block: dict[str, Any] = {}
    ci: dict[str, Any] = {}
    reps: dict[str, Any] = {}
    conditions = table.conditions(design)
    for cond in sorted(set(conditions)):
        rows = np.nonzero(conditions == cond)[0]
        groups = np.asarray(table.groups)[rows]
        names = sorted({str(g) for g in groups.ravel()})
        sums = {name: pair_sums(_rows(r, rows), _rows(text, rows), groups, item[rows], n_items, names)
                for name, r in readings.items()}
        block[cond] = {"n_prompts": int(len(rows)), **_tree(sums, np.ones(n_items), names, to_scalars)}
        if boot is not None:
            reps[cond] = _tree(sums, boot, names, lambda t: t)
            ci[cond] = percentile_ci(reps[cond])
    return Agreement(block=block, ci=ci, replicates=reps if boot is not None else None)


def choice_agreement(table: ScoreTable, generated: ScoreTable, design: Design, debiased: np.ndarray | None,
                     opts: AnalysisOptions) -> Agreement:
    """How often each reading of a scored table picks what a generation run of the same design
    generated: per condition of the bench's `design`, over the prompts with a valid generated answer, `letters`, `text`
    (with a text reading) and `debiased` (with `debiased` q) each give `argmax` (the share of
    prompts whose pick is the generated letter's option) and `JSD` (bits, between the reading's
    group shares and the generated picks' shares). `generated` is the one-hot table of
    `probe.results.generations.read_generation_table`; items are resampled as in `table`."""
    where = {int(p): i for i, p in enumerate(np.asarray(table.prompt_id))}
    missing = [int(p) for p in generated.prompt_id if int(p) not in where]
    if missing:
        raise ProbeInputError(f"the generation run has prompt ids the scored run lacks ({missing[:5]}): not the "
                              "same design")
    rows = np.array([where[int(p)] for p in generated.prompt_id], dtype=np.int64)
    if table.order is not None and generated.order is not None and \
            not np.array_equal(np.asarray(table.order)[rows], np.asarray(generated.order)):
        raise ProbeInputError("the two runs show the options of some prompt in different orders: not the same design")
    picks = np.zeros(generated.logprobs.shape)
    np.put_along_axis(picks, np.asarray(generated.logprobs).argmax(axis=1)[:, None], 1.0, axis=1)
    readings = {"letters": Reading(table.logprobs, choice_probs(table.logprobs, opts.temperature))}
    if table.text_logprobs is not None:
        readings["text"] = Reading(table.text_logprobs, choice_probs(table.text_logprobs, opts.temperature))
    if debiased is not None:
        readings["debiased"] = Reading(debiased, debiased)
    reference = replace(table.subset(rows), logprobs=picks)
    return _against(reference, reference.conditions(design), {k: _rows(r, rows) for k, r in readings.items()},
                    np.unique(table.item_id.astype(str)), opts)


def _against(reference: ScoreTable, conditions: np.ndarray, readings: dict[str, Reading], items: np.ndarray,
             opts: AnalysisOptions) -> Agreement:
    """Each reading against the choices `reference.logprobs` (one-hot), per condition."""
    item = np.searchsorted(items, reference.item_id.astype(str))
    boot = bootstrap_weights(len(items), opts.n_boot, opts.seed) if opts.n_boot > 0 else None
    ref = Reading(reference.logprobs, reference.logprobs)
    block: dict[str, Any] = {}
    ci: dict[str, Any] = {}
    reps: dict[str, Any] = {}
    for cond in sorted(set(conditions)):
        rows = np.nonzero(conditions == cond)[0]
        groups = np.asarray(reference.groups)[rows]
        names = sorted({str(g) for g in groups.ravel()})
        sums = {k: pair_sums(_rows(r, rows), _rows(ref, rows), groups, item[rows], len(items), names)
                for k, r in readings.items()}

        def tree(w: np.ndarray) -> dict[str, Any]:
            return {k: {m: v for m, v in evaluate(s, w, names, by_group=False).items() if m != "spearman"}
                    for k, s in sums.items()}

        block[cond] = {"n_prompts": int(len(rows)), **to_scalars(tree(np.ones(len(items))))}
        if boot is not None:
            reps[cond] = tree(boot)
            ci[cond] = percentile_ci(reps[cond])
    return Agreement(block=block, ci=ci, replicates=reps if boot is not None else None)


def per_byte(table: ScoreTable) -> np.ndarray:
    """`text_logprobs / text_n_bytes`: the per-byte text score (the `text_norm` reading). lm-eval's
    `acc_norm` divides by characters; probe divides by UTF-8 bytes, which do not depend on how a
    script is split into characters. Every continuation shown must have a byte; a letter its row
    does not show (`order` −1) has none and keeps −inf."""
    if table.text_logprobs is None or table.text_n_bytes is None:
        raise ValueError("per_byte needs a table with text_logprobs and text_n_bytes")
    n_bytes = np.asarray(table.text_n_bytes, dtype=np.float64)
    shown = np.ones(n_bytes.shape, bool) if table.order is None else np.asarray(table.order) >= 0
    empty = (n_bytes <= 0) & shown
    if empty.any():
        bad = int(np.asarray(table.prompt_id)[empty.any(axis=1)][0])
        raise ProbeInputError(f"scores.parquet: prompt_id {bad}: text_n_bytes must be ≥ 1 for every option, got "
                              f"{np.asarray(table.text_n_bytes)[empty.any(axis=1)][0].tolist()} "
                              "(an empty continuation has no per-byte score)")
    lp = np.asarray(table.text_logprobs, dtype=np.float64)
    return np.where(shown, lp / np.where(shown, n_bytes, 1.0), -np.inf)


def _rows(r: Reading, rows: np.ndarray) -> Reading:
    return Reading(scores=r.scores[rows], probs=r.probs[rows])


def _tree(sums: dict[str, PairSums], w: np.ndarray, names: list[str], leaf: Any) -> dict[str, Any]:
    """Raw comparison with its groups, and the debiased one (without groups) beside it."""
    out = leaf(evaluate(sums["raw"], w, names))
    if "debiased" in sums:
        out["debiased"] = leaf(evaluate(sums["debiased"], w, names, by_group=False))
    return out
