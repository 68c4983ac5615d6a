"""Activation-patching results on disk (`intervention=patch`):
- `patching.safetensors`: `logprobs` `[pair, layer, letter]` float32 — full-vocabulary log p of
  each letter for the pair's destination prompt with the residual stream after `layers[j]` at
  its answer position replaced by the source prompt's; `layers` int64 (0-based, increasing);
  `pair` int64 (0..n-1);
- `patching.parquet`: one row per pair — `pair`, `item_id`, `rotation`, `target`, `source_id`,
  `dest_id` (prompt ids of `prompts.parquet`; their unpatched scores are in `scores.parquet`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from safetensors.numpy import save_file

from probe.results.io import write_table

PAIRS_SCHEMA = pa.schema([("pair", pa.int64()), ("item_id", pa.string()), ("rotation", pa.int64()),
                          ("target", pa.string()), ("source_id", pa.int64()), ("dest_id", pa.int64())])


def write_patching(run_dir: Path, pairs: Sequence[dict[str, Any]], logprobs: np.ndarray, layers: Sequence[int],
                   letters: Sequence[str]) -> None:
    """Both files; the tensor file last, so its presence means the patching pass finished."""
    assert logprobs.shape[:2] == (len(pairs), len(layers)) and not np.isnan(logprobs).any()
    write_table(run_dir / "patching.parquet", pa.Table.from_pylist(list(pairs), schema=PAIRS_SCHEMA))
    tmp = run_dir / ".patching.safetensors.tmp"
    save_file({"logprobs": np.ascontiguousarray(logprobs, dtype=np.float32),
               "layers": np.asarray(layers, dtype=np.int64), "pair": np.arange(len(pairs), dtype=np.int64)},
              str(tmp), metadata={"letters": "".join(letters)})
    os.replace(tmp, run_dir / "patching.safetensors")
