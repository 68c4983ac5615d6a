"""Generated answers and judge verdicts on disk (`generations.parquet`, `judgements.parquet`).

A forced-choice run in generation mode stores, per prompt, the raw text after the pre-filled
cue, the parsed letter (null when invalid) and the rationale; metrics read it back as a one-hot
`ScoreTable`, so generation and letter runs go through the same metric code. Judge verdicts
(failures included, as `judge_error`) go to `judgements.parquet`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from probe.errors import ProbeInputError
from probe.results.io import parquet_source
from probe.results.layout import GENERATIONS, JUDGEMENTS, PROMPTS
from probe.results.scores import ScoreTable, read_prompts, write_table


def write_generations(run_dir: Path, rows: Sequence[dict[str, Any]], schema: pa.Schema) -> None:
    """`generations.parquet`, rows sorted by `prompt_id`."""
    ordered = sorted(rows, key=lambda r: r["prompt_id"])
    write_table(run_dir / GENERATIONS, pa.Table.from_pylist(ordered, schema=schema))


def write_judgements(run_dir: Path, rows: Sequence[dict[str, Any]], schema: pa.Schema) -> None:
    """`judgements.parquet` in the bench's `schema`: one row per verdict; columns a task does not
    use stay null. Rows in a canonical order (per-question verdicts first, then by prompt id,
    task and the other columns in schema order), so merged shards write the unsharded run's file."""
    rest = [n for n in schema.names if n not in ("prompt_id", "task")]

    def order(row: dict[str, Any]) -> tuple[Any, ...]:
        pid = row.get("prompt_id")
        # A bench's identifying columns follow `task`, so they break ties before any verdict
        # column; str() because verdict columns may hold lists or booleans.
        return (pid is not None, -1 if pid is None else pid, row.get("task") or "",
                *(str(row.get(n) or "") for n in rest))

    write_table(run_dir / JUDGEMENTS, pa.Table.from_pylist(sorted(rows, key=order), schema=schema))


def read_judgements(run_dir: Path) -> list[dict[str, Any]]:
    """The rows of `judgements.parquet` (empty when the run judged nothing)."""
    path = run_dir / JUDGEMENTS
    return pq.read_table(parquet_source(path)).to_pylist() if path.is_file() else []


def read_generation_table(run_dir: Path, letters: Sequence[str]) -> tuple[ScoreTable, list[dict[str, Any]]]:
    """Valid generations as a one-hot `ScoreTable` (log p = 0 for the chosen letter, −inf else),
    so generation runs go through the same metric code; and the invalid rows, kept for the report."""
    prompts = read_prompts(run_dir)
    gens = pq.read_table(parquet_source(run_dir / GENERATIONS)).sort_by("prompt_id").to_pylist()
    if [g["prompt_id"] for g in gens] != prompts.prompt_id.tolist():
        raise ProbeInputError(f"{run_dir}: {GENERATIONS} and {PROMPTS} hold different prompt ids")
    valid = np.array([g["parsed_letter"] is not None for g in gens], dtype=bool)
    lp = np.full((len(gens), len(letters)), -np.inf, dtype=np.float32)
    for i, g in enumerate(gens):
        if g["parsed_letter"] is not None:
            lp[i, list(letters).index(g["parsed_letter"])] = 0.0
    table = prompts.with_scores(lp, np.ones(len(gens), dtype=bool)).subset(valid)
    return table, [g for g, ok in zip(gens, valid) if not ok]
