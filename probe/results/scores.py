"""Prompts and scores tables: writers (streamed in checkpointed parts) and the joined reader.

Every file is written to a temporary name and renamed into place, so a reader never sees a
half-written file. Metrics and reports are computed from what is read back here, never from
in-memory state of the scoring pass.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from safetensors.numpy import save

from probe.errors import ProbeInputError
from probe.probs import unscorable
from probe.files import atomic_write_bytes
from probe.results.integrity import read_parquet
from probe.results.io import write_table
from probe.results.layout import PROMPTS, SCORE_PARTS, SCORE_TENSORS, SCORES
from probe.results.mech import write_lens
from probe.results.parts import PartStore
from probe.results.schemas import ARGMAX_COLUMNS, PROMPT_HEAD, PROMPT_TAIL, SCORES_SCHEMA
from probe.results.text_parts import TEXT_PROMPT_FIELDS, letter_reading_absent, text_arrays
from probe.types import ONE_CONDITION, Design, LetterScore, RenderedPrompt

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class ScoreTable:
    """One run's prompts and scores joined by `prompt_id` (rows sorted by it).

    `logprobs` is float32 `[prompt, letter]`: full-vocabulary log p of each letter (a `text`-mode
    run, which has no letter reading: its float64 `text_logprobs`). `design` holds the bench's
    design columns; the bench's `Design` says which plays which part (`conditions`, `cells`).
    """

    prompt_id: np.ndarray
    item_id: np.ndarray
    design: Mapping[str, np.ndarray]
    """`[prompt]` per design column of the prompts table, in its column order: integer columns as
    int64 (−1 where null), the others as object arrays (None where null)."""
    groups: np.ndarray
    """`[prompt, letter]` array of group labels shown at each letter."""
    logprobs: np.ndarray
    greedy_valid: np.ndarray
    category: np.ndarray | None = None
    """Per-prompt item category (CCD-Bench domain), None-filled object array when absent."""
    order: np.ndarray | None = None
    """`[prompt, letter]` source-option index shown at each letter."""
    text_logprobs: np.ndarray | None = None
    """Answer-text reading (`backend.mode=letters+text|text`): float64 `[prompt, letter]`, the sum
    of the log-probs of the continuation of the option shown at each letter; None without one."""
    text_n_tokens: np.ndarray | None = None
    """`[prompt, letter]` tokens of each option's continuation (the per-token normaliser)."""
    text_n_bytes: np.ndarray | None = None
    """`[prompt, letter]` UTF-8 bytes of each option's continuation text (the per-byte normaliser)."""

    def subset(self, mask: np.ndarray) -> ScoreTable:
        """The rows where `mask` is true."""
        def rows(value: Any) -> Any:
            if isinstance(value, Mapping):
                return {name: column[mask] for name, column in value.items()}
            return None if value is None else value[mask]

        return ScoreTable(**{f.name: rows(getattr(self, f.name)) for f in dataclasses.fields(self)})

    def column(self, name: str) -> np.ndarray:
        """`[prompt]` values of one design column."""
        if name not in self.design:
            raise ProbeInputError(f"the prompts table has no design column {name!r}; it has {list(self.design)}")
        return self.design[name]

    def conditions(self, design: Design) -> np.ndarray:
        """`[prompt]` condition labels (str) under the bench's `design`."""
        if design.condition is None:
            return np.full(len(self.prompt_id), ONE_CONDITION, dtype=object)
        return np.array([str(v) for v in self.column(design.condition)], dtype=object)

    def targets(self, design: Design) -> np.ndarray:
        """`[prompt]` the group each prompt's cue names (None: none)."""
        if design.target is None:
            return np.full(len(self.prompt_id), None, dtype=object)
        return self.column(design.target)

    def cells(self, design: Design) -> list[tuple[Any, ...]]:
        """Per prompt, its design values besides the condition and the ordering: with the item and
        the condition they make its prompt group (the prompts that differ only in option order)."""
        names = [n for n in self.design if n not in (design.condition, design.ordering)]
        columns = [self.design[n] for n in names]
        return [tuple(c[r] for c in columns) for r in range(len(self.prompt_id))]


def write_prompts(run_dir: Path, rows: Sequence[dict[str, Any]], schema: pa.Schema) -> None:
    """`prompts.parquet`: one row per prompt (the bench's schema), including the exact rendered text."""
    write_table(run_dir / PROMPTS, pa.Table.from_pylist(list(rows), schema=schema))


