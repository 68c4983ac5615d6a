"""Hugging Face transformers backend: batched letter log-probs at the last prompt position.

With `prefix_reuse` on (the default) every unique token of the prompts' token trie goes through
the model once (`probe.backends.trie` plans, `probe.backends.treekv` runs a pass on top of the
ancestors' KV cache). Without it a batch is plainly right-padded.

Either way only each prompt's last real hidden state goes through the LM head, in float32: bf16
logits are too coarse for letter margins, and a `[batch, seq, vocab]` tensor (262k vocab for
Gemma 3) would dwarf the model's activations.

`HFScorer.texts()` scores answer texts as continuations on the same model and head
(`probe.backends.text_scorer`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Mapping, Sequence, Set
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from probe.backends.batching import BackendStats
from probe.backends.fastpass import FastLayers, FastSteps, path_name, wanted
from probe.backends.interventions import Edit, EditHook, InterventionPlan, node_edits
from probe.backends.passes import PassRunner
from probe.backends.patch_hooks import ResidualSink, run_patching
from probe.backends.specs import HFBackendSpec
from probe.backends.taps import MechSpec, ResidualTap, resolve_layers
from probe.backends.text_scorer import TextScorer
from probe.backends.treekv import KVStore, decoder_and_cache_kw, run_pass
from probe.backends.trie import TrieChunk, build_chunk, sort_prompts, unique_tokens
from probe.backends.units import plain_chunk, score_chunks
from probe.errors import ProbeInputError
from probe.types import LetterIds, LetterScore, RenderedPrompt

log = logging.getLogger(__name__)


class BatchOutput(NamedTuple):
    logprobs: torch.Tensor
    """`[rows, letters]` full-vocabulary letter log-probs, on CPU."""
    argmax: torch.Tensor
    """`[rows]` full-vocabulary argmax token."""
    argmax_logprob: torch.Tensor
    """`[rows]` its full-vocabulary log-probability, on CPU."""
    prompts: tuple[RenderedPrompt, ...]
    """The prompt of each row."""
    lens: np.ndarray | None = None
    activations: np.ndarray | None = None


class _PatchState(NamedTuple):
    """A patch pass under way: where its sources' residuals go (None: a destination pass)."""

    sink: ResidualSink | None


HEAD_CHECK_TOL = {True: 1e-4, False: 0.5}
"""Letter log-prob tolerance of the head check, nats: float32 (the exactness bound of
docs/concepts/exact-distributions.md#what-always-holds)
and reduced precision (bf16/fp16 rows differ with padding and prefix sharing)."""


