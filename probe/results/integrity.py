"""A stored run's files checked before a command reads them: every table a readable parquet
file, `prompts.parquet` holding the number of prompts the manifest records, the answer tables
one row per prompt, and the rows what a row must be: `scores.parquet` with every column its
readers need, one value per letter in every row, none of its log-probs above 0 and a prompt's
letter probabilities summing to at most 1; `prompts.parquet`'s `order` a permutation of the
options each prompt shows. A damaged file (cut by a full disk, edited, copied half-way) fails
here with one line naming the run and the file, never as a traceback from deep inside a read
or, worse, as numbers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from probe.errors import ProbeInputError
from probe.results.io import parquet_source
from probe.results.layout import GENERATIONS, JUDGEMENTS, PATCHING_PAIRS, PROMPTS, SCORES
from probe.results.manifest import Manifest
from probe.results.schemas import ARGMAX_COLUMNS, SCORES_SCHEMA

TABLES = (PROMPTS, SCORES, GENERATIONS, JUDGEMENTS, PATCHING_PAIRS)
"""The parquet tables a run directory can hold."""
ONE_ROW_PER_PROMPT = (SCORES, GENERATIONS)
SCORE_LISTS = ("letter_logprobs", "text_logprobs", "text_n_tokens", "text_n_bytes")
"""The list columns of `scores.parquet`: one value per letter (option) in every row."""
LOGPROB_LISTS = ("letter_logprobs", "text_logprobs")
LOGPROB_SLACK = 1e-3
"""Nats above 0 a stored log-prob may show before it is refused: a log-softmax value is never
positive (a sum of them neither), so `+5` or `1e308` is an edited or damaged file; the slack
only spares a backend's last-bit rounding."""
LETTER_MASS_SLACK = 1e-3
"""How far above 1 a prompt's letter probabilities may sum before the row is refused: each is a
full-vocabulary probability of a distinct token, so together they are at most 1; the slack
spares float32 rounding of the stored log-probs."""
REQUIRED_SCORES = tuple(n for n in SCORES_SCHEMA.names if n not in ARGMAX_COLUMNS)
"""The `scores.parquet` columns every run has (the argmax columns are null in older runs)."""
TEXT_SCORES = ("text_logprobs", "text_n_tokens", "text_n_bytes")
"""A text reading's columns: all of them or none."""


def damaged(run_dir: Path, name: str, why: str) -> ProbeInputError:
    """The one-line error for a damaged file `name` of the run in `run_dir`."""
    return ProbeInputError(f"{run_dir}: {name} is damaged ({why}); restore it from a copy, or score the run again "
                           "into a fresh directory (hydra.run.dir=…)")


def read_parquet(run_dir: Path, name: str) -> pa.Table:
    """`run_dir/name` read whole; a file pyarrow cannot read is a one-line `ProbeInputError`."""
    try:
        return pq.read_table(parquet_source(run_dir / name))
    except (pa.ArrowException, OSError, ValueError) as e:  # ArrowInvalid is a ValueError too
        raise damaged(run_dir, name, f"not a readable parquet file: {_first_line(e)}") from None
    except RecursionError:  # deeply nested cells
        raise damaged(run_dir, name, "cells nested too deeply to read") from None


def table_rows(run_dir: Path, name: str) -> int | None:
    """Rows of the parquet table `name` as its footer records them (None: no such file); a file
    without a readable footer — cut short, or not parquet — is a one-line `ProbeInputError`."""
    path = run_dir / name
    if not path.is_file():
        return None
    try:
        return int(pq.ParquetFile(parquet_source(path)).metadata.num_rows)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise damaged(run_dir, name, f"not a readable parquet file: {_first_line(e)}") from None


def check_tables(run_dir: Path, manifest: Manifest) -> None:
    """Every stored table of the run readable, with the rows its manifest implies: the prompts
    it records (a shard: its own), and one answer row per prompt."""
    rows = {name: table_rows(run_dir, name) for name in TABLES}
    expected = manifest.shard.n_prompts if manifest.shard is not None else manifest.bench.n_prompts
    if rows[PROMPTS] is not None and expected is not None and rows[PROMPTS] != expected:
        raise damaged(run_dir, PROMPTS, f"{rows[PROMPTS]} rows; the manifest records {expected} prompts")
    for name in ONE_ROW_PER_PROMPT:
        if rows[name] is not None and rows[PROMPTS] is not None and rows[name] != rows[PROMPTS]:
            raise damaged(run_dir, name, f"{rows[name]} rows for the {rows[PROMPTS]} prompts of {PROMPTS}")
    if rows[SCORES] is not None:
        check_score_lists(run_dir)
    if rows[PROMPTS] is not None and "order" in pq.read_schema(parquet_source(run_dir / PROMPTS)).names:
        check_orders(run_dir)


