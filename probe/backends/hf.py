"""Hugging Face transformers backend: batched letter log-probs at the last prompt position.

Design: right-pad a length-sorted batch, run the decoder once, gather each row's last real
hidden state, and apply the LM head there only, in float32. Right padding keeps every real
token at its natural position, so a batched row sees exactly what it would see alone; the
head on gathered rows avoids a `[batch, seq, vocab]` logits tensor (262k vocab for Gemma 3).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F

from probe.errors import ProbeInputError
from probe.types import LetterIds, LetterScore, RenderedPrompt


@dataclass(frozen=True)
class HFBackendSpec:
    """Batching limits. A batch holds at most `max_batch_size` prompts and `batch_tokens` padded tokens."""

    batch_tokens: int = 8192
    max_batch_size: int = 32
    device: str = "auto"


@dataclass
class BackendStats:
    """What the manifest records about a scoring pass."""

    forward_s: float = 0.0
    n_batches: int = 0
    batch_sizes: dict[int, int] = field(default_factory=dict)
    """batch size → how many batches had it."""


class HFScorer:
    """Scores rendered prompts with a loaded `transformers` causal LM."""

    def __init__(self, model: Any, spec: HFBackendSpec) -> None:
        self.model = model
        self.spec = spec
        self.stats = BackendStats()
        self.decoder = model.get_decoder()
        head = model.get_output_embeddings()
        # Keep an fp32 copy of only the head: bf16 logits are too coarse for letter margins.
        self.head_weight = head.weight.detach().float()
        self.head_bias = None if head.bias is None else head.bias.detach().float()
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.softcap = getattr(config, "final_logit_softcapping", None)
        self.device = self.decoder.get_input_embeddings().weight.device
        self._head_checked = False

    def score(self, prompts: Sequence[RenderedPrompt], letters: LetterIds) -> Iterator[list[LetterScore]]:
        """Yield scores batch by batch (length-sorted order); callers key them by `prompt_id`."""
        letter_ids = torch.tensor(letters.ids, device=self.head_weight.device)
        for batch in plan_batches(prompts, self.spec.batch_tokens, self.spec.max_batch_size):
            if not self._head_checked:
                self._check_head(batch[0])
            t0 = time.perf_counter()
            logprobs, argmax = self._letter_logprobs(batch, letter_ids)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.stats.forward_s += time.perf_counter() - t0
            self.stats.n_batches += 1
            self.stats.batch_sizes[len(batch)] = self.stats.batch_sizes.get(len(batch), 0) + 1
            is_letter = (argmax[:, None] == letter_ids[None, :]).any(dim=1)
            yield [
                LetterScore(prompt_id=r.prompt.prompt_id, letter_logprobs=tuple(lp), greedy_valid=bool(v))
                for r, lp, v in zip(batch, logprobs.tolist(), is_letter.tolist())
            ]

    @torch.inference_mode()
    def _letter_logprobs(self, batch: Sequence[RenderedPrompt], letter_ids: torch.Tensor):
        lengths = torch.tensor([len(r.token_ids) for r in batch])
        width = int(lengths.max())
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, r in enumerate(batch):
            ids[i, : len(r.token_ids)] = torch.tensor(r.token_ids)
            mask[i, : len(r.token_ids)] = 1
        out = self.decoder(input_ids=ids.to(self.device), attention_mask=mask.to(self.device), use_cache=False)
        hidden = out.last_hidden_state  # [batch, seq, d_model], final norm applied
        last = hidden[torch.arange(len(batch), device=hidden.device), (lengths - 1).to(hidden.device)]
        logits = self._head(last)  # [batch, vocab] float32
        logprobs = F.log_softmax(logits, dim=-1)
        return logprobs[:, letter_ids].cpu(), logits.argmax(dim=-1)

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        """LM head in float32, with Gemma-style final logit softcapping where configured."""
        logits = F.linear(hidden.to(self.head_weight.device).float(), self.head_weight, self.head_bias)
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    @torch.inference_mode()
    def _check_head(self, prompt: RenderedPrompt) -> None:
        """Once per run: our decoder+head path must match the model's own forward.

        Guards against architectures whose `forward` does more after the decoder than the
        head and softcapping we replicate (then letter log-probs would silently be wrong).
        """
        self._head_checked = True
        ids = torch.tensor([prompt.token_ids], device=self.device)
        ours = self._head(self.decoder(input_ids=ids).last_hidden_state[0, -1:])
        theirs = self.model(input_ids=ids).logits[0, -1:].float().to(ours.device)
        tol = 1e-3 if self.head_weight.dtype == torch.float32 and self.model.dtype == torch.float32 else 0.5
        err = (F.log_softmax(ours, -1) - F.log_softmax(theirs, -1)).abs().max().item()
        if err > tol:
            raise ProbeInputError(
                f"model {type(self.model).__name__}: the HF backend's head path disagrees with the model's "
                f"forward by {err:.3g} nats; this architecture needs support in probe.backends.hf"
            )


def plan_batches(
    prompts: Sequence[RenderedPrompt], batch_tokens: int, max_batch_size: int
) -> list[list[RenderedPrompt]]:
    """Sort by length (longest first, so an out-of-memory shows up at once) and cut batches
    whose padded size `rows × longest` stays within the token budget."""
    if batch_tokens < 1 or max_batch_size < 1:
        raise ProbeInputError(f"backend: batch_tokens and max_batch_size must be ≥ 1, got {batch_tokens}, {max_batch_size}")
    ordered = sorted(prompts, key=lambda r: (-len(r.token_ids), r.prompt.prompt_id))
    batches: list[list[RenderedPrompt]] = []
    current: list[RenderedPrompt] = []
    for r in ordered:
        width = len(current[0].token_ids) if current else len(r.token_ids)
        if current and ((len(current) + 1) * width > batch_tokens or len(current) >= max_batch_size):
            batches.append(current)
            current = []
        current.append(r)
    if current:
        batches.append(current)
    return batches
