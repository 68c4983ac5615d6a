"""A mechanistic follow-up on a stored run: where does the cultural preference appear?

    python -m probe model=smollm2-135m bench=demo analysis.logit_lens=true "analysis.capture_layers=[-1]"
    python scripts/example_followup.py runs/demo/smollm2-135m/<time>

Prints the first layer from which on the C0 culture distribution read through the logit lens
stays within a JSD of 0.01 bits of the final one, and the same for the letter distribution
(they differ: rotation balances a letter preference out of the culture shares, so the culture
distribution can settle at once while the letters change completely), then fits a linear probe that predicts the chosen
culture from the captured residual stream (cross-validated by item, against the majority
baseline). Everything comes from the run directory; no model is loaded.
"""

from __future__ import annotations

import argparse

import numpy as np

import probe
from probe.benches.registry import task_of
from probe.metrics.lens import chosen_groups, first_layer_within, fit_linear_probe, layer_table, lens_condition


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir")
    parser.add_argument("--bits", type=float, default=0.01, help="JSD threshold to the final layer")
    args = parser.parse_args()

    run = probe.load_run(args.run_dir)
    design = task_of(run.manifest).design  # the condition a run's report reads (DiSCo: C0)
    condition = lens_condition(run.table().conditions(design), design)
    table = layer_table(run, design, condition)
    culture = first_layer_within(table, args.bits)
    letters = first_layer_within(table, args.bits, "letter_jsd_to_final")
    n_layers = len(table["csd"])
    print(f"{run.manifest.model.name} on {run.manifest.bench.name}: {n_layers} layers")
    print(f"the {condition or 'overall'} culture distribution is within {args.bits} bits (JSD) of the final "
          f"layer's from layer {culture} on; the letter distribution (per prompt, averaged) from layer {letters} on")
    final = table["csd"][-1]
    top = sorted(final, key=final.get, reverse=True)[:3]
    print("final-layer top groups: " + ", ".join(f"{g} {final[g]:.3f}" for g in top))

    captured = run.captured_layers()
    x = run.activations([captured[-1]])[:, 0]
    y = chosen_groups(run)
    items = run.prompts.column("item_id").to_numpy(zero_copy_only=False)
    fit = fit_linear_probe(x.astype(np.float32), y, items)
    print(f"linear probe on layer {captured[-1]} → chosen culture: accuracy {fit.accuracy:.3f} ± "
          f"{fit.accuracy_std:.3f} vs majority baseline {fit.majority_baseline:.3f} "
          f"({fit.n_classes} classes, {fit.n_samples} prompts, folds split by item)")


if __name__ == "__main__":
    main()
