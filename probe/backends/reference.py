"""The float64 reference: the value every float32 scoring path approximates, and how far each is.

probe's paths (eager, `backend.fast_path`, lm-eval's, vLLM's) are float32 computations of the
same quantity, each rounding in its own order; none is the exact value, so a path is judged by
its distance from a float64 forward of the same model on the same token ids — the decoder and
the head in float64, one prompt at a time, no trie, no padding, the model's own `forward` —
not by bit-equality with another float32 path. `scripts/bench_scoring.py` and the tests use it;
`meets_default_rule` is the rule by which a computation may become the default.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from probe.backends.continuations import TextRequest
from probe.types import LetterIds, RenderedPrompt

DEFAULT_RULE_FACTOR = 1.5
"""A computation may become the default when its deviation from the float64 reference (max and
mean) is at most this multiple of the current default's."""
DEFAULT_RULE_FLOOR = 2e-5
"""Nats: deviations below this pass the rule whatever the factor — float32 rounding noise over a
small model's layers, where a ratio of two numbers near 1e-7 says nothing."""


@dataclass(frozen=True)
class Deviation:
    """|Δ log p| of a path's values against the float64 reference, nats."""

    max: float
    mean: float
    n: int
    """Values compared (prompts × letters, or continuation scores)."""

    @classmethod
    def of(cls, got: np.ndarray, reference: np.ndarray) -> Deviation:
        """The deviation of `got` from `reference` (same shape)."""
        if got.shape != reference.shape:
            raise ValueError(f"deviation: shapes differ, got {got.shape}, reference {reference.shape}")
        gap = np.abs(np.asarray(got, dtype=np.float64) - reference)
        return cls(float(gap.max()), float(gap.mean()), int(gap.size))


def default_rule_text(current: str) -> str:
    """The default rule in words, against the path named `current`."""
    return f"≤ {DEFAULT_RULE_FACTOR}× {current}'s, or ≤ {DEFAULT_RULE_FLOOR:g} nats"


def meets_default_rule(candidate: Deviation, current: Deviation, factor: float = DEFAULT_RULE_FACTOR,
                       floor: float = DEFAULT_RULE_FLOOR) -> bool:
    """Whether `candidate` may replace `current` as the default computation: its max and mean
    deviation from the float64 reference each at most `factor` × the current default's (or below
    `floor`)."""
    return all(c <= max(factor * d, floor) for c, d in ((candidate.max, current.max), (candidate.mean, current.mean)))


def float64_model(model: Any, device: torch.device | str | None = None) -> Any:
    """A float64 copy of `model` (decoder and head), on `device` (default: the model's); the
    model itself is left as it is."""
    ref = copy.deepcopy(model).to(dtype=torch.float64)
    return ref.to(device) if device is not None else ref


@torch.inference_mode()
def reference_letters(model64: Any, rendered: Sequence[RenderedPrompt], letters: LetterIds) -> np.ndarray:
    """`[prompt, letter]` full-vocabulary letter log-probs at each prompt's last position, from
    `model64(input_ids)` in float64, one prompt at a time."""
    device = next(model64.parameters()).device
    ids = torch.tensor(letters.ids, device=device)
    out = np.empty((len(rendered), len(letters.ids)))
    for k, r in enumerate(rendered):
        x = torch.from_numpy(r.token_ids.astype(np.int64))[None].to(device)
        logits = model64(input_ids=x, logits_to_keep=1).logits[0, -1]
        out[k] = F.log_softmax(logits.double(), dim=-1)[ids].cpu().numpy()
    return out


@torch.inference_mode()
def reference_texts(model64: Any, requests: Sequence[TextRequest]) -> np.ndarray:
    """`[request, option]` continuation log-probs (Σ over each continuation's tokens, as
    `TextScore.logprobs`), from `model64(prompt + continuation)` in float64."""
    device = next(model64.parameters()).device
    out = np.empty((len(requests), max(len(r.continuations) for r in requests)))
    out.fill(np.nan)
    for k, request in enumerate(requests):
        n = len(request.prompt.token_ids)
        for j, c in enumerate(request.continuations):
            x = torch.from_numpy(np.concatenate([request.prompt.token_ids, c]).astype(np.int64))[None].to(device)
            logprobs = F.log_softmax(model64(input_ids=x).logits[0, n - 1:-1].double(), dim=-1)
            target = torch.from_numpy(c.astype(np.int64))[:, None].to(device)
            out[k, j] = float(logprobs.gather(1, target).sum())
    return out
