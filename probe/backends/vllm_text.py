"""Answer-text scores on the vLLM path: each option's `prompt + continuation` is one request whose
prompt log-probs are read at the continuation's positions.

A request is our own token ids (`TokensPrompt`) with `SamplingParams(max_tokens=1,
prompt_logprobs=0)`. With 0, vLLM 0.32 returns at every prompt position but the first the
log-prob of the actual next prompt token and no alternatives (`Sampler.gather_logprobs` keeps
the target plus the top 0: vllm/v1/sample/sampler.py, vllm/v1/worker/gpu_model_runner.py
`_get_prompt_logprobs_dict`). The value is the float32 log-softmax over the full vocabulary of
the LM head's logits (final softcapping included, the head in float32 under `fp32_head`);
prompt positions skip the sampling processors, so `logprobs_mode` (raw_logprobs, the default
the letter path also relies on) does not change them. A score sums them in float64, as on the
HF path (`probe.backends.text_scorer`), which is the reference.

No prefix sharing: a request that asks for prompt log-probs skips reading the prefix cache
(`SamplingParams.skip_reading_prefix_cache` defaults to true with `prompt_logprobs`:
vllm/sampling_params.py `__post_init__`; vllm/v1/core/kv_cache_manager.py
`prefix_cache_lookup_enabled`), because the runner computes log-probs only for positions it
runs (from `num_computed_tokens` on) and leaves cached ones unset. So every leaf runs whole —
the K options of a prompt each pay for the prompt — and the manifest's computed tokens say so:
they are the submitted tokens less what the engine reports as cached per request
(`num_cached_tokens`, 0 here), against the leaves' trie, the least an exact scorer could run.
A request may override the default (`skip_reading_prefix_cache=False`); the continuation
positions are then still computed whenever the cache stops before the prompt's last token, but
that leans on the runner leaving cached rows unset rather than on documented behaviour, so
probe does not do it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence, Set
from typing import Any

import numpy as np

from probe.backends.batching import BackendStats
from probe.backends.continuations import TextRequest, TextScore
from probe.backends.trie import unique_token_count
from probe.errors import ProbeInputError


class VLLMTextScorer:
    """Scores continuations with a vLLM engine's `LLM` (`probe.backends.vllm.VLLMEngine.texts`)."""

    def __init__(self, llm: Any, sampling: Any, tokens_prompt: Any, chunk: int) -> None:
        self.llm, self.tokens_prompt, self.chunk = llm, tokens_prompt, chunk
        self.stats = BackendStats()
        self.params = sampling(max_tokens=1, temperature=0.0, prompt_logprobs=0, detokenize=False)

    def score(self, requests: Sequence[TextRequest], done: Set[int] = frozenset()) -> Iterator[list[TextScore]]:
        """Yield scores engine call by engine call (whole requests, in prompt id order, at most
        `chunk` leaves a call unless one request has more); calls whose requests are all in
        `done` (prompt ids) are skipped, so a resumed run computes the rest as the uninterrupted
        run would."""
        ordered = sorted(requests, key=lambda q: q.prompt.prompt.prompt_id)
        ids = [q.prompt.prompt.prompt_id for q in ordered]
        twice = sorted({a for a, b in zip(ids, ids[1:]) if a == b})
        if twice:  # scores are keyed by prompt id
            raise ProbeInputError(f"text scoring: prompts {twice[:5]} have more than one request; expected one each")
        leaves = [np.concatenate([q.prompt.token_ids, c]) for q in ordered for c in q.continuations]
        self.stats.prompt_tokens = int(sum(len(s) for s in leaves))
        self.stats.unique_tokens = unique_token_count(leaves)
        for call in _calls(ordered, self.chunk):
            if all(q.prompt.prompt.prompt_id in done for q in call):
                continue
            yield self._run(call)

    def _run(self, call: Sequence[TextRequest]) -> list[TextScore]:
        """One engine call: every option of every request in `call`, one request each."""
        prompts = [self.tokens_prompt(prompt_token_ids=np.concatenate([q.prompt.token_ids, c]).tolist())
                   for q in call for c in q.continuations]
        t0 = time.perf_counter()
        outs = self.llm.generate(prompts, self.params, use_tqdm=False)
        self.stats.count_batch(len(prompts), time.perf_counter() - t0)
        scores, at = [], 0
        for q in call:
            mine = outs[at:at + len(q.continuations)]
            at += len(q.continuations)
            self.stats.tokens_computed += sum(len(o.prompt_token_ids) - int(o.num_cached_tokens or 0) for o in mine)
            scores.append(_score(q, [_continuation_logprobs(q, c, o) for c, o in zip(q.continuations, mine)]))
        return scores


def _calls(ordered: Sequence[TextRequest], chunk: int) -> Iterator[list[TextRequest]]:
    """Whole requests, in order, each group with at most `chunk` leaves (or one request)."""
    call: list[TextRequest] = []
    leaves = 0
    for q in ordered:
        if call and leaves + len(q.continuations) > chunk:
            yield call
            call, leaves = [], 0
        call.append(q)
        leaves += len(q.continuations)
    if call:
        yield call


def _continuation_logprobs(request: TextRequest, continuation: np.ndarray, out: Any) -> np.ndarray:
    """The log-probs vLLM returned for the continuation's tokens (positions after the prompt)."""
    n = len(request.prompt.token_ids)
    cached = int(out.num_cached_tokens or 0)
    if cached > n - 1:  # the runner leaves the log-probs of cached positions unset
        raise RuntimeError(f"probe: error: vLLM served {cached} tokens of text prompt {request.prompt.prompt.prompt_id}"
                           f" from its prefix cache with prompt_logprobs on (expected at most {n - 1}); its "
                           "continuation log-probs would be unset")
    steps = out.prompt_logprobs[n:n + len(continuation)]  # entry i: log p(token i | tokens < i)
    return np.array([float(step[int(t)].logprob) for step, t in zip(steps, continuation)], dtype=np.float64)


def _score(request: TextRequest, values: Sequence[np.ndarray]) -> TextScore:
    """A request's score: each option's continuation-token log-probs summed in float64."""
    return TextScore(prompt_id=request.prompt.prompt.prompt_id,
                     logprobs=tuple(float(np.sum(v, dtype=np.float64)) for v in values),
                     n_tokens=tuple(len(c) for c in request.continuations),
                     token_ids=tuple(tuple(int(t) for t in c) for c in request.continuations))

