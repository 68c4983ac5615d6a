"""Prompt-trie planning: every unique token of a set of prompts goes through the model once.

The prompts of a forced-choice item differ only in places (condition lines, context blocks,
option rotations), so in a token trie they hold about half of their tokens as unique nodes.
This module is pure planning (numpy, no torch): it sorts the prompts, cuts them into chunks
of whole subtrees, builds each chunk's radix tree (edges are token runs), and orders the
nodes into forward passes in which every node's ancestors ran before it. The HF backend runs
each pass on top of the ancestors' KV cache.

Sorting makes the trie cheap to build: in lexicographic order, the tokens a prompt shares
with all earlier ones are exactly its common prefix with its predecessor (`lcp`), so the
unique tokens of a contiguous run of sorted prompts are `len(first) + Σ (len − lcp)`, and the
radix tree falls out of one stack pass.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from probe.errors import ProbeInputError
from probe.types import RenderedPrompt


@dataclass(frozen=True, eq=False)
class TrieNode:
    """A run of tokens shared by every prompt below it."""

    parent: int
    """Index of the parent node in its chunk; -1 under the (empty) root."""
    start: int
    """Tokens on the path before this node: the position id of its first token."""
    tokens: np.ndarray
    ends: tuple[RenderedPrompt, ...]
    """Prompts whose last token is this node's last (identical prompts share a node)."""
    n_children: int

    @property
    def stop(self) -> int:
        return self.start + len(self.tokens)


@dataclass(frozen=True, eq=False)
class TrieChunk:
    """A contiguous run of sorted prompts, its radix tree and its forward passes."""

    nodes: tuple[TrieNode, ...]
    steps: tuple[tuple[int, ...], ...]
    """Forward passes in order, as node indices; a node's parent is in an earlier step."""
    prompts: tuple[RenderedPrompt, ...] = field(default=())

    @property
    def unique_tokens(self) -> int:
        return sum(len(n.tokens) for n in self.nodes)

    def path(self, index: int) -> list[int]:
        """Ancestors of node `index`, root side first (the node itself excluded)."""
        out = []
        parent = self.nodes[index].parent
        while parent >= 0:
            out.append(parent)
            parent = self.nodes[parent].parent
        return out[::-1]


def sort_prompts(prompts: Sequence[RenderedPrompt]) -> tuple[list[RenderedPrompt], np.ndarray]:
    """Prompts in lexicographic token order (ties by prompt id), and `lcp[i]`, the common
    prefix length of prompt i with prompt i − 1 (`lcp[0] = 0`)."""
    empty = [r.prompt.prompt_id for r in prompts if not len(r.token_ids)]
    if empty:
        raise ProbeInputError(f"prompts {empty[:5]} have no tokens; nothing to score")
    ordered = sorted(prompts, key=lambda r: (tuple(r.token_ids.tolist()), r.prompt.prompt_id))
    lcp = np.zeros(len(ordered), dtype=np.int64)
    for i in range(1, len(ordered)):
        lcp[i] = _lcp(ordered[i - 1].token_ids, ordered[i].token_ids)
    return ordered, lcp


def unique_tokens(prompts: Sequence[RenderedPrompt]) -> int:
    """Nodes of the token trie of `prompts`: the least work exact scoring can do."""
    return unique_token_count([r.token_ids for r in prompts])


def unique_token_count(seqs: Sequence[np.ndarray]) -> int:
    """Nodes of the token trie of token sequences (each sorted one adds its length minus its
    common prefix with its predecessor)."""
    ordered = sorted(seqs, key=lambda s: tuple(s.tolist()))
    return int(sum(len(s) for s in ordered) - sum(_lcp(a, b) for a, b in zip(ordered, ordered[1:])))


