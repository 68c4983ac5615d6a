"""Mechanistic outputs on disk (indexed by `prompt_id`, rows in prompt-id order):
- `lens.safetensors`: `lens` `[prompt, layer, letter]` float32 — full-vocabulary log p of each
  letter when the final norm and the unembedding are applied after layer `l`;
- `activations.safetensors`: `activations` `[prompt, captured layer, d_model]` (float32 or
  float16) and `layers` (the captured layer indices). A full DiSCo run of a 12B model
  (15,808 prompts, d_model 3,840) is 243 MB per captured layer in float32, 121 MB in float16.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np
from safetensors.numpy import save

from probe.files import atomic_write_bytes, open_nofollow, replace
from probe.results.layout import ACTIVATIONS, LENS


def write_lens(run_dir: Path, ids: np.ndarray, lens: np.ndarray, letters: Sequence[str]) -> None:
    """`lens.safetensors`: `lens` `[prompt, layer, letter]` float32 and `prompt_id`, rows in id order."""
    atomic_write_bytes(run_dir / LENS, save(
        {"lens": np.ascontiguousarray(lens, dtype=np.float32), "prompt_id": np.ascontiguousarray(ids, np.int64)},
        metadata={"letters": "".join(letters)}))  # one metadata key: safetensors writes a map in random order


class ActivationWriter:
    """Writes `[prompt, layer, d_model]` rows straight to their place in a safetensors file.

    Rows arrive in batch (planned) order; the file is pre-sized, so each row is written at its
    prompt's offset (row k holds `ids[k]`; a run of every prompt has ids 0..n-1, a shard its
    own) and nothing but one batch is ever in memory. Renamed into place when
    every row is written. A run resumed with `done` prompts (their scores stored, so their rows
    were written before them) reopens the same temporary file when its header matches; `resumed`
    says whether it could (if not, the caller must score those prompts again).
    """

    def __init__(self, run_dir: Path, prompt_ids: Sequence[int], layers: Sequence[int], d_model: int, dtype: str,
                 done: Collection[int] = ()) -> None:
        self.path, self.tmp = run_dir / ACTIVATIONS, run_dir / f".{ACTIVATIONS}.tmp"
        self.np_dtype = np.dtype(dtype)
        self.row_bytes = len(layers) * d_model * self.np_dtype.itemsize
        ids = np.asarray(prompt_ids, dtype=np.int64)
        assert (np.diff(ids) > 0).all(), "prompt ids in increasing order"
        self.row = {int(p): k for k, p in enumerate(ids)}
        n_prompts = len(ids)
        lay = np.array(layers, dtype=np.int64)
        n_act = n_prompts * self.row_bytes
        header = {
            "activations": {"dtype": {"float32": "F32", "float16": "F16"}[dtype],
                            "shape": [n_prompts, len(layers), d_model], "data_offsets": [0, n_act]},
            "layers": {"dtype": "I64", "shape": [len(layers)], "data_offsets": [n_act, n_act + lay.nbytes]},
            "prompt_id": {"dtype": "I64", "shape": [n_prompts],
                          "data_offsets": [n_act + lay.nbytes, n_act + lay.nbytes + ids.nbytes]},
            "__metadata__": {"layer": "output of decoder layer l, 0-based; row k holds prompt_id[k]"},
        }
        blob = json.dumps(header).encode()
        blob += b" " * (-len(blob) % 8)  # safetensors aligns the data section to 8 bytes
        self.data_start = 8 + len(blob)
        prefix = struct.pack("<Q", len(blob)) + blob
        size = self.data_start + n_act + lay.nbytes + ids.nbytes
        self.n_prompts = n_prompts
        # Killed after every row was written and the file renamed (e.g. during analysis): done.
        self.complete = len(done) == n_prompts and self.path.is_file() and self.path.stat().st_size == size \
            and _head(self.path, len(prefix)) == prefix
        self.resumed = self.complete or (bool(done) and self.tmp.is_file() and self.tmp.stat().st_size == size
                                         and _head(self.tmp, len(prefix)) == prefix)
        self.written: set[int] = set(done) if self.resumed else set()
        if self.complete:
            return
        if self.resumed:
            self.f = open_nofollow(self.tmp, os.O_RDWR, "r+b")
            return
        self.tmp.unlink(missing_ok=True)  # a stale one (or a planted link): start a new file, never through a link
        self.f = open_nofollow(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, "wb")
        self.f.write(prefix)
        self.f.truncate(self.data_start + n_act)
        self.f.seek(self.data_start + n_act)
        self.f.write(lay.tobytes() + ids.tobytes())

    def add(self, prompt_id: int, acts: np.ndarray) -> None:
        """Write one prompt's `[layer, d_model]` row at its offset."""
        if self.complete:
            return
        self.f.seek(self.data_start + self.row[prompt_id] * self.row_bytes)
        self.f.write(np.ascontiguousarray(acts, dtype=self.np_dtype).tobytes())
        self.written.add(prompt_id)  # a set: a resumed batch may bring a stored prompt again
        self.f.flush()  # in the OS's hands before the prompt's score part is written

    def close(self) -> None:
        """Rename the finished file into place (every prompt's row must have been written)."""
        if self.complete:
            return
        self.f.close()
        assert len(self.written) == self.n_prompts, "every prompt's activations must be written"
        replace(self.tmp, self.path)


def _head(path: Path, n: int) -> bytes:
    with open(path, "rb") as f:
        return f.read(n)
