"""BLEnD's whose-answer reading as a `Task` (`bench.mode=whose_answer`): its own kind, reached from
the `blend` config through `Task.modes`. Letter-free: read with `backend.mode=text
bench.text_form=cloze`, each candidate answer scored as a continuation of the question."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from probe.backends.reading import Reading
from probe.benches import forced
from probe.benches.blend import whose, whose_metrics
from probe.benches.blend.data import COUNTRIES, BlendSpec, load, read_files, resolve_files
from probe.benches.blend.whose_conclusion import opening
from probe.benches.forced import headline
from probe.benches.task import Answers, Column, Data, PreparedBench, Presentation, Scoring, Task, TextForms, bench_spec
from probe.errors import ProbeInputError
from probe.metrics.core import AnalysisOptions, get_path, merged
from probe.metrics.tree import MetricsTree
from probe.results.run import Run
from probe.viz.figures import Figure, bars, pyplot, save
from probe.viz.markdown import value_ci

log = logging.getLogger(__name__)

CREDIT = "split"
"""The credit rule the manifest records (`probe.benches.blend.whose_metrics`)."""


def prepare(spec: BlendSpec, generate: bool, cache_dir: Path) -> PreparedBench:
    """The qualifying questions' neutral and cued prompts (`bench.limit`: the first N qualifying)."""
    if generate:
        raise ProbeInputError("bench.mode=whose_answer scores the candidate answers' texts; expected "
                              "backend.mode=text (bench.text_form=cloze), got backend.mode=generate")
    if spec.countries and set(spec.countries) != set(COUNTRIES):
        raise ProbeInputError(f"bench.countries: bench.mode=whose_answer reads all 16 countries; expected [], "
                              f"got {list(spec.countries)}")
    files = resolve_files(spec, cache_dir)
    d = whose.design(load(files, (), ()))
    asked = d.questions[:spec.limit]
    log.info("BLEnD whose_answer: %d question ids; %d fail the multiple-choice rule (a dropped pair, or a top "
             "answer with < %d votes or no English); %d qualify, %d skipped with no clean neutral form %s; %d asked",
             d.n_questions, len(d.not_qualifying), whose.MIN_VOTES, len(d.questions) + len(d.no_neutral),
             len(d.no_neutral), list(d.no_neutral), len(asked))
    limited = whose.WhoseDesign(asked, d.n_questions, d.not_qualifying, d.no_neutral)
    root = str(Path(spec.path).expanduser()) if spec.path else spec.url
    source = {"path": root, "sha256": spec.sha256, "mode": spec.mode, "n_question_ids": d.n_questions,
              "n_not_qualifying": len(d.not_qualifying), "n_qualifying": len(d.questions) + len(d.no_neutral),
              "no_neutral": list(d.no_neutral), "n_asked": len(asked), "credit": CREDIT}
    return PreparedBench(name=spec.name, kind=spec.kind, letters=whose.LETTERS16, items=whose.items(limited),
                         prompts=whose.prompts(limited), source=source,
                         data_files=read_files(files, ()))


def metrics(run: Run, mask: np.ndarray | None, opts: AnalysisOptions) -> MetricsTree:
    """The whose-answer metrics from the stored scores: the text reading's (a letters-only run's
    letter log-probs read the same way, over a 16-option question)."""
    spec = bench_spec(BlendSpec, run.manifest.bench.config)
    table = run.table()
    if mask is not None:
        table = table.subset(np.asarray(mask, bool)[table.prompt_id])
    text = table.text_logprobs is not None or run.manifest.backend.reading is Reading.TEXT
    scores = table.text_logprobs if table.text_logprobs is not None else table.logprobs
    items, item = np.unique(table.item_id.astype(str), return_inverse=True)
    column = {c: i for i, c in enumerate(COUNTRIES)}
    target = np.array([column.get(str(t), -1) for t in table.column("target")])
    reading = whose_metrics.Reading(np.asarray(scores, np.float64), np.asarray(table.order, np.int64), item, target,
                                    len(items))
    return merged({"n_items": len(items), "n_prompts": len(table.prompt_id), "mode": spec.mode,
                   "reading": (Reading.TEXT if text else Reading.LETTERS).value, "credit": CREDIT, "temperature": opts.temperature,
                   "bootstrap": {"n_boot": opts.n_boot, "seed": opts.seed, "unit": "question", "n_units": len(items)}},
                  whose_metrics.compute(reading, COUNTRIES, (spec.high_resource, spec.low_resource), opts.temperature,
                                        opts.n_boot, opts.seed))