def _lcp(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    differ = np.flatnonzero(a[:n] != b[:n])
    return int(differ[0]) if len(differ) else n


def cut_chunks(lengths: np.ndarray, lcp: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Cut sorted prompts into `[a, b)` runs of at most `budget` unique tokens (a single prompt
    may exceed it). Each cut goes where the two sides share the fewest tokens (ties: the
    latest), so chunks end at item boundaries and recompute only the common chat header."""
    new = lengths - lcp  # tokens prompt i adds to a run that holds prompt i - 1
    chunks, a, n = [], 0, len(lengths)
    while a < n:
        cost, b = int(lengths[a]), a + 1
        while b < n and cost + new[b] <= budget:
            cost += int(new[b])
            b += 1
        if b < n and b - a > 1:
            window = lcp[a + 1:b + 1]  # cutting before prompt c costs lcp[c]
            c = a + 1 + int(len(window) - 1 - np.argmin(window[::-1]))
            b = c
        chunks.append((a, b))
        a = b
    return chunks


def build_chunk(ordered: Sequence[RenderedPrompt], lcp: np.ndarray, batch_tokens: int,
                max_batch_size: int) -> TrieChunk:
    """The radix tree of sorted prompts (`lcp[0]` is ignored) and its forward passes."""
    parents: list[int] = []
    spans: list[list[int]] = []  # [source prompt, start, stop]
    ends: list[list[RenderedPrompt]] = []
    stack: list[int] = []  # the previous prompt's path, root side first
    for i, r in enumerate(ordered):
        shared = 0 if i == 0 else int(lcp[i])
        while stack and spans[stack[-1]][1] >= shared:
            stack.pop()
        if stack and spans[stack[-1]][2] > shared:
            stack.append(_split(stack.pop(), shared, parents, spans, ends))
        if len(r.token_ids) > shared:
            parents.append(stack[-1] if stack else -1)
            spans.append([i, shared, len(r.token_ids)])
            ends.append([])
            stack.append(len(spans) - 1)
        ends[stack[-1]].append(r)
    # splits append a parent after its child: renumber so parents come first (starts grow downwards)
    order = sorted(range(len(spans)), key=lambda k: (spans[k][1], k))
    new_index = {old: new for new, old in enumerate(order)}
    n_children = np.bincount([new_index[p] for p in parents if p >= 0], minlength=len(parents))
    nodes = tuple(TrieNode(parent=new_index[parents[k]] if parents[k] >= 0 else -1, start=spans[k][1],
                           tokens=ordered[spans[k][0]].token_ids[spans[k][1]:spans[k][2]], ends=tuple(ends[k]),
                           n_children=int(n_children[new_index[k]])) for k in order)
    return TrieChunk(nodes=nodes, steps=_steps(nodes, batch_tokens, max_batch_size), prompts=tuple(ordered))


def _split(node: int, at: int, parents: list[int], spans: list[list[int]], ends: list[list[RenderedPrompt]]) -> int:
    """Split `node` at depth `at`: a new node takes its head and becomes its parent."""
    source, start, _ = spans[node]
    parents.append(parents[node])
    spans.append([source, start, at])
    ends.append([])
    head = len(spans) - 1
    parents[node] = head
    spans[node][1] = at
    return head


def _steps(nodes: Sequence[TrieNode], batch_tokens: int, max_batch_size: int) -> tuple[tuple[int, ...], ...]:
    """Forward passes: nodes run as late as their children allow (wave = tree height − node
    height), so every leaf runs in the last wave; the prompts' option blocks are leaves of one
    length, which keeps padding low. Each wave is cut, longest nodes first, into passes of at
    most `max_batch_size` rows and `rows × (longest start + longest node)` ≤ `batch_tokens`,
    and a node shorter than ¾ of its pass's longest starts a new pass: a CPU forward costs
    about its padded tokens, a few more passes cost little."""
    height = [0] * len(nodes)
    for i in range(len(nodes) - 1, -1, -1):  # parents come before their children in `nodes`
        p = nodes[i].parent
        if p >= 0:
            height[p] = max(height[p], height[i] + 1)
    top = max(height, default=0)
    waves: list[list[int]] = [[] for _ in range(top + 1)]
    for i, h in enumerate(height):
        waves[top - h].append(i)
    steps: list[tuple[int, ...]] = []
    for wave in waves:
        wave.sort(key=lambda i: (-len(nodes[i].tokens), -nodes[i].start, i))
        current: list[int] = []
        p_max = s_max = 0
        for i in wave:
            p, s = max(p_max, nodes[i].start), max(s_max, len(nodes[i].tokens))
            short = 4 * len(nodes[i].tokens) < 3 * s_max  # padding it would waste a quarter of the row
            if current and (short or len(current) + 1 > max_batch_size or (len(current) + 1) * (p + s) > batch_tokens):
                steps.append(tuple(current))
                current, p, s = [], nodes[i].start, len(nodes[i].tokens)
            current.append(i)
            p_max, s_max = p, s
        if current:
            steps.append(tuple(current))
    return tuple(steps)


EditFrom = Mapping[int, tuple[Hashable, ...]]
"""prompt id → (first position an intervention edits, what else identifies the edit…): prompts
may share a node that reaches past their first edited position only when the tuples agree."""


def cap_shared(ordered: Sequence[RenderedPrompt], lcp: np.ndarray, edit_from: EditFrom) -> np.ndarray:
    """`lcp` capped so that no trie node mixes edited and unedited (or differently edited)
    positions: neighbours with another edit share at most the positions before both edits.

    The trie shares a range of sorted prompts' tokens up to the least `lcp` between them; it
    reaches past an edit start only if every neighbouring pair in the range kept its full
    `lcp`, i.e. had equal edits, so the first and last prompt of the range have equal edits too."""
    out = lcp.copy()
    for i in range(1, len(ordered)):
        a, b = edit_from.get(ordered[i - 1].prompt.prompt_id), edit_from.get(ordered[i].prompt.prompt_id)
        if a != b:
            limit = min(x[0] for x in (a, b) if x is not None)
            out[i] = min(int(out[i]), limit)
    return out


def plan_trie(prompts: Sequence[RenderedPrompt], batch_tokens: int, max_batch_size: int,
              edit_from: EditFrom | None = None) -> list[TrieChunk]:
    """Chunks of at most `batch_tokens` unique tokens, each with its tree and passes (with
    `edit_from`, nodes respect the interventions' edit starts; see `cap_shared`)."""
    if not prompts:
        return []
    ordered, lcp = sort_prompts(prompts)
    if edit_from:
        lcp = cap_shared(ordered, lcp, edit_from)
    lengths = np.array([len(r.token_ids) for r in ordered], dtype=np.int64)
    return [build_chunk(ordered[a:b], lcp[a:b], batch_tokens, max_batch_size)
            for a, b in cut_chunks(lengths, lcp, batch_tokens)]


def replicate_leaves(chunk: TrieChunk, copies: Mapping[int, Sequence[RenderedPrompt]], batch_tokens: int,
                     max_batch_size: int) -> TrieChunk:
    """`chunk` with the last token of each prompt `p` in `copies` run once per prompt of
    `copies[p]` (same tokens and positions, one-token leaves on `p`'s shared path): activation
    patching runs every (pair, layer) of a destination as its own row. `p` must end in a leaf
    of its own (plan with `edit_from` giving each `p` its own key)."""
    nodes = list(chunk.nodes)
    for k, n in enumerate(chunk.nodes):
        if not n.ends or n.ends[0].prompt.prompt_id not in copies:
            continue
        assert len(n.ends) == 1 and not n.n_children, "a patched prompt ends in a leaf of its own"
        extra = copies[n.ends[0].prompt.prompt_id]
        if len(n.tokens) == 1:  # the slot itself becomes the first copy: no index moves
            parent = n.parent
            nodes[k] = replace(n, ends=(extra[0],))
            rest = extra[1:]
        else:  # the slot keeps all but the last token and the copies hang from it
            parent, rest = k, extra
            nodes[k] = replace(n, tokens=n.tokens[:-1], ends=(), n_children=len(extra))
        nodes += [TrieNode(parent=parent, start=n.stop - 1, tokens=n.tokens[-1:], ends=(c,), n_children=0)
                  for c in rest]
    counts = np.bincount([n.parent for n in nodes if n.parent >= 0], minlength=len(nodes))
    nodes = [replace(n, n_children=int(counts[k])) for k, n in enumerate(nodes)]
    prompts = tuple(r for n in nodes for r in n.ends)
    return TrieChunk(nodes=tuple(nodes), steps=_steps(nodes, batch_tokens, max_batch_size), prompts=prompts)


def cache_waves(lcp: np.ndarray, block: int) -> np.ndarray:
    """For prompts in trie order, the engine call (wave) each goes in so that an automatic
    prefix cache of `block`-token blocks can serve every shared full block.

    A cache serves only blocks computed in an earlier call: requests scheduled together would
    all miss. Prompt i shares `lcp[i]` tokens with the first prompt of the run before it whose
    common prefix with it is that long; it goes one wave after that prompt (wave 0 when it
    shares no full block). The number of waves is the trie's depth in branchings (5 for DiSCo),
    and nearly all prompts land in the last one."""
    wave = np.zeros(len(lcp), dtype=np.int64)
    stack: list[tuple[int, int]] = []  # (shared length, index of the first prompt of that run)
    for i in range(1, len(lcp)):
        first = i - 1
        while stack and stack[-1][0] >= lcp[i]:
            first = stack.pop()[1]
        stack.append((int(lcp[i]), first))
        if lcp[i] >= block:
            wave[i] = wave[first] + 1
    return wave


def cacheable_tokens(lcp: np.ndarray, block: int) -> int:
    """Prompt tokens a `block`-token prefix cache can serve at best (whole shared blocks)."""
    return int((lcp // block * block).sum())
