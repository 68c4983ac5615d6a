"""Hugging Face transformers backend: batched letter log-probs at the last prompt position.

Two passes per batch when `prefix_reuse` is on (the default):
1. the shared prefix of each group, once per group (right-padded, natural positions);
2. the rotated suffixes of all rows, on top of that KV cache expanded over the rows.
Between them each group's prefix K/V are moved to the right end of the prefix block, so every
row reads `[pad… prefix | suffix …pad]`: distances between real tokens are the same as in the
unpadded prompt, which keeps sliding-window layers (Gemma 3) exact, and explicit position ids
keep RoPE exact. Without prefix reuse a batch is plainly right-padded.

Either way only each row's last real hidden state goes through the LM head, in float32: bf16
logits are too coarse for letter margins, and a `[batch, seq, vocab]` tensor (262k vocab for
Gemma 3) would dwarf the model's activations.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Iterator, Sequence, Set
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from transformers import DynamicCache

from probe.backends.batching import BackendStats, plan_batches
from probe.backends.prefix import PrefixGroup, group_by_prefix, plan_prefix_batches
from probe.backends.specs import HFBackendSpec
from probe.backends.taps import MechSpec, ResidualTap, resolve_layers
from probe.errors import ProbeInputError
from probe.types import LetterIds, LetterScore, RenderedPrompt

log = logging.getLogger(__name__)


class BatchOutput(NamedTuple):
    logprobs: torch.Tensor
    """`[rows, letters]` full-vocabulary letter log-probs, on CPU."""
    argmax: torch.Tensor
    """`[rows]` full-vocabulary argmax token."""
    lens: np.ndarray | None = None
    activations: np.ndarray | None = None


HEAD_CHECK_TOL = {True: 1e-4, False: 0.5}
"""Letter log-prob tolerance of the head check, nats: float32 (the exactness bound of SPEC §7)
and reduced precision (bf16/fp16 rows differ with padding and prefix sharing)."""


class HFScorer:
    """Scores rendered prompts with a loaded `transformers` causal LM."""

    def __init__(self, model: Any, spec: HFBackendSpec, mech: MechSpec | None = None) -> None:
        self.model = model
        self.spec = spec
        self.mech = mech or MechSpec()
        self.stats = BackendStats()
        self.decoder = model.get_decoder()
        head = model.get_output_embeddings()
        self.head_weight = head.weight.detach().float()  # fp32 copy of the head only
        self.head_bias = None if head.bias is None else head.bias.detach().float()
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.softcap = getattr(config, "final_logit_softcapping", None)
        self.device = self.decoder.get_input_embeddings().weight.device
        self._head_checked = False
        self._row_cap: int | None = None  # set after an out-of-memory: never retry that many rows
        # transformers renamed `past_key_values` to `cache` (5.2x); use whichever this one takes
        params = inspect.signature(self.decoder.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._tap: ResidualTap | None = None
        if self.mech.active:
            self.n_layers = len(self.decoder.layers)
            self.capture = resolve_layers(self.mech.capture_layers, self.n_layers)
            lens_layers = range(self.n_layers) if self.mech.logit_lens else ()
            self._tap = ResidualTap(self.decoder.layers, [*lens_layers, *self.capture])

    def score(
        self, prompts: Sequence[RenderedPrompt], letters: LetterIds, done: Set[int] = frozenset()
    ) -> Iterator[list[LetterScore]]:
        """Yield scores batch by batch (length-sorted order); callers key them by `prompt_id`.

        Batches are planned over all prompts, then those whose prompts are all in `done` are
        skipped: a resumed run computes the remaining batches exactly as the first run would."""
        letter_ids = torch.tensor(letters.ids, device=self.head_weight.device)
        if self.spec.prefix_reuse:
            batches = plan_prefix_batches(group_by_prefix(prompts), self.spec.batch_tokens, self.spec.max_batch_size)
        else:
            batches = [[PrefixGroup(rows=tuple(b), prefix_len=0)]
                       for b in plan_batches(prompts, self.spec.batch_tokens, self.spec.max_batch_size)]
        if batches and not self._head_checked:
            # The first group of the plan, not of the remaining work: a resumed run checks the
            # same prompts as the run it resumes.
            self._check_head(batches[0][0], letter_ids)
        for batch in batches:
            if all(r.prompt.prompt_id in done for g in batch for r in g.rows):
                continue
            yield from self._run(batch, letter_ids)

    def _run(self, batch: list[PrefixGroup], letter_ids: torch.Tensor) -> Iterator[list[LetterScore]]:
        """Score one batch; on out-of-memory split it in half and retry (results unchanged)."""
        n_rows = sum(len(g.rows) for g in batch)
        if n_rows > 1 and self._row_cap is not None and n_rows > self._row_cap:
            for half in _halves(batch):
                yield from self._run(half, letter_ids)
            return
        t0 = time.perf_counter()
        try:
            out = self._forward(batch, letter_ids)
        except torch.OutOfMemoryError:
            if n_rows == 1:
                raise
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            self.stats.oom_splits += 1
            self._row_cap = max(1, n_rows // 2)
            for half in _halves(batch):
                yield from self._run(half, letter_ids)
            return
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.stats.count_batch(n_rows, time.perf_counter() - t0)
        rows = [r for g in batch for r in g.rows]
        is_letter = (out.argmax[:, None] == letter_ids[None, :]).any(dim=1)
        yield [LetterScore(prompt_id=r.prompt.prompt_id, letter_logprobs=tuple(lp), greedy_valid=bool(v),
                           lens=None if out.lens is None else out.lens[i],
                           activations=None if out.activations is None else out.activations[i])
               for i, (r, lp, v) in enumerate(zip(rows, out.logprobs.tolist(), is_letter.tolist()))]

    @torch.inference_mode()
    def _forward(self, batch: list[PrefixGroup], letter_ids: torch.Tensor) -> BatchOutput:
        """Letter log-probs (and lens / activations when asked) for every row of a batch."""
        rows = [r for g in batch for r in g.rows]
        plens = [g.prefix_len for g in batch for _ in g.rows]
        if max(plens) == 0:
            hidden, last = self._plain(rows)
        else:
            hidden, last = self._with_prefix(batch)
        self.stats.tokens_computed += sum(g.prefix_len + sum(len(r.token_ids) - g.prefix_len for r in g.rows)
                                          for g in batch)
        logits = self._head(hidden[torch.arange(len(rows), device=hidden.device), last.to(hidden.device)])
        logprobs = F.log_softmax(logits, dim=-1)
        out = BatchOutput(logprobs[:, letter_ids].cpu(), logits.argmax(dim=-1))
        if self._tap is not None:
            out = self._mech_outputs(out, letter_ids)
        return out

    def _mech_outputs(self, out: BatchOutput, letter_ids: torch.Tensor) -> BatchOutput:
        """The lens applies the final norm and the fp32 head to each layer's residual stream, so
        its last layer is the scores' computation exactly."""
        assert self._tap is not None
        captured = self._tap.captured
        lens = acts = None
        if self.mech.logit_lens:
            norm = self.decoder.norm
            lens = torch.stack([F.log_softmax(self._head(norm(captured[layer])), dim=-1)[:, letter_ids]
                                for layer in range(self.n_layers)], dim=1).cpu().numpy()
        if self.capture:
            acts = torch.stack([captured[layer] for layer in self.capture], dim=1).float().cpu().numpy()
        return out._replace(lens=lens, activations=acts)

    def _plain(self, rows: Sequence[RenderedPrompt]) -> tuple[torch.Tensor, torch.Tensor]:
        ids, mask, lengths = _right_pad([r.token_ids for r in rows])
        self._arm(lengths - 1)
        out = self.decoder(input_ids=ids.to(self.device), attention_mask=mask.to(self.device), use_cache=False)
        self._disarm()
        return out.last_hidden_state, lengths - 1

    def _with_prefix(self, batch: list[PrefixGroup]) -> tuple[torch.Tensor, torch.Tensor]:
        dev = self.device
        pids, pmask, plens = _right_pad([g.rows[0].token_ids[:g.prefix_len] for g in batch])
        out = self.decoder(input_ids=pids.to(dev), attention_mask=pmask.to(dev),
                           **{self._cache_kw: DynamicCache()}, use_cache=True)
        p_max = pids.shape[1]
        row_group = torch.tensor([i for i, g in enumerate(batch) for _ in g.rows], device=dev)
        prefix_cache = out.cache if hasattr(out, "cache") else out.past_key_values
        layers = []
        for layer in prefix_cache.layers:
            layers.append((_right_align(layer.keys, plens, row_group), _right_align(layer.values, plens, row_group)))
        cache = DynamicCache(ddp_cache_data=layers)
        suffixes = [r.token_ids[g.prefix_len:] for g in batch for r in g.rows]
        sids, smask, slens = _right_pad(suffixes)
        row_plen = plens.to(dev)[row_group]
        prefix_mask = (torch.arange(p_max, device=dev)[None, :] >= (p_max - row_plen)[:, None]).long()
        mask = torch.cat([prefix_mask, smask.to(dev)], dim=1)
        positions = row_plen[:, None] + torch.arange(sids.shape[1], device=dev)[None, :]
        self._arm(slens - 1)
        out = self.decoder(input_ids=sids.to(dev), attention_mask=mask, position_ids=positions,
                           **{self._cache_kw: cache}, use_cache=True)
        self._disarm()
        return out.last_hidden_state, slens - 1

    def _arm(self, last: torch.Tensor) -> None:
        if self._tap is not None:
            self._tap.arm(last)

    def _disarm(self) -> None:
        if self._tap is not None:
            self._tap.disarm()

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        """LM head in float32, with Gemma-style final logit softcapping where configured."""
        logits = F.linear(hidden.to(self.head_weight.device).float(), self.head_weight, self.head_bias)
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    @torch.inference_mode()
    def _check_head(self, group: PrefixGroup, letter_ids: torch.Tensor) -> None:
        """Once per run: the scoring path must give what the model's own forward gives.

        Up to two prompts of `group` go through the exact path scoring uses (shared prefix, padding,
        gathered last position, fp32 head, softcapping) and, one at a time, through
        `model(input_ids)`. What scoring stores must agree: each letter's full-vocabulary log-prob
        (within `HEAD_CHECK_TOL` nats) and the argmax token (unless the reference's top two are
        tied within that tolerance). This guards against architectures whose `forward` does more
        after the decoder than the head and softcapping replicated here.

        A disagreement is measured once more before the run stops: a missing piece of the head
        path disagrees every time, while a rare transient gap on a loaded CPU (seen once, 4.5e-4
        nats, in dozens of runs; never reproduced) must not kill one job of a large array. Every
        measurement goes to the manifest (`backend.head_check`).
        """
        self._head_checked = True
        rows = group.rows[:2]
        tol = HEAD_CHECK_TOL[self.model.dtype == torch.float32]
        attempts = []
        for _ in range(2):
            gap, argmax_ok = self._head_gap(PrefixGroup(rows=rows, prefix_len=group.prefix_len), letter_ids, tol)
            attempts.append({"max_letter_gap": gap, "argmax_agrees": argmax_ok})
            if gap <= tol and argmax_ok:
                break
            log.warning("head check: scoring path and model forward differ by %.3g nats (tolerance %g); measuring "
                        "again", gap, tol)
        self.stats.head_check = {"prompt_ids": [int(r.prompt.prompt_id) for r in rows], **attempts[-1],
                                 "tolerance": tol, "attempts": attempts}
        if gap > tol or not argmax_ok:
            raise ProbeInputError(
                f"model {type(self.model).__name__}: the HF backend's scoring path disagrees with the model's forward "
                f"(letter log-probs differ by up to {gap:.3g} nats, tolerance {tol:g}; argmax agrees: {argmax_ok}; "
                f"measured {len(attempts)} times); this architecture needs support in probe.backends.hf"
            )

    def _head_gap(self, group: PrefixGroup, letter_ids: torch.Tensor, tol: float) -> tuple[float, bool]:
        """Largest letter log-prob gap between the scoring path and `model(input_ids)` over the
        group's rows, and whether every row's argmax token agrees (or the reference is tied)."""
        before = self.stats.tokens_computed
        ours = self._forward([group], letter_ids)
        self.stats.tokens_computed = before  # a check, not scoring work
        gap, argmax_ok = 0.0, True
        for i, r in enumerate(group.rows):
            ids = torch.from_numpy(r.token_ids.astype(np.int64))[None].to(self.device)
            ref = F.log_softmax(self.model(input_ids=ids).logits[0, -1].float(), dim=-1).cpu()
            gap = max(gap, (ours.logprobs[i] - ref[letter_ids.cpu()]).abs().max().item())
            top2 = ref.topk(2).values
            argmax_ok &= int(ours.argmax[i]) == int(ref.argmax()) or float(top2[0] - top2[1]) <= tol
        return gap, bool(argmax_ok)


