"""Answer texts as continuations of prompts: the records and the work plan (pure, no torch).

Each option's text, tokenized after its prompt, is one continuation; `prompt + continuation` is
one *leaf* sequence. The leaves go into the same token trie as prompts do
(`probe.backends.trie`): the K continuations of a prompt hang below the prompt's path, and
prompts that share a prefix share it here too, so every unique token runs once. A leaf's score
needs the next-token log-probs at the prompt's last position and at each continuation position
but the last; `plan_texts` marks those positions (*head sites*) in the nodes that hold them, so
the runner (`probe.backends.text_scorer`) puts only them through the LM head.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from probe.backends.batching import plan_batches
from probe.backends.specs import HFBackendSpec
from probe.backends.trie import TrieChunk, build_chunk, cut_chunks, sort_prompts
from probe.backends.units import plain_chunk
from probe.errors import ProbeInputError
from probe.types import RenderedPrompt


@dataclass(frozen=True, eq=False)
class TextRequest:
    """A prompt and its options' continuations, in the prompt's letter order."""

    prompt: RenderedPrompt
    continuations: tuple[np.ndarray, ...]
    """One `[n_tokens]` int32 array per option (read-only): the option's text (with whatever
    closes it, e.g. a quote) tokenized in context after the prompt's last token."""

    def __post_init__(self) -> None:
        pid = self.prompt.prompt.prompt_id
        if not len(self.prompt.token_ids):
            raise ProbeInputError(f"text scoring: prompt {pid} has no tokens; a continuation needs a prompt before it")
        if not self.continuations:
            raise ProbeInputError(f"text scoring: prompt {pid} has no continuations; expected one per option")
        conts = []
        for k, c in enumerate(self.continuations):
            ids = np.array(c, dtype=np.int32).reshape(-1)
            if not len(ids):
                raise ProbeInputError(f"text scoring: prompt {pid}, option {k}: the continuation has no tokens; "
                                      "expected at least one (the option's text)")
            ids.flags.writeable = False
            conts.append(ids)
        object.__setattr__(self, "continuations", tuple(conts))


@dataclass(frozen=True)
class TextScore:
    """Text scores of one prompt's options, in the prompt's letter order."""

    prompt_id: int
    logprobs: tuple[float, ...]
    """Σ over the continuation's tokens of the full-vocabulary log-prob of that token given the
    prompt and the continuation before it (float32 log-softmax values, summed in float64)."""
    n_tokens: tuple[int, ...]
    """Tokens of each continuation (the per-token normaliser)."""
    token_ids: tuple[tuple[int, ...], ...]
    """Each continuation's token ids: with the prompt's `token_ids`, enough to recompute a score."""


@dataclass(frozen=True, eq=False)
class HeadSites:
    """The positions of one trie node whose next token is a continuation token."""

    positions: np.ndarray
    """`[n_positions]` distinct offsets within the node (rows of the pass's hidden states)."""
    which: np.ndarray
    """`[n_sites]` index into `positions` of each site: a shared parent's last position serves
    the first token of each of its K continuations."""
    targets: np.ndarray
    """`[n_sites]` the token whose log-prob each site reads."""
    slots: np.ndarray
    """`[n_sites]` where each value goes in the plan's flat per-token array (`TextPlan.starts`)."""


@dataclass(frozen=True, eq=False)
class TextChunk:
    """A trie chunk of leaf sequences and the head sites of its nodes."""

    trie: TrieChunk
    sites: dict[int, HeadSites]
    """Node index → its head sites (nodes without any are absent)."""
    requests: tuple[int, ...]
    """Indices (into `TextPlan.requests`) of the requests with a leaf in this chunk."""


@dataclass(frozen=True, eq=False)
class TextPlan:
    """Every request's leaves, planned into chunks."""

    requests: tuple[TextRequest, ...]
    """In prompt id order: the plan does not depend on the order requests came in."""
    chunks: tuple[TextChunk, ...]
    first_leaf: np.ndarray
    """`[n_requests + 1]` request i's option k is leaf `first_leaf[i] + k`."""
    starts: np.ndarray
    """`[n_leaves + 1]` where each leaf's per-token values begin in the flat array."""
    unique_tokens: int
    """Nodes of the leaves' token trie: the least work exact text scoring can do."""
    leaf_tokens: int
    """Tokens of all leaves, as if each ran alone."""


