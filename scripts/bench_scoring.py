"""Letter-scoring throughput on one fixed set of DiSCo-protocol prompts.

    python scripts/bench_scoring.py                        # CPU: probe vs probe-noprefix vs lm-eval, SmolLM2-135M
    python scripts/bench_scoring.py --items 6              # the first 6 demo items (312 prompts)
    python scripts/bench_scoring.py --engines probe,vllm --vllm-python .venv-vllm/bin/python
    python scripts/bench_scoring.py --text hybrid --items 4  # answer texts as continuations: probe vs lm-eval
    python scripts/bench_scoring.py --mixes demo,short,long --items 8  # probe vs lm-eval per item mix
    python scripts/bench_scoring.py --mixes demo,short,long --items 4 --runs 3  # medians of 3 runs, in turn
    python scripts/bench_scoring.py --mixes demo,short,short177 --items 4 --runs 3 --engines probe,probe-fast,lm-eval
    python scripts/bench_scoring.py --mixes demo,short,long,short177 --items 2 --engines probe,probe-fast,float64
                                                           # each path's |Δ log p| against a float64 forward
    python scripts/bench_scoring.py --memory               # peak RSS at 1× and 4× the prompts (tiny model)
    python scripts/bench_scoring.py --generate --items 2   # generation mode: trie prefill vs plain batches
    python scripts/bench_scoring.py --fast-steps --mixes short,short177 --items 2 --runs 3 --threads 1
                                                           # backend.fast_path step by step, CPU time
    python scripts/bench_scoring.py --gpu [--tokenizer DIR] # random Gemma-3-12B text model, bf16, 304 × 52 prompts
    python scripts/bench_scoring.py --gpu --small          # dry run of the GPU mode on a 2-layer model (CPU ok)

Each engine runs in its own process (so peak RSS is its own), scores the same rendered token
ids, and saves its letter log-probs; the parent prints prompts/s, the ratios to lm-eval, and
the max |Δ log p| between engines (with engine `float64`, each engine's max and mean |Δ log p|
against a float64 forward of the model on `--reference` prompts spread over the set, and the
default rule: the fast path within 1.5× the eager path's), the trie limit (unique / prompt tokens) and the compute
limit: the unique tokens' forward FLOPs at this machine's measured fp32 GEMM peak. lm-eval
(`pip install lm-eval`) is needed only for its column; install it in a separate environment,
not probe's.

`--text hybrid|cloze` scores the options' texts as continuations instead of the letters (the
answer-text reading, `backend.mode=text`): probe's text scorer on the prompt trie against
lm-eval `loglikelihood` requests `(text prompt, continuation)` on the same strings. There a
"prompt" is a text prompt with its four continuations, and its tokens are those of the four
prompt + continuation sequences (what lm-eval computes).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
from scoring_workers import PROBES, load_smollm2, worker  # the engines, each run in a process of its own

ENGINES = ("probe", "probe-fast", "probe-noprefix", "lm-eval", "vllm", "float64")
MIXES = ("demo", "short", "long", "short177")  # probe.benches.disco.perf.BENCH_MIXES; arguments are parsed before importing probe


def spawn(engine: str, args: argparse.Namespace, out: Path, python: str, extra: list[str]) -> dict:
    cmd = [python, __file__, "--worker", engine, "--out", str(out), "--items", str(args.items or 0),
           "--batch-tokens", str(args.batch_tokens), "--max-batch-size", str(args.max_batch_size),
           "--lm-eval-batch", str(args.lm_eval_batch), "--threads", str(args.threads), "--mix", args.mix, *extra,
           "--gemm-seconds", str(args.gemm_seconds), "--reference", str(args.reference),
           *(["--vllm-block-size", str(args.vllm_block_size)] if args.vllm_block_size else [])]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "2"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{engine} failed:\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1].removeprefix("RESULT "))


def mixes(args: argparse.Namespace) -> None:
    """`--mixes`: the comparison on each item mix in turn, then one line per mix and trie engine
    (`probe`; `probe-fast`, the fast path, on a row of its own)."""
    summary = []
    for mix in args.mixes.split(","):
        print(f"\n## mix {mix}\n", flush=True)
        args.mix = mix
        summary.append((mix, compare(args)))
    print("\n| mix | prompts | prompt tokens / prompt | trie limit | probe tokens computed / limit | probe prompts/s "
          "| of compute limit | of best-GEMM limit | of it in CPU time | CPU s | setup s (fusing, packing; nothing compiles) | lm-eval prompts/s "
          "| probe / lm-eval (median of pairs) "
          "| one-row passes (tokens, time) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for mix, r in summary:
        lm = r.get("lm-eval")
        for engine in (e for e in PROBES if e in r):
            p, sh = r[engine], r[engine]["passes"]
            name = mix if engine == "probe" else f"{mix}, fast path"
            print(f"| {name} | {p['n_prompts']} | {p['prompt_tokens'] / p['n_prompts']:.0f} | "
                  f"{p['unique_tokens'] / p['prompt_tokens']:.3f} | {p['tokens_computed'] / p['unique_tokens']:.3f} | "
                  f"{p['prompts_per_s']:.2f} | {p['prompts_per_s'] / compute_limit(p):.0%} | "
                  f"{p['prompts_per_s'] / best_limit(p):.0%} | "
                  f"{p['unique_flops'] / p['peak_flops_cpu'] / p['cpu_seconds']:.0%} | "
                  f"{p['cpu_seconds']:.1f} | {p['setup_seconds']:.2f} | "
                  f"{lm['prompts_per_s'] if lm else float('nan'):.2f} | "
                  f"{p.get('vs_lm_eval', p['prompts_per_s'] / lm['prompts_per_s'] if lm else float('nan')):.2f}× | "
                  f"{sh['one_row']}/{sh['n_passes']} ({sh['one_row_token_share']:.1%}, "
                  f"{sh['one_row_time_share']:.1%}) |")
        if "vs_probe" in r.get("probe-fast", {}):
            f = r["probe-fast"]
            print(f"|  | fast path / eager, median of pairs: wall {f['vs_probe']:.3f}×, CPU time "
                  f"{f['cpu_vs_probe']:.3f}× |")


def compute_limit(r: dict) -> float:
    """Prompts/s if the trie's unique tokens ran at this machine's fp32 GEMM peak (a probe result):
    torch's default BLAS on 2048² products. The mixes table also gives the share in CPU time
    (`peak_flops_cpu`: the GEMM rate per second of this process's CPU), which other jobs on a
    shared machine stretch much less than wall time."""
    return r["n_prompts"] * r["peak_flops"] / r["unique_flops"]


def best_limit(r: dict) -> float:
    """`compute_limit` at the faster of the two GEMMs this machine offers torch: the default BLAS
    or oneDNN on a packed weight (the fast path's products), both on 2048² products."""
    return r["n_prompts"] * np.nanmax([r["peak_flops"], r.get("peak_flops_onednn", np.nan)]) / r["unique_flops"]


def compare(args: argparse.Namespace) -> dict[str, dict]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-scoring-"))
    results, logprobs = {}, {}
    runs: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    for _ in range(args.runs):  # engines in turn, A B A B …: a drifting machine hits all alike
        for engine in args.engines.split(","):
            python = {"lm-eval": args.lm_eval_python, "vllm": args.vllm_python}.get(engine, sys.executable)
            r = spawn(engine, args, tmp / f"{engine}.npy", python, ["--text", args.text] if args.text else [])
            runs.setdefault(engine, []).append(r["prompts_per_s"])
            cpu.setdefault(engine, []).append(r.get("cpu_seconds", float("nan")))
            results[engine] = {**r, "prompts_per_s": float(np.median(runs[engine])),
                               "cpu_seconds": float(np.median(cpu[engine]))}
            logprobs[engine] = np.load(tmp / f"{engine}.npy")
            print(f"{engine:15s} {r['prompts_per_s']:8.2f} prompts/s", flush=True)
    ref = logprobs.pop("float64", None)  # a reference, not an engine: no speed figures
    results.pop("float64", None)
    base = results.get("lm-eval")
    if args.runs > 1:
        print(f"\nmedians of {args.runs} runs each; run by run: "
              + "; ".join(f"{e} {', '.join(f'{v:.2f}' for v in vs)}" for e, vs in runs.items()))
        for engine in (e for e in PROBES if e in runs and base):
            pairs = [a / b for a, b in zip(runs[engine], runs["lm-eval"])]
            results[engine]["vs_lm_eval"] = float(np.median(pairs))
            print(f"{engine} / lm-eval pair by pair: {', '.join(f'{x:.2f}×' for x in pairs)} "
                  f"(median {np.median(pairs):.2f}×)")
    if all(e in runs for e in PROBES):  # the fast path's gain, pair by pair (CPU time: steadier when shared)
        wall = [a / b for a, b in zip(runs["probe-fast"], runs["probe"])]
        cpu_gain = [b / a for a, b in zip(cpu["probe-fast"], cpu["probe"])]
        results["probe-fast"].update(vs_probe=float(np.median(wall)), cpu_vs_probe=float(np.median(cpu_gain)))
        print(f"probe-fast / probe pair by pair: wall {', '.join(f'{x:.3f}×' for x in wall)}; CPU time "
              f"{', '.join(f'{x:.3f}×' for x in cpu_gain)} "
              f"(medians {np.median(wall):.3f}×, {np.median(cpu_gain):.3f}×)")
    print(f"\n{results[next(iter(results))]['n_prompts']} prompts, {args.threads or 'default'} threads\n")
    print("| engine | prompts/s | tokens computed / prompt tokens | peak RSS MiB | vs lm-eval |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        ratio = f"{r['prompts_per_s'] / base['prompts_per_s']:.2f}×" if base else "–"
        print(f"| {name} | {r['prompts_per_s']:.2f} | {r['tokens_computed'] / r['prompt_tokens']:.2f} | "
              f"{r['peak_rss_mb']:.0f} | {ratio} |")
    first = results[next(iter(results))]
    print(f"\ntrie limit: {first['unique_tokens'] / first['prompt_tokens']:.3f} of prompt tokens are unique")
    for engine in (e for e in PROBES if e in results):
        r = results[engine]
        limit = compute_limit(r)
        print(f"compute limit: {limit:.2f} prompts/s = {r['unique_flops'] / r['n_prompts'] / 1e9:.1f} GFLOP per prompt "
              f"(unique tokens only) at {r['peak_flops'] / 1e9:.0f} GFLOP/s (fp32 GEMM peak, {args.threads or 'default'} "
              f"threads); {engine} reaches {r['prompts_per_s'] / limit:.0%} of it, padding "
              f"{r['padded_tokens'] / r['tokens_computed'] - 1:.1%} over the unique tokens")
        if "peak_flops_onednn" in r:
            best = best_limit(r)
            print(f"best-GEMM limit: {best:.2f} prompts/s at {r['peak_flops_onednn'] / 1e9:.0f} GFLOP/s (oneDNN, packed "
                  f"2048² weight; default BLAS {r['peak_flops'] / 1e9:.0f}); {engine} reaches "
                  f"{r['prompts_per_s'] / best:.0%} of the faster")
        for key, lib in (("shape_flops", "default BLAS"), ("shape_flops_onednn", "oneDNN, packed")):
            if key in r:  # the same FLOPs at the rate of the model's own products, 4,096 rows wide
                shaped = r["n_prompts"] * r[key] / r["unique_flops"]
                print(f"model-shape limit ({lib}): {shaped:.2f} prompts/s at {r[key] / 1e9:.0f} GFLOP/s (one "
                      f"layer's products at the model's shapes, 4,096 rows); {engine} reaches "
                      f"{r['prompts_per_s'] / shaped:.0%} of it")
        if base:
            need = 3 * base["prompts_per_s"]
            print(f"3× lm-eval = {need:.2f} prompts/s = {need / limit:.0%} of the compute limit")
        if r.get("passes"):
            sh = r["passes"]
            share = sh["one_row"] / sh["n_passes"] if sh["n_passes"] else float("nan")
            print(f"passes: {sh['n_passes']}, one row: {sh['one_row']} ({share:.1%}), holding "
                  f"{sh['one_row_token_share']:.1%} of the tokens computed and {sh['one_row_time_share']:.1%} of the "
                  "forward time")
    if "vllm" in results:
        r = results["vllm"]
        print(f"vllm prefix cache served {1 - r['tokens_computed'] / r['prompt_tokens']:.3f} of prompt tokens; "
              f"whole shared {r['block_size']}-token blocks allow {r['cacheable_tokens'] / r['prompt_tokens']:.3f}, "
              f"the trie {1 - r['unique_tokens'] / r['prompt_tokens']:.3f}")
    names = list(logprobs)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            print(f"max |Δ log p| {a} vs {b}: {np.abs(logprobs[a] - logprobs[b]).max():.2e}")
    if ref is not None and "probe" in logprobs:  # each engine against the float64 forward; the default rule
        from probe.benches.disco.perf import deviation_lines

        rows = np.flatnonzero(~np.isnan(ref).all(axis=1))
        print("\n" + "\n".join(deviation_lines(logprobs, ref[rows], rows, "probe")))
    return results


def memory(args: argparse.Namespace) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    print("| prompts | peak RSS MiB | prompts/s |\n|---|---|---|")
    for repeat in (1, 4):
        r = spawn("probe", args, tmp / f"m{repeat}.npy", sys.executable, ["--model", "tiny", "--repeat", str(repeat)])
        print(f"| {r['n_prompts']} | {r['peak_rss_mb']:.0f} | {r['prompts_per_s']:.1f} |", flush=True)


def gpu(args: argparse.Namespace) -> None:
    """Full DiSCo protocol (304 items × 52) on a random-weight Gemma-3-12B text model in bf16.

    `--small` runs the same code on a 2-layer model of that family (on CPU if no GPU): a dry
    run that checks the script, not a measurement."""
    import torch
    from transformers import AutoTokenizer, Gemma3ForCausalLM

    from probe.benches.disco import perf
    from probe.prompts.render import RenderSettings, render_prompts
    from probe.models.tiny import TinySpec, build_tokenizer

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not args.small:
        raise SystemExit("--gpu needs a CUDA device (or --small for a CPU dry run)")
    tok = AutoTokenizer.from_pretrained(args.tokenizer) if args.tokenizer else build_tokenizer(TinySpec())
    config = perf.gemma3_12b_text_config()
    if args.small:
        config.num_hidden_layers, config.layer_types = 2, ["sliding_attention", "full_attention"]
        config.hidden_size, config.intermediate_size, config.vocab_size = 256, 512, 4096
        config.num_attention_heads, config.num_key_value_heads, config.head_dim = 4, 2, 64
    torch.manual_seed(0)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.set_default_dtype(dtype)  # build directly in bf16: a float32 12B model would take 48 GB first
    with torch.device(device):
        model = Gemma3ForCausalLM(config).eval()
    torch.set_default_dtype(torch.float32)
    n_items = 2 if args.small else 304
    prompts = perf.demo_prompts(None, repeat=n_items // 24 + 1)
    keep = set(sorted({p.item_id for p in prompts})[:n_items])
    prompts = [p for p in prompts if p.item_id in keep]
    rendered, letters = render_prompts(tok, prompts, "ABCD", RenderSettings(kind="instruct"), "gemma-3-12b-shape")
    perf.score_with_probe(model, rendered[:64], letters, True, args.batch_tokens, args.max_batch_size, "auto")  # warm-up
    rows, logprobs = [], {}
    # the default (fast_path=auto: eager on CUDA, where the packed products do not apply), the
    # eager path, the fast path's CUDA steps one by one (on CPU, --small, auto runs them all), no sharing
    engines = [("probe", True, "auto"), ("probe-eager", True, False),
               ("probe-fused", True, perf.GPU_STEPS["fused projections"]),
               *([("probe-fast", True, True)] if device == "cuda" else []), ("probe-noprefix", False, False)]
    for engine, prefix, fast in engines:
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        logprobs[engine], t = perf.score_with_probe(model, rendered, letters, prefix, args.batch_tokens,
                                                    args.max_batch_size, fast)
        ctx = float(np.mean([len(r.token_ids) for r in rendered])) / 2
        # MFU counts the unique tokens only: recomputed and padded tokens are waste, not work
        flops = perf.forward_flops(config, t.unique_tokens, ctx, len(rendered))
        peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")
        rows.append((engine, t.n_prompts, t.seconds, t.prompts_per_s, t.unique_tokens / t.seconds,
                     t.padded_tokens / t.unique_tokens, flops / t.seconds / args.peak_tflops / 1e12, peak))
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU dry run (--small)"
    print(f"{name}, {dtype}, {len(rendered)} prompts, tokenizer "
          f"{'real ' + args.tokenizer if args.tokenizer else 'tiny BPE (more tokens per word than Gemma)'}")
    print("| engine | prompts | s | prompts/s | unique tokens/s | padded / unique tokens | MFU | peak GiB |\n"
          "|---|---|---|---|---|---|---|---|")
    for row in rows:
        print("| {} | {} | {:.1f} | {:.0f} | {:.0f} | {:.2f} | {:.1%} | {:.1f} |".format(*row))
    gpu_reference(model, rendered, letters, logprobs, args.reference or 64)


def gpu_reference(model, rendered, letters, logprobs: dict, n_reference: int) -> None:
    """`--gpu`: each engine's |Δ log p| against a float64 forward on `n_reference` prompts, and the
    default rule. The model is turned into float64 in place (exact: every bf16 value is a float64
    value), so this runs last; on the GPU where it fits (8 bytes per weight), else on the CPU."""
    import torch

    from probe.backends.reference import reference_letters
    from probe.benches.disco import perf

    rows = perf.reference_rows(len(rendered), n_reference)
    device = next(model.parameters()).device
    if device.type == "cuda":  # converted weight by weight: the bf16 ones are freed as it goes
        held = sum(p.numel() * p.element_size() for p in model.parameters())
        if 8 * sum(p.numel() for p in model.parameters()) + 4 * 2**30 > torch.cuda.mem_get_info(device)[0] + held:
            model.to("cpu")  # no room on the GPU for 8 bytes per weight and activations: the CPU computes it
    model.to(torch.float64)
    t0 = time.perf_counter()
    ref = reference_letters(model, [rendered[i] for i in rows], letters)
    print(f"\nfloat64 reference: {len(rows)} prompts in {time.perf_counter() - t0:.0f} s on "
          f"{next(model.parameters()).device}")
    print("\n".join(perf.deviation_lines(logprobs, ref, rows, "probe-eager")))


def fast_steps(args: argparse.Namespace) -> None:
    """`--fast-steps`: the fast path's steps one at a time (`probe.benches.disco.perf.FAST_STEPS`), in this
    process, SmolLM2, pass by pass in turn; CPU time, so a shared machine's other jobs count less."""
    import torch

    from probe.benches.disco import perf
    from probe.backends.trie import unique_tokens
    from probe.prompts.render import render_prompts

    torch.set_num_threads(args.threads or torch.get_num_threads())
    spec, loaded = load_smollm2()
    print("| mix | prompts | step | CPU s (median) | speed vs eager (median of rounds) | vs the step before "
          "| of compute limit | of best-GEMM limit |\n|---|---|---|---|---|---|---|---|", flush=True)
    for mix in (args.mixes or args.mix).split(","):
        rendered, letters = render_prompts(loaded.tokenizer, perf.demo_prompts(args.items, 1, mix), "ABCD",
                                           spec.render_settings(), spec.name)
        rounds = perf.step_seconds(loaded.model, rendered, letters, args.runs)
        ctx = float(np.mean([len(r.token_ids) for r in rendered])) / 2
        flops = perf.forward_flops(loaded.model.config, unique_tokens(rendered), ctx, len(rendered))
        peak = perf.gemm_peak_flops(clock=time.process_time)
        best = np.nanmax([peak, perf.gemm_peak_flops(clock=time.process_time, packed=True)])
        names = list(rounds[0])
        for k, name in enumerate(names):
            cpu = float(np.median([r[name] for r in rounds]))
            vs_eager = np.median([r[names[0]] / r[name] for r in rounds])
            vs_before = np.median([r[names[max(k - 1, 0)]] / r[name] for r in rounds])
            print(f"| {mix} | {len(rendered)} | {name} | {cpu:.1f} | {vs_eager:.3f}× | {vs_before:.3f}× | "
                  f"{flops / peak / cpu:.0%} | {flops / best / cpu:.0%} |", flush=True)
    print(f"\n{args.runs} rounds, {args.threads or 'default'} threads; the compute limit: unique tokens' FLOPs at "
          "the 2048² fp32 GEMM rate (torch's default BLAS; best: the faster of it and oneDNN on a packed weight), "
          "both in CPU time")


def generation(args: argparse.Namespace) -> None:
    """HF generation mode (greedy, `--max-new-tokens`) with and without trie prefill, SmolLM2."""
    import torch

    from probe.benches.disco import perf
    from probe.backends.generate import HFGenerator
    from probe.backends.specs import HFBackendSpec
    from probe.prompts.render import render_prompts

    torch.set_num_threads(args.threads or torch.get_num_threads())
    spec, loaded = load_smollm2()
    rendered, _ = render_prompts(loaded.tokenizer, perf.demo_prompts(args.items), None, spec.render_settings(),
                                 spec.name)
    texts = {}
    print("| generation | prompts/s | prefill tokens computed / prompt tokens |\n|---|---|---|")
    for share in (True, False):
        gen = HFGenerator(loaded.model, loaded.tokenizer, HFBackendSpec(
            batch_tokens=args.batch_tokens, max_batch_size=args.max_batch_size, prefix_reuse=share,
            max_new_tokens=args.max_new_tokens))
        t0 = time.perf_counter()
        texts[share] = {g.prompt_id: g.text for b in gen.generate(rendered) for g in b}
        seconds = time.perf_counter() - t0
        computed = gen.stats.tokens_computed / gen.stats.prompt_tokens if share else 1.0
        print(f"| {'trie prefill' if share else 'plain batches'} | {len(rendered) / seconds:.2f} | {computed:.2f} |",
              flush=True)
    same = sum(texts[True][i] == texts[False][i] for i in texts[True])
    print(f"identical greedy continuations: {same} of {len(texts[True])}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engines", default="probe,probe-noprefix,lm-eval", help=f"some of {','.join(ENGINES)}")
    p.add_argument("--items", type=int, default=0, help="first N demo items (0 = all 24)")
    p.add_argument("--batch-tokens", type=int, default=8192)
    p.add_argument("--max-batch-size", type=int, default=32)
    p.add_argument("--lm-eval-batch", type=int, default=32)
    p.add_argument("--lm-eval-python", default=sys.executable, help="python of the environment that has lm-eval")
    p.add_argument("--vllm-python", default=sys.executable, help="python of the environment that has vLLM")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--runs", type=int, default=1, help="runs of each engine, in turn; medians are reported")
    p.add_argument("--vllm-block-size", type=int, default=None, help="vllm engine: KV block size (default: vLLM's)")
    p.add_argument("--mix", choices=MIXES, default="demo", help="item mix (probe.benches.disco.perf.BENCH_MIXES)")
    p.add_argument("--mixes", default=None, help="compare on each of these mixes, e.g. demo,short,long")
    p.add_argument("--text", choices=("hybrid", "cloze"), default=None,
                   help="score the option texts as continuations (answer-text reading) instead of the letters")
    p.add_argument("--memory", action="store_true")
    p.add_argument("--gpu", action="store_true")
    p.add_argument("--generate", action="store_true", help="HF generation mode, trie prefill vs plain")
    p.add_argument("--fast-steps", action="store_true", help="the fast path's steps one at a time, in CPU time")
    p.add_argument("--max-new-tokens", type=int, default=8, help="--generate: continuation length")
    p.add_argument("--tokenizer", default=None, help="--gpu: a real Gemma 3 tokenizer folder")
    p.add_argument("--small", action="store_true", help="--gpu: dry run of the script on a 2-layer model")
    p.add_argument("--peak-tflops", type=float, default=989.0, help="--gpu: dense bf16 peak (H100/H200 SXM)")
    p.add_argument("--reference", type=int, default=0,
                   help="engine float64 (and --gpu): prompts the float64 reference scores, spread over the set "
                        "(0 = all; --gpu: 0 means 64)")
    p.add_argument("--gemm-seconds", type=float, default=2.0,
                   help="how long each GEMM rate behind the compute limits is measured (per worker)")
    p.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--model", default="smollm2", help=argparse.SUPPRESS)
    p.add_argument("--repeat", type=int, default=1, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.items = args.items or None
    if args.worker:
        worker(args)
    elif args.memory:
        memory(args)
    elif args.gpu:
        gpu(args)
    elif args.generate:
        generation(args)
    elif args.fast_steps:
        fast_steps(args)
    elif args.mixes:
        mixes(args)
    else:
        compare(args)


if __name__ == "__main__":
    main()
