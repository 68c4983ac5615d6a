"""The answer-text reading on disk: its checkpointed parts, and its columns in `scores.parquet`
and `prompts.parquet` (`backend.mode=text|letters+text`).

A `scores.parquet` row stays one design cell (one letter prompt). Its text reading is stored in
the same row, per option in that row's letter order, so `text_logprobs[i]` and
`letter_logprobs[i]` are the same option. Text prompts have their own ids (cloze cells of one
item and condition share one); `prompts.parquet` gives each row's text prompt, its text and its
token ids, so `text_prompt_token_ids + text_token_ids[i]` is the sequence a score sums over.
In `text` mode the letter columns are null: there is no letter reading. A letter the row does not
show (`order` −1, a bench whose items differ in K) has no continuation: log-prob −inf (no
probability), no token ids, 0 tokens and 0 bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from probe.errors import ProbeInputError
from probe.results.io import parquet_source, write_table
from probe.results.layout import SCORES
from probe.results.schemas import SCORES_SCHEMA

TEXT_PART_SCHEMA = pa.schema([
    ("prompt_id", pa.int64()),
    ("logprobs", pa.list_(pa.float64())),
    ("token_ids", pa.list_(pa.list_(pa.int32()))),
])
"""`text.parts/`: one row per text prompt (its own id), options in the item's source order."""

TEXT_SCORE_FIELDS: tuple[pa.Field, ...] = (
    pa.field("text_logprobs", pa.list_(pa.float64())),
    pa.field("text_token_ids", pa.list_(pa.list_(pa.int32()))),
    pa.field("text_n_tokens", pa.list_(pa.int32())),
    pa.field("text_n_bytes", pa.list_(pa.int32())),
)
"""`scores.parquet` columns of a text reading, per option in the row's letter order: the sum of
the continuation's full-vocabulary log-probs (float32 values summed in float64), its token ids,
their count and the continuation text's UTF-8 bytes (lm-eval's per-token and per-byte norms)."""

TEXT_PROMPT_FIELDS: tuple[pa.Field, ...] = (
    pa.field("text_prompt_id", pa.int64()),
    pa.field("text_prompt", pa.string()),
    pa.field("text_prompt_token_ids", pa.list_(pa.int32())),
)
"""`prompts.parquet` columns of a text reading: the row's text prompt, its rendered text (ending
in the text cue) and the exact token ids the continuations follow."""

NOT_SHOWN_LOGPROB = float("-inf")
"""The text log-prob stored at a letter its row does not show (`order` −1): no option, no probability."""


@dataclass(frozen=True)
class TextCell:
    """One design cell's link to its text prompt."""

    prompt_id: int
    """The letter prompt id (the `scores.parquet` row)."""
    text_prompt_id: int
    order: tuple[int, ...]
    """Source option shown at each letter (`Prompt.order`)."""


def text_part(scores: Sequence[tuple[int, Sequence[float], Sequence[Sequence[int]]]]) -> pa.Table:
    """A `text.parts` part: `(text prompt id, log-probs, token ids)` per text prompt, source order."""
    return pa.table({"prompt_id": pa.array([s[0] for s in scores], pa.int64()),
                     "logprobs": pa.array([list(s[1]) for s in scores], pa.list_(pa.float64())),
                     "token_ids": pa.array([[list(t) for t in s[2]] for s in scores], pa.list_(pa.list_(pa.int32())))},
                    schema=TEXT_PART_SCHEMA)


def write_text_scores(run_dir: Path, parts: pa.Table, cells: Sequence[TextCell],
                      n_bytes: Mapping[int, Sequence[int]], letter_reading: bool) -> None:
    """Write `scores.parquet` with the text columns: appended to the letter reading's table
    (its columns untouched), or, in `text` mode, beside null letter columns."""
    path = run_dir / SCORES
    by_text = {int(i): k for k, i in enumerate(parts.column("prompt_id").to_pylist())}
    logprobs, token_ids = parts.column("logprobs").to_pylist(), parts.column("token_ids").to_pylist()
    cells = sorted(cells, key=lambda c: c.prompt_id)
    missing = sorted({c.text_prompt_id for c in cells} - set(by_text))
    if missing:
        raise ProbeInputError(f"{run_dir}: text prompts {missing[:5]} have no stored text scores")
    rows = [(by_text[c.text_prompt_id], c) for c in cells]
    columns = [
        [[logprobs[k][o] if o >= 0 else NOT_SHOWN_LOGPROB for o in c.order] for k, c in rows],
        [[token_ids[k][o] if o >= 0 else [] for o in c.order] for k, c in rows],
        [[len(token_ids[k][o]) if o >= 0 else 0 for o in c.order] for k, c in rows],
        [[n_bytes[c.text_prompt_id][o] if o >= 0 else 0 for o in c.order] for k, c in rows],
    ]
    ids = [c.prompt_id for c in cells]
    if letter_reading:
        table = pq.read_table(parquet_source(path)).sort_by("prompt_id")
        if table.column("prompt_id").to_pylist() != ids:
            raise ProbeInputError(f"{path}: its prompt ids are not the text reading's design cells")
    else:
        table = pa.table([pa.array(ids, pa.int64()), *[pa.nulls(len(ids), f.type) for f in SCORES_SCHEMA][1:]],
                         schema=SCORES_SCHEMA)
    for field, values in zip(TEXT_SCORE_FIELDS, columns):
        table = table.append_column(field, pa.array(values, field.type))
    write_table(path, table)


def text_arrays(scores: pa.Table) -> dict[str, np.ndarray]:
    """`ScoreTable`'s text fields from a `scores.parquet` table (rows in its order); empty
    without a text reading."""
    if "text_logprobs" not in scores.column_names:
        return {}
    k = len(scores.column("text_logprobs")[0]) if scores.num_rows else 0
    shape = (scores.num_rows, k)
    return {"text_logprobs": np.asarray(scores.column("text_logprobs").to_pylist(), np.float64).reshape(shape),
            "text_n_tokens": np.asarray(scores.column("text_n_tokens").to_pylist(), np.int64).reshape(shape),
            "text_n_bytes": np.asarray(scores.column("text_n_bytes").to_pylist(), np.int64).reshape(shape)}


def letter_reading_absent(scores: pa.Table) -> bool:
    """Whether a `scores.parquet` holds only a text reading (`text` mode: null letter columns)."""
    return "text_logprobs" in scores.column_names and scores.column("letter_logprobs").null_count == scores.num_rows