def check_score_lists(run_dir: Path) -> None:
    """`scores.parquet`'s list columns hold one value per letter in every row, and no log-prob is
    above 0 (`LOGPROB_SLACK`); NaN and ±inf are the readers' to refuse (`probe.results.scores`)."""
    names = pq.read_schema(parquet_source(run_dir / SCORES)).names
    wanted = [*REQUIRED_SCORES, *(TEXT_SCORES if any(c in names for c in TEXT_SCORES) else ())]
    missing = [c for c in wanted if c not in names]
    if missing:
        raise damaged(run_dir, SCORES, f"it has no {missing[0]} column; a run's scores table holds {wanted}")
    table = read_parquet_columns(run_dir, SCORES, ["prompt_id", *(c for c in SCORE_LISTS if c in names)])
    for name in table.column_names[1:]:
        lengths = pc.min_max(pc.list_value_length(table.column(name)))
        low, high = lengths["min"].as_py(), lengths["max"].as_py()
        if low != high:
            raise damaged(run_dir, SCORES, f"its {name} lists are ragged: rows hold {low} to {high} values")
        if name in LOGPROB_LISTS:
            values = pc.list_flatten(table.column(name)).to_numpy(zero_copy_only=False).astype(np.float64)
            above = values[np.isfinite(values) & (values > LOGPROB_SLACK)]  # +inf: the readers' NaN/inf check
            if above.size:
                raise damaged(run_dir, SCORES, f"{above.size} of its {name} are above 0 (largest {above.max():g}); a "
                                               "log-prob is never positive")
    if table.num_rows and "letter_logprobs" in table.column_names:
        _check_letter_mass(run_dir, table)


def _check_letter_mass(run_dir: Path, table: pa.Table) -> None:
    """Every prompt's letter probabilities sum to at most 1 (`LETTER_MASS_SLACK`): the letters are
    distinct tokens of one next-token distribution. Rows with a NaN or ±inf (or the null rows of a
    text-only run) are the readers' to refuse."""
    column = table.column("letter_logprobs")
    if column.null_count == table.num_rows:
        return
    values = pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(np.float64)
    lp = values.reshape(table.num_rows - column.null_count, -1)
    mass = np.exp(lp).sum(axis=1)
    # NaN compares False; a +inf log-prob (mass inf) is the readers' non-finite refusal, which says more
    bad = np.flatnonzero((mass > 1 + LETTER_MASS_SLACK) & np.isfinite(lp).all(axis=1))
    if bad.size:
        ids = table.column("prompt_id").filter(pc.invert(pc.is_null(column))).to_numpy()
        raise damaged(run_dir, SCORES, f"row of prompt_id {int(ids[bad[0]])}, column letter_logprobs: its letter "
                                       f"probabilities sum to {mass[bad[0]]:.4g} (at most 1: one next-token "
                                       f"distribution); {bad.size} such row(s)")


def check_orders(run_dir: Path) -> None:
    """Every row's `order` of `prompts.parquet` reorders the options its item shows: indices in
    0..k−1, then the padding −1 (`NOT_SHOWN`) of a run whose items have fewer options than its
    widest, with k and the multiset of indices the same in every prompt of one item. A bench whose
    options are distinct (every forced-choice rotation) thus stores a permutation in each row; one
    that shows a candidate in several slots (an answer two groups share) stores the same repeats in
    every prompt of the item, so the rule holds for both without naming either."""
    table = read_parquet_columns(run_dir, PROMPTS, ["prompt_id", "item_id", "order"])
    column = table.column("order")
    if not table.num_rows:
        return
    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
    if column.null_count or lengths.min() != lengths.max():
        raise damaged(run_dir, PROMPTS, "its order lists are null or ragged")
    order = pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(np.int64).reshape(table.num_rows, -1)
    width = order.shape[1]
    shown = (order >= 0).sum(axis=1)
    inside = np.arange(width)[None, :] < shown[:, None]
    # Shown slots first, each index below the number shown; padding exactly NOT_SHOWN after them.
    ranged = np.where(inside, (order >= 0) & (order < shown[:, None]), order == -1).all(axis=1)
    items = np.unique(table.column("item_id").to_numpy(zero_copy_only=False).astype(str), return_inverse=True)[1]
    first = np.zeros(items.max() + 1, dtype=np.int64)
    first[items[::-1]] = np.arange(table.num_rows)[::-1]  # each item's first row: its reference
    multiset = np.sort(np.where(inside, order, width), axis=1)
    same = (multiset == multiset[first[items]]).all(axis=1) & (shown == shown[first[items]])
    bad = np.flatnonzero(~ranged | ~same)
    if bad.size:
        row = int(bad[0])
        raise damaged(run_dir, PROMPTS, f"row of prompt_id {table.column('prompt_id')[row].as_py()}, column order: "
                                        f"{order[row].tolist()[:12]} is not a permutation of the "
                                        f"{shown[first[items]][row]} options its item shows (indices 0..k−1 as in "
                                        f"the item's other prompts, then −1 padding); {bad.size} such row(s)")


def read_parquet_columns(run_dir: Path, name: str, columns: list[str]) -> pa.Table:
    """The `columns` of the parquet table `run_dir/name`; an unreadable file is a one-line error."""
    try:
        return pq.read_table(parquet_source(run_dir / name), columns=columns)
    except (pa.ArrowException, OSError, ValueError) as e:
        raise damaged(run_dir, name, f"not a readable parquet file: {_first_line(e)}") from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
