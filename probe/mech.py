"""Mechanistic outputs of a scoring pass: the logit lens on the option letters and residual-stream
activations at the answer position.

Both come from the same forward pass as the scores: forward hooks on the decoder layers keep
only each row's answer position (`[rows, d_model]` per layer), so memory stays bounded by the
batch, not by `batch × seq × layers`. Files (indexed by `prompt_id`, rows in prompt-id order):
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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from probe.errors import ProbeInputError


@dataclass(frozen=True)
class MechSpec:
    """`analysis.logit_lens`, `analysis.capture_layers`, `analysis.capture_dtype`."""

    logit_lens: bool = False
    capture_layers: tuple[int, ...] = ()
    """Decoder layer indices (0-based; −1 = last) whose output residual stream is stored."""
    capture_dtype: Literal["float32", "float16"] = "float32"

    @property
    def active(self) -> bool:
        return self.logit_lens or bool(self.capture_layers)


MECH_KEYS = ("logit_lens", "capture_layers", "capture_dtype")


def split_analysis(analysis: dict[str, Any]) -> tuple[MechSpec, dict[str, Any]]:
    """Separate the keys that change the forward pass from the metric options."""
    from probe.config import build

    mech = build(MechSpec, {k: v for k, v in analysis.items() if k in MECH_KEYS}, "analysis")
    return mech, {k: v for k, v in analysis.items() if k not in MECH_KEYS}


def resolve_layers(layers: Sequence[int], n_layers: int) -> tuple[int, ...]:
    """Negative indices count from the end; out-of-range indices are an input error."""
    out = []
    for layer in layers:
        i = layer + n_layers if layer < 0 else layer
        if not 0 <= i < n_layers:
            raise ProbeInputError(f"analysis.capture_layers: layer {layer} out of range for {n_layers} layers")
        out.append(i)
    return tuple(out)


class ResidualTap:
    """Forward hooks that keep the residual stream at given positions after given layers."""

    def __init__(self, layers_module: Any, layers: Sequence[int]) -> None:
        import torch

        self._torch = torch
        self.layers = tuple(sorted(set(layers)))
        self._last: Any = None
        self.captured: dict[int, Any] = {}
        self._handles = [layers_module[i].register_forward_hook(self._hook(i)) for i in self.layers]

    def _hook(self, index: int):
        def keep(module: Any, args: Any, output: Any) -> None:
            if self._last is None:  # the shared-prefix pass: nothing to keep
                return
            hidden = output[0] if isinstance(output, tuple) else output
            rows = self._torch.arange(hidden.shape[0], device=hidden.device)
            self.captured[index] = hidden[rows, self._last.to(hidden.device)].detach()
        return keep

    def arm(self, last: Any) -> None:
        """Keep positions `last[row]` in the next forward pass."""
        self._last, self.captured = last, {}

    def disarm(self) -> None:
        self._last = None

    def close(self) -> None:
        for h in self._handles:
            h.remove()


class LensWriter:
    """Collects `[layer, letter]` lens rows (small) and writes `lens.safetensors` at the end."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.rows: dict[int, np.ndarray] = {}

    def add(self, prompt_id: int, lens: np.ndarray) -> None:
        self.rows[prompt_id] = lens.astype(np.float32)

    def close(self, letters: Sequence[str]) -> None:
        from safetensors.numpy import save_file

        ids = np.array(sorted(self.rows), dtype=np.int64)
        tmp = self.run_dir / ".lens.safetensors.tmp"
        save_file({"lens": np.stack([self.rows[i] for i in ids]), "prompt_id": ids}, str(tmp),
                  metadata={"letters": "".join(letters), "layer": "output of decoder layer l, 0-based"})
        os.replace(tmp, self.run_dir / "lens.safetensors")


class ActivationWriter:
    """Writes `[prompt, layer, d_model]` rows straight to their place in a safetensors file.

    Rows arrive in batch (length-sorted) order; the file is pre-sized, so each row is written at
    `prompt_id`'s offset and nothing but one batch is ever in memory. Renamed into place when
    every row is written.
    """

    def __init__(self, run_dir: Path, n_prompts: int, layers: Sequence[int], d_model: int, dtype: str) -> None:
        self.path, self.tmp = run_dir / "activations.safetensors", run_dir / ".activations.safetensors.tmp"
        self.np_dtype = np.dtype(dtype)
        self.row_bytes = len(layers) * d_model * self.np_dtype.itemsize
        ids = np.arange(n_prompts, dtype=np.int64)
        lay = np.array(layers, dtype=np.int64)
        n_act = n_prompts * self.row_bytes
        header = {
            "activations": {"dtype": {"float32": "F32", "float16": "F16"}[dtype],
                            "shape": [n_prompts, len(layers), d_model], "data_offsets": [0, n_act]},
            "layers": {"dtype": "I64", "shape": [len(layers)], "data_offsets": [n_act, n_act + lay.nbytes]},
            "prompt_id": {"dtype": "I64", "shape": [n_prompts],
                          "data_offsets": [n_act + lay.nbytes, n_act + lay.nbytes + ids.nbytes]},
            "__metadata__": {"layer": "output of decoder layer l, 0-based; row = prompt_id"},
        }
        blob = json.dumps(header).encode()
        blob += b" " * (-len(blob) % 8)  # safetensors aligns the data section to 8 bytes
        self.data_start = 8 + len(blob)
        self.n_prompts, self.written = n_prompts, 0
        self.f = open(self.tmp, "wb")
        self.f.write(struct.pack("<Q", len(blob)) + blob)
        self.f.truncate(self.data_start + n_act)
        self.f.seek(self.data_start + n_act)
        self.f.write(lay.tobytes() + ids.tobytes())

    def add(self, prompt_id: int, acts: np.ndarray) -> None:
        assert 0 <= prompt_id < self.n_prompts, "prompt ids are 0..n-1"
        self.f.seek(self.data_start + prompt_id * self.row_bytes)
        self.f.write(np.ascontiguousarray(acts, dtype=self.np_dtype).tobytes())
        self.written += 1

    def close(self) -> None:
        self.f.close()
        assert self.written == self.n_prompts, "every prompt's activations must be written"
        os.replace(self.tmp, self.path)