def report(m: Mapping[str, Any], run: Run) -> str:
    """Markdown: the conclusion and terms, the headline numbers, then per country the neutral share and the compliance."""
    e, ci = m["expected"], (m.get("ci95") or {}).get("expected") or {}

    def cell(*path: str) -> str:
        return value_ci(get_path(e, *path), get_path(ci, *path))

    lines = [f"# BLEnD whose answer — {m['model']}", "", *opening(m),
             f"{m['n_items']} questions, {m['n_prompts']} prompts (neutral form + 16 country cues each), read from "
             f"the {m['reading']} scores at T = {m['temperature']}; a shared answer's mass is split equally among "
             "its countries. 95% intervals resample questions.", "",
             f"- neutral form: KL from uniform {cell('neutral', 'KL')} nats, Gini {cell('neutral', 'gini')}, "
             f"high − low-resource share {cell('neutral', 'spd')}",
             f"- compliance (mass on the cued country's answer, mean over countries): {cell('compliance', 'mean')}; "
             f"gain over the neutral form {cell('compliance_gain', 'mean')}",
             f"- stickiness (mass on the neutral form's top answer under other countries' cues): {cell('stickiness')}",
             "", "| country | neutral share | compliance |", "|---|---|---|"]
    lines += [f"| {c} | {cell('neutral', 'shares', c)} | {cell('compliance', 'by_country', c)} |" for c in COUNTRIES]
    return "\n".join(lines) + "\n"


def figures(run: Run, out_dir: Path) -> list[Figure]:
    """The neutral form's country shares and the compliance per country, with their 95% CIs."""
    e, ci = run.metrics.get("expected") or {}, (run.metrics.get("ci95") or {}).get("expected") or {}
    if not e:
        return []
    fig, axes = pyplot().subplots(1, 2, figsize=(11, 3.8), constrained_layout=True)
    for ax, path, label in ((axes[0], ("neutral", "shares"), "neutral-form share"),
                            (axes[1], ("compliance", "by_country"), "compliance under its cue")):
        bars(ax, get_path(e, *path), get_path(ci, *path), list(COUNTRIES))
        ax.set(ylabel=label, title=f"BLEnD whose answer — {run.metrics.get('model', '')}")
    return [save(fig, out_dir, "whose_by_country.png", "Per country: the mean share of the neutral form's "
                 "distribution (dotted: uniform 1/16) and the mass on its own answer under its cue, 95% CIs over "
                 "questions.")]


_COLUMNS = (Column("neutral KL", "neutral.KL"), Column("high − low", "neutral.spd"),
            Column("compliance", "compliance.mean"), Column("stickiness", "stickiness"))

TASK = Task(
    kind="blend_whose",
    title="BLEnD (whose answer)",
    answers=Answers.LETTERS,
    data=Data(spec_type=BlendSpec, prepare=prepare),
    scoring=Scoring(metrics=metrics, headline=headline, report=report, figures=figures),
    presentation=Presentation(sweep_columns=_COLUMNS, pair_columns=_COLUMNS,
                              sweep_note="Which country's annotated answer the model's scores favour: KL from "
                                         "uniform and high − low-resource share of the neutral form, compliance "
                                         "and stickiness under country cues; 95% CIs over questions."),
    tables=forced.LETTER_TABLES,  # a forced-choice bench's tables
    design=forced.ROTATION_DESIGN,
    text=TextForms(forms=("cloze",), message=whose.text_message),
)
"""BLEnD's whose-answer reading: a distribution over the 16 countries' answers per question."""
