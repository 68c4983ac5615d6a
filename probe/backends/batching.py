"""Pieces every backend shares: run statistics, generation records, length-sorted batch plans."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from probe.errors import ProbeInputError
from probe.types import RenderedPrompt


@dataclass
class BackendStats:
    """What the manifest records about a scoring or generation pass."""

    forward_s: float = 0.0
    """Seconds inside model forward passes (or engine calls)."""
    n_batches: int = 0
    batch_sizes: dict[int, int] = field(default_factory=dict)
    """rows per batch → how many batches had it (after any out-of-memory splits)."""
    oom_splits: int = 0
    tokens_computed: int = 0
    """Tokens actually run through the model in this process (each trie node once per chunk)."""
    padded_tokens: int = 0
    """Token slots of the forward passes, padding included (HF backend)."""
    prompt_tokens: int = 0
    """Tokens of all the prompts, as if each ran alone."""
    unique_tokens: int = 0
    """Nodes of the prompts' token trie: the least work exact scoring can do."""
    path: str | None = None
    """The computation the HF backend ran (`probe.backends.fastpass.path_name`: `eager`, `fast`,
    `fast+packed`); None for an engine without that choice (vLLM)."""
    head_check: dict[str, object] | None = None
    """What the HF backend's once-per-run head check measured (prompts, largest letter gap)."""
    seconds_by_rows: dict[int, float] = field(default_factory=dict)
    """rows per batch → seconds its batches took (where a plan's time goes; benchmarks only)."""
    tokens_by_rows: dict[int, int] = field(default_factory=dict)
    """rows per batch → tokens its batches computed (HF trie passes; benchmarks only)."""

    def count_batch(self, rows: int, seconds: float) -> None:
        """Record one finished batch."""
        self.forward_s += seconds
        self.n_batches += 1
        self.batch_sizes[rows] = self.batch_sizes.get(rows, 0) + 1
        self.seconds_by_rows[rows] = self.seconds_by_rows.get(rows, 0.0) + seconds

    @contextmanager
    def uncounted(self) -> Iterator[None]:
        """Work done inside (a check, not scoring) leaves every counter as it was."""
        saved = copy.deepcopy(self.__dict__)
        try:
            yield
        finally:
            self.__dict__.update(saved)

    def count_pass(self, lengths: Sequence[int], width: int) -> None:
        """Record the work of one trie pass: its rows' new tokens, padded to `width` slots."""
        self.tokens_computed += sum(lengths)
        self.padded_tokens += len(lengths) * width
        self.tokens_by_rows[len(lengths)] = self.tokens_by_rows.get(len(lengths), 0) + sum(lengths)


@dataclass(frozen=True)
class Generation:
    """One generated continuation."""

    prompt_id: int
    text: str
    """The decoded continuation after the prompt (a pre-filled cue is not repeated)."""


def plan_batches(
    prompts: Sequence[RenderedPrompt], batch_tokens: int, max_batch_size: int, keep_order: bool = False
) -> list[list[RenderedPrompt]]:
    """Sort by length (longest first, so an out-of-memory shows at once; `keep_order` keeps the
    given order instead) and cut batches whose padded size `rows × longest` stays within the
    token budget."""
    if batch_tokens < 1 or max_batch_size < 1:
        raise ProbeInputError(f"backend: batch_tokens and max_batch_size must be ≥ 1, got {batch_tokens}, {max_batch_size}")
    ordered = list(prompts) if keep_order else sorted(prompts, key=lambda r: (-len(r.token_ids), r.prompt.prompt_id))
    batches: list[list[RenderedPrompt]] = []
    current: list[RenderedPrompt] = []
    longest = 0
    for r in ordered:
        width = max(longest, len(r.token_ids))
        if current and ((len(current) + 1) * width > batch_tokens or len(current) >= max_batch_size):
            batches.append(current)
            current, width = [], len(r.token_ids)
        current.append(r)
        longest = width
    if current:
        batches.append(current)
    return batches
