"""The answer-text reading of a run (`backend.mode=text|letters+text`): its prompts, its pass
and its columns.

The text scorer is a plan of its own (`probe.backends.text_scorer`), run after the letter pass, so the
letter plan — and every letter number — is the letters-only run's. Its scores stream into
checkpointed parts (`text.parts/`) keyed by text prompt id; a resumed run skips the chunks whose
text prompts are all stored and computes the rest as the uninterrupted run would. At the end
each design cell's row of `scores.parquet` gains its text prompt's scores in the cell's letter
order (`probe.results.text_parts`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from tqdm import tqdm

from probe.backends.base import TextBackend
from probe.backends.continuations import TextRequest, TextScore
from probe.errors import ProbeInputError
from probe.models import max_positions
from probe.pipeline.context import RunContext
from probe.probs import unscorable
from probe.prompts.control import check_data_text
from probe.prompts.text_forms import RenderedText, TextDesign, render_texts, text_design
from probe.results.layout import TEXT_PARTS
from probe.results.parts import PartStore
from probe.results.text_parts import (
    TEXT_PART_SCHEMA,
    TEXT_PROMPT_FIELDS,
    TextCell,
    text_part,
    write_text_scores,
)
from probe.types import RenderedPrompt
from probe.viz.markdown import terminal_line


@dataclass(frozen=True)
class TextReading:
    """A run's text prompts, rendered, with each option's continuation."""

    design: TextDesign
    rendered: tuple[RenderedText, ...]
    """Indexed by text prompt id."""


def prepare_text(ctx: RunContext) -> TextReading | None:
    """The text reading's prompts (None when the run has none), checked before any weight loads."""
    if not ctx.plan.text_pass:
        return None
    text, bench, tokenizer, name = ctx.task.text, ctx.bench, ctx.loaded.tokenizer, ctx.model.name
    assert text is not None  # the config refused a text reading of a bench without one
    design = text_design(bench.prompts, bench.items, ctx.config.bench.spec.text_form, text.message)
    check_data_text(tokenizer, design.prompts, bench.data_label, name, design.options)
    return TextReading(design, tuple(render_texts(tokenizer, design, ctx.settings, name, max_positions(ctx.loaded))))


def describe(reading: TextReading) -> list[str]:
    """What a dry run prints about the text reading: its size and its first text prompt."""
    first = reading.rendered[0]
    return [terminal_line(f"text reading ({reading.design.form}): {len(reading.rendered)} text prompts, options "
                          f"tokenized in context; --- text prompt 0 ({len(first.prompt.token_ids)} tokens; "
                          f"continuation token counts {[len(c) for c in first.continuations]}) ---"),
            first.prompt.text]


def prompt_columns(reading: TextReading, rows: Sequence[dict[str, Any]], schema: pa.Schema,
                   ) -> tuple[list[dict[str, Any]], pa.Schema]:
    """`prompts.parquet` rows and schema with each row's text prompt (id, text, token ids)."""
    out = []
    for row in rows:
        t = reading.design.of_cell[row["prompt_id"]]
        r = reading.rendered[t].prompt
        out.append({**row, "text_prompt_id": t, "text_prompt": r.text, "text_prompt_token_ids": r.token_ids})
    for field in TEXT_PROMPT_FIELDS:
        schema = schema.append(field)
    return out, schema


def score_texts(ctx: RunContext, reading: TextReading, rendered: Sequence[RenderedPrompt], scorer: TextBackend) -> int:
    """Score every text prompt's options into `text.parts`, then write the text columns of
    `scores.parquet`; returns how many text prompts an interrupted earlier run had stored."""
    cfg = ctx.config
    store = PartStore(cfg.out_dir / TEXT_PARTS, TEXT_PART_SCHEMA)
    resumed = len(store.done)
    requests = [TextRequest(r.prompt, r.continuations) for r in reading.rendered]
    buffer: list[TextScore] = []
    since = time.monotonic()
    with tqdm(total=len(requests), unit="prompt", desc="text scoring", disable=not cfg.progress) as bar:
        bar.update(resumed)
        for batch in scorer.score(requests, set(store.done)):
            new = [s for s in batch if s.prompt_id not in store.done]  # a resumed chunk reports stored ones too
            _refuse_nonfinite(cfg.out_dir, store, buffer, new)
            buffer += new
            bar.update(len(new))
            if len(buffer) >= cfg.shard_size or time.monotonic() - since >= cfg.part_seconds:
                _flush(store, buffer)
                buffer, since = [], time.monotonic()
    _flush(store, buffer)
    cells = [TextCell(r.prompt.prompt_id, reading.design.of_cell[r.prompt.prompt_id], r.prompt.order)
             for r in rendered]
    n_bytes = {t: r.n_bytes for t, r in enumerate(reading.rendered)}
    write_text_scores(cfg.out_dir, store.read(), cells, n_bytes, letter_reading=cfg.plan.letters_pass)
    return resumed


def _refuse_nonfinite(out: Path, store: PartStore, buffer: Sequence[TextScore],
                      batch: Sequence[TextScore]) -> None:
    """Stop the run at a batch holding a text prompt whose answer-text log-probs give no choice
    distribution (`probe.probs.unscorable`), as the letter pass does: the batches before it are
    stored first (a rerun, the cause fixed, resumes from them), this one never is, so no
    checkpoint, `scores.parquet` or manifest ever holds a NaN."""
    bad = sorted(s.prompt_id for s in batch if unscorable(np.asarray(s.logprobs, dtype=np.float64)[None])[0])
    if not bad:
        return
    _flush(store, buffer)
    raise ProbeInputError(
        f"{out}: text scoring stopped: {len(bad)} of the {len(batch)} text prompts of a batch have answer-text "
        f"log-probs that are not finite (NaN or +inf, or −inf at every option; first text prompt ids {bad[:5]}), so a "
        "weight, a steering vector or an activation is; check the checkpoint, or load a float16 model in bfloat16 or "
        f"float32 (model.dtype), and rerun into this directory: the {len(store.done)} text prompts stored before this "
        "batch are kept, this batch is not")


def _flush(store: PartStore, scores: Sequence[TextScore]) -> None:
    if scores:
        store.append(text_part([(s.prompt_id, s.logprobs, s.token_ids) for s in scores]))


def text_counters(scorer: TextBackend, resumed: int) -> dict[str, Any]:
    """The text pass's work, for the manifest's `backend` block: the trie's unique tokens (the
    least exact text scoring can do), the tokens computed (this process), the leaves' tokens as
    if each ran alone, and the text prompts an interrupted run had stored."""
    st = scorer.stats
    return {"text_unique_tokens": st.unique_tokens, "text_tokens_computed": st.tokens_computed,
            "text_leaf_tokens": st.prompt_tokens, "text_padded_tokens": st.padded_tokens,
            "text_n_batches": st.n_batches, "text_oom_splits": st.oom_splits, "text_head_check": st.head_check,
            "text_resumed_prompts": resumed, "text_scoring_s": st.forward_s}
