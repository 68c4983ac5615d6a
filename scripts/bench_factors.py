"""What a factor run costs: the demo items with the protocol's prompt alone vs the factorial of
`labels × cue × instruction` (36 variants), each a full run through the pipeline.

    python scripts/bench_factors.py                         # SmolLM2-135M, 4 demo items, CPU
    python scripts/bench_factors.py --model tiny --items 2  # the tiny test model (seconds)
    python scripts/bench_factors.py --factors '[labels,cue]' --conditions '[C0]'
    python scripts/bench_factors.py --conditions '[C0]' --set backend.batch_tokens=1024
    python scripts/bench_factors.py --conditions '[C0]' --lm-eval-python <lm-eval venv>/bin/python
    python scripts/bench_factors.py --conditions '[C0]' --items 2 --parity 4  # variants alone vs in the factorial

Per run it prints the prompts, prompt tokens, the prompt trie's unique tokens (the least any
exact scorer must compute: the trie limit), the tokens the scorer computed, their ratio to the
limit, the scoring wall time and prompts/s (from the run's manifest), and, for the factorial,
the tokens computed per variant against the single variant's: what sharing across variants saves.
Each run writes its directory under a temporary folder (kept with --keep).

With `--lm-eval-python` (the python of an environment that has lm-eval; not probe's), lm-eval's
HF backend then scores each run's stored prompts (`prompts.parquet` `text`, each prompt's own
variant's labels as one-token continuations) on the same model in a process of its own: the
table gains its prompts/s, probe's ratio to it, and the largest |Δ log p| between lm-eval and the
letter log-probs the run stored (SmolLM2 only: lm-eval loads the same weights through probe).

With `--parity N`, N of the factorial's variants (spread over it) then run each on its own
(`factors=[{its levels}]`), and the script prints, per variant, the largest |Δ log p| between its
letters alone and inside the factorial, prompt by prompt (and the protocol run's against
variant 0): what scoring every variant in one plan may move (the bound is 1e-5 nats).
`--parity-float64` scores the factorial's stored token ids once in one plan and each picked
variant in a plan of its own, on the model in float32 and with its decoder in float64 (the head
stays float32): the float64 column shows how much of the gap is the decoder's float32 rounding (a
pass's row count and padding change the order of its sums) rather than the plan's content.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def run_once(out: Path, model: str, items: int, conditions: str | None, factors: str | None,
             extra: list[str]) -> dict[str, Any]:
    """One pipeline run into `out`; returns its manifest's work counters and timings."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from probe.config import package_conf_dir
    from probe.pipeline.execute import run
    from probe.pipeline.spec import run_config

    overrides = [f"model={model}", "bench=demo", f"bench.limit={items}", "analysis.n_boot=100", "progress=false"]
    overrides += [f"bench.conditions={conditions}"] if conditions else []
    overrides += [f"factors={factors}"] if factors else []
    overrides += extra
    with initialize_config_dir(config_dir=str(package_conf_dir()), version_base="1.3"):
        values = OmegaConf.to_container(compose(config_name="config", overrides=overrides), resolve=True)
    assert isinstance(values, dict)
    from probe.results.run import load_run

    run(run_config(values, out))
    manifest = load_run(out).manifest.raw
    work, timings = manifest["backend"], manifest["timings"]
    return {"variants": len(manifest.get("variants") or [None]), "prompts": manifest["bench"]["n_prompts"],
            "prompt_tokens": work["prompt_tokens"], "unique_tokens": work["unique_tokens"],
            "tokens_computed": work["tokens_computed"], "scoring_wall_s": timings["scoring_wall_s"],
            "prompts_per_s": timings["prompts_per_s"]}


