"""Forced-choice benchmarks (DiSCo, CCD-Bench, a new K-option bench): the builder and its hooks.

A forced-choice task states only what is its own — loading, design, the metric formulas, the
report text, figures, table columns (`ForcedChoice`, `Presentation`) — and `forced_choice_task`
adds the rest: the prompts and generations tables, parsing generated answers to letters, the
metric header (letter mass, invalid generations, temperature, bootstrap), the letter-prior
blocks, the headline and the letter-prior and invalid-generation sections of the report.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from probe.benches.forced_metrics import (
    Compute,
    debiased_choices,
    generated_choice_agreement,
    is_generation_run,
    is_text_only_run,
    letter_metrics,
)
from probe.benches.order_report import orders_section
from probe.benches.task import (
    Answers,
    Column,
    BenchHead,
    Factors,
    Judging,
    PreparedBench,
    Presentation,
    Scoring,
    Tables,
    Task,
    TextForms,
    no_figures,
)
from probe.metrics.core import AnalysisOptions, merged
from probe.metrics.tree import Headline, MetricsTree
from probe.prompts.parse import parse_answer
from probe.prompts.text_forms import TEXT_FORMS, TextMessage
from probe.prompts.variants import SETTING_FACTORS, Reword
from probe.results.generations import read_generation_table
from probe.results.run import Run
from probe.results.schemas import GENERATIONS_SCHEMA, forced_prompts_schema
from probe.results.scores import forced_choice_rows
from probe.types import Design, RenderedPrompt
from probe.viz.figures import Figure
from probe.viz.letters import letter_section, warnings_block
from probe.viz.markdown import invalid_section, split_opening, value_ci
from probe.viz.text_agreement import agreement_section, choice_agreement_markdown

__all__ = ["LETTER_TABLES", "ROTATION_COLUMNS", "ROTATION_DESIGN", "ForcedChoice", "choice_agreement_markdown",
           "forced_choice_task", "generated_choice_agreement", "headline", "is_generation_run", "is_text_only_run",
           "letter_columns", "letter_metrics", "letter_report", "letter_tables", "parse_letter", "text_columns"]





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
    "items; letter × group is what differs between items (item-specific letter preferences).{note} The "
    "`debiased` column of the tables above is every metric recomputed on the debiased distribution: for an "
    "item shown under all K orderings, each question's own letter effects are removed (the closed form; π "
    "is not used); for an item with fewer orderings, the prompt's distribution is divided by π and "
    "renormalised. Metrics of position itself (the letter probabilities) are 1/K there by construction. "
    "The shares are of the log-prob variance, where an improbable letter weighs as much as a probable one; "
    "the lines below say the same on the probability scale (the mass the letter moves) and how much of the "
    "debiased content would come back from other orderings (content reliability). Top pick share: "
    "the letter most often picked (greedy or generated) and its share over the complete groups, 1/K for "
    "a model blind to letters whatever its content preference.")
"""How the letter-prior section of a forced-choice report reads (`probe.viz.letters.letter_section`)."""

ESTIMATORS = {
    "rotations": "closed form over the orderings of each item (every option once at every letter)",
    "prior_division": "prior pooled over the run's balanced design, each prompt debiased as p / π renormalised "
                      "(PriDe); assumes the design balances content across letters",
    "mixed": "closed form where an item has all orderings, p / π elsewhere (π from the complete groups; an "
             "incomplete group keeps its own letter effects, e.g. a context whose position moves with the ordering)",
    "count_fit": "fit of the choice counts: π by the pairwise conditional likelihood within each item's orderings "
                 "(free of the contents), contents by iterative proportional fitting with π held; with one ordering "
                 "per item, both jointly by IPF with content per label",
}
"""What each letter-prior estimator (`probe.metrics.letters`) does, as the report says it."""


def letter_report(body: Callable[[Mapping[str, Any]], str],
                  letter_note: str = "") -> Callable[[Mapping[str, Any], Run], str]:
    """The `Scoring.report` hook: the bench's own markdown, opened by the letter-prior warning when it
    fires and followed by the letter-prior section (`LETTER_READING` with the bench's own
    `letter_note`; and, with a text reading, the letter-vs-text agreement section); a plain note
    when no answer was valid, and in generation mode the list of invalid outputs."""
    reading = LETTER_READING.format(note=f" {letter_note}" if letter_note else "")

    def report(metrics: Mapping[str, Any], run: Run) -> str:
        text = body(metrics) if metrics.get("expected") is not None else (
            f"# {metrics['bench']} — {metrics['model']}\n\nNo valid answers: all {metrics['n_prompts']} "
            "generations were unparseable, so no metric is defined.\n")
        head, rest = split_opening(text)
        # the letter warning comes right after the conclusion: it changes how every number below reads
        text = "\n".join([head, "", *warnings_block(metrics), rest.lstrip("\n")])
        text += letter_section(metrics, reading, ESTIMATORS) + orders_section(metrics) + agreement_section(metrics)
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

RunMetrics = Callable[[Run, np.ndarray | None, AnalysisOptions], MetricsTree]
"""`(run, prompt mask or None, options) → metrics.json`: a task's whole metrics hook (`Scoring.metrics`)."""

