"""LocQA as a `Task`: open answers generated, judged, and scored for global and regional bias."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from probe.benches.locqa import figures, report
from probe.benches.locqa.data import (
    LocQASpec,
    build_prompts,
    first_templates,
    load_questions,
    resolve_source,
)
from probe.benches.locqa.judging import JUDGEMENT_COLUMNS, RulesJudge, judge_jobs
from probe.benches.locqa.metrics import Judgement, PromptRef, compute
from probe.benches.open_answer import OpenAnswer, kept_prompt_ids, open_answer_task
from probe.benches.task import Column, PreparedBench, Presentation, bench_spec
from probe.errors import ProbeInputError
from probe.files import sha256_file
from probe.metrics.core import AnalysisOptions, merged
from probe.metrics.tree import MetricsTree
from probe.results.generations import read_judgements
from probe.results.run import Run
from probe.types import Prompt

PROMPT_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("template", pa.string()), pa.field("category", pa.string()), pa.field("language", pa.string()),
    pa.field("mode", pa.string()), pa.field("locale", pa.string()))
"""LocQA's `prompts.parquet` columns: one row per question (× locale in explicit mode)."""


def prepare(spec: LocQASpec, generate: bool, cache_dir: Path) -> PreparedBench:
    """Validated questions (checksummed file) and the prompts of `spec.mode`; always generated."""
    path = resolve_source(spec, cache_dir)
    questions = first_templates(load_questions(path, spec.languages, spec.categories), spec.limit)
    prompts = [p.to_prompt() for p in build_prompts(questions, spec)]
    return PreparedBench(name=spec.name, kind=spec.kind, letters=(), items=questions, prompts=prompts,
                         source={"path": str(path), "sha256": sha256_file(path), "mode": spec.mode}, cue=None,
                         data_files=(path,))


def prompt_values(prompt: Prompt) -> dict[str, object]:
    """The template, language, mode and locale of a prompt, and its category."""
    return {**dict(prompt.design), "category": prompt.category}


def metrics(run: Run, mask: np.ndarray | None, opts: AnalysisOptions) -> MetricsTree:
    """B_US, B_R, the taxonomy and the rest (docs/benchmarks/locqa.md) from the stored prompts and judgements and
    the checksum-verified data file; a mask keeps the chosen prompts (semantic matches stay)."""
    bench = run.manifest.bench
    path = Path(str(bench.path))
    if not path.is_file() or sha256_file(path) != bench.sha256:
        raise ProbeInputError(f"{run.path}: the LocQA data file {path} is missing or changed (sha256 in manifest.json)")
    spec = bench_spec(LocQASpec, bench.config)
    questions = first_templates(load_questions(path, spec.languages, spec.categories), spec.limit)
    rows = run.prompts.to_pylist()
    keep = kept_prompt_ids(mask)
    prompts = [PromptRef(r["prompt_id"], r["template"], r["language"], r["mode"], r["locale"])
               for r in rows if keep is None or r["prompt_id"] in keep]
    judgements = [Judgement.from_record(r) for r in read_judgements(run.path)
                  if keep is None or r["prompt_id"] is None or r["prompt_id"] in keep]
    n_templates = len({q.template for q in questions})  # what the bootstrap resamples (`locqa_sums`)
    header = {"n_items": bench.n_items, "n_prompts": len(prompts), "mode": bench.source["mode"],
              "bootstrap": {"n_boot": opts.n_boot, "seed": opts.seed, "unit": "template", "n_units": n_templates}}
    return merged(header, compute(questions, prompts, judgements, opts))


_COLUMNS = (Column("B_US", "B_US_macro"), Column("|B_R − 1|", "B_R_dev_macro"),
            Column("multiplicity", "multiplicity"))

TASK = open_answer_task(
    OpenAnswer(kind="locqa", title="LocQA", spec_type=LocQASpec, prepare=prepare, prompt_columns=PROMPT_COLUMNS,
               prompt_values=prompt_values, judge_jobs=judge_jobs, judgement_columns=JUDGEMENT_COLUMNS,
               judges=(RulesJudge.name,), metrics=metrics, report=report.report, figures=figures.run_figures,
               unit="template"),
    Presentation(sweep_columns=(*_COLUMNS, Column("no-answer rate", "no_answer_rate")),
                 sweep_note="Judged open answers, 95% bootstrap CIs over templates.",
                 pair_columns=_COLUMNS, sweep_figures=figures.sweep_figures),
)