def stored_requests(run_dir: Path) -> tuple[list[dict[str, Any]], np.ndarray]:
    """Each stored prompt's exact text and its variant's labels, and the letter log-probs the run
    stored `[prompt, letter]` (prompt-id order)."""
    from probe.results.run import load_run

    run = load_run(run_dir)
    prompts = run.prompts.to_pylist()
    scores = dict(zip(*run.scores.select(["prompt_id", "letter_logprobs"]).to_pydict().values()))
    manifest = run.manifest.raw
    labels = {int(v["index"]): list(v["labels"]) for v in manifest.get("variants") or []}
    requests = [{"text": p["text"], "labels": labels.get(int(p.get("variant") or 0), list(manifest["letters"]))}
                for p in prompts]
    return requests, np.array([scores[p["prompt_id"]] for p in prompts], dtype=np.float64)


def lm_eval_worker(requests_file: Path, out: Path) -> None:
    """In lm-eval's environment: score the requests with its HF backend, save `[prompt, letter]`
    log-probs, print a JSON timing line."""
    from bench_scoring import load_smollm2
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    requests = json.loads(requests_file.read_text())
    _, loaded = load_smollm2()
    lm = HFLM(pretrained=loaded.model, tokenizer=loaded.tokenizer, batch_size=32)
    instances = [Instance(request_type="loglikelihood", doc={}, arguments=(r["text"], label), idx=i)
                 for r in requests for i, label in enumerate(r["labels"])]
    t0 = time.perf_counter()
    got = [ll for ll, _ in lm.loglikelihood(instances, disable_tqdm=True)]
    seconds = time.perf_counter() - t0
    width = max(len(r["labels"]) for r in requests)
    lp, k = np.full((len(requests), width), np.nan), 0
    for i, r in enumerate(requests):
        lp[i, :len(r["labels"])] = got[k:k + len(r["labels"])]
        k += len(r["labels"])
    np.save(out, lp)
    print("RESULT " + json.dumps({"seconds": seconds, "prompts_per_s": len(requests) / seconds}))


