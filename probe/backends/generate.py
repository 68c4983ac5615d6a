"""Text generation on the HF backend: the forced-choice fallback and the LLM judge.

Prompts are the same rendered token ids as in letter mode (answer cue pre-filled), so with
greedy decoding the first generated token is exactly the letter-mode argmax token. Batches are
left-padded for `generate`, which derives position ids from the attention mask.

With `prefix_reuse` (the default) a batch is a run of prompts in trie order, and everything but
each prompt's last token is prefilled through the prompt trie (`probe.backends.treekv`), each
unique token once; `generate` then starts from that cache, right-aligned as left padding puts
it, and computes only the last prompt token and the continuation. Forced-choice prompts share
about half their tokens and their answers are a few tokens long, so prefill is most of the work.

Every decoding step's logits are checked (`FiniteLogits`): NaN logits decode as an arbitrary
token, so text from a broken forward pass would parse and be counted like any other answer.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence, Set
from typing import Any

import numpy as np
import torch
from transformers import DynamicCache, LogitsProcessor, LogitsProcessorList, PreTrainedModel

from probe.backends.batching import BackendStats, Generation
from probe.backends.specs import HFBackendSpec
from probe.backends.treekv import KVStore, decoder_and_cache_kw, run_pass
from probe.backends.trie import build_chunk, sort_prompts, unique_tokens
from probe.backends.units import generate_batches
from probe.errors import ProbeInputError
from probe.prompts.tokenizer import Tokenizer
from probe.types import RenderedPrompt


class FiniteLogits(LogitsProcessor):
    """Flags, per row, a decoding step whose logits hold a NaN or +inf, or are −inf for every
    token (no next-token distribution); flags stay on the device, so no step waits on a sync."""

    def __init__(self, rows: int, device: torch.device) -> None:
        self.flags = torch.zeros(rows, dtype=torch.bool, device=device)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        self.flags |= (torch.isnan(scores).any(-1) | torch.isposinf(scores).any(-1)
                       | torch.isneginf(scores).all(-1)).to(self.flags.device)
        return scores

    def check(self, names: Sequence[str]) -> None:
        """Raise `ProbeInputError` naming the first flagged rows (`names[i]` names row i)."""
        bad = [names[i] for i in torch.nonzero(self.flags).flatten().tolist()]
        if bad:
            raise ProbeInputError(
                f"generation stopped: the next-token logits of {len(bad)} of the {len(names)} prompts of a batch are "
                f"not finite (NaN or +inf, or −inf for every token; first: {', '.join(bad[:5])}), so a weight or an "
                "activation is; fix the model (or load a float16 model in bfloat16 or float32) and rerun into this "
                "directory: the batches stored before are kept, nothing of this one is")


class HFGenerator:
    """Batched greedy (or seeded sampled) decoding of rendered prompts."""

    def __init__(self, model: PreTrainedModel, tokenizer: Tokenizer, spec: HFBackendSpec,
                 template_kwargs: dict[str, Any] | None = None) -> None:
        self.model, self.tokenizer, self.spec = model, tokenizer, spec
        self.template_kwargs = dict(template_kwargs or {})
        """Chat-template variables for `chat` (e.g. Qwen3's enable_thinking=False)."""
        self.stats = BackendStats(path="eager")  # decoding has no fast path
        self.device = model.get_input_embeddings().weight.device
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    def generate(self, prompts: Sequence[RenderedPrompt], done: Set[int] = frozenset()) -> Iterator[list[Generation]]:
        """Yield generations batch by batch (length-sorted order). Batches are planned over all
        prompts and those wholly in `done` skipped, so a resumed run decodes the rest exactly
        as the first run would have (same batches, same padding, same sampling seeds)."""
        self.stats.prompt_tokens = int(sum(len(r.token_ids) for r in prompts))
        self.stats.unique_tokens = unique_tokens(prompts)
        for i, batch in enumerate(generate_batches(prompts, self.spec)):
            if all(r.prompt.prompt_id in done for r in batch):
                continue
            # a one-token prompt has nothing to prefill: that batch runs plainly
            share = self.spec.prefix_reuse and min(len(r.token_ids) for r in batch) > 1
            cache = self._prefill(batch) if share else None
            texts = self._generate_ids([r.token_ids for r in batch], [f"prompt {r.prompt.prompt_id}" for r in batch],
                                       seed=self.spec.seed + i, cache=cache)
            yield [Generation(prompt_id=r.prompt.prompt_id, text=t) for r, t in zip(batch, texts)]

    @torch.inference_mode()
    def _prefill(self, batch: Sequence[RenderedPrompt]) -> DynamicCache:
        """KV of every prompt but its last token, through the trie of the batch, right-aligned
        in `[rows, kv_heads, width − 1, head_dim]` per layer (width = the longest prompt)."""
        heads = [RenderedPrompt(r.prompt, "", r.token_ids[:-1]) for r in batch]
        chunk = build_chunk(*sort_prompts(heads), self.spec.batch_tokens, self.spec.max_batch_size)
        store = KVStore.for_chunk(chunk, keep_ends=True)
        decoder, cache_kw = decoder_and_cache_kw(self.model)
        t0 = time.perf_counter()
        for step in chunk.steps:
            run_pass(decoder, cache_kw, chunk, step, store)
            store.ran(chunk, step)
        self.stats.forward_s += time.perf_counter() - t0
        self.stats.tokens_computed += chunk.unique_tokens
        end_of = {r.prompt.prompt_id: i for i, n in enumerate(chunk.nodes) for r in n.ends}
        paths = [store.paths[end_of[h.prompt.prompt_id]] for h in heads]
        width = max(len(h.token_ids) for h in heads)
        return DynamicCache(ddp_cache_data=store.right_aligned(paths, width))

    @torch.inference_mode()
    def _generate_ids(self, seqs: Sequence[np.ndarray], names: Sequence[str], seed: int,
                      cache: DynamicCache | None = None) -> list[str]:
        """Decode `seqs` (left-padded into one batch); `names` name the rows in errors."""
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, width - len(s):] = torch.from_numpy(np.asarray(s, dtype=np.int64))
            mask[i, width - len(s):] = 1
        kwargs: dict[str, Any] = {"max_new_tokens": self.spec.max_new_tokens, "pad_token_id": self.pad_id}
        if cache is not None:  # holds all but the last prompt token of every row
            kwargs[decoder_and_cache_kw(self.model)[1]] = cache
        if self.spec.do_sample:
            torch.manual_seed(seed)  # per batch, so a rerun of the same plan samples the same text
            kwargs.update(do_sample=True, temperature=self.spec.sample_temperature, top_p=1.0, top_k=0)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        finite = FiniteLogits(len(seqs), self.device)
        t0 = time.perf_counter()
        out = self.model.generate(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                                  logits_processor=LogitsProcessorList([finite]), **kwargs)
        self.stats.count_batch(len(seqs), time.perf_counter() - t0)
        finite.check(names)
        return self.tokenizer.batch_decode(out[:, width:], skip_special_tokens=True)

    def chat(self, messages: Sequence[str]) -> list[str]:
        """Answer plain user messages (chat template, generation prompt); used by the LLM judge."""
        seqs = []
        for m in messages:
            text = self.tokenizer.apply_chat_template([{"role": "user", "content": m}], tokenize=False,
                                                      add_generation_prompt=True, **self.template_kwargs)
            seqs.append(np.asarray(self.tokenizer(text, add_special_tokens=False)["input_ids"]))
        order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))
        out: list[str] = [""] * len(seqs)
        step = max(1, self.spec.max_batch_size)
        for start in range(0, len(order), step):
            idx = order[start:start + step]
            for i, text in zip(idx, self._generate_ids([seqs[i] for i in idx], [f"judge request {i}" for i in idx],
                                                       seed=self.spec.seed + start)):
                out[i] = text
        return out
