"""Forced-choice benchmarks (DiSCo, CCD-Bench, a new K-option bench): the builder and its hooks.

A forced-choice task states only what is its own — loading, design, the metric formulas, the
report text, figures, table columns (`ForcedChoice`, `Presentation`) — and `forced_choice_task`
adds the rest: the prompts and generations tables, parsing generated answers to letters, the
metric header (letter mass, invalid generations, temperature, bootstrap), the letter-prior
blocks, the headline and the letter-prior and invalid-generation sections of the report.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from probe.benches.task import (
    Column,
    Judging,
    PreparedBench,
    Presentation,
    Tables,
    Task,
    bench_spec,
    no_figures,
    no_text_message,
)
from probe.metrics.core import AnalysisOptions, Measured, merged, replicates_of
from probe.metrics.letters import LetterAnalysis, LetterOptions, analyse
from probe.metrics.tree import Headline, MetricsTree
from probe.metrics.text_agreement import Agreement, agreement, choice_agreement, per_byte
from probe.prompts.parse import parse_answer
from probe.prompts.text_forms import TEXT_FORMS, TextMessage
from probe.prompts.variants import SETTING_FACTORS, Reword, no_reword
from probe.results.generations import read_generation_table
from probe.results.run import Run
from probe.results.schemas import GENERATIONS_SCHEMA, forced_prompts_schema
from probe.results.scores import ScoreTable, forced_choice_rows
from probe.types import Design, RenderedPrompt
from probe.viz.figures import Figure
from probe.viz.letters import letter_section, warnings_block
from probe.viz.markdown import invalid_section, split_opening, value_ci
from probe.viz.text_agreement import agreement_section, choice_agreement_markdown

__all__ = ["LETTER_TABLES", "ROTATION_COLUMNS", "ROTATION_DESIGN", "ForcedChoice", "choice_agreement_markdown",
           "forced_choice_task", "generated_choice_agreement", "headline", "is_generation_run", "is_text_only_run",
           "letter_columns", "letter_metrics", "letter_report", "letter_tables", "parse_letter", "text_columns"]

Compute = Callable[[ScoreTable, AnalysisOptions, Any], dict[str, Any]]
"""`(table, options, bench spec) → {"expected", "greedy", "ci95", …}` of one bench."""


def is_generation_run(run: Run) -> bool:
    """Whether the run decoded text (`backend.mode=generate`) instead of reading letter log-probs."""
    return run.manifest.backend.mode == "generate"


def is_text_only_run(run: Run) -> bool:
    """Whether the run read option texts and no letters (`backend.mode=text`): its table's log-probs
    are the text scores."""
    return run.manifest.backend.mode == "text"


def letter_metrics(compute: Compute, spec_type: type, design: Design
                   ) -> Callable[[Run, np.ndarray | None, AnalysisOptions], MetricsTree]:
    """The `Task.metrics` hook of a forced-choice bench: the header every such run reports, then
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
            out.update({"n_items": len(items), "n_prompts": n_prompts, "mode": "generate",
                        "invalid_rate": len(invalid) / n_prompts if n_prompts else float("nan"),
                        "n_invalid": len(invalid)})
        else:
            table = run.table()
            if mask is not None:
                table = table.subset(np.asarray(mask, bool)[table.prompt_id])
            out.update({"n_items": int(len(np.unique(table.item_id.astype(str)))),
                        "n_prompts": int(len(table.prompt_id))})
            if is_text_only_run(run):  # no letter was read: a letter mass of text scores would mean nothing
                out["mode"] = "text"
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
        return merged(own, letter_blocks(compute, table, design, opts, spec, is_generation_run(run),
                                         own.get("ci95"), letters_read=not is_text_only_run(run)))

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
                  generated: bool, ci95: dict[str, Any] | None, letters_read: bool = True) -> Measured:
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
                              "letter_pick_shares": {}, "letter_warnings": []}
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


def letter_columns(condition: str | None = None) -> tuple[Column, Column]:
    """Sweep columns of the letter prior for `condition` (None: the run's first): the letter's
    share of the log-prob variance, and the most preferred letter with its prior π."""
    def pick(m: Mapping[str, Any], key: str) -> tuple[Any, Any, str | None]:
        block = m.get(key) or {}
        cond = condition if condition is not None else next(iter(block), None)
        return block.get(cond), ((m.get("ci95") or {}).get(key) or {}).get(cond), cond

    def share(m: Mapping[str, Any]) -> str:
        split, cis, _ = pick(m, "letter_split")
        return "–" if not split else value_ci(split["letter"], (cis or {}).get("letter"))

    def top(m: Mapping[str, Any]) -> str:
        prior, cis, _ = pick(m, "letter_prior")
        if not prior:
            return "–"
        letter = max(prior, key=prior.get)
        return f"{letter} {value_ci(prior[letter], (cis or {}).get(letter))}"

    where = f" ({condition})" if condition else ""
    return (Column(f"letter share{where}", "letter_split", cell=share,
                   undefined="no letter share: no variance split for this run's design (its report says why)"),
            Column(f"top letter π{where}", "letter_prior", cell=top,
                   undefined="no letter prior: the run's design cannot separate letter from content"))


