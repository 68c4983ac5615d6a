"""The generation fallback of a forced-choice run: decode, parse, judge rationales, store.

Tables (results contract):
- `generations.parquet`: `prompt_id`, `text` (raw continuation after the pre-filled cue),
  `parsed_letter` (null when invalid), `rationale` (null when none);
- `judgements.parquet` (when rationales exist): one row per rationale, task `globe_dimensions`,
  `dimensions` (list<str>), `judge_error`, `judge`; the columns LocQA's tasks use are null.
  `dropped` lists answers a judge named that are not in the item's gold set (flagged, not used).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from probe.judges import Judge, JudgeRequest
from probe.parse import parse_answer
from probe.results import ScoreTable, read_prompts, write_table
from probe.types import RenderedPrompt

GENERATIONS_SCHEMA = pa.schema([
    ("prompt_id", pa.int64()), ("text", pa.string()), ("parsed_letter", pa.string()), ("rationale", pa.string()),
])
JUDGEMENTS_SCHEMA = pa.schema([
    ("prompt_id", pa.int64()), ("task", pa.string()), ("template", pa.string()), ("language", pa.string()),
    ("dimensions", pa.list_(pa.string())), ("mentioned_answers", pa.list_(pa.string())),
    ("framing_style", pa.string()), ("matches", pa.list_(pa.string())), ("match_locale", pa.bool_()),
    ("mentions_us_answer", pa.bool_()), ("judge_error", pa.string()), ("judge", pa.string()),
    ("dropped", pa.list_(pa.string())),
])


def generate_and_store(
    generator: Any, rendered: Sequence[RenderedPrompt], cue: str, letters: Sequence[str], run_dir: Path,
    progress: bool,
) -> list[dict[str, Any]]:
    """Generate for every prompt, parse `cue + text`, write `generations.parquet`; return the rows."""
    from tqdm import tqdm

    rows: list[dict[str, Any]] = []
    with tqdm(total=len(rendered), unit="prompt", desc="generating", disable=not progress) as bar:
        for batch in generator.generate(rendered):
            for g in batch:
                parsed = parse_answer(cue + g.text, letters)
                rows.append({"prompt_id": g.prompt_id, "text": g.text, "parsed_letter": parsed.letter,
                             "rationale": parsed.rationale})
            bar.update(len(batch))
    rows.sort(key=lambda r: r["prompt_id"])
    write_table(run_dir / "generations.parquet", pa.Table.from_pylist(rows, schema=GENERATIONS_SCHEMA))
    return rows


def judge_rationales(judge: Judge, rows: Sequence[dict[str, Any]], run_dir: Path) -> None:
    """Classify each rationale's GLOBE dimensions; every rationale gets a row, failures included."""
    with_rationale = [r for r in rows if r["rationale"]]
    if not with_rationale:
        return
    results = judge.judge([JudgeRequest("globe_dimensions", {"rationale": r["rationale"]}) for r in with_rationale])
    out = [{"prompt_id": r["prompt_id"], "task": "globe_dimensions",
            "dimensions": None if res.output is None else res.output["dimensions"],
            "judge_error": res.error, "judge": res.judge} for r, res in zip(with_rationale, results)]
    write_table(run_dir / "judgements.parquet", pa.Table.from_pylist(out, schema=JUDGEMENTS_SCHEMA))


def read_generation_table(run_dir: Path, letters: Sequence[str]) -> tuple[ScoreTable, list[dict[str, Any]]]:
    """Valid generations as a one-hot `ScoreTable` (log p = 0 for the chosen letter, −inf else),
    so generation runs go through the same metric code; and the invalid rows, kept for the report."""
    prompts = read_prompts(run_dir)
    gens = pq.read_table(run_dir / "generations.parquet").sort_by("prompt_id").to_pylist()
    if [g["prompt_id"] for g in gens] != prompts.prompt_id.tolist():
        raise ValueError(f"{run_dir}: generations.parquet and prompts.parquet hold different prompt ids")
    valid = np.array([g["parsed_letter"] is not None for g in gens], dtype=bool)
    lp = np.full((len(gens), len(letters)), -np.inf, dtype=np.float32)
    for i, g in enumerate(gens):
        if g["parsed_letter"] is not None:
            lp[i, letters.index(g["parsed_letter"])] = 0.0
    table = prompts.with_scores(lp, np.ones(len(gens), dtype=bool)).subset(valid)
    return table, [g for g, ok in zip(gens, valid) if not ok]


def pluralism(run_dir: Path, top: int = 10) -> dict[str, Any] | None:
    """Share of judged rationales citing ≥ 2 GLOBE dimensions, and the most frequent pairs.

    Rationales the judge failed on are excluded from the rate and counted in `n_judge_errors`."""
    path = run_dir / "judgements.parquet"
    if not path.is_file():
        return None
    rows = [r for r in pq.read_table(path).to_pylist() if r["task"] == "globe_dimensions"]
    judged = [r["dimensions"] for r in rows if r["judge_error"] is None]
    pairs: dict[tuple[str, str], int] = {}
    for dims in judged:
        for i, a in enumerate(dims):
            for b in dims[i + 1:]:
                pairs[(a, b)] = pairs.get((a, b), 0) + 1
    ranked = sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return {"rate": float(np.mean([len(d) >= 2 for d in judged])) if judged else float("nan"),
            "n_rationales": len(judged), "n_judge_errors": len(rows) - len(judged),
            "top_pairs": [[a, b, n] for (a, b), n in ranked]}