def with_lm_eval(python: str, run_dir: Path, row: dict[str, Any]) -> None:
    """lm-eval on `run_dir`'s stored prompts in `python`'s environment; adds its prompts/s and the
    largest |Δ log p| against the stored letter log-probs to `row`."""
    requests, stored = stored_requests(run_dir)
    req_file, out = run_dir / "lm_eval_requests.json", run_dir / "lm_eval_logprobs.npy"
    req_file.write_text(json.dumps(requests))
    env = {**os.environ, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([python, __file__, "--lm-eval-worker", str(req_file), "--out", str(out)],
                          capture_output=True, text=True, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"lm-eval failed on {run_dir.name}:\n{proc.stderr[-4000:]}")
    result = json.loads(lines[-1].removeprefix("RESULT "))
    delta = np.nanmax(np.abs(np.load(out)[:, :stored.shape[1]] - stored), axis=1)
    # lm-eval moves a context's trailing whitespace into the continuation (it scores "\nA" after a
    # cue ending in a newline, not "A"): those prompts' gap is that token's log-prob, kept apart
    spaced = np.array([r["text"] != r["text"].rstrip() for r in requests])
    row.update(lm_eval_prompts_per_s=result["prompts_per_s"], lm_eval_s=result["seconds"],
               max_delta=float(delta[~spaced].max()) if (~spaced).any() else float("nan"),
               max_delta_spaced=float(delta[spaced].max()) if spaced.any() else None, n_spaced=int(spaced.sum()))


def variant_letters(run_dir: Path) -> dict[str, np.ndarray]:
    """`{variant name: [prompt, letter] stored log-probs}` in prompt order (a run without
    factors: its prompts under the name `protocol`)."""
    from probe.results.run import load_run

    run = load_run(run_dir)
    prompts = run.prompts.to_pydict()
    scores = dict(zip(*run.scores.select(["prompt_id", "letter_logprobs"]).to_pydict().values()))
    names = {int(v["index"]): v["name"] for v in run.manifest.raw.get("variants") or [{"index": 0, "name": "protocol"}]}
    out: dict[str, list[Any]] = {}
    for pid, v in zip(prompts["prompt_id"], prompts.get("variant") or [0] * len(prompts["prompt_id"])):
        out.setdefault(names[int(v)], []).append(scores[pid])
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def parity(root: Path, args: argparse.Namespace) -> list[tuple[str, int, float]]:
    """`(variant, prompts, max |Δ log p|)`: the protocol run against the factorial's variant 0, then
    `args.parity` variants spread over the factorial, each run alone."""
    factorial = variant_letters(root / "factorial")
    from probe.results.run import load_run

    records = load_run(root / "factorial").manifest.raw["variants"]
    first = next(iter(factorial.values()))
    out = [("protocol (the run without factors)", len(first),
            float(np.abs(variant_letters(root / "protocol")["protocol"] - first).max()))]
    picks = np.unique(np.linspace(1, len(records) - 1, args.parity).round().astype(int)) if args.parity else []
    for k in picks:
        rec = records[int(k)]
        levels = ", ".join(f"{f}: {lv}" for f, lv in rec["levels"].items())
        run_once(root / f"alone-{k}", args.model, args.items, args.conditions, f"[{{{levels}}}]", args.set)
        alone = variant_letters(root / f"alone-{k}")[rec["name"]]
        out.append((rec["name"], len(alone), float(np.abs(alone - factorial[rec["name"]]).max())))
    return out


def plan_parity(run_dir: Path, variants: list[str], dtype: str) -> list[tuple[str, float]]:
    """`(variant, max |Δ log p|)`: the factorial's stored token ids scored in one plan against each
    of `variants`' prompts in a plan of their own, on SmolLM2 cast to `dtype`, every label token of
    every variant read. In float64 the decoder's float32 rounding is out of the gap (the scorer's
    head stays float32, so its rounding stays in): what is left is how much a variant's scores
    depend on the rest of the plan."""
    import torch
    from bench_scoring import load_smollm2

    from probe.benches.disco.perf import score_with_probe
    from probe.results.run import load_run
    from probe.types import LetterIds, Prompt, RenderedPrompt

    run = load_run(run_dir)
    prompts = run.prompts.to_pydict()
    records = run.manifest.raw["variants"]
    names = {int(v["index"]): v["name"] for v in records}
    ids = sorted({int(t) for v in records for t in v["label_token_ids"]})
    letters = LetterIds(tuple(str(t) for t in ids), tuple(ids))
    rendered = [RenderedPrompt(Prompt(prompt_id=pid, item_id=item, order=(0,), groups=("g",), message="",
                                      prefix_key=item), "", np.asarray(tok))
                for pid, item, tok in zip(prompts["prompt_id"], prompts["item_id"], prompts["token_ids"])]
    of = [names[int(v)] for v in prompts["variant"]]
    _, loaded = load_smollm2()
    model = loaded.model.to(getattr(torch, dtype))
    together, _ = score_with_probe(model, rendered, letters, True, 8192, 32)
    out = []
    for name in variants:
        mine = [i for i, n in enumerate(of) if n == name]
        alone, _ = score_with_probe(model, [rendered[i] for i in mine], letters, True, 8192, 32)
        out.append((name, float(np.abs(alone - together[mine]).max())))
    return out


def table(rows: dict[str, dict[str, Any]]) -> str:
    """The side-by-side markdown table (lm-eval's columns when it ran)."""
    head = ["run", "variants", "prompts", "prompt tokens", "trie limit", "tokens computed", "computed / limit",
            "scoring s", "prompts/s"]
    lm = all("lm_eval_prompts_per_s" in r for r in rows.values())
    head += ["lm-eval s", "lm-eval prompts/s", "probe / lm-eval", "max |Δ log p|¹"] if lm else []
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for name, r in rows.items():
        cells = [name, r["variants"], r["prompts"], r["prompt_tokens"], r["unique_tokens"], r["tokens_computed"],
                 f"{r['tokens_computed'] / r['unique_tokens']:.3f}", f"{r['scoring_wall_s']:.1f}",
                 f"{r['prompts_per_s']:.2f}"]
        if lm:
            cells += [f"{r['lm_eval_s']:.1f}", f"{r['lm_eval_prompts_per_s']:.2f}",
                      f"{r['prompts_per_s'] / r['lm_eval_prompts_per_s']:.2f}×", f"{r['max_delta']:.1e}"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    spaced = [f"{name}: {r['n_spaced']} prompts, {r['max_delta_spaced']:.1e}" for name, r in rows.items()
              if lm and r.get("max_delta_spaced") is not None]
    if lm:
        lines.append("\n¹ over the prompts whose text does not end in whitespace; lm-eval moves a trailing space "
                     "or newline into the continuation, so where a prompt ends in one (the `bare` cue) the gap is "
                     "that token's log-prob" + (f" ({'; '.join(spaced)})" if spaced else ""))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m", help="a model config name (conf/model)")
    parser.add_argument("--items", type=int, default=4, help="the first N demo items")
    parser.add_argument("--conditions", default=None, help="bench.conditions, e.g. '[C0]' (default: all four)")
    parser.add_argument("--factors", default="[labels,cue,instruction]", help="the factorial's factors")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="another run override for both runs, e.g. backend.batch_tokens=1024 (repeatable)")
    parser.add_argument("--keep", action="store_true", help="keep the run directories")
    parser.add_argument("--lm-eval-python", default=None,
                        help="python of an environment that has lm-eval: score the same stored prompts with it")
    parser.add_argument("--parity", type=int, default=0, metavar="N",
                        help="also run N of the factorial's variants alone and compare their letters")
    parser.add_argument("--parity-float64", action="store_true",
                        help="with --parity: also score the factorial's token ids in one plan and each picked "
                             "variant in its own, float32 and float64 (SmolLM2)")
    parser.add_argument("--lm-eval-worker", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.lm_eval_worker is not None:
        return lm_eval_worker(args.lm_eval_worker, args.out)
    if args.lm_eval_python and args.model != "smollm2-135m":
        raise SystemExit("--lm-eval-python: lm-eval loads SmolLM2 (the default --model) only")
    root = Path(tempfile.mkdtemp(prefix="bench_factors-"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        rows = {"protocol": run_once(root / "protocol", args.model, args.items, args.conditions, None, args.set),
                f"factors={args.factors}": run_once(root / "factorial", args.model, args.items, args.conditions,
                                                    args.factors, args.set)}
        if args.lm_eval_python:
            for (name, row), sub in zip(rows.items(), ("protocol", "factorial")):
                with_lm_eval(args.lm_eval_python, root / sub, row)
        same = parity(root, args) if args.parity else []
        planned = {}
        if args.parity and args.parity_float64:
            picked = [name for name, _, _ in same[1:]]
            planned = {dtype: dict(plan_parity(root / "factorial", picked, dtype)) for dtype in ("float32", "float64")}
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(table(rows))
    one, many = rows["protocol"], rows[f"factors={args.factors}"]
    print(f"\ntokens computed per variant: {many['tokens_computed'] / many['variants']:.0f} vs "
          f"{one['tokens_computed']} for the protocol alone "
          f"({many['tokens_computed'] / many['variants'] / one['tokens_computed']:.2f}×); prompts/s "
          f"{many['prompts_per_s'] / one['prompts_per_s']:.2f}× the single variant's"
          + (f"; lm-eval {many['lm_eval_prompts_per_s'] / one['lm_eval_prompts_per_s']:.2f}×"
             if "lm_eval_prompts_per_s" in one else "")
          + (f"; run directories kept under {root}" if args.keep else ""))
    if same:
        print("\n| variant alone vs in the factorial | prompts | max |Δ log p| |\n|---|---|---|")
        for name, n, delta in same:
            print(f"| {name} | {n} | {delta:.1e} |")
    if planned:
        print("\n| variant: own plan vs the factorial's plan (token ids, every label read) | float32 | float64 decoder, float32 head |"
              "\n|---|---|---|")
        for name in planned["float32"]:
            print(f"| {name} | {planned['float32'][name]:.1e} | {planned['float64'][name]:.1e} |")


if __name__ == "__main__":
    main()
