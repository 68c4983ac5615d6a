"""Activation patching on the trie: every (pair, layer) of a destination prompt read exactly.

For a pair (source s, destination d) and a layer l, the residual stream after layer l at d's
answer position is replaced by s's, and d's letters are read. Positions before the answer
position never see it (causal attention), so d's prefix is computed once: d's answer token
becomes one one-token leaf per (pair, layer) on d's shared path (`trie.replicate_leaves`), each
with its own `set` edit. Sources run first, grouped by trie chunk, their residuals kept (float32,
`[layers, d_model]` each) only until their destinations have run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np
import torch

from probe.backends.batching import plan_batches
from probe.backends.interventions import Edit
from probe.backends.specs import HFBackendSpec
from probe.backends.trie import TrieChunk, plan_trie, replicate_leaves
from probe.backends.units import plain_chunk, score_chunks
from probe.types import LetterIds, LetterScore, RenderedPrompt


@dataclass
class ResidualSink:
    """Where a source pass leaves each ending prompt's residual stream at its answer position,
    after every patch layer: prompt id → float32 `[patch layer, d_model]`, on the CPU."""

    residuals: dict[int, torch.Tensor] = field(default_factory=dict)


class PatchScorer(Protocol):
    """What activation patching asks of a scorer (`probe.backends.hf.HFScorer`)."""

    spec: HFBackendSpec
    patch_layers: tuple[int, ...]
    """Resolved decoder layers (0-based) whose output a patch replaces."""
    head_weight: torch.Tensor

    def patch_pass(self, chunk: TrieChunk, letter_ids: torch.Tensor, edits: Mapping[int, Edit] | None = None,
                   sink: ResidualSink | None = None) -> Iterator[list[LetterScore]]:
        """Run a chunk's passes for patching: `edits` (by prompt id) applied, the residuals of the
        prompts that end in it left in `sink` when given; its rows are no prompts of the run, so
        nothing else it records (logit lens, activations) is produced."""
        ...


def run_patching(scorer: PatchScorer, prompts: Sequence[RenderedPrompt], letters: LetterIds,
                 pairs: Sequence[tuple[int, int]], done: Set[int] = frozenset()) -> Iterator[tuple[list[int], np.ndarray]]:
    """Yield `(pair indices, log-probs [pair, layer, letter])` per group of sources, run by
    `scorer`'s patch passes."""
    by_id = {r.prompt.prompt_id: r for r in prompts}
    letter_ids = torch.tensor(letters.ids, device=scorer.head_weight.device)
    layers = scorer.patch_layers
    sources = sorted({s for s, _ in pairs})
    base = max(by_id) + 1  # copies get fresh ids: base + pair · layers + j
    pairs_of: dict[int, list[int]] = {}
    for k, (s, _) in enumerate(pairs):
        pairs_of.setdefault(s, []).append(k)
    for chunk in score_chunks([by_id[s] for s in sources], scorer.spec):
        # groups are whole source chunks of a fixed plan: a resumed pass skips the finished ones
        if all(k in done for r in chunk.prompts for k in pairs_of[r.prompt.prompt_id]):
            continue
        sink = ResidualSink()
        for _ in scorer.patch_pass(chunk, letter_ids, sink=sink):  # scores already stored: residuals only
            pass
        kept = sink.residuals
        group = [k for k, (s, _) in enumerate(pairs) if s in kept]
        copies: dict[int, list[RenderedPrompt]] = {}
        edits: dict[int, Edit] = {}
        for k in group:
            s, d = pairs[k]
            dest = by_id[d]
            for j, layer in enumerate(layers):
                vid = base + k * len(layers) + j
                copies.setdefault(d, []).append(RenderedPrompt(replace(dest.prompt, prompt_id=vid), "", dest.token_ids))
                edits[vid] = Edit(layer=layer, start=len(dest.token_ids) - 1, vector=kept[s][j], mode="set", key=vid)
        out = np.full((len(group), len(layers), len(letters.ids)), np.nan, dtype=np.float32)
        row = {k: m for m, k in enumerate(group)}
        for dest_chunk in _dest_chunks(scorer.spec, [by_id[d] for d in sorted(copies)], copies):
            for batch in scorer.patch_pass(dest_chunk, letter_ids, edits):
                for score in batch:
                    k, j = divmod(score.prompt_id - base, len(layers))
                    out[row[k], j] = score.letter_logprobs
        assert not np.isnan(out).any(), "every (pair, layer) is read once"
        yield group, out


def _dest_chunks(spec: HFBackendSpec, dests: Sequence[RenderedPrompt],
                 copies: dict[int, list[RenderedPrompt]]) -> list[TrieChunk]:
    """With prefix reuse, the destinations' trie (each answer token a leaf of its own) with the
    copies hung on it; without, plain batches of the copies as whole prompts."""
    if not spec.prefix_reuse:
        flat = [c for d in dests for c in copies[d.prompt.prompt_id]]
        return [plain_chunk(b) for b in plan_batches(flat, spec.batch_tokens, spec.max_batch_size)]
    own = {d.prompt.prompt_id: (len(d.token_ids) - 1, d.prompt.prompt_id) for d in dests}
    return [replicate_leaves(c, copies, spec.batch_tokens, spec.max_batch_size)
            for c in plan_trie(dests, spec.batch_tokens, spec.max_batch_size, own)]