def plan_texts(requests: Sequence[TextRequest], spec: HFBackendSpec) -> TextPlan:
    """Chunks of leaf sequences (trie chunks with `spec.prefix_reuse`, else plain right-padded
    batches, both within `spec`'s budgets) with their head sites."""
    ordered = tuple(sorted(requests, key=lambda q: q.prompt.prompt.prompt_id))
    twice = sorted({a.prompt.prompt.prompt_id for a, b in zip(ordered, ordered[1:])
                    if a.prompt.prompt.prompt_id == b.prompt.prompt.prompt_id})
    if twice:  # scores are keyed by prompt id
        raise ProbeInputError(f"text scoring: prompts {twice[:5]} have more than one request; expected one each")
    leaves = _leaves(ordered)
    sizes = [len(c) for q in ordered for c in q.continuations]
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    prompt_len = np.array([len(q.prompt.token_ids) for q in ordered for _ in q.continuations], dtype=np.int64)
    owner = np.array([i for i, q in enumerate(ordered) for _ in q.continuations], dtype=np.int64)
    # plan_trie's steps, keeping the sorted order's common prefixes for the unique-token count
    by_tokens, lcp = sort_prompts(leaves)
    lengths = np.array([len(r.token_ids) for r in by_tokens], dtype=np.int64)
    if spec.prefix_reuse:
        tries = [build_chunk(by_tokens[a:b], lcp[a:b], spec.batch_tokens, spec.max_batch_size)
                 for a, b in cut_chunks(lengths, lcp, spec.batch_tokens)]
    else:
        tries = [plain_chunk(b) for b in plan_batches(leaves, spec.batch_tokens, spec.max_batch_size)]
    chunks = tuple(_text_chunk(t, prompt_len, starts, owner) for t in tries)
    first_leaf = np.concatenate([[0], np.cumsum([len(q.continuations) for q in ordered])]).astype(np.int64)
    return TextPlan(requests=ordered, chunks=chunks, first_leaf=first_leaf, starts=starts,
                    unique_tokens=int(lengths.sum() - lcp[1:].sum()), leaf_tokens=int(lengths.sum()))


def _leaves(requests: Sequence[TextRequest]) -> list[RenderedPrompt]:
    """One rendered sequence per (request, option), `prompt + continuation`; its prompt id is
    its leaf index, so the trie keys leaves, not prompts."""
    out = []
    for q in requests:
        for c in q.continuations:
            leaf = len(out)
            out.append(RenderedPrompt(replace(q.prompt.prompt, prompt_id=leaf), "",
                                      np.concatenate([q.prompt.token_ids, c])))
    return out


def _text_chunk(trie: TrieChunk, prompt_len: np.ndarray, starts: np.ndarray, owner: np.ndarray) -> TextChunk:
    """The head sites of `trie`'s nodes: leaf L reads positions `prompt_len[L] − 1 …
    len(L) − 2` (each predicting the next token), found by walking up from the node it ends in."""
    found: dict[int, list[tuple[int, int, int]]] = {}  # node → (offset, target, slot)
    for index, node in enumerate(trie.nodes):
        for r in node.ends:
            leaf = r.prompt.prompt_id
            first, stop = int(prompt_len[leaf]) - 1, len(r.token_ids) - 1  # sites [first, stop)
            k = index
            while k >= 0 and trie.nodes[k].stop > first:
                n = trie.nodes[k]
                for g in range(max(first, n.start), min(stop, n.stop)):
                    site = (g - n.start, int(r.token_ids[g + 1]), int(starts[leaf]) + g - first)
                    found.setdefault(k, []).append(site)
                k = n.parent
    sites = {k: _head_sites(v) for k, v in found.items()}
    requests = sorted({int(owner[r.prompt.prompt_id]) for r in trie.prompts})
    return TextChunk(trie=trie, sites=sites, requests=tuple(requests))


def _head_sites(found: list[tuple[int, int, int]]) -> HeadSites:
    index: dict[int, int] = {}  # offset → its row in `positions` (a node has few: no np.unique)
    which = [index.setdefault(offset, len(index)) for offset, _, _ in found]
    return HeadSites(positions=np.array(list(index), dtype=np.int64), which=np.array(which, dtype=np.int64),
                     targets=np.array([t for _, t, _ in found], dtype=np.int64),
                     slots=np.array([s for _, _, s in found], dtype=np.int64))