def forced_choice_rows(rendered: Sequence[RenderedPrompt], prefix_lens: Sequence[int],
                       design: Sequence[str] = ()) -> list[dict[str, Any]]:
    """`probe.results.schemas.forced_prompts_schema` rows of forced-choice prompts, with the
    `design` fields of each prompt as columns (null where a prompt has none)."""
    rows = []
    for r, plen in zip(rendered, prefix_lens):
        p = r.prompt
        rows.append({"prompt_id": p.prompt_id, "item_id": p.item_id, **{name: p.value(name) for name in design},
                     "category": p.category, "order": list(p.order), "groups": list(p.groups),
                     "n_tokens": len(r.token_ids), "prefix_len": plen, "text": r.text, "token_ids": r.token_ids})
    return rows


class ScoreWriter:
    """Streams scores (and, when asked, logit-lens rows) to checkpointed parts in
    `scores.parts/`, then merges them into `scores.parquet`, `scores.safetensors` (and
    `lens.safetensors`) sorted by `prompt_id`.

    Memory during scoring stays at one chunk. A prompt's lens row travels in the same part as
    its scores, so a resumed run never has one without the other. A part is cut after `chunk`
    prompts or, whichever comes first, after the batch that ends `part_seconds` of work since
    the last part (as `clock` measures), so a kill loses about that much work at most.
    """

    def __init__(self, run_dir: Path, letters: Sequence[str], chunk: int = 4096, lens: bool = False,
                 part_seconds: float = math.inf, clock: Callable[[], float] = time.monotonic,
                 decode: Callable[[int], str] | None = None) -> None:
        self.run_dir, self.letters, self.chunk, self.lens = run_dir, tuple(letters), chunk, lens
        self.part_seconds, self._clock = part_seconds, clock
        self._since = clock()
        self._decode = decode
        """Token id → text for `argmax_token` (None: the column stays null)."""
        self._decoded: dict[int, str] = {}  # a run's argmax tokens are few distinct ids
        schema = SCORES_SCHEMA.append(pa.field("lens", pa.list_(pa.float32()))) if lens else SCORES_SCHEMA
        self.store = PartStore(run_dir / SCORE_PARTS, schema)
        self._buffer: list[LetterScore] = []
        self.done = set(self.store.done)
        """Prompt ids already scored by an earlier, interrupted run into this directory."""
        self._n_layers: int | None = None

    def add(self, scores: Sequence[LetterScore]) -> None:
        """Buffer a batch; parts are cut at batch boundaries, so a resumed run recomputes whole
        batches exactly as planned and gets bit-identical scores.

        A batch with a prompt whose letter log-probs are not finite (`probe.probs.unscorable`)
        stops the run: nothing of it is stored, the batches before it are (so a rerun after the
        cause is fixed resumes from them), and no `DONE` is ever written. It stops at the first
        such batch: a broken forward pass rarely heals, and the rest could take hours."""
        new = [s for s in scores if s.prompt_id not in self.done]
        lp = np.array([s.letter_logprobs for s in new], dtype=np.float32).reshape(-1, len(self.letters))
        bad = unscorable(lp)
        if bad.any():
            self._flush()
            first = sorted(s.prompt_id for s, b in zip(new, bad) if b)[:5]
            raise ProbeInputError(
                f"{self.run_dir}: scoring stopped: {int(bad.sum())} of the {len(new)} prompts of a batch have no valid "
                f"letter log-probs (NaN or +inf, or −inf at every letter; first prompt ids {first}), so a weight, a "
                "steering vector or an activation is not finite (a float16 overflow?); fix the cause and rerun into "
                f"this directory: the {len(self.store.done)} prompts stored before this batch are kept, this batch "
                "is not")
        self._buffer.extend(new)
        if len(self._buffer) >= self.chunk or self._clock() - self._since >= self.part_seconds:
            self._flush()

    def _flush(self) -> None:
        self._since = self._clock()
        if not self._buffer:
            return
        lp = np.array([s.letter_logprobs for s in self._buffer], dtype=np.float32).reshape(-1, len(self.letters))
        ids = np.array([s.prompt_id for s in self._buffer], dtype=np.int64)
        valid = np.array([s.greedy_valid for s in self._buffer], dtype=bool)
        table = _scores_table(ids, lp, valid, self.letters, self._argmax(self._buffer))
        if self.lens:
            rows = [np.asarray(s.lens, dtype=np.float32).ravel() for s in self._buffer]
            table = table.append_column("lens", pa.array(rows, type=pa.list_(pa.float32())))
        self.store.append(table)
        self._buffer = []

    def _argmax(self, scores: Sequence[LetterScore]) -> pa.Table:
        """The argmax columns of `scores` (null where the backend reported no argmax)."""
        ids = [s.argmax_token_id for s in scores]
        text = [None if i is None or self._decode is None else self._text(i) for i in ids]
        return pa.table([pa.array(ids, pa.int64()), pa.array(text, pa.string()),
                         pa.array([s.argmax_logprob for s in scores], pa.float32())], names=list(ARGMAX_COLUMNS))

    def _text(self, token_id: int) -> str:
        assert self._decode is not None
        if token_id not in self._decoded:
            self._decoded[token_id] = self._decode(token_id)
        return self._decoded[token_id]

    def close(self) -> None:
        """Merge the parts into the final files. The parts stay until the run writes `DONE`, so a
        run killed after this point (in analysis, say) resumes without scoring anything again."""
        self._flush()
        table = self.store.read()
        lp = np.asarray(table.column("letter_logprobs").to_pylist(), dtype=np.float32).reshape(-1, len(self.letters))
        ids = table.column("prompt_id").to_numpy()
        write_scores_arrays(self.run_dir, ids, lp, table.column("greedy_valid").to_numpy(zero_copy_only=False),
                            self.letters, argmax_columns(table))
        if self.lens:
            lens = np.asarray(table.column("lens").to_pylist(), dtype=np.float32)
            # an empty shard's lens has no rows to tell the layer count: [0, 0, letters]
            lens = lens.reshape(len(ids), -1, len(self.letters)) if len(ids) else np.zeros((0, 0, len(self.letters)),
                                                                                           np.float32)
            write_lens(self.run_dir, ids, lens, self.letters)


