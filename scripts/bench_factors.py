"""What a factor run costs: the demo items with the protocol's prompt alone vs the factorial of
`labels × cue × instruction` (36 variants), each a full run through the pipeline.

    python scripts/bench_factors.py                         # SmolLM2-135M, 4 demo items, CPU
    python scripts/bench_factors.py --model tiny --items 2  # the tiny test model (seconds)
    python scripts/bench_factors.py --factors '[labels,cue]' --conditions '[C0]'
    python scripts/bench_factors.py --conditions '[C0]' --set backend.batch_tokens=1024

Per run it prints the prompts, prompt tokens, the prompt trie's unique tokens (the least any
exact scorer must compute: the trie limit), the tokens the scorer computed, their ratio to the
limit, the scoring wall time and prompts/s (from the run's manifest), and, for the factorial,
the tokens computed per variant against the single variant's: what sharing across variants saves.
Each run writes its directory under a temporary folder (kept with --keep).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


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
    run(run_config(values, out))
    manifest = json.loads((out / "manifest.json").read_text())
    work, timings = manifest["backend"], manifest["timings"]
    return {"variants": len(manifest.get("variants") or [None]), "prompts": manifest["bench"]["n_prompts"],
            "prompt_tokens": work["prompt_tokens"], "unique_tokens": work["unique_tokens"],
            "tokens_computed": work["tokens_computed"], "scoring_wall_s": timings["scoring_wall_s"],
            "prompts_per_s": timings["prompts_per_s"]}


def table(rows: dict[str, dict[str, Any]]) -> str:
    """The side-by-side markdown table."""
    head = ["run", "variants", "prompts", "prompt tokens", "trie limit", "tokens computed", "computed / limit",
            "scoring s", "prompts/s"]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['variants']} | {r['prompts']} | {r['prompt_tokens']} | {r['unique_tokens']} | "
                     f"{r['tokens_computed']} | {r['tokens_computed'] / r['unique_tokens']:.3f} | "
                     f"{r['scoring_wall_s']:.1f} | {r['prompts_per_s']:.1f} |")
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
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench_factors-"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        rows = {"protocol": run_once(root / "protocol", args.model, args.items, args.conditions, None, args.set),
                f"factors={args.factors}": run_once(root / "factorial", args.model, args.items, args.conditions,
                                                    args.factors, args.set)}
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print(table(rows))
    one, many = rows["protocol"], rows[f"factors={args.factors}"]
    print(f"\ntokens computed per variant: {many['tokens_computed'] / many['variants']:.0f} vs "
          f"{one['tokens_computed']} for the protocol alone "
          f"({many['tokens_computed'] / many['variants'] / one['tokens_computed']:.2f}×); prompts/s "
          f"{many['prompts_per_s'] / one['prompts_per_s']:.2f}× the single variant's"
          + (f"; run directories kept under {root}" if args.keep else ""))


if __name__ == "__main__":
    main()
