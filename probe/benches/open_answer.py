"""Open-answer (judged) benchmarks (LocQA, BLEnD, a new judged bench): the builder and its hooks.

An open-answer task states only what is its own — its loader and prompts (`prepare`), the
columns its prompts add to `prompts.parquet`, what it asks its judge and the columns the
verdicts fill, its metrics, report and figures (`OpenAnswer`, `Presentation`) — and
`open_answer_task` adds the rest: open answers generated (no letters, no answer cue), the
generations table (the raw text and the answer with thinking removed), the prompts and
judgements tables around its own columns, the model-read judges (`llm`, `http`) beside its
own deterministic ones, and the headline (its `metrics` block and the `ci95` intervals).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from probe.benches.task import Answers, BenchHead, JudgeJob, Judging, PreparedBench, Presentation, Scoring, Tables, Task
from probe.benches.task import no_figures
from probe.metrics.core import AnalysisOptions
from probe.metrics.tree import Headline, MetricsTree
from probe.prompts.parse import strip_thinking
from probe.results.run import Run
from probe.results.schemas import judgements_schema
from probe.types import Prompt, RenderedPrompt
from probe.viz.figures import Figure

__all__ = ["ANSWER_GENERATIONS", "MODEL_JUDGES", "OpenAnswer", "headline", "kept_prompt_ids", "open_answer_task"]

ANSWER_GENERATIONS = pa.schema([("prompt_id", pa.int64()), ("text", pa.string()), ("answer", pa.string())])
"""`generations.parquet` of an open-answer run: the raw text and the answer the judge reads."""

MODEL_JUDGES: tuple[str, ...] = ("llm", "http")
"""The judges that answer any registered judge task by reading its prompt
(`probe.judges.registry.MECHANISMS`), in the order a refused `judge=` lists them."""

PROMPT_HEAD = (pa.field("prompt_id", pa.int64()),)
PROMPT_TAIL = (pa.field("n_tokens", pa.int64()), pa.field("text", pa.string()),
               pa.field("token_ids", pa.list_(pa.int32())))
"""`prompts.parquet` of an open-answer run: `prompt_id`, the bench's own columns, then the
length, the rendered text and the exact token ids the backend received."""


@dataclass(frozen=True)
class OpenAnswer(BenchHead):
    """What an open-answer bench states of its own (after `BenchHead`'s kind, title, spec type and
    loader); `open_answer_task` adds the rest."""

    prompt_columns: tuple[pa.Field, ...]
    """Its `prompts.parquet` columns between `prompt_id` and `n_tokens` (template, language, …)."""
    prompt_values: Callable[[Prompt], Mapping[str, object]]
    """`prompt → the values of prompt_columns` (keys beyond them are ignored)."""
    judge_jobs: Callable[[PreparedBench, Sequence[Mapping[str, Any]]], list[JudgeJob]]
    """`(bench, generations rows) → what to ask the judge`; each row has `prompt_id`, `text`
    and `answer`."""
    judgement_columns: tuple[pa.Field, ...]
    """Its `judgements.parquet` columns between `prompt_id, task` and `judge_error, judge,
    dropped`: those that identify a verdict, then its judge tasks' verdict columns."""
    judges: tuple[str, ...]
    """Its own deterministic judges (`register_judge`); `llm` and `http` are added."""
    metrics: Callable[[Run, np.ndarray | None, AnalysisOptions], MetricsTree]
    """`(run, prompt mask or None, options) → metrics.json` entries beyond `bench` and `model`,
    from the stored tables: its point estimates under `metrics`, their intervals under `ci95`."""
    report: Callable[[Mapping[str, Any]], str]
    """Its `report.md` from `metrics.json`."""
    figures: Callable[[Run, Path], list[Figure]] = no_figures
    """A run's figures, written into the given directory."""
    unit: str = "item_id"
    """The `prompts.parquet` column whose values the bootstrap resamples (one of `prompt_columns`)."""


def headline(metrics: Mapping[str, Any]) -> Headline:
    """The `metrics` block and its intervals (`ci95`)."""
    return Headline(metrics.get("metrics"), metrics.get("ci95"))


def parse_answer(rendered: RenderedPrompt, text: str, bench: PreparedBench) -> dict[str, Any]:
    """The answer the judge reads: the generated text without thinking blocks, trimmed."""
    return {"answer": strip_thinking(text)}


def kept_prompt_ids(mask: np.ndarray | None) -> set[int] | None:
    """The prompt ids a `[prompt]` mask keeps (None: no mask, every prompt)."""
    return None if mask is None else set(np.nonzero(np.asarray(mask, bool))[0].tolist())


def open_answer_task(bench: OpenAnswer, presentation: Presentation, modes: tuple[tuple[str, Task], ...] = ()) -> Task:
    """The `Task` of an open-answer bench: answers generated and read by its judges, the tables
    around its own columns, its `metrics` block as headline; `modes` as `Task.modes`."""
    if bench.unit not in {f.name for f in bench.prompt_columns}:
        raise ValueError(f"{bench.kind}: unit {bench.unit!r} is not one of its prompt columns")
    schema = pa.schema([*PROMPT_HEAD, *bench.prompt_columns, *PROMPT_TAIL])

    def prompt_rows(rendered: Sequence[RenderedPrompt], prefix_lens: Sequence[int]) -> list[dict[str, Any]]:
        return [{**bench.prompt_values(r.prompt), "prompt_id": r.prompt.prompt_id, "n_tokens": len(r.token_ids),
                 "text": r.text, "token_ids": r.token_ids} for r in rendered]

    return Task(kind=bench.kind, title=bench.title, answers=Answers.OPEN,
                data=bench.data,
                scoring=Scoring(metrics=bench.metrics, headline=headline, report=lambda m, run: bench.report(m),
                                figures=bench.figures, unit=bench.unit),
                presentation=presentation,
                tables=Tables(prompts_schema=schema, prompt_rows=prompt_rows, generations_schema=ANSWER_GENERATIONS,
                              parse_generation=parse_answer),
                modes=modes,
                judging=Judging(jobs=bench.judge_jobs, judges=(*bench.judges, *MODEL_JUDGES),
                                schema=judgements_schema(bench.judgement_columns)))