class HFScorer:
    """Scores rendered prompts with a loaded `transformers` causal LM."""

    def __init__(self, model: PreTrainedModel, spec: HFBackendSpec, mech: MechSpec | None = None,
                 intervention: InterventionPlan | None = None, fast_steps: FastSteps = FastSteps()) -> None:
        self.model = model
        self.spec = spec
        self.mech = mech or MechSpec()
        self.intervention = intervention or InterventionPlan()
        self.stats = BackendStats()
        self.decoder, self._cache_kw = decoder_and_cache_kw(model)
        head = model.get_output_embeddings()
        self.head_weight = head.weight.detach().float()  # fp32 copy of the head only
        self.head_bias = None if head.bias is None else head.bias.detach().float()
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        self.softcap = getattr(config, "final_logit_softcapping", None)
        self.device = self.decoder.get_input_embeddings().weight.device
        self._head_checked = False
        self._passes = PassRunner(self.stats, self.device)
        self._tap: ResidualTap | None = None
        self.n_layers = len(self.decoder.layers)
        self.capture = resolve_layers(self.mech.capture_layers, self.n_layers)
        self.patch_layers = resolve_layers(self.intervention.patch_layers, self.n_layers, "intervention.layers")
        lens_layers = range(self.n_layers) if self.mech.logit_lens else ()
        if self.mech.active or self.patch_layers:
            self._tap = ResidualTap(self.decoder.layers, [*lens_layers, *self.capture, *self.patch_layers])
        edit_layers = {e.layer for e in self.intervention.steer.values()} | set(self.patch_layers)
        self._edit_hook = EditHook(self.decoder.layers, sorted(edit_layers)) if edit_layers else None
        # taps and edits hook every layer's full output: they keep the eager path
        hooked = self._tap is not None or self._edit_hook is not None
        fast = wanted(spec.fast_path, self.decoder.get_input_embeddings().weight) and not hooked
        self._fast = FastLayers.of(self.decoder, fast_steps) if fast else None
        self.stats.path = path_name(self._fast)
        self._node_edits: Mapping[int, Edit] = {}  # the running chunk's edits, by node
        self._patch: _PatchState | None = None  # set by `patch_pass` while its passes run

    def score(
        self, prompts: Sequence[RenderedPrompt], letters: LetterIds, done: Set[int] = frozenset()
    ) -> Iterator[list[LetterScore]]:
        """Yield scores pass by pass (planned order); callers key them by `prompt_id`.

        Chunks are planned over all prompts (`probe.backends.units`), then those whose prompts
        are all in `done` are skipped: a resumed run, or one shard of a run, computes its chunks
        exactly as one uninterrupted run of every prompt would."""
        letter_ids = torch.tensor(letters.ids, device=self.head_weight.device)
        steer = self.intervention.steer
        chunks = score_chunks(prompts, self.spec, {pid: e.sharing for pid, e in steer.items()} if steer else None)
        self.stats.prompt_tokens = int(sum(len(r.token_ids) for r in prompts))
        self.stats.unique_tokens = unique_tokens(prompts)
        if chunks and not self._head_checked:
            # The first chunk of the plan, not of the remaining work: a resumed run checks the
            # same prompts as the run it resumes.
            self._check_head(chunks[0], letter_ids)
        for chunk in chunks:
            if all(r.prompt.prompt_id in done for r in chunk.prompts):
                continue
            yield from self._run_chunk(chunk, letter_ids, steer)

    def patch(self, prompts: Sequence[RenderedPrompt], letters: LetterIds, pairs: Sequence[tuple[int, int]],
              done: Set[int] = frozenset()) -> Iterator[tuple[list[int], np.ndarray]]:
        """Activation patching (`probe.backends.patch_hooks`): yields `(pair indices, [pair,
        layer, letter] log-probs)` group by group; groups whose pairs are all in `done` are skipped."""
        yield from run_patching(self, prompts, letters, pairs, done)

    def texts(self) -> TextScorer:
        """A scorer of answer texts as continuations (`probe.backends.text_scorer`) on this model, with
        this scorer's spec and float32 head. Interventions do not reach it, so it refuses them
        rather than score the unedited model under an edited run's name."""
        if self.intervention.steer or self.patch_layers:
            raise ProbeInputError("text scoring: interventions (steering, patching) apply to letter scores only; "
                                  "expected intervention=none with answer-text scoring")
        return TextScorer(self.model, self._head, int(self.head_weight.shape[0]), self.spec,
                          HEAD_CHECK_TOL[self.model.dtype == torch.float32], self._fast)

    def patch_pass(self, chunk: TrieChunk, letter_ids: torch.Tensor, edits: Mapping[int, Edit] | None = None,
                   sink: ResidualSink | None = None) -> Iterator[list[LetterScore]]:
        """A chunk's passes for activation patching (`probe.backends.patch_hooks.PatchScorer`): its
        rows are no prompts of the run (no lens, no activations); with `sink`, the residuals of
        the prompts that end in it, after each patch layer, are left there."""
        self._patch = _PatchState(sink)
        try:
            yield from self._run_chunk(chunk, letter_ids, edits)
        finally:
            self._patch = None

    def _run_chunk(self, chunk: TrieChunk, letter_ids: torch.Tensor,
                   edits: Mapping[int, Edit] | None = None) -> Iterator[list[LetterScore]]:
        """Run a chunk's passes; `edits` (by prompt id) are applied to the nodes they reach."""
        store = KVStore.for_chunk(chunk, buffers=self._passes.buffers)
        self._node_edits = node_edits(chunk, edits) if edits else {}
        try:
            for step in chunk.steps:
                yield from self._run(chunk, step, store, letter_ids)
                store.ran(chunk, step)
        finally:
            self._node_edits = {}

    def _run(self, chunk: TrieChunk, rows: Sequence[int], store: KVStore,
             letter_ids: torch.Tensor) -> Iterator[list[LetterScore]]:
        """Run one pass (`PassRunner`: halved on out-of-memory, results unchanged)."""
        for out in self._passes.run(rows, lambda part: self.forward_pass(chunk, part, store, letter_ids)):
            if out is not None:
                yield _letter_scores(out, letter_ids)

    @torch.inference_mode()
    def forward_pass(self, chunk: TrieChunk, rows: Sequence[int], store: KVStore,
                     letter_ids: torch.Tensor) -> BatchOutput | None:
        """Run a pass; letter log-probs (and lens / activations when asked) of the prompts
        that end in it, or None when none does."""
        nodes = [chunk.nodes[i] for i in rows]
        keep = [j for j, n in enumerate(nodes) if n.ends]
        if keep and self._tap is not None:
            self._tap.arm(torch.tensor([len(n.tokens) - 1 for n in nodes]))
        if self._node_edits and self._edit_hook is not None:
            self._edit_hook.arm(chunk, rows, self._node_edits)
        try:
            reads = (torch.tensor(keep, dtype=torch.long), torch.tensor([len(nodes[j].tokens) - 1 for j in keep],
                                                                        dtype=torch.long))
            hidden, last = run_pass(self.decoder, self._cache_kw, chunk, rows, store, self._fast,
                                    tuple(t.to(self.device) for t in reads))
        finally:
            if self._tap is not None:
                self._tap.disarm()
            if self._edit_hook is not None:
                self._edit_hook.disarm()
        self.stats.count_pass([len(n.tokens) for n in nodes], int(last.max() + 1))
        if not keep:
            return None
        # a node where several identical prompts end gives each of them the same row
        owners = [(q, r) for q, j in enumerate(keep) for r in nodes[j].ends]
        sel = torch.tensor(keep, device=hidden.device)
        logits = self._head(hidden[sel, last.to(hidden.device)[sel]])
        pick = torch.tensor([q for q, _ in owners], device=logits.device)
        full = F.log_softmax(logits, dim=-1)
        argmax = logits.argmax(dim=-1)
        out = BatchOutput(full[:, letter_ids][pick].cpu(), argmax[pick],
                          full.gather(1, argmax[:, None])[:, 0][pick].cpu(), tuple(r for _, r in owners))
        sink = None if self._patch is None else self._patch.sink
        if sink is not None and self._tap is not None:  # patching sources: residuals to write elsewhere
            for q, r in owners:
                sink.residuals[r.prompt.prompt_id] = torch.stack(
                    [self._tap.captured[layer][keep[q]] for layer in self.patch_layers]).float().cpu()
        if self.mech.active and self._patch is None:  # patch passes' rows are no prompts of the run
            out = self._mech_outputs(out, letter_ids, sel[pick])
        return out

    def _mech_outputs(self, out: BatchOutput, letter_ids: torch.Tensor, rows: torch.Tensor) -> BatchOutput:
        """The lens applies the final norm and the fp32 head to each layer's residual stream
        (at `rows` of the pass), so its last layer is the scores' computation exactly."""
        assert self._tap is not None
        captured = {layer: h[rows.to(h.device)] for layer, h in self._tap.captured.items()}
        lens = acts = None
        if self.mech.logit_lens:
            norm = self.decoder.norm
            lens = torch.stack([F.log_softmax(self._head(norm(captured[layer])), dim=-1)[:, letter_ids]
                                for layer in range(self.n_layers)], dim=1).cpu().numpy()
        if self.capture:
            acts = torch.stack([captured[layer] for layer in self.capture], dim=1).float().cpu().numpy()
        return out._replace(lens=lens, activations=acts)

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        """LM head in float32, with Gemma-style final logit softcapping where configured."""
        logits = F.linear(hidden.to(self.head_weight.device).float(), self.head_weight, self.head_bias)
        if self.softcap:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits

    @torch.inference_mode()
    def _check_head(self, chunk: TrieChunk, letter_ids: torch.Tensor) -> None:
        """Once per run: the scoring path must give what the model's own forward gives.

        Up to three prompts of `chunk` (the first two in trie order, which share the longest
        path, and the last, which branches off early) go through the exact path scoring uses
        (trie passes on ancestor KV, padding, gathered last position, fp32 head, softcapping)
        and, one at a time, through `model(input_ids)`. What scoring stores must agree: each
        letter's full-vocabulary log-prob (within `HEAD_CHECK_TOL` nats) and the argmax token
        (unless the reference's top two are tied within that tolerance). This guards against
        architectures whose `forward` does more after the decoder than the head and softcapping
        replicated here.

        A disagreement is measured once more before the run stops: a missing piece of the head
        path disagrees every time, while a rare transient gap on a loaded CPU (seen once, 4.5e-4
        nats, in dozens of runs; never reproduced) must not kill one job of a large array. Every
        measurement goes to the manifest (`backend.head_check`). Only finite values are
        compared: a NaN or +inf on either path (a non-finite weight, an overflow) stops the run at
        once, since NaN compares false with any tolerance and would otherwise pass as gap 0.
        """
        self._head_checked = True
        picked = list({id(r): r for r in (*chunk.prompts[:2], chunk.prompts[-1])}.values())
        if self.spec.prefix_reuse:
            ordered, lcp = sort_prompts(picked)
            probe_chunk = build_chunk(ordered, lcp, self.spec.batch_tokens, self.spec.max_batch_size)
        else:
            probe_chunk = plain_chunk(picked)
        tol = HEAD_CHECK_TOL[self.model.dtype == torch.float32]
        attempts = []
        ids = [int(r.prompt.prompt_id) for r in probe_chunk.prompts]
        for _ in range(2):
            gap, argmax_ok, finite = self._head_gap(probe_chunk, letter_ids, tol)
            attempts.append({"max_letter_gap": gap, "argmax_agrees": argmax_ok, "finite": finite})
            if not finite:
                raise ProbeInputError(
                    f"model {type(self.model).__name__}: letter log-probs of the head check's prompts {ids} are not "
                    "finite (NaN or +inf), so a weight or an activation is; check the checkpoint, or load a float16 "
                    "model in bfloat16 or float32 (model.dtype)")
            if gap <= tol and argmax_ok:
                break
            log.warning("head check: scoring path and model forward differ by %.3g nats (tolerance %g); measuring "
                        "again", gap, tol)
        self.stats.head_check = {"prompt_ids": ids, **attempts[-1], "tolerance": tol, "attempts": attempts}
        if gap > tol or not argmax_ok:
            raise ProbeInputError(
                f"model {type(self.model).__name__}: the HF backend's scoring path disagrees with the model's forward "
                f"(letter log-probs differ by up to {gap:.3g} nats, tolerance {tol:g}; argmax agrees: {argmax_ok}; "
                f"measured {len(attempts)} times); this architecture needs support in probe.backends.hf"
            )

    def _head_gap(self, chunk: TrieChunk, letter_ids: torch.Tensor, tol: float) -> tuple[float, bool, bool]:
        """Largest letter log-prob gap between the scoring path and `model(input_ids)` over the
        chunk's prompts, whether every argmax token agrees (or the reference is tied), and
        whether every letter log-prob of both paths is finite or −inf (`_letter_gap`)."""
        store = KVStore.for_chunk(chunk, buffers=self._passes.buffers)
        outs = []
        with self.stats.uncounted():  # a check, not scoring work
            for step in chunk.steps:
                out = self.forward_pass(chunk, step, store, letter_ids)
                store.ran(chunk, step)
                outs += [] if out is None else [(r, out.logprobs[k], out.argmax[k]) for k, r in enumerate(out.prompts)]
        gap, argmax_ok = 0.0, True
        for r, logprobs, argmax in outs:
            ids = torch.from_numpy(r.token_ids.astype(np.int64))[None].to(self.device)
            ref = F.log_softmax(self.model(input_ids=ids).logits[0, -1].float(), dim=-1).cpu()
            letter_gap = _letter_gap(logprobs, ref[letter_ids.cpu()])
            if letter_gap is None:
                return math.inf, False, False
            gap = max(gap, letter_gap)
            top2 = ref.topk(2).values
            argmax_ok &= int(argmax) == int(ref.argmax()) or float(top2[0] - top2[1]) <= tol
        return gap, bool(argmax_ok), True