def _right_pad(seqs: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`(ids [n, width], mask [n, width], lengths [n])`, zeros after each sequence."""
    lengths = torch.tensor([len(s) for s in seqs])
    ids = torch.zeros((len(seqs), int(lengths.max())), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.from_numpy(np.asarray(s, dtype=np.int64))
    mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).long()
    return ids, mask, lengths


def _right_align(kv: torch.Tensor, plens: torch.Tensor, row_group: torch.Tensor) -> torch.Tensor:
    """`[groups, heads, P, d]` right-padded K or V → `[rows, heads, P, d]` right-aligned per row.

    Padding slots become zeros; the attention mask hides them, and finite zeros (unlike the
    NaNs a fully masked query can produce) cannot leak into a softmax.
    """
    p_max = kv.shape[2]
    aligned = torch.zeros_like(kv)
    for g, n in enumerate(plens.tolist()):
        aligned[g, :, p_max - n:] = kv[g, :, :n]
    return aligned.index_select(0, row_group)


def _halves(batch: list[PrefixGroup]) -> list[list[PrefixGroup]]:
    if len(batch) > 1:
        return [batch[: len(batch) // 2], batch[len(batch) // 2:]]
    g = batch[0]
    mid = len(g.rows) // 2
    return [[PrefixGroup(rows=g.rows[:mid], prefix_len=g.prefix_len)],
            [PrefixGroup(rows=g.rows[mid:], prefix_len=g.prefix_len)]]