NO_TEXT = "no agreement: the run has no answer-text reading (`backend.mode=letters+text`)"


def text_columns(condition: str | None = None) -> tuple[Column, Column]:
    """Sweep columns of the letter-vs-text audit for `condition` (None: the run's first): how often
    the two readings pick the same option, and the JSD of their group shares. Optional: only a
    sweep with a text reading shows them."""
    def pick(m: Mapping[str, Any], key: str) -> str:
        block = m.get("agreement") or {}
        cond = condition if condition is not None else next(iter(block), None)
        value = (block.get(cond) or {}).get(key)
        return "–" if value is None else value_ci(value, (((m.get("ci95") or {}).get("agreement") or {}).get(cond)
                                                          or {}).get(key))

    where = f" ({condition})" if condition else ""
    return (Column(f"letters = text{where}", "agreement", cell=lambda m: pick(m, "argmax"), undefined=NO_TEXT,
                   optional=True),
            Column(f"JSD letters‖text{where}", "agreement", cell=lambda m: pick(m, "JSD"), undefined=NO_TEXT,
                   optional=True))


def headline(metrics: Mapping[str, Any]) -> Headline:
    """The expected (probability-weighted) tree and its intervals."""
    return Headline(metrics.get("expected"), (metrics.get("ci95") or {}).get("expected"))


LETTER_READING = (
    "Each letter log-prob is split into a letter effect (the prior π, the same for every item), a content "
    "effect (the option shown) and a residual. The letter share is the part common to the condition's "
    "items; letter × group is what differs between items (item-specific letter preferences; at DiSCo's "
    "C3 also the primacy of the fact in slot 1, whose letter moves with the context rotation). The "
    "`debiased` column of the tables above is every metric recomputed with the letter prior removed; "
    "metrics of position itself (letter probabilities, PPR) are 1/K there by construction. Top pick share: "
    "the letter most often picked (greedy or generated) and its share over the complete groups, 1/K for "
    "a model blind to letters whatever its content preference.")
"""How the letter-prior section of a forced-choice report reads (`probe.viz.letters.letter_section`)."""

ESTIMATORS = {
    "rotations": "closed form over the orderings of each item (every option once at every letter)",
    "prior_division": "prior pooled over the run's balanced design, each prompt debiased as p / π renormalised "
                      "(PriDe); assumes the design balances content across letters",
    "mixed": "closed form where an item has all orderings, p / π elsewhere (π from the complete groups; an "
             "incomplete group keeps its own letter effects, e.g. DiSCo C3's primacy)",
    "count_fit": "fit of the choice counts: π by the pairwise conditional likelihood within each item's orderings "
                 "(free of the contents), contents by iterative proportional fitting with π held; with one ordering "
                 "per item, both jointly by IPF with content per label",
}
"""What each letter-prior estimator (`probe.metrics.letters`) does, as the report says it."""


def letter_report(body: Callable[[Mapping[str, Any]], str]) -> Callable[[Mapping[str, Any], Run], str]:
    """The `Task.report` hook: the bench's own markdown, opened by the letter-prior warning when it
    fires and followed by the letter-prior section (and, with a text reading, the letter-vs-text
    agreement section); a plain note when no answer was valid, and in
    generation mode the list of invalid outputs."""
    def report(metrics: Mapping[str, Any], run: Run) -> str:
        text = body(metrics) if metrics.get("expected") is not None else (
            f"# {metrics['bench']} — {metrics['model']}\n\nNo valid answers: all {metrics['n_prompts']} "
            "generations were unparseable, so no metric is defined.\n")
        head, rest = split_opening(text)
        # the letter warning comes right after the conclusion: it changes how every number below reads
        text = "\n".join([head, "", *warnings_block(metrics), rest.lstrip("\n")])
        text += letter_section(metrics, LETTER_READING, ESTIMATORS) + agreement_section(metrics)
        if is_generation_run(run):
            text += invalid_section(read_generation_table(run.path, run.letters)[1])
        return text

    return report


def parse_letter(rendered: RenderedPrompt, text: str, bench: PreparedBench) -> dict[str, Any]:
    """`parsed_letter` (null = invalid) and `rationale` of a generated answer, read after the cue."""
    parsed = parse_answer((bench.cue or "") + text, bench.letters)
    return {"parsed_letter": parsed.letter, "rationale": parsed.rationale}


ROTATION_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("condition", pa.string()), pa.field("target", pa.string()), pa.field("rotation", pa.int64()),
    pa.field("ctx_rotation", pa.int64()),
)
"""The design columns the built-in forced-choice benches store (a bench's stored layout, kept as
it was): the condition, the group a cue names, the option rotation and the context rotation of
each prompt (null where a bench has none of these)."""

