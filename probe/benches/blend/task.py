"""BLEnD as a `Task`: the paper's short-answer protocol — greedy answers, judged against the
annotated answers of each country, scored per country in the local language and in English."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from probe.benches.blend import figures, report, whose_task
from probe.benches.blend.data import COUNTRIES, BlendSpec, load, resolve_files
from probe.benches.blend.judging import JUDGEMENT_COLUMNS, BlendRulesJudge, judge_jobs
from probe.benches.blend.metrics import Verdict, compute
from probe.benches.blend.prompts import build
from probe.benches.task import Column, Judging, PreparedBench, Presentation, Tables, Task, bench_spec
from probe.metrics.core import AnalysisOptions, merged
from probe.prompts.parse import strip_thinking
from probe.results.generations import read_judgements
from probe.results.run import Run
from probe.results.schemas import judgements_schema
from probe.types import RenderedPrompt

log = logging.getLogger(__name__)

PROMPTS_SCHEMA = pa.schema([
    ("prompt_id", pa.int64()), ("question_id", pa.string()), ("country", pa.string()), ("language", pa.string()),
    ("template", pa.string()), ("topic", pa.string()), ("kept", pa.bool_()), ("n_tokens", pa.int64()),
    ("text", pa.string()), ("token_ids", pa.list_(pa.int32())),
])
"""`prompts.parquet` of a BLEnD run: one row per question × country × template × language."""

GENERATIONS_SCHEMA = pa.schema([("prompt_id", pa.int64()), ("text", pa.string()), ("answer", pa.string())])
"""`generations.parquet` of a BLEnD run: the raw text and the answer (thinking removed, trimmed)."""


def prepare(spec: BlendSpec, generate: bool, cache_dir: Path) -> PreparedBench:
    """Validated data (checksummed files) and the short-answer prompts; always generated."""
    files = resolve_files(spec, cache_dir)
    data = load(files, spec.countries, spec.templates, spec.limit)
    built = build(data, spec.templates)
    n_pairs = len(data.questions)
    log.info("BLEnD: %d (question, country) pairs; %d excluded by the source's multiple-choice rule (a "
             "not-applicable vote or more than two idks votes), %d kept; %d pair(s) with a blank local question "
             "asked in English only", n_pairs, data.n_excluded, n_pairs - data.n_excluded, len(built.skipped_local))
    root = str(Path(spec.path).expanduser()) if spec.path else spec.url
    source = {"path": root, "sha256": spec.sha256, "mode": spec.mode, "n_pairs": n_pairs,
              "n_excluded_pairs": data.n_excluded, "skipped_local": list(built.skipped_local)}
    return PreparedBench(name=spec.name, kind=spec.kind, letters=(), items=data.questions, prompts=built.prompts,
                         source=source, cue=None)


def prompt_rows(rendered: Sequence[RenderedPrompt], prefix_lens: Sequence[int]) -> list[dict[str, Any]]:
    """`PROMPTS_SCHEMA` rows."""
    return [{"prompt_id": r.prompt.prompt_id, **{k: v for k, v in r.prompt.extra if k != "kept"},
             "kept": r.prompt.extra_value("kept") == "true", "topic": r.prompt.category,
             "n_tokens": len(r.token_ids), "text": r.text, "token_ids": r.token_ids} for r in rendered]


def parse_generation(rendered: RenderedPrompt, text: str, bench: PreparedBench) -> dict[str, Any]:
    """The answer the judge reads: the text without thinking blocks, trimmed."""
    return {"answer": strip_thinking(text).strip()}


def metrics(run: Run, mask: np.ndarray | None, opts: AnalysisOptions) -> dict[str, Any]:
    """Scores per country, language, topic and template (`probe.benches.blend.metrics`) from the
    stored prompts and verdicts; a mask keeps the chosen prompts."""
    spec = bench_spec(BlendSpec, run.manifest.bench.config)
    rows = run.prompts.select(["prompt_id", "question_id", "country", "language", "template", "topic",
                               "kept"]).to_pylist()
    keep = None if mask is None else set(np.nonzero(np.asarray(mask, bool))[0].tolist())
    prompts = {r["prompt_id"]: r for r in rows if keep is None or r["prompt_id"] in keep}
    verdicts = [Verdict(p["question_id"], p["country"], p["language"], p["template"], p["topic"], p["kept"],
                        None if j["judge_error"] is not None else bool(j["correct"]))
                for j in read_judgements(run.path) if (p := prompts.get(j["prompt_id"])) is not None]
    countries = [c for c in COUNTRIES if c in {p["country"] for p in prompts.values()}]
    pairs = {(p["question_id"], p["country"]): p["kept"] for p in prompts.values()}
    n_questions = len({q for q, _ in pairs})
    header = {"n_items": len(pairs), "n_prompts": len(prompts), "mode": spec.mode,
              "n_judge_errors": sum(v.correct is None for v in verdicts),
              "n_excluded_pairs": sum(not k for k in pairs.values()),
              "bootstrap": {"n_boot": opts.n_boot, "seed": opts.seed, "unit": "question", "n_units": n_questions}}
    return merged(header, compute(verdicts, countries, (spec.high_resource, spec.low_resource), opts))


def headline(m: Mapping[str, Any]) -> tuple[Any, Any]:
    """The `metrics` block (`all` and `kept` pairs) and its question-bootstrap intervals."""
    return m.get("metrics"), m.get("ci95")


_COLUMNS = (Column("local", "all.score.local"), Column("English", "all.score.en"),
            Column("local − English", "all.gap"))

TASK = Task(
    kind="blend",
    unit="question_id",
    title="BLEnD",
    spec_type=BlendSpec,
    answers="open",
    prepare=prepare,
    metrics=metrics,
    headline=headline,
    report=lambda m, run: report.report(dict(m)),
    figures=figures.run_figures,
    presentation=Presentation(sweep_columns=(*_COLUMNS, Column("high − low (local)", "all.resource_gap.local"),
                                             Column("local (kept pairs)", "kept.score.local")),
                              sweep_note="Share of short answers giving an annotated answer (all pairs; mean over "
                                         "countries), 95% bootstrap CIs over question ids.",
                              pair_columns=_COLUMNS, sweep_figures=figures.sweep_figures),
    tables=Tables(prompts_schema=PROMPTS_SCHEMA, prompt_rows=prompt_rows,
                  generations_schema=GENERATIONS_SCHEMA, parse_generation=parse_generation),
    judging=Judging(jobs=judge_jobs, judges=(BlendRulesJudge.name, "llm", "http"),
                    schema=judgements_schema(JUDGEMENT_COLUMNS)),
    modes=(("whose_answer", whose_task.TASK),),
)
