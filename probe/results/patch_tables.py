"""Activation-patching results on disk (`intervention=patch`):
- `patching.safetensors`: `logprobs` `[pair, layer, letter]` float32 — full-vocabulary log p of
  each letter for the pair's destination prompt with the residual stream after `layers[j]` at
  its answer position replaced by the source prompt's; `layers` int64 (0-based, increasing);
  `pair` int64 (0..n-1);
- `patching.parquet`: one row per pair — `pair`, `item_id`, `rotation`, `target`, `source_id`,
  `dest_id` (prompt ids of `prompts.parquet`; their unpatched scores are in `scores.parquet`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from safetensors import safe_open
from safetensors.numpy import save

from probe.errors import ProbeInputError
from probe.files import atomic_write_bytes
from probe.results.io import parquet_source, write_table
from probe.results.layout import PATCHING_PAIRS, PATCHING_TENSORS

PAIRS_SCHEMA = pa.schema([("pair", pa.int64()), ("item_id", pa.string()), ("rotation", pa.int64()),
                          ("target", pa.string()), ("source_id", pa.int64()), ("dest_id", pa.int64())])

PATCHED_GROUPS = "cultures"
"""`patching.json`'s key listing the groups patched pairs target (sorted). The results contract
keeps the name it was first stored under, so tables written by every version read alike."""


PAIR_COLUMNS: dict[str, pa.DataType] = {f.name: f.type for f in PAIRS_SCHEMA}
"""The columns of `patching.parquet` and their types (`target` is the only nullable one)."""


def write_patching(run_dir: Path, pairs: Sequence[dict[str, Any]], logprobs: np.ndarray, layers: Sequence[int],
                   letters: Sequence[str]) -> None:
    """Both files; the tensor file last, so its presence means the patching pass finished."""
    assert logprobs.shape[:2] == (len(pairs), len(layers)) and not np.isnan(logprobs).any()
    write_table(run_dir / PATCHING_PAIRS, pa.Table.from_pylist(list(pairs), schema=PAIRS_SCHEMA))
    atomic_write_bytes(run_dir / PATCHING_TENSORS, save(
        {"logprobs": np.ascontiguousarray(logprobs, dtype=np.float32),
         "layers": np.asarray(layers, dtype=np.int64), "pair": np.arange(len(pairs), dtype=np.int64)},
        metadata={"letters": "".join(letters)}))


def load_patching(run_path: str | Path) -> tuple[np.ndarray, np.ndarray, pa.Table]:
    """`(logprobs [pair, layer, letter] float32, layers [layer] int64, pairs table sorted by pair)`
    of a run directory, with the files' own consistency checked (shapes, pair ids 0..n-1 in both
    files, increasing layer indices, column types); prompt ids are checked by `patching_table`."""
    run_path = Path(run_path)
    tensors, table_path = run_path / PATCHING_TENSORS, run_path / PATCHING_PAIRS
    for path in (tensors, table_path):
        if not path.is_file():
            raise ProbeInputError(f"{run_path}: no {path.name} (was the run made with activation patching?)")
    with safe_open(str(tensors), framework="numpy") as f:
        missing = sorted({"logprobs", "layers", "pair"} - set(f.keys()))
        if missing:
            raise ProbeInputError(f"{tensors}: expected tensors logprobs, layers, pair; missing {missing}")
        logprobs, layers, pair = f.get_tensor("logprobs"), f.get_tensor("layers"), f.get_tensor("pair")
    if logprobs.ndim != 3:
        raise ProbeInputError(f"{tensors}: field 'logprobs': expected [pair, layer, letter], got shape "
                              f"{list(logprobs.shape)}")
    n_pairs, n_layers, _ = logprobs.shape
    if layers.shape != (n_layers,) or (n_layers and (layers.min() < 0 or (np.diff(layers) <= 0).any())):
        raise ProbeInputError(f"{tensors}: field 'layers': expected {n_layers} increasing layer indices ≥ 0 "
                              f"(one per logprobs layer), got {layers.tolist()}")
    if not np.array_equal(pair, np.arange(n_pairs)):
        raise ProbeInputError(f"{tensors}: field 'pair': expected pair ids 0..{n_pairs - 1} in order (one per "
                              f"logprobs row), got {len(pair)} ids starting {pair[:5].tolist()}")
    if np.isnan(logprobs).any():
        raise ProbeInputError(f"{tensors}: field 'logprobs': expected log-probs, got NaN at pair "
                              f"{int(np.argwhere(np.isnan(logprobs))[0][0])}")
    pairs = pq.read_table(parquet_source(table_path))
    for name, dtype in PAIR_COLUMNS.items():
        if name not in pairs.column_names:
            raise ProbeInputError(f"{table_path}: expected column {name!r}; columns: {pairs.column_names}")
        if not pairs.schema.field(name).type.equals(dtype):
            raise ProbeInputError(f"{table_path}: column {name!r}: expected {dtype}, got "
                                  f"{pairs.schema.field(name).type}")
        if name != "target" and pairs.column(name).null_count:
            raise ProbeInputError(f"{table_path}: column {name!r}: expected no nulls, got "
                                  f"{pairs.column(name).null_count}")
    pairs = pairs.sort_by("pair")
    ids = pairs.column("pair").to_numpy()
    if not np.array_equal(ids, np.arange(n_pairs)):
        raise ProbeInputError(f"{table_path}: column 'pair': expected ids 0..{n_pairs - 1} once each (the rows of "
                              f"{PATCHING_TENSORS}), got {len(ids)} rows with ids {ids[:5].tolist()}…")
    return logprobs, layers, pairs
