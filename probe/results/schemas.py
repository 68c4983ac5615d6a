"""Every table schema of a run directory, in one place (the results contract, SPEC §6).

Forced-choice runs (letter or generation mode) share `PROMPTS_SCHEMA`; open-answer runs whose
questions are templates asked in several languages (LocQA) use `OPEN_PROMPTS_SCHEMA`. A bench
names its prompts schema on its task; every other file has one schema whatever the bench.
"""

from __future__ import annotations

import pyarrow as pa

PROMPTS_SCHEMA = pa.schema([
    ("prompt_id", pa.int64()),
    ("item_id", pa.string()),
    ("condition", pa.string()),
    ("target", pa.string()),
    ("rotation", pa.int64()),
    ("ctx_rotation", pa.int64()),
    ("category", pa.string()),
    ("order", pa.list_(pa.int64())),
    ("groups", pa.list_(pa.string())),
    ("n_tokens", pa.int64()),
    ("prefix_len", pa.int64()),
    ("text", pa.string()),
    ("token_ids", pa.list_(pa.int32())),
])
"""`prompts.parquet` of a forced-choice run: one row per (item, condition, ordering). `token_ids`
are the exact ids every backend received (follow-up studies feed these, not a re-tokenised text)."""

OPEN_PROMPTS_SCHEMA = pa.schema([
    ("prompt_id", pa.int64()), ("template", pa.string()), ("category", pa.string()), ("language", pa.string()),
    ("mode", pa.string()), ("locale", pa.string()), ("n_tokens", pa.int64()), ("text", pa.string()),
    ("token_ids", pa.list_(pa.int32())),
])
"""`prompts.parquet` of an open-answer run: one row per question (× locale in explicit mode)."""

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

OPEN_GENERATIONS_SCHEMA = pa.schema([("prompt_id", pa.int64()), ("text", pa.string()), ("answer", pa.string())])
"""`generations.parquet` of an open-answer run: raw text and the answer (thinking removed)."""

JUDGEMENTS_SCHEMA = pa.schema([
    ("prompt_id", pa.int64()), ("task", pa.string()), ("template", pa.string()), ("language", pa.string()),
    ("dimensions", pa.list_(pa.string())), ("mentioned_answers", pa.list_(pa.string())),
    ("framing_style", pa.string()), ("matches", pa.list_(pa.string())), ("match_locale", pa.bool_()),
    ("mentions_us_answer", pa.bool_()), ("judge_error", pa.string()), ("judge", pa.string()),
    ("dropped", pa.list_(pa.string())),
])
"""`judgements.parquet`: one row per judge verdict, failures kept as `judge_error`; a task fills
the columns it uses and leaves the others null."""
