"""Merge the shards of one run into its full run directory (no model needed).

    python -m probe merge --out RUN_DIR SHARD_DIR|SWEEP_DIR [...]

The shards are the run directories of `bench.shard=0/n … (n-1)/n`, in any order; a sweep
directory (`multirun/<time>`) stands for its run subdirectories. RUN_DIR gets the prompts, scores and
mechanistic rows, generations and verdicts an unsharded run would have written (scores bit for
bit on the same hardware and software), then metrics and reports as any run. A shard that is
missing, given twice, unfinished, of another configuration or changed since it finished (its
files against the checksums it recorded), and a RUN_DIR that is, holds or lies inside an input,
stop the merge with one line before anything is written.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from probe.commands import cmdline
from probe.errors import ProbeInputError
from probe.pipeline.shard_merge import merge_shards
from probe.results.layout import REPORT_PAGE

__all__ = ["merge_shards"]


def _body(argv: list[str]) -> int:
    command = cmdline.parse(argv, "", flags={"--out": "out"})
    unknown = sorted(set(command.overrides) - {"out"})
    if unknown:
        raise ProbeInputError(f"unknown option(s) {unknown}; valid: --out")
    if "out" not in command.overrides:
        raise ProbeInputError("--out RUN_DIR is required (the merged run's directory)")
    if not command.paths:
        raise ProbeInputError("no shard directories given")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    out = merge_shards(command.paths, Path(str(command.overrides["out"])))
    page = out / REPORT_PAGE
    print(f"probe merge: run written to {out}" + (f"; open {page}" if page.is_file() else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m probe merge`."""
    return cmdline.main("probe merge", __doc__ or "", _body, argv)


if __name__ == "__main__":
    sys.exit(main())