Extra = Callable[[Run, np.ndarray | None], dict[str, Any]]
"""`(run, prompt mask or None) → metrics.json` entries read from other tables, after the letter
metrics (CCD: the pluralism of judged rationales)."""


@dataclass(frozen=True)
class ForcedChoice(BenchHead):
    """What a forced-choice bench states of its own (after `BenchHead`'s kind, title, spec type and
    loader); `forced_choice_task` adds the rest."""

    report: Callable[[Mapping[str, Any]], str]
    """Its own `report.md` body from `metrics.json` (the letter-prior sections are added)."""
    compute: Compute | None = None
    """Its metric formulas on a score table: `{"expected", "greedy", "ci95", …}` (wrapped by
    `letter_metrics`). Exactly one of `compute` and `run_metrics`."""
    run_metrics: RunMetrics | None = None
    """Its whole metrics hook, for a bench whose formulas read more of the run than the score table
    (GlobalOpinionQA and OpinionQA read the survey side stored in `prompts.parquet`); it calls
    `letter_metrics` itself. Exactly one of `compute` and `run_metrics`."""
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
    """The prompt factors its protocol admits (`Factors.names`): the cue and the system message
    by default, which every forced-choice prompt takes; `labels`, `instruction` and `layout`
    need `reword`."""
    reword: Reword | None = None
    """Its user message under another wording (`Factors.reword`); None: the message stays its own."""
    letter_note: str = ""
    """What the letter-prior section adds for this bench: what its design puts into letter ×
    group, its own metrics of position (one or two sentences; empty: nothing)."""

    def __post_init__(self) -> None:
        if (self.compute is None) == (self.run_metrics is None):
            raise ValueError(f"bench {self.kind!r}: give exactly one of `compute` (formulas on a score table) and "
                             "`run_metrics` (a metrics hook reading the run)")
        reworded = [f for f in self.factors if f not in SETTING_FACTORS]
        if reworded and self.reword is None:
            raise ValueError(f"bench {self.kind!r} admits the factors {reworded}, which reword its message: give it "
                             "a `reword`")


def forced_choice_task(bench: ForcedChoice, presentation: Presentation, judging: Judging = Judging()) -> Task:
    """The `Task` of a forced-choice bench: letter answers, the letter tables and metric header,
    the letter-prior blocks around its own `compute`, the expected tree as headline, its report
    body inside the letter report; `judging` only for a bench that judges generated rationales."""
    if bench.run_metrics is not None:
        metrics = bench.run_metrics
    else:
        assert bench.compute is not None  # ForcedChoice.__post_init__: exactly one of the two
        metrics = letter_metrics(bench.compute, bench.spec_type, bench.design)
    if bench.extra_metrics is not None:
        metrics = _with_extra(metrics, bench.extra_metrics)
    return Task(kind=bench.kind, title=bench.title, answers=Answers.LETTERS,
                data=bench.data,
                scoring=Scoring(metrics=metrics, headline=headline, report=letter_report(bench.report, bench.letter_note),
                                figures=bench.figures, debiased=partial(debiased_choices, design=bench.design)),
                presentation=presentation, tables=letter_tables(bench.design_columns), judging=judging,
                design=bench.design, factors=Factors(names=bench.factors, reword=bench.reword),
                text=None if bench.text_message is None else TextForms(forms=TEXT_FORMS, message=bench.text_message))


def _with_extra(metrics: Callable[[Run, np.ndarray | None, AnalysisOptions], MetricsTree],
                extra: Extra) -> Callable[[Run, np.ndarray | None, AnalysisOptions], MetricsTree]:
    def both(run: Run, mask: np.ndarray | None, opts: AnalysisOptions) -> MetricsTree:
        return merged(metrics(run, mask, opts), extra(run, mask))

    return both
