"""Every table schema of a run directory, in one place (the results contract, docs/results/contract.md).

Forced-choice runs (letter or generation mode) share the columns of `forced_prompts_schema`
around the design columns their bench declares. A bench whose prompts or verdicts have columns of
their own declares those schemas on its task (`Task.tables`, and `Task.judging.schema` built with
`judgements_schema()`); every other file has one schema whatever the bench.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

PROMPT_HEAD: tuple[pa.Field, ...] = (pa.field("prompt_id", pa.int64()), pa.field("item_id", pa.string()))
"""The first columns of a forced-choice run's `prompts.parquet`; the bench's design columns follow."""
PROMPT_TAIL: tuple[pa.Field, ...] = (
    pa.field("category", pa.string()), pa.field("order", pa.list_(pa.int64())),
    pa.field("groups", pa.list_(pa.string())), pa.field("n_tokens", pa.int64()), pa.field("prefix_len", pa.int64()),
    pa.field("text", pa.string()), pa.field("token_ids", pa.list_(pa.int32())),
)
"""The last columns of a forced-choice run's `prompts.parquet`, after the bench's design columns.
`token_ids` are the exact ids every backend received (follow-up studies feed these, not a
re-tokenised text)."""


def forced_prompts_schema(design: Sequence[pa.Field]) -> pa.Schema:
    """`prompts.parquet` of a forced-choice run: one row per prompt, `PROMPT_HEAD`, the bench's
    `design` columns (its `Prompt.design` fields it stores), `PROMPT_TAIL`."""
    return pa.schema([*PROMPT_HEAD, *design, *PROMPT_TAIL])


SCORES_SCHEMA = pa.schema([
    ("prompt_id", pa.int64()),
    ("letter_logprobs", pa.list_(pa.float32())),
    ("letter_mass", pa.float64()),
    ("greedy_letter", pa.string()),
    ("greedy_valid", pa.bool_()),
    ("argmax_token_id", pa.int64()),
    ("argmax_token", pa.string()),
    ("argmax_logprob", pa.float32()),
])
"""`scores.parquet`: full-vocabulary letter log-probs per prompt (letter mode), and the
full-vocabulary argmax token at the answer position (id, decoded text, log-prob): what the model
wanted to say instead when the letter mass is low. Runs scored before these columns existed lack
them; readers treat them as null."""

ARGMAX_COLUMNS: tuple[str, ...] = ("argmax_token_id", "argmax_token", "argmax_logprob")
"""The `scores.parquet` columns that older runs lack."""

GENERATIONS_SCHEMA = pa.schema([
    ("prompt_id", pa.int64()), ("text", pa.string()), ("parsed_letter", pa.string()), ("rationale", pa.string()),
])
"""`generations.parquet` of a forced-choice run in generation mode: raw text after the cue, the
parsed letter (null = invalid) and the rationale (null = none)."""

JUDGEMENT_HEAD: tuple[pa.Field, ...] = (pa.field("prompt_id", pa.int64()), pa.field("task", pa.string()))
"""The first columns of every `judgements.parquet`: the prompt judged (null for a verdict about
the data rather than a prompt) and the judge task."""
JUDGEMENT_TAIL: tuple[pa.Field, ...] = (
    pa.field("judge_error", pa.string()), pa.field("judge", pa.string()), pa.field("dropped", pa.list_(pa.string())))
"""The last columns of every `judgements.parquet`: why the verdict failed (null when it did
not), the judge, and the entries its validator dropped."""


def judgements_schema(columns: Sequence[pa.Field] = ()) -> pa.Schema:
    """`judgements.parquet` of a bench: `JUDGEMENT_HEAD`, the bench's own columns (identifying
    ones, then its judge tasks' verdict columns), `JUDGEMENT_TAIL`. One row per verdict; a task
    fills the columns it uses and leaves the others null."""
    return pa.schema([*JUDGEMENT_HEAD, *columns, *JUDGEMENT_TAIL])