def _letter_gap(scored: torch.Tensor, ref: torch.Tensor) -> float | None:
    """Largest |scored − ref| over the letters, finite values only; None when either side has a
    NaN or +inf. A −inf (a letter of probability 0 in float32) agrees only with a −inf."""
    if not all(bool((torch.isfinite(t) | torch.isneginf(t)).all()) for t in (scored, ref)):
        return None
    if bool((torch.isneginf(scored) != torch.isneginf(ref)).any()):
        return math.inf
    finite = torch.isfinite(ref)
    return float((scored[finite] - ref[finite]).abs().max()) if bool(finite.any()) else 0.0


def _letter_scores(out: BatchOutput, letter_ids: torch.Tensor) -> list[LetterScore]:
    is_letter = (out.argmax[:, None] == letter_ids[None, :].to(out.argmax.device)).any(dim=1)
    return [LetterScore(prompt_id=r.prompt.prompt_id, letter_logprobs=tuple(lp), greedy_valid=bool(v),
                        lens=None if out.lens is None else out.lens[k],
                        activations=None if out.activations is None else out.activations[k],
                        argmax_token_id=int(a), argmax_logprob=float(alp))
            for k, (r, lp, v, a, alp) in enumerate(zip(out.prompts, out.logprobs.tolist(), is_letter.tolist(),
                                                      out.argmax.tolist(), out.argmax_logprob.tolist()))]

