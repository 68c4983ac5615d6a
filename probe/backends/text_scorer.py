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
log-softmax; a score sums them in float64, in continuation order. Once per scorer, before
scoring, a few requests go through this path and through `model(input_ids)` and must agree
token by token (`TextScorer._check`), as letters must in the letter scorer's head check.

The vLLM path (`probe.backends.vllm_text`) asks for `prompt_logprobs` on each `prompt +
continuation` request and reads the continuation positions; in vLLM V1 asking for prompt
log-probs turns automatic prefix caching off for those requests (cached blocks skip the
computation the log-probs come from), so it computes every leaf whole, with no sharing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence, Set
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from probe.backends.batching import BackendStats
from probe.backends.continuations import TextChunk, TextPlan, TextRequest, TextScore, plan_texts
from probe.backends.fastpass import FastLayers, path_name
from probe.backends.passes import PassRunner
from probe.backends.specs import HFBackendSpec
from probe.backends.treekv import KVStore, decoder_and_cache_kw, run_pass
from probe.errors import ProbeInputError

HEAD_BLOCK_FLOATS = 1 << 26
"""Logits (float32) the head computes at once: 256 MiB, 256 positions of a 262k vocabulary."""

Head = Callable[[torch.Tensor], torch.Tensor]
"""`[n, d_model]` hidden states → `[n, vocab]` float32 logits (softcapped where configured)."""


class TextScorer:
    """Scores continuations with a loaded model's decoder and the letter scorer's float32 head."""

    def __init__(self, model: PreTrainedModel, head: Head, vocab_size: int, spec: HFBackendSpec, check_tol: float,
                 fast: FastLayers | None = None) -> None:
        self.model = model
        self.fast = fast
        """The fused layers (`backend.fast_path`), or None for the eager path."""
        self.decoder, self.cache_kw = decoder_and_cache_kw(model)
        self.head = head
        self.vocab_size = vocab_size
        self.spec = spec
        self.check_tol = check_tol
        """Largest per-token gap (nats) the once-per-scorer check accepts against `model(input_ids)`."""
        self.stats = BackendStats(path=path_name(fast))
        self.device = self.decoder.get_input_embeddings().weight.device
        self._checked = False
        self._passes = PassRunner(self.stats, self.device)

    def score(self, requests: Sequence[TextRequest], done: Set[int] = frozenset()) -> Iterator[list[TextScore]]:
        """Yield the scores of the requests completed by each chunk, chunk by chunk (planned
        over all requests); chunks whose requests are all in `done` (prompt ids) are skipped,
        so a resumed run computes the rest as the uninterrupted run would."""
        plan = plan_texts(requests, self.spec)
        if plan.chunks and not self._checked:
            # the first chunk of the plan, not of the remaining work: a resumed run checks the
            # same requests as the run it resumes
            self._check(_check_requests(plan))
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

    def _check(self, requests: Sequence[TextRequest]) -> None:
        """Once per scorer: the scoring path must give what the model's own forward gives.

        `requests` go through the path scoring uses (their own trie plan under this spec:
        passes on ancestor KV, padding, gathered sites, fp32 head, softcapping) and, one option
        at a time, through `model(input_ids)`; every continuation token's log-prob must agree
        within `check_tol` nats, as the letter scorer's head check asks of letters. A gap is
        measured once more before the run stops (a transient gap on a loaded CPU must not kill
        one job of an array); a NaN or +inf stops it at once. The measurements go to
        `stats.head_check`; the check's passes are not counted as scoring work."""
        self._checked = True
        plan = plan_texts(requests, self.spec)
        ref = np.concatenate([_reference_values(self.model, self.device, q) for q in plan.requests])
        attempts: list[dict[str, object]] = []
        with self.stats.uncounted():
            for _ in range(2):
                values = np.full(len(ref), np.nan, dtype=np.float64)
                for chunk in plan.chunks:
                    self._run_chunk(chunk, values)
                gap = _token_gap(values, ref)
                attempts.append({"max_token_gap": gap})
                if gap <= self.check_tol or math.isinf(gap):
                    break
        ids = [q.prompt.prompt.prompt_id for q in plan.requests]
        self.stats.head_check = {"prompt_ids": ids, **attempts[-1], "tolerance": self.check_tol, "attempts": attempts}
        if _not_finite(values) or _not_finite(ref):  # not the architecture: the weights or activations
            raise ProbeInputError(
                f"model {type(self.model).__name__}: answer-text log-probs of the text check's prompts {ids} are not "
                "finite (NaN or +inf), so a weight or an activation is; check the checkpoint, or load a float16 "
                "model in bfloat16 or float32 (model.dtype)")
        if not gap <= self.check_tol:
            raise ProbeInputError(
                f"model {type(self.model).__name__}: the HF backend's text scoring path disagrees with the model's "
                f"forward on prompts {ids} (continuation token log-probs differ by up to {gap:.3g} nats, tolerance "
                f"{self.check_tol:g}; measured {len(attempts)} times; NaN or inf counts as a gap of inf); this "
                "architecture needs support in probe.backends.hf")

    def _run_chunk(self, chunk: TextChunk, values: np.ndarray) -> np.ndarray:
        """Run a chunk's passes, writing its sites' log-probs into `values`; return their slots."""
        store = KVStore.for_chunk(chunk.trie, buffers=self._passes.buffers)
        written = []
        for step in chunk.trie.steps:
            written += self._run(chunk, step, store, values)
            store.ran(chunk.trie, step)
        return np.concatenate(written) if written else np.zeros(0, dtype=np.int64)

    def _run(self, chunk: TextChunk, rows: Sequence[int], store: KVStore, values: np.ndarray) -> list[np.ndarray]:
        """Run one pass (`PassRunner`: halved on out-of-memory, results unchanged)."""
        return self._passes.run(rows, lambda part: self._forward(chunk, part, store, values))

    @torch.inference_mode()
    def _forward(self, chunk: TextChunk, rows: Sequence[int], store: KVStore, values: np.ndarray) -> np.ndarray:
        """Run a pass and the head at its nodes' sites; write the log-probs, return their slots."""
        here = [(j, chunk.sites[i]) for j, i in enumerate(rows) if i in chunk.sites]
        row = np.concatenate([np.full(len(s.positions), j) for j, s in here]) if here else np.zeros(0, np.int64)
        col = np.concatenate([s.positions for _, s in here]) if here else np.zeros(0, np.int64)
        reads = (torch.from_numpy(row).to(self.device), torch.from_numpy(col).to(self.device))
        hidden, last = run_pass(self.decoder, self.cache_kw, chunk.trie, rows, store, self.fast, reads)
        nodes = [chunk.trie.nodes[i] for i in rows]
        self.stats.count_pass([len(n.tokens) for n in nodes], int(last.max() + 1))
        if not here:
            return np.zeros(0, dtype=np.int64)
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


