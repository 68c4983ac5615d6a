"""Taps on the scoring forward pass: the residual stream at the answer position, for the logit
lens on the option letters and for stored activations.

Forward hooks on the decoder layers keep only each row's answer position (`[rows, d_model]` per
layer), so memory stays bounded by the batch, not by `batch × seq × layers`. The files they
feed are written by `probe.results.mech`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

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


def resolve_layers(layers: Sequence[int], n_layers: int, key: str = "analysis.capture_layers") -> tuple[int, ...]:
    """Negative indices count from the end; out-of-range indices are an input error."""
    out = []
    for layer in layers:
        i = layer + n_layers if layer < 0 else layer
        if not 0 <= i < n_layers:
            raise ProbeInputError(f"{key}: layer {layer} out of range for {n_layers} layers")
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
