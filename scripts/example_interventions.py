"""Causal follow-ups on stored runs: where does the location cue act, and where does it point?

    python -m probe model=smollm2-135m bench=demo intervention=patch "intervention.layers=[0,6,12,18,24,29]"
    python -m probe model=smollm2-135m bench=demo "analysis.capture_layers=[15]"
    python scripts/example_interventions.py --patched runs/demo/smollm2-135m/<patch run> \\
        --vectors runs/demo/smollm2-135m/<capture run> --layer 15

Prints, from the patching run, the share of the cue's effect restored at each patched layer
(the first layer restoring half of it is where the cue has reached the answer position), and
from the capture run the per-culture steering vectors at the layer: their norms and the cosine
similarity between cultures (do the cues share a direction?). No model is loaded.
"""

from __future__ import annotations

import argparse

import numpy as np

import probe
from probe.api import patching_table, steering_vectors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--patched", help="a run made with intervention=patch")
    parser.add_argument("--vectors", help="a run made with analysis.capture_layers")
    parser.add_argument("--layer", type=int, help="the captured layer (0-based, as stored) the vectors are read at")
    args = parser.parse_args()
    if args.patched:
        run = probe.load_run(args.patched)
        table = patching_table(run, temperature=run.manifest.temperature, n_boot=200, seed=0)
        print(f"activation patching {table['source']} → {table['dest']}, {table['n_pairs']['all']} pairs")
        for layer, share, ci in zip(table["layers"], table["restored"]["all"], table["ci95"]["all"]):
            print(f"  layer {layer:3d}: restored {_num(share)}  [{_num(ci[0])}, {_num(ci[1])}]")
        half = next((layer for layer, s in zip(table["layers"], table["restored"]["all"]) if s is not None and s >= 0.5),
                    None)
        print(f"first layer restoring half the cue's effect: {half}")
    if args.vectors:
        vectors = steering_vectors(args.vectors, args.layer)
        names = sorted(vectors)
        unit = np.stack([vectors[c] / np.linalg.norm(vectors[c]) for c in names])
        cos = unit @ unit.T
        print(f"steering vectors at layer {args.layer}: " + ", ".join(f"{c} |v|={np.linalg.norm(vectors[c]):.2f}"
                                                                   for c in names))
        off = cos[~np.eye(len(names), dtype=bool)]
        print(f"cosine between cultures: mean {off.mean():.3f}, min {off.min():.3f}, max {off.max():.3f}")


def _num(v: float | None) -> str:
    """Undefined where the cue does not move the culture (CR_source = CR_dest)."""
    return "   –  " if v is None else f"{v:+.3f}"


if __name__ == "__main__":
    main()