@torch.inference_mode()
def _reference_values(model: Any, device: torch.device, request: TextRequest) -> np.ndarray:
    """Each option's continuation-token log-probs from one `model(prompt + continuation)`,
    options in order (the layout of a plan's flat per-token array)."""
    n = len(request.prompt.token_ids)
    out = []
    for c in request.continuations:
        ids = torch.from_numpy(np.concatenate([request.prompt.token_ids, c]).astype(np.int64))[None].to(device)
        logprobs = F.log_softmax(model(input_ids=ids).logits[0, n - 1:-1].float(), dim=-1)
        out.append(logprobs.gather(1, torch.from_numpy(c.astype(np.int64))[:, None].to(logprobs.device))[:, 0])
    return torch.cat(out).double().cpu().numpy()


def _not_finite(values: np.ndarray) -> bool:
    """Whether log-probs hold a NaN or +inf (a broken forward pass: a log-prob is never > 0)."""
    return bool(np.isnan(values).any() or np.isposinf(values).any())


def _token_gap(scored: np.ndarray, ref: np.ndarray) -> float:
    """Largest |scored − ref|; inf when either side has a NaN or +inf, or only one a −inf."""
    if np.isnan(scored).any() or np.isnan(ref).any() or np.isposinf(scored).any() or np.isposinf(ref).any():
        return math.inf
    if (np.isneginf(scored) != np.isneginf(ref)).any():
        return math.inf
    finite = np.isfinite(ref)
    return float(np.abs(scored[finite] - ref[finite]).max()) if finite.any() else 0.0


def _check_requests(plan: TextPlan) -> list[TextRequest]:
    """The requests of the first chunk's first two leaves in trie order (the longest shared
    path) and of its last leaf (an early branch)."""
    leaves = [r.prompt.prompt_id for r in plan.chunks[0].trie.prompts]
    owners = np.searchsorted(plan.first_leaf, [leaves[0], leaves[min(1, len(leaves) - 1)], leaves[-1]], "right") - 1
    return [plan.requests[int(i)] for i in dict.fromkeys(owners.tolist())]


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

