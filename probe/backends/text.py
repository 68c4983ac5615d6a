"""Exact answer-text scores on the HF path: option texts as continuations through the prompt trie.

A text score is `Σ_t log p(c_t | prompt, c_<t)` over the continuation's tokens. The leaves
`prompt + continuation` are planned as a token trie (`probe.backends.continuations`): every
unique token runs through the decoder once, on its ancestors' KV (`probe.backends.treekv`),
so the K continuations of a prompt pay for the prompt once, and so do the prompts that share
its prefix. With `prefix_reuse` off each leaf runs whole in a right-padded batch.

Why the LM head runs only at head sites (the prompt's last position and each continuation
position but the last): those are the only positions whose next-token log-prob a score reads,
and a `[rows, seq, vocab]` logits tensor (262k vocab for Gemma 3) would dwarf the model's
activations. A shared parent's last position is one row of the head that serves K targets.
The head runs in float32, with Gemma's final logit softcapping, exactly as the letter scorer's
(`HFScorer._head`), since bf16 logits are too coarse for the small differences being compared;
the sites' hidden states go through it in blocks so a large vocabulary never needs more than
`HEAD_BLOCK_FLOATS` logits at once. Each token's value is the float32 full-vocabulary
log-softmax; a score sums them in float64, in continuation order.

A vLLM path (not built) would ask for `prompt_logprobs` on each `prompt + continuation`
request and read the continuation positions; in vLLM V1 asking for prompt log-probs turns
automatic prefix caching off for those requests (cached blocks skip the computation the
log-probs come from), so it would compute every leaf whole, with no sharing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence, Set
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from probe.backends.batching import BackendStats
from probe.backends.continuations import TextChunk, TextPlan, TextRequest, TextScore, plan_texts
from probe.backends.specs import HFBackendSpec
from probe.backends.treekv import KVStore, run_pass

HEAD_BLOCK_FLOATS = 1 << 26
"""Logits (float32) the head computes at once: 256 MiB, 256 positions of a 262k vocabulary."""

Head = Callable[[torch.Tensor], torch.Tensor]
"""`[n, d_model]` hidden states → `[n, vocab]` float32 logits (softcapped where configured)."""


class TextScorer:
    """Scores continuations with a loaded decoder and the letter scorer's float32 head."""

    def __init__(self, decoder: Any, cache_kw: str, head: Head, vocab_size: int, spec: HFBackendSpec) -> None:
        self.decoder = decoder
        self.cache_kw = cache_kw
        self.head = head
        self.vocab_size = vocab_size
        self.spec = spec
        self.stats = BackendStats()
        self.device = decoder.get_input_embeddings().weight.device
        self._row_cap: int | None = None  # set after an out-of-memory: never retry that many rows

    def score(self, requests: Sequence[TextRequest], done: Set[int] = frozenset()) -> Iterator[list[TextScore]]:
        """Yield the scores of the requests completed by each chunk, chunk by chunk (planned
        over all requests); chunks whose requests are all in `done` (prompt ids) are skipped,
        so a resumed run computes the rest as the uninterrupted run would."""
        plan = plan_texts(requests, self.spec)
        self.stats.prompt_tokens = plan.leaf_tokens
        self.stats.unique_tokens = plan.unique_tokens
        values = np.full(int(plan.starts[-1]), np.nan, dtype=np.float64)
        slot_owner = np.repeat(np.repeat(np.arange(len(plan.requests)), np.diff(plan.first_leaf)), np.diff(plan.starts))
        left = np.bincount(slot_owner, minlength=len(plan.requests))  # sites not yet run, per request
        for chunk in plan.chunks:
            if all(plan.requests[i].prompt.prompt.prompt_id in done for i in chunk.requests):
                continue
            slots = self._run_chunk(chunk, values)
            left -= np.bincount(slot_owner[slots], minlength=len(left))
            # a request finishes in the chunk holding its last leaf, so it is reported once
            finished = [i for i in chunk.requests if left[i] == 0]
            if finished:
                yield [_score(plan, i, values) for i in finished]

    def _run_chunk(self, chunk: TextChunk, values: np.ndarray) -> np.ndarray:
        """Run a chunk's passes, writing its sites' log-probs into `values`; return their slots."""
        store = KVStore.for_chunk(chunk.trie)
        written = []
        for step in chunk.trie.steps:
            written += self._run(chunk, step, store, values)
            store.ran(chunk.trie, step)
        return np.concatenate(written) if written else np.zeros(0, dtype=np.int64)

    def _run(self, chunk: TextChunk, rows: Sequence[int], store: KVStore, values: np.ndarray) -> list[np.ndarray]:
        """Run one pass; on out-of-memory split it in half and retry (results unchanged)."""
        if len(rows) > 1 and self._row_cap is not None and len(rows) > self._row_cap:
            return [s for half in _halves(rows) for s in self._run(chunk, half, store, values)]
        t0 = time.perf_counter()
        try:
            slots = self._forward(chunk, rows, store, values)
        except torch.OutOfMemoryError:
            if len(rows) == 1:
                raise
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            self.stats.oom_splits += 1
            self._row_cap = max(1, len(rows) // 2)
            return [s for half in _halves(rows) for s in self._run(chunk, half, store, values)]
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.stats.count_batch(len(rows), time.perf_counter() - t0)
        return [slots]

    @torch.inference_mode()
    def _forward(self, chunk: TextChunk, rows: Sequence[int], store: KVStore, values: np.ndarray) -> np.ndarray:
        """Run a pass and the head at its nodes' sites; write the log-probs, return their slots."""
        hidden, last = run_pass(self.decoder, self.cache_kw, chunk.trie, rows, store)
        nodes = [chunk.trie.nodes[i] for i in rows]
        self.stats.tokens_computed += sum(len(n.tokens) for n in nodes)
        self.stats.padded_tokens += len(nodes) * int(last.max() + 1)
        here = [(j, chunk.sites[i]) for j, i in enumerate(rows) if i in chunk.sites]
        if not here:
            return np.zeros(0, dtype=np.int64)
        row = np.concatenate([np.full(len(s.positions), j) for j, s in here])
        col = np.concatenate([s.positions for _, s in here])
        base = np.cumsum([0] + [len(s.positions) for _, s in here[:-1]])
        site = np.concatenate([b + s.which for b, (_, s) in zip(base, here)])  # sites' rows of `picked`
        targets = np.concatenate([s.targets for _, s in here])
        slots = np.concatenate([s.slots for _, s in here])
        picked = hidden[torch.from_numpy(row).to(hidden.device), torch.from_numpy(col).to(hidden.device)]
        values[slots] = self._site_logprobs(picked, site, targets)
        return slots

    def _site_logprobs(self, picked: torch.Tensor, site: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """Full-vocabulary log-prob of `targets[s]` at hidden state `picked[site[s]]`, per site,
        with the head run over blocks of `picked`."""
        out = np.empty(len(site), dtype=np.float64)
        block = max(1, HEAD_BLOCK_FLOATS // self.vocab_size)
        for a in range(0, picked.shape[0], block):
            mine = np.flatnonzero((site >= a) & (site < a + block))
            full = F.log_softmax(self.head(picked[a:a + block]), dim=-1)
            at = torch.from_numpy(site[mine] - a).to(full.device)
            tok = torch.from_numpy(targets[mine]).to(full.device)
            out[mine] = full[at, tok].double().cpu().numpy()
        return out


def _score(plan: TextPlan, index: int, values: np.ndarray) -> TextScore:
    """The finished request `index`'s score: each option's per-token values summed in float64."""
    q = plan.requests[index]
    first = int(plan.first_leaf[index])
    sums, counts, ids = [], [], []
    for k, c in enumerate(q.continuations):
        a, b = int(plan.starts[first + k]), int(plan.starts[first + k + 1])
        sums.append(float(np.sum(values[a:b], dtype=np.float64)))
        counts.append(b - a)
        ids.append(tuple(int(t) for t in c))
    return TextScore(prompt_id=q.prompt.prompt.prompt_id, logprobs=tuple(sums), n_tokens=tuple(counts),
                     token_ids=tuple(ids))


def _halves(rows: Sequence[int]) -> list[tuple[int, ...]]:
    mid = len(rows) // 2
    return [tuple(rows[:mid]), tuple(rows[mid:])]