ROTATION_DESIGN = Design(condition="condition", target="target", ordering="rotation")
"""The parts `ROTATION_COLUMNS` play: conditions analysed apart, cue targets, rotations within a
prompt group (a bench adds its default contrast and lens reference with `dataclasses.replace`)."""


@cache
def letter_tables(design: tuple[pa.Field, ...]) -> Tables:
    """A forced-choice bench's tables: one prompt row with its `design` columns, option order and
    groups; a generated answer's parsed letter and rationale."""
    return Tables(prompts_schema=forced_prompts_schema(design),
                  prompt_rows=partial(forced_choice_rows, design=tuple(f.name for f in design)),
                  generations_schema=GENERATIONS_SCHEMA, parse_generation=parse_letter)


LETTER_TABLES = letter_tables(ROTATION_COLUMNS)
"""The tables of a forced-choice bench with `ROTATION_COLUMNS` (the `ForcedChoice` default)."""

Extra = Callable[[Run, np.ndarray | None], dict[str, Any]]
"""`(run, prompt mask or None) → metrics.json` entries read from other tables, after the letter
metrics (CCD: the pluralism of judged rationales)."""


@dataclass(frozen=True)
class ForcedChoice:
    """What a forced-choice bench states of its own; `forced_choice_task` adds the rest."""

    kind: str
    """Registry name; a bench config selects it with `kind:`."""
    title: str
    """Display name in reports."""
    spec_type: type
    """Frozen dataclass of the `bench:` config block (with `name` and `kind` fields)."""
    prepare: Callable[[Any, bool, Path], PreparedBench]
    """`(bench spec, generation mode?, data cache dir) → PreparedBench` (items, prompts, letters)."""
    compute: Compute
    """Its metric formulas on a score table: `{"expected", "greedy", "ci95", …}`."""
    report: Callable[[Mapping[str, Any]], str]
    """Its own `report.md` body from `metrics.json` (the letter-prior sections are added)."""
    figures: Callable[[Run, Path], list[Figure]] = no_figures
    """A run's figures, written into the given directory."""
    extra_metrics: Extra | None = None
    """Metrics beyond the letter ones, appended to `metrics.json` (None: none)."""
    text_message: TextMessage | None = None
    """Its answer-text reading's user message (`probe.prompts.text_forms`; both forms); None: none."""
    design_columns: tuple[pa.Field, ...] = ROTATION_COLUMNS
    """Its design fields stored as `prompts.parquet` columns (after `item_id`), in order; a prompt
    without one of them stores null."""
    design: Design = ROTATION_DESIGN
    """The parts its design fields play (`Task.design`)."""
    factors: tuple[str, ...] = SETTING_FACTORS
    """The prompt factors its protocol admits (`Task.factors`): the cue and the system message
    by default, which every forced-choice prompt takes; `labels`, `instruction` and `layout`
    need `reword`."""
    reword: Reword | None = None
    """Its user message under another wording (`Task.reword`); None: the message stays its own."""

    def __post_init__(self) -> None:
        reworded = [f for f in self.factors if f not in SETTING_FACTORS]
        if reworded and self.reword is None:
            raise ValueError(f"bench {self.kind!r} admits the factors {reworded}, which reword its message: give it "
                             "a `reword`")


def forced_choice_task(bench: ForcedChoice, presentation: Presentation, judging: Judging = Judging()) -> Task:
    """The `Task` of a forced-choice bench: letter answers, the letter tables and metric header,
    the letter-prior blocks around its own `compute`, the expected tree as headline, its report
    body inside the letter report; `judging` only for a bench that judges generated rationales."""
    metrics = letter_metrics(bench.compute, bench.spec_type, bench.design)
    if bench.extra_metrics is not None:
        metrics = _with_extra(metrics, bench.extra_metrics)
    return Task(kind=bench.kind, title=bench.title, spec_type=bench.spec_type, answers="letters",
                prepare=bench.prepare, metrics=metrics, headline=headline, report=letter_report(bench.report),
                presentation=presentation, tables=letter_tables(bench.design_columns), figures=bench.figures,
                judging=judging, design=bench.design, factors=bench.factors, reword=bench.reword or no_reword,
                text_forms=TEXT_FORMS if bench.text_message else (),
                text_message=bench.text_message or no_text_message,
                debiased=partial(debiased_choices, design=bench.design))


def debiased_choices(run: Run, temperature: float, design: Design) -> np.ndarray | None:
    """`[row of run.table(), letter]` choice distribution at `temperature` with the letter prior
    removed, as the `debiased` metrics read it (None: some condition has no estimate)."""
    lopts = LetterOptions(temperature=temperature, n_boot=0)
    return analyse_widths(run.table(), design, lopts, is_generation_run(run)).debiased


def _with_extra(metrics: Callable[[Run, np.ndarray | None, AnalysisOptions], MetricsTree],
                extra: Extra) -> Callable[[Run, np.ndarray | None, AnalysisOptions], MetricsTree]:
    def both(run: Run, mask: np.ndarray | None, opts: AnalysisOptions) -> MetricsTree:
        return merged(metrics(run, mask, opts), extra(run, mask))

    return both