def argmax_columns(scores: pa.Table) -> pa.Table:
    """The argmax columns of a scores table, all null for one written before they existed."""
    n = scores.num_rows
    return pa.table([scores.column(c) if c in scores.column_names else pa.nulls(n, SCORES_SCHEMA.field(c).type)
                     for c in ARGMAX_COLUMNS], names=list(ARGMAX_COLUMNS))


def _scores_table(ids: np.ndarray, lp: np.ndarray, valid: np.ndarray, letters: Sequence[str],
                  argmax: pa.Table | None = None) -> pa.Table:
    argmax = argmax_columns(pa.table({"prompt_id": ids})) if argmax is None else argmax
    return pa.table({
        "prompt_id": ids,
        "letter_logprobs": pa.FixedSizeListArray.from_arrays(pa.array(lp.ravel(), pa.float32()), len(letters))
        .cast(pa.list_(pa.float32())),
        "letter_mass": np.exp(lp.astype(np.float64)).sum(axis=1),
        "greedy_letter": [letters[i] for i in lp.argmax(axis=1)] if len(ids) else pa.array([], pa.string()),
        "greedy_valid": valid,
        **{c: argmax.column(c) for c in ARGMAX_COLUMNS},
    }, schema=SCORES_SCHEMA)


def write_scores_arrays(
    run_dir: Path, ids: np.ndarray, lp: np.ndarray, valid: np.ndarray, letters: Sequence[str],
    argmax: pa.Table | None = None,
) -> None:
    """`scores.parquet` and `scores.safetensors` (`letter_logprobs` `[prompt, letter]` float32);
    `argmax` holds the `ARGMAX_COLUMNS` in the rows' order (None: null)."""

    write_table(run_dir / SCORES, _scores_table(ids, lp, valid, letters, argmax))
    atomic_write_bytes(run_dir / SCORE_TENSORS, save(
        {"letter_logprobs": np.ascontiguousarray(lp), "prompt_id": np.ascontiguousarray(ids, dtype=np.int64)},
        metadata={"letters": "".join(letters)}))


