"""Calibration of the format-robustness inference by simulation: the table of
docs/concepts/format-robustness.md (coverage of the 95% intervals, family-wise false `format…`
verdicts in the null world, power at planted group × factor interactions).

    python scripts/format_calibration.py [--replicates 200]
"""

from __future__ import annotations

import argparse

from probe.metrics.format_calibration import NULL, World, table_rows
from probe.viz.markdown import table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicates", type=int, default=200)
    args = parser.parse_args()
    worlds = {"null (no interaction)": NULL,
              **{f"g1 × f0 ±{size} logits": World(interaction=((1, 0, size),)) for size in (0.2, 0.3, 0.4, 0.6)}}
    print("\n".join(table(["world", "shares", "effects", "components", "any format…", "flagged (power)", "spread called"],
                          table_rows(worlds, n_rep=args.replicates))))


if __name__ == "__main__":
    main()
