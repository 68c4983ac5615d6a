"""What every backend offers: letter scores (letter mode), continuations (generation mode) and
answer-text scores (the text modes); what the HF scorer adds, activation patching between
paired prompts; and what the vLLM engine adds, its prefix-cache counters. `make_backend`
(`probe.backends.factory`) returns a `Backend`: a `Scorer` or, in `mode: generate`, a `Generator`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence, Set
from typing import Protocol, Union, runtime_checkable

import numpy as np

from probe.backends.batching import BackendStats, Generation
from probe.backends.continuations import TextRequest, TextScore
from probe.types import LetterIds, LetterScore, RenderedPrompt


class LetterBackend(Protocol):
    """Letter mode: letter log-probs of every prompt."""

    stats: BackendStats

    def score(
        self, prompts: Sequence[RenderedPrompt], letters: LetterIds, done: Set[int] = frozenset()
    ) -> Iterator[list[LetterScore]]:
        """Yield scores batch by batch, in any order; every prompt not in `done` at least once
        (batches are planned over all prompts, so a resumed run repeats the original plan)."""
        ...


class TextBackend(Protocol):
    """The text modes: each option's text scored as a continuation of its prompt
    (`HFScorer.texts`, `VLLMEngine.texts`)."""

    stats: BackendStats

    def score(self, requests: Sequence[TextRequest], done: Set[int] = frozenset()) -> Iterator[list[TextScore]]:
        """Yield the scores of finished requests batch by batch, each request once; batches
        whose requests' prompt ids are all in `done` are skipped."""
        ...


class Scorer(LetterBackend, Protocol):
    """The letter and text modes on one set of weights (`HFScorer`, `VLLMEngine`): letter scores,
    and a text scorer sharing them."""

    capture: tuple[int, ...]
    """The layers whose residual stream at the answer position the letter pass stores (empty:
    none; only the HF scorer captures)."""

    def texts(self) -> TextBackend:
        """A scorer of answer texts as continuations on the same model."""
        ...


class Generator(Protocol):
    """Generation mode: continuations of rendered prompts, and chat answers for an LLM judge."""

    stats: BackendStats

    def generate(self, prompts: Sequence[RenderedPrompt], done: Set[int] = frozenset()) -> Iterator[list[Generation]]:
        """Yield generations batch by batch, in any order; batches wholly in `done` are skipped."""
        ...

    def chat(self, messages: Sequence[str]) -> list[str]:
        """Answer plain user messages (chat template, generation prompt)."""
        ...


class Patcher(Protocol):
    """Activation patching (`probe.backends.patch_hooks`): the HF scorer, under `intervention=patch`."""

    stats: BackendStats

    def patch(self, prompts: Sequence[RenderedPrompt], letters: LetterIds, pairs: Sequence[tuple[int, int]],
              done: Set[int] = frozenset()) -> Iterator[tuple[list[int], np.ndarray]]:
        """Yield `(pair indices, [pair, layer, letter] log-probs)` group by group; groups whose
        pairs are all in `done` are skipped."""
        ...


@runtime_checkable
class PrefixCacheCounters(Protocol):
    """A backend whose engine keeps a prefix cache and counts what it served (the vLLM engine):
    the manifest's `prefix_cache_hit_rate`, `prefix_cache_limit` and `prefix_cache_block`."""

    stats: BackendStats
    cacheable_tokens: int
    """Prompt tokens of the last plan that whole shared KV blocks could serve."""
    block_size: int
    """The engine's KV block size in tokens (it caches whole blocks only)."""

    def prefix_cache_hit_rate(self) -> float | None:
        """Share of prompt tokens served from the prefix cache (None: nothing looked up)."""
        ...


Backend = Union[Scorer, Generator]
"""What `make_backend` returns: a `Scorer` in the letter and text modes, a `Generator` in
`mode: generate` (the vLLM engine is both)."""
