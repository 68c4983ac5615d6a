"""Coverage of GlobalOpinionQA's 95% intervals and the false-alarm rate and power of its
cue-specificity verdict, in planted worlds (`probe.benches.globalopinion.calibration`).

    python scripts/calibrate_globalopinion.py [--reps 400] [--items 40 120] [--boot 400]

Prints one markdown table: each tracked metric's coverage per world and question count, then
the share of runs whose verdict says the cue is specific (the null world: false alarms; the
planted world: power). docs/benchmarks/globalopinion.md quotes its output.
"""

from __future__ import annotations

import argparse

from probe.benches.globalopinion.calibration import NULL, PLANTED, TRACKED, calibrate, truth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--items", type=int, nargs="+", default=[40, 120])
    parser.add_argument("--boot", type=int, default=400)
    parser.add_argument("--truth-items", type=int, default=20_000)
    args = parser.parse_args()
    worlds = {"null": NULL, "planted": PLANTED}
    truths = {name: truth(w, args.truth_items) for name, w in worlds.items()}
    tallies = {(name, n): calibrate(w, args.reps, n, args.boot, truths=truths[name])
               for name, w in worlds.items() for n in args.items}
    head = [f"{name}, {n} questions" for name, n in tallies]
    print("| metric | " + " | ".join(head) + " |")
    print("|---" * (len(head) + 1) + "|")
    for path in TRACKED:
        print(f"| `{path}` | " + " | ".join(f"{t.coverage(path):.3f}" for t in tallies.values()) + " |")
    print("| verdict: cue specific | " + " | ".join(f"{t.specific / t.n_rep:.3f}" for t in tallies.values()) + " |")
    print(f"\n{args.reps} replicates per cell, {args.boot} bootstrap resamples, truths from "
          f"{args.truth_items} questions; null world: cue_pull {NULL.cue_pull}, planted: {PLANTED.cue_pull}.")


if __name__ == "__main__":
    main()