@dataclass(frozen=True)
class PromptTable:
    """`prompts.parquet` as arrays, sorted by `prompt_id` (see `ScoreTable` for the fields)."""

    prompt_id: np.ndarray
    item_id: np.ndarray
    design: Mapping[str, np.ndarray]
    groups: np.ndarray
    category: np.ndarray
    order: np.ndarray

    def with_scores(self, logprobs: np.ndarray, greedy_valid: np.ndarray, **text: np.ndarray) -> ScoreTable:
        return ScoreTable(logprobs=logprobs, greedy_valid=greedy_valid, **text,
                          **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)})


NOT_DESIGN = frozenset(f.name for f in (*PROMPT_HEAD, *PROMPT_TAIL, *TEXT_PROMPT_FIELDS))
"""Columns of a forced-choice `prompts.parquet` that are no design column of its bench."""


def read_prompts(run_dir: Path) -> PromptTable:
    if not (run_dir / PROMPTS).is_file():
        raise ProbeInputError(f"{run_dir}: missing {PROMPTS}; is this a probe run directory?")
    prompts = read_parquet(run_dir, PROMPTS).sort_by("prompt_id")
    return PromptTable(
        prompt_id=prompts.column("prompt_id").to_numpy(),
        item_id=np.asarray(prompts.column("item_id").to_pylist(), dtype=object),
        design={name: _design_column(prompts.column(name)) for name in prompts.column_names if name not in NOT_DESIGN},
        groups=np.asarray(prompts.column("groups").to_pylist(), dtype=object),
        category=np.asarray(prompts.column("category").to_pylist(), dtype=object),
        order=np.asarray(prompts.column("order").to_pylist(), dtype=np.int64),
    )


def _design_column(column: pa.ChunkedArray) -> np.ndarray:
    """One design column as the `ScoreTable` holds it: integers as int64 with −1 for null, anything
    else as an object array."""
    if pa.types.is_integer(column.type):
        return column.fill_null(-1).to_numpy().astype(np.int64)
    return np.asarray(column.to_pylist(), dtype=object)


def read_table(run_dir: Path) -> ScoreTable:
    """Join `prompts.parquet` and `scores.parquet`; fails if either is missing or they disagree.

    With a text reading the text fields are filled (`probe.results.text_parts`); a `text`-mode run has
    no letter reading, so its `logprobs` are the text log-probs (float64) and every metric reads
    them, with every prompt's greedy choice valid (the argmax over option texts is an option)."""
    prompts = read_prompts(run_dir)
    if not (run_dir / SCORES).is_file():
        raise ProbeInputError(f"{run_dir}: missing {SCORES}; is this a finished probe run directory?")
    scores = read_parquet(run_dir, SCORES).sort_by("prompt_id")
    if not np.array_equal(prompts.prompt_id, scores.column("prompt_id").to_numpy()):
        raise ProbeInputError(f"{run_dir}: prompts.parquet and scores.parquet hold different prompt ids")
    text = text_arrays(scores)
    if text:  # the text reading feeds the same metrics: no number computed from a NaN either
        _refuse_unscorable(run_dir, prompts.prompt_id, text["text_logprobs"], "answer-text log-probs (text_logprobs)",
                           "option")
    if letter_reading_absent(scores):
        return prompts.with_scores(logprobs=text["text_logprobs"], greedy_valid=np.ones(scores.num_rows, bool), **text)
    logprobs = np.asarray(scores.column("letter_logprobs").to_pylist(), dtype=np.float32)
    _refuse_unscorable(run_dir, prompts.prompt_id, logprobs, "letter log-probs", "letter")
    return prompts.with_scores(logprobs=logprobs,
                               greedy_valid=scores.column("greedy_valid").to_numpy(zero_copy_only=False), **text)


def _refuse_unscorable(run_dir: Path, prompt_ids: np.ndarray, logprobs: np.ndarray, what: str, unit: str) -> None:
    """Stop where a reading has rows without a choice distribution (`probe.probs.unscorable`):
    every metric reads scores through `read_table`, so none is computed from a NaN."""
    bad = unscorable(logprobs) if logprobs.ndim == 2 else np.zeros(len(logprobs), bool)  # 1-d: no rows
    if bad.any():
        raise ProbeInputError(
            f"{run_dir / SCORES}: {int(bad.sum())} of {len(bad)} prompts have no valid {what} "
            f"(NaN or +inf, or −inf at every {unit}; first prompt ids {prompt_ids[bad][:5].tolist()}); no "
            "metric is computed from them: score the run again with a finite model and intervention")
