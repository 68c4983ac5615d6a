"""BLEnD as a `Task`: the paper's short-answer protocol — greedy answers, judged against the
annotated answers of each country, scored per country in the local language and in English."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pyarrow as pa

from probe.benches.blend import figures, report, whose_task
from probe.benches.blend.data import COUNTRIES, BlendSpec, load, read_files, resolve_files
from probe.benches.blend.judging import JUDGEMENT_COLUMNS, BlendRulesJudge, judge_jobs
from probe.benches.blend.metrics import Verdict, compute
from probe.benches.blend.prompts import build
from probe.benches.open_answer import OpenAnswer, kept_prompt_ids, open_answer_task
from probe.benches.task import Column, PreparedBench, Presentation, bench_spec
from probe.metrics.core import AnalysisOptions, merged
from probe.metrics.tree import MetricsTree
from probe.results.generations import read_judgements
from probe.results.run import Run
from probe.types import Prompt

log = logging.getLogger(__name__)

PROMPT_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("question_id", pa.string()), pa.field("country", pa.string()), pa.field("language", pa.string()),
    pa.field("template", pa.string()), pa.field("topic", pa.string()), pa.field("kept", pa.bool_()))
"""BLEnD's `prompts.parquet` columns: one row per question × country × template × language."""


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
                         source=source, cue=None,
                         data_files=read_files(files, spec.countries))


def prompt_values(prompt: Prompt) -> dict[str, object]:
    """The question, country, language and template of a prompt, its topic and whether the
    source's multiple-choice rule keeps its (question, country) pair."""
    return {**dict(prompt.design), "kept": prompt.value("kept") == "true", "topic": prompt.category}


def metrics(run: Run, mask: np.ndarray | None, opts: AnalysisOptions) -> MetricsTree:
    """Scores per country, language, topic and template (`probe.benches.blend.metrics`) from the
    stored prompts and verdicts; a mask keeps the chosen prompts."""
    spec = bench_spec(BlendSpec, run.manifest.bench.config)
    rows = run.prompts.select(["prompt_id", "question_id", "country", "language", "template", "topic",
                               "kept"]).to_pylist()
    keep = kept_prompt_ids(mask)
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


_COLUMNS = (Column("local", "all.score.local"), Column("English", "all.score.en"),
            Column("local − English", "all.gap"))

TASK = open_answer_task(
    OpenAnswer(kind="blend", title="BLEnD", spec_type=BlendSpec, prepare=prepare, prompt_columns=PROMPT_COLUMNS,
               prompt_values=prompt_values, judge_jobs=judge_jobs, judgement_columns=JUDGEMENT_COLUMNS,
               judges=(BlendRulesJudge.name,), metrics=metrics, report=report.report, figures=figures.run_figures,
               unit="question_id"),
    Presentation(sweep_columns=(*_COLUMNS, Column("high − low (local)", "all.resource_gap.local"),
                                Column("local (kept pairs)", "kept.score.local")),
                 sweep_note="Share of short answers giving an annotated answer (all pairs; mean over countries), "
                            "95% bootstrap CIs over question ids.",
                 pair_columns=_COLUMNS, sweep_figures=figures.sweep_figures),
    modes=(("whose_answer", whose_task.TASK),),
)
