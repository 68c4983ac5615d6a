"""OpinionQA as a `Task`: any survey of its shape, by group, with personas and survey error.

A forced-choice bench on `ForcedChoice`; the prompts table carries each question's survey side
(design column `human`, JSON, on the prompts of its first condition), so every metric is
recomputed from the run's own files, and the metrics hook reads it before the forced-choice
machinery runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from probe.benches import forced
from probe.benches.opinionqa import report
from probe.benches.opinionqa.atp import read_folder
from probe.benches.opinionqa.metrics import compute, read_human
from probe.benches.opinionqa.personas import load_texts
from probe.benches.opinionqa.prompts import (
    CONDITION,
    CUE,
    DEFAULT,
    HUMAN,
    ROTATION,
    TARGET,
    build_prompts,
    item_of,
    persona_cells,
    reword,
    text_message,
)
from probe.benches.opinionqa.spec import OpinionQASpec
from probe.benches.opinionqa.survey import Question
from probe.benches.opinionqa.table import read_table
from probe.benches.orders import plan_orders
from probe.benches.task import Column, PreparedBench, Presentation, bench_spec
from probe.errors import ProbeInputError
from probe.files import sha256_file
from probe.metrics.core import AnalysisOptions
from probe.metrics.tree import MetricsTree
from probe.prompts.factors import BUILTIN_FACTORS
from probe.results.run import Run
from probe.results.scores import ScoreTable
from probe.types import LETTERS, Design, GroupNoun


def load(spec: OpinionQASpec) -> tuple[list[Question], list[Path]]:
    """The survey's questions (`bench.format`) and the files read, in the order read."""
    if not spec.path:
        raise ProbeInputError("bench.path: required (the OpinionQA dataset is not shipped or downloaded: give its "
                              "human_resp/<wave>/ folder, or a survey table with bench.format=table)")
    path = Path(spec.path).expanduser()
    bad = [a for a in spec.attributes if "=" in a]
    if bad:
        raise ProbeInputError(f"bench.attributes: an attribute name holds no '=', got {bad}")
    if spec.format == "table":
        return read_table(path, spec.attributes), [path]
    return read_folder(path, spec.attributes)


def prepare(spec: OpinionQASpec, generate: bool, cache_dir: Path) -> PreparedBench:
    """Validated questions, the persona conditions, their prompts under every ordering."""
    if not spec.cue.strip():
        raise ProbeInputError(f"bench.cue: expected the text the letter follows (the paper's {CUE!r}), got {spec.cue!r}")
    questions, files = load(spec)
    questions = questions[: spec.limit]
    too_wide = [q.key for q in questions if len(q.options) > len(LETTERS)]
    if too_wide:
        raise ProbeInputError(f"{files[0]}: questions {too_wide[:5]} have more than {len(LETTERS)} options")
    width = max(len(q.options) for q in questions)
    per_k, record = plan_orders(spec, [len(q.options) for q in questions])
    orders = None if record is None else {k: o.orders for k, o in per_k.items()}
    texts = load_texts(spec.persona_path)
    cells = persona_cells(questions, list(dict.fromkeys(spec.personas)), texts)
    prompts = build_prompts(questions, cells, width, orders)
    source: dict[str, Any] = {"path": str(spec.path), "format": spec.format, "questions": len(questions),
                              "files": {p.name: sha256_file(p) for p in files},
                              "groups": len({(a, g) for q in questions for a, g, _ in q.counts}),
                              "conditions": len(cells)}
    if record is not None:
        source["orders"] = record
    data_files = tuple(files) + ((Path(spec.persona_path).expanduser(),) if spec.persona_path else ())
    return PreparedBench(name=spec.name, kind=spec.kind, letters=LETTERS[:width], items=[item_of(q) for q in questions],
                         prompts=prompts, source=source, cue=spec.cue, data_files=data_files)


DESIGN_COLUMNS: tuple[pa.Field, ...] = (
    pa.field(CONDITION, pa.string()), pa.field(TARGET, pa.string()), pa.field(ROTATION, pa.int64()),
    pa.field(HUMAN, pa.string()),
)
"""The prompts table's design columns: condition, persona group, ordering and the survey side."""

DESIGN = Design(condition=CONDITION, target=TARGET, ordering=ROTATION, reference=DEFAULT, structured=(HUMAN,))
"""Conditions analysed apart (default and each persona format), the persona's group as target,
orderings within a prompt group; the survey side a JSON object."""


def metrics(run: Run, mask: np.ndarray | None, opts: AnalysisOptions) -> MetricsTree:
    """The forced-choice metrics with this bench's formulas, the survey side read from the run."""
    human = read_human(run.prompts.select(["item_id", HUMAN]))
    spec = bench_spec(OpinionQASpec, run.manifest.bench.config)
    return forced.letter_metrics(lambda t, o, s: compute(t, o, spec, human), OpinionQASpec, DESIGN)(run, mask, opts)


def _named(m: Mapping[str, Any], end: str) -> str:
    n = m.get("naming") or {}
    return str(n.get(end) or "none named")


TASK = forced.forced_choice_task(
    forced.ForcedChoice(kind="opinionqa", title="OpinionQA", spec_type=OpinionQASpec, prepare=prepare,
                        run_metrics=metrics, report=report.report, design_columns=DESIGN_COLUMNS, design=DESIGN,
                        text_message=text_message, factors=tuple(BUILTIN_FACTORS), reword=reword),
    Presentation(
        sweep_columns=(Column("overall representativeness", "default.overall.representativeness"),
                       Column("mean over groups", "default.mean.representativeness"),
                       Column("closest group", "default.mean.representativeness", cell=lambda m: _named(m, "closest")),
                       Column("furthest group", "default.mean.representativeness",
                              cell=lambda m: _named(m, "furthest")),
                       *forced.letter_columns(DEFAULT)),
        sweep_note="Representativeness = 1 − W1/(N − 1) on the options' ordinal positions against the whole panel "
                   "and the mean over groups; groups named only when a test of equal closeness rejects; expected "
                   "values with 95% intervals over questions and survey draws.",
        pair_columns=(Column("overall representativeness", "default.overall.representativeness"),),
        curve_metrics=(Column("overall representativeness", "default.overall.representativeness"),),
        groups=GroupNoun("group", "groups")),
)
