"""The forced-choice metrics every forced-choice bench shares: the header (letter mass, invalid
generations), the letter-prior blocks (per option count K when a bench's items differ in K), the
answer-text and generated-choice agreement, and the debiased reading a `Run` gets from its task.
`probe.benches.forced` builds a task from them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from probe.backends.reading import Reading
from probe.benches.order_report import order_blocks
from probe.benches.task import (
    bench_spec,
)
from probe.metrics.core import AnalysisOptions, Measured, merged, replicates_of
from probe.metrics.preference import PARALLEL_TREES
from probe.metrics.letters import LetterAnalysis, LetterOptions, analyse
from probe.metrics.text_agreement import (
    Agreement,
    agreement,
    choice_agreement,
    per_byte,
)
from probe.metrics.tree import MetricsTree
from probe.results.generations import read_generation_table
from probe.results.run import Run
from probe.results.scores import ScoreTable
from probe.types import Design

Compute = Callable[[ScoreTable, AnalysisOptions, Any], dict[str, Any]]
"""`(table, options, bench spec) → {"expected", "greedy", "ci95", …}` of one bench."""


def is_generation_run(run: Run) -> bool:
    """Whether the run decoded text (`backend.mode=generate`) instead of reading letter log-probs."""
    return run.manifest.backend.reading.generates


def is_text_only_run(run: Run) -> bool:
    """Whether the run read option texts and no letters (`backend.mode=text`): its table's log-probs
    are the text scores."""
    return run.manifest.backend.reading is Reading.TEXT


def letter_metrics(compute: Compute, spec_type: type, design: Design
                   ) -> Callable[[Run, np.ndarray | None, AnalysisOptions], MetricsTree]:
    """The `Scoring.metrics` hook of a forced-choice bench: the header every such run reports, then
    the bench's own blocks from `compute` on the (masked) table, and the letter-prior blocks over
    the conditions and prompt groups of its `design`, returned with their bootstrap replicates
    (`Measured`).

    Generation runs read one-hot choices (invalid outputs excluded and counted); letter runs
    report the letter mass and how often the full-vocabulary argmax is a letter.
    """
    def metrics(run: Run, mask: np.ndarray | None, opts: AnalysisOptions) -> MetricsTree:
        spec = bench_spec(spec_type, run.manifest.bench.config)
        out: dict[str, Any] = {}
        if is_generation_run(run):
            table, invalid = read_generation_table(run.path, run.letters)
            if mask is not None:
                kept = set(np.nonzero(np.asarray(mask, bool))[0].tolist())
                table = table.subset(np.isin(table.prompt_id, list(kept)))
                invalid = [g for g in invalid if g["prompt_id"] in kept]
            n_prompts = len(table.prompt_id) + len(invalid)
            items = set(table.item_id.astype(str)) | {str(run.prompts.column("item_id")[g["prompt_id"]])
                                                        for g in invalid}
            out.update({"n_items": len(items), "n_prompts": n_prompts, "mode": Reading.GENERATE.value,
                        "invalid_rate": len(invalid) / n_prompts if n_prompts else float("nan"),
                        "n_invalid": len(invalid)})
        else:
            table = run.table()
            if mask is not None:
                table = table.subset(np.asarray(mask, bool)[table.prompt_id])
            out.update({"n_items": int(len(np.unique(table.item_id.astype(str)))),
                        "n_prompts": int(len(table.prompt_id))})
            if is_text_only_run(run):  # no letter was read: a letter mass of text scores would mean nothing
                out["mode"] = Reading.TEXT.value
            else:
                mass, valid = shown_mass(table)
                out.update({"letter_mass": {"mean": float(mass.mean()), "share_below_half": float((mass < 0.5).mean())},
                            "greedy_valid_rate": float(valid.mean())})
        out.update({"temperature": opts.temperature,
                    "bootstrap": {"n_boot": opts.n_boot, "seed": opts.seed, "unit": "item",
                                  "n_units": len(np.unique(table.item_id.astype(str)))}})
        if not len(table.prompt_id):  # every generation invalid: nothing to aggregate, which the report says
            return {**out, "expected": None, "greedy": None, "ci95": {}}
        own = merged(out, compute(table, opts, spec))
        if not is_generation_run(run) and not is_text_only_run(run):
            own = merged(own, order_blocks(table, design, opts, spec, own.get("ci95")))
        return merged(own, letter_blocks(compute, table, design, opts, spec, is_generation_run(run),
                                         own.get("ci95"), letters_read=not is_text_only_run(run),
                                         parallel={k: own[k] for k in PARALLEL_TREES if isinstance(own.get(k), dict)}))

    return metrics


def shown_mass(table: ScoreTable) -> tuple[np.ndarray, np.ndarray]:
    """`[prompt]` letter mass and greedy validity over the letters each prompt shows (all of the
    table's letters unless `shown_options` says otherwise: a letter not shown is not an answer)."""
    lp = table.logprobs.astype(np.float64)
    shown = shown_options(table)
    if shown is None:
        return np.exp(lp).sum(axis=1), np.asarray(table.greedy_valid)
    inside = np.arange(lp.shape[1])[None, :] < shown[:, None]
    best = np.where(inside, lp, -np.inf).max(axis=1) >= lp.max(axis=1)
    return np.where(inside, np.exp(lp), 0.0).sum(axis=1), np.asarray(table.greedy_valid) & best


def letter_blocks(compute: Compute, table: ScoreTable, design: Design, opts: AnalysisOptions, spec: Any,
                  generated: bool, ci95: dict[str, Any] | None, letters_read: bool = True,
                  parallel: dict[str, dict[str, Any]] | None = None) -> Measured:
    """The letter-prior decomposition (`probe.metrics.letters`) and the `debiased` tree.

    The debiased tree is the bench's own `compute` on the debiased choice distribution `q`
    (stored as log-probs `T · log q`, so `softmax(lp / T)` gives back `q`): every metric goes
    through the same code as `expected`. Its intervals resample items with `q` fixed, which is
    exact for the rotation estimator (a group's `q` reads only its own prompts); `ci95` gains
    `debiased`, `letter_prior` and `letter_split` in place. `debiased` is null when a condition
    has no estimate (its `letter_prior_estimator` entry says why). With a text reading the text
    blocks follow (`text_blocks`; `letters_read` False: a `text`-mode run, whose `logprobs` are
    the text scores). The replicates of `debiased` and of the text blocks are returned with them.
    """
    lopts = LetterOptions(temperature=opts.temperature, n_boot=opts.n_boot, seed=opts.seed,
                          prior_ratio=opts.letter_prior_ratio)
    letters = analyse_widths(table, design, lopts, generated)
    if letters.debiased is None:  # some condition's design cannot separate letter from content
        if ci95 is not None and opts.n_boot > 0:
            ci95.update(letters.ci)
        return merged({"debiased": None, **letters.blocks},
                      text_blocks(compute, table, design, opts, spec, None, ci95, letters_read))
    with np.errstate(divide="ignore"):
        lp = opts.temperature * np.log(letters.debiased)
    debiased = compute(replace(table, logprobs=lp), opts, spec)
    if ci95 is not None and opts.n_boot > 0:
        ci95.update({"debiased": (debiased.get("ci95") or {}).get("expected"), **letters.ci})
    for key, tree in (parallel or {}).items():  # `p`, `sim95`: the debiased reading's beside the others
        if isinstance(debiased.get(key), dict) and "expected" in debiased[key]:
            tree["debiased"] = debiased[key]["expected"]
    own = Measured({"debiased": debiased.get("expected"), **letters.blocks}, _renamed(debiased, "debiased"))
    return merged(own, text_blocks(compute, table, design, opts, spec, letters.debiased, ci95, letters_read))


def shown_options(table: ScoreTable) -> np.ndarray | None:
    """`[prompt]` options each prompt shows, where some prompts show fewer than the table has
    letters (a bench whose items differ in K marks the letters beyond a prompt's K with `order`
    −1); None when every prompt shows every letter."""
    if table.order is None:
        return None
    order = np.asarray(table.order)
    return (order >= 0).sum(axis=1) if (order < 0).any() else None


def analyse_widths(table: ScoreTable, design: Design, lopts: LetterOptions, generated: bool) -> LetterAnalysis:
    """`probe.metrics.letters.analyse`, run once per number of shown options when the table mixes
    them (`shown_options`): each part sees only its K letters, its blocks are keyed
    `"{condition} (K={k})"`, and the debiased distribution is 0 at letters a prompt does not show."""
    shown = shown_options(table)
    if shown is None:
        return analyse(table, design, lopts, generated)
    debiased: np.ndarray | None = np.zeros(table.logprobs.shape, dtype=np.float64)
    blocks: dict[str, Any] = {"letter_prior": {}, "letter_split": {}, "letter_prior_estimator": {},
                              "letter_pick_shares": {}, "letter_effect": {}, "letter_warnings": []}
    ci: dict[str, Any] = {}
    for k in np.unique(shown).tolist():
        rows = shown == k
        part = analyse(_first_letters(table.subset(rows), k), design, lopts, generated)
        if part.debiased is None or debiased is None:
            debiased = None
        else:
            debiased[np.ix_(rows, np.arange(k))] = part.debiased
        for key, value in part.blocks.items():
            if key == "letter_warnings":
                blocks[key] += [{**w, "condition": f"{w['condition']} (K={k})"} for w in value]
            else:
                blocks[key].update({f"{c} (K={k})": v for c, v in value.items()})
        for key, value in part.ci.items():
            ci.setdefault(key, {}).update({f"{c} (K={k})": v for c, v in value.items()})
    return LetterAnalysis(debiased=debiased, blocks=blocks, ci=ci)


def _first_letters(table: ScoreTable, k: int) -> ScoreTable:
    """`table` cut to its first `k` letters (the per-letter arrays; the rest stay as they are)."""
    cut = {name: getattr(table, name)[:, :k] for name in ("logprobs", "groups", "order", "text_logprobs",
                                                          "text_n_tokens", "text_n_bytes")
           if getattr(table, name) is not None}
    return replace(table, **cut)


def text_blocks(compute: Compute, table: ScoreTable, design: Design, opts: AnalysisOptions, spec: Any,
                debiased: np.ndarray | None, ci95: dict[str, Any] | None, letters_read: bool = True) -> Measured:
    """The answer-text reading's trees and the letter-vs-text `agreement` audit; `{}` for a run
    without a text reading (its metrics.json gains no key).

    `text` is the bench's own `compute` on the summed continuation log-probs (lm-eval's `acc`
    score), `text_norm` on the same per UTF-8 byte (`per_byte`; lm-eval's `acc_norm` divides by
    characters). Both take the `expected` tree, as `debiased` does, and put their intervals and
    replicates under their own names; `agreement` is `probe.metrics.text_agreement` with the debiased
    letters `debiased` (None: no letter-prior estimate, raw letters only). A `text`-mode run
    (`letters_read` False) has no letter reading: its `expected` tree already is the text's, so it
    gains `text_norm` only.
    """
    out = Measured()
    if table.text_logprobs is None:
        return out
    if letters_read:
        out = merged(out, _tree_of(compute, replace(table, logprobs=table.text_logprobs), opts, spec, "text", ci95))
    if table.text_n_bytes is not None:
        out = merged(out, _tree_of(compute, replace(table, logprobs=per_byte(table)), opts, spec, "text_norm", ci95))
    if not letters_read:
        return out
    audit = agreement_widths(table, design, debiased, opts)
    if ci95 is not None and opts.n_boot > 0:
        ci95["agreement"] = audit.ci
    return merged(out, Measured({"agreement": audit.block},
                                {} if audit.replicates is None else {"agreement": audit.replicates}))


def agreement_widths(table: ScoreTable, design: Design, debiased: np.ndarray | None,
                     opts: AnalysisOptions) -> Agreement:
    """`probe.metrics.text_agreement.agreement` over the letters each prompt shows: once per number
    of shown options when the table mixes them (`shown_options`), its conditions keyed
    `"{condition} (K={k})"` as `analyse_widths` keys the letter blocks."""
    shown = shown_options(table)
    if shown is None:
        return agreement(table, design, debiased, opts)
    parts: list[tuple[int, Agreement]] = []
    for k in np.unique(shown).tolist():
        rows = shown == k
        q = None if debiased is None else debiased[rows][:, :k]
        parts.append((k, agreement(_first_letters(table.subset(rows), k), design, q, opts)))

    def keyed(tree_of: Callable[[Agreement], dict[str, Any] | None]) -> dict[str, Any]:
        return {f"{c} (K={k})": v for k, part in parts for c, v in (tree_of(part) or {}).items()}

    no_reps = any(part.replicates is None for _, part in parts)
    return Agreement(block=keyed(lambda a: a.block), ci=keyed(lambda a: a.ci),
                     replicates=None if no_reps else keyed(lambda a: a.replicates))


def generated_choice_agreement(scored: Run, generated: Run, design: Design, opts: AnalysisOptions) -> Agreement:
    """How often the letter, debiased and text readings of a letters(+text) run `scored` pick what
    the generation run `generated` of the same design generated, per condition of the bench's
    `design` (`probe.metrics.text_agreement.choice_agreement`)."""
    table = scored.table()
    letters = analyse(table, design, LetterOptions(temperature=opts.temperature, n_boot=0, seed=opts.seed))
    return choice_agreement(table, read_generation_table(generated.path, generated.letters)[0], design,
                            letters.debiased, opts)


def _tree_of(compute: Compute, table: ScoreTable, opts: AnalysisOptions, spec: Any, name: str,
             ci95: dict[str, Any] | None) -> Measured:
    """`{name: the bench's expected tree on table}`, its intervals as `ci95[name]` and its
    replicates under `name`."""
    tree = compute(table, opts, spec)
    if ci95 is not None and opts.n_boot > 0:
        ci95[name] = (tree.get("ci95") or {}).get("expected")
    return Measured({name: tree.get("expected")}, _renamed(tree, name))


def _renamed(blocks: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The `expected` replicates of `blocks` under the block name `name` (none without a bootstrap)."""
    replicates = replicates_of(blocks)
    return {name: replicates["expected"]} if "expected" in replicates else {}



def debiased_choices(run: Run, temperature: float, design: Design) -> np.ndarray | None:
    """`[row of run.table(), letter]` choice distribution at `temperature` with the letter prior
    removed, as the `debiased` metrics read it (None: some condition has no estimate)."""
    lopts = LetterOptions(temperature=temperature, n_boot=0)
    return analyse_widths(run.table(), design, lopts, is_generation_run(run)).debiased


