"""LocQA as a `Task`: open answers generated, judged, and scored for global and regional bias."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from probe.benches.locqa import figures, judging, report
from probe.benches.locqa.rules import RulesJudge
from probe.benches.locqa.data import (
    LocQASpec,
    build_prompts,
    first_templates,
    load_questions,
    resolve_source,
)
from probe.benches.locqa.metrics import Judgement, PromptRef, compute
from probe.benches.task import Column, Judging, PreparedBench, Presentation, Tables, Task, bench_spec
from probe.errors import ProbeInputError
from probe.files import sha256_file
from probe.metrics.core import AnalysisOptions, merged
from probe.prompts.parse import strip_thinking
from probe.results.generations import read_judgements
from probe.results.run import Run
from probe.results.schemas import SHARED_JUDGEMENT_COLUMNS, judgements_schema
from probe.types import RenderedPrompt


OPEN_PROMPTS_SCHEMA = pa.schema([
    ("prompt_id", pa.int64()), ("template", pa.string()), ("category", pa.string()), ("language", pa.string()),
    ("mode", pa.string()), ("locale", pa.string()), ("n_tokens", pa.int64()), ("text", pa.string()),
    ("token_ids", pa.list_(pa.int32())),
])
"""`prompts.parquet` of a LocQA run: one row per question (× locale in explicit mode)."""

OPEN_GENERATIONS_SCHEMA = pa.schema([("prompt_id", pa.int64()), ("text", pa.string()), ("answer", pa.string())])
"""`generations.parquet` of a LocQA run: raw text and the answer (thinking removed)."""


def prepare(spec: LocQASpec, generate: bool, cache_dir: Path) -> PreparedBench:
    """Validated questions (checksummed file) and the prompts of `spec.mode`; always generated."""
    path = resolve_source(spec, cache_dir)
    questions = first_templates(load_questions(path, spec.languages, spec.categories), spec.limit)
    prompts = [p.to_prompt() for p in build_prompts(questions, spec)]
    return PreparedBench(name=spec.name, kind=spec.kind, letters=(), items=questions, prompts=prompts,
                         source={"path": str(path), "sha256": sha256_file(path), "mode": spec.mode}, cue=None)


def prompt_rows(rendered: Sequence[RenderedPrompt], prefix_lens: Sequence[int]) -> list[dict[str, Any]]:
    """`OPEN_PROMPTS_SCHEMA` rows: the template, language, mode and locale of each prompt."""
    return [{"prompt_id": r.prompt.prompt_id, **dict(r.prompt.extra), "category": r.prompt.category,
             "n_tokens": len(r.token_ids), "text": r.text, "token_ids": r.token_ids} for r in rendered]


def parse_generation(rendered: RenderedPrompt, text: str, bench: PreparedBench) -> dict[str, Any]:
    """The answer the judge reads: the text without thinking blocks."""
    return {"answer": strip_thinking(text)}


def metrics(run: Run, mask: np.ndarray | None, opts: AnalysisOptions) -> dict[str, Any]:
    """B_US, B_R, the taxonomy and the rest (SPEC §4) from the stored prompts and judgements and
    the checksum-verified data file; a mask keeps the chosen prompts (semantic matches stay)."""
    bench = run.manifest.bench
    path = Path(str(bench.path))
    if not path.is_file() or sha256_file(path) != bench.sha256:
        raise ProbeInputError(f"{run.path}: the LocQA data file {path} is missing or changed (sha256 in manifest.json)")
    spec = bench_spec(LocQASpec, bench.config)
    questions = first_templates(load_questions(path, spec.languages, spec.categories), spec.limit)
    rows = run.prompts.to_pylist()
    keep = None if mask is None else set(np.nonzero(np.asarray(mask, bool))[0].tolist())
    prompts = [PromptRef(r["prompt_id"], r["template"], r["language"], r["mode"], r["locale"])
               for r in rows if keep is None or r["prompt_id"] in keep]
    judgements = [Judgement.from_record(r) for r in read_judgements(run.path)
                  if keep is None or r["prompt_id"] is None or r["prompt_id"] in keep]
    n_templates = len({q.template for q in questions})  # what the bootstrap resamples (`locqa_sums`)
    header = {"n_items": bench.n_items, "n_prompts": len(prompts), "mode": bench.source["mode"],
              "bootstrap": {"n_boot": opts.n_boot, "seed": opts.seed, "unit": "template", "n_units": n_templates}}
    return merged(header, compute(questions, prompts, judgements, opts))


def headline(m: Mapping[str, Any]) -> tuple[Any, Any]:
    """The `metrics` block and its template-bootstrap intervals."""
    return m.get("metrics"), m.get("ci95")


_COLUMNS = (Column("B_US", "B_US_macro"), Column("|B_R − 1|", "B_R_dev_macro"),
            Column("multiplicity", "multiplicity"))

TASK = Task(
    kind="locqa",
    unit="template",
    title="LocQA",
    spec_type=LocQASpec,
    answers="open",
    prepare=prepare,
    metrics=metrics,
    headline=headline,
    report=lambda m, run: report.report(dict(m)),
    figures=figures.run_figures,
    presentation=Presentation(sweep_columns=(*_COLUMNS, Column("no-answer rate", "no_answer_rate")),
                              sweep_note="Judged open answers, 95% bootstrap CIs over templates.",
                              pair_columns=_COLUMNS, sweep_figures=figures.sweep_figures),
    tables=Tables(prompts_schema=OPEN_PROMPTS_SCHEMA, prompt_rows=prompt_rows,
                  generations_schema=OPEN_GENERATIONS_SCHEMA, parse_generation=parse_generation),
    judging=Judging(jobs=judging.judge_jobs, judges=(RulesJudge.name, "llm", "http"),
                    schema=judgements_schema(SHARED_JUDGEMENT_COLUMNS)),
)
