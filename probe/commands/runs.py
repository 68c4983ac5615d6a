"""The past runs at or below a directory, newest path last: bench, model, label (when a run has
one: `run.label=…`), mode, variants, conditions, status, headline, caveat, path.

    probe runs [DIR]        (default: runs)

Status: `done` (finished), `analysed` (metrics written, no DONE: stopped before the end),
`scoring` (claimed but not scored: running, or stopped — rerun its command to resume),
`shard i/n` (merge the shards with `probe merge`), `dry run` (`dry_run=true`: its prompts table
and launch record only, whose bench, model and label it shows). Mode is the backend's
(`letters`, `generate`, …), vars a factor run's variant count, conds how many conditions it
analysed apart. The headline is the bench's first headline metric with its
95% interval (of a factor run: its protocol variant's); caveat the first thing its summary warns
about (`letter-driven`, `small sample`, `low letter mass`, …). Paths are relative to DIR.
"""

from __future__ import annotations

import sys
from pathlib import Path

from probe.commands import cmdline
from probe.errors import ProbeInputError, printable
from probe.report.run_list import RunLine, list_runs
from probe.viz.markdown import TERMINAL_WIDTH

DEFAULT_DIR = Path("runs")
"""Where `probe run` writes its runs (`hydra.run.dir`'s default)."""


def lines(found: list[RunLine], root: Path) -> list[str]:
    """Aligned columns, the path last (the rest fit `TERMINAL_WIDTH` characters); a `label`
    column after the model only when some run has one."""
    labelled = any(r.label for r in found)
    head = ("bench", "model", *(("label",) if labelled else ()), "mode", "vars", "conds", "status", "headline",
            "caveat", "path")
    rows = [tuple(map(printable, (r.bench, r.model, *((r.label or "–",) if labelled else ()), r.mode, r.variants,
                                  r.conditions, r.status, r.headline, r.caveat, _relative(r.path, root))))
            for r in found]
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head) - 1)]
    # leave the paths room on the line: the longest, up to 12 characters (a longer one overflows)
    budget = TERMINAL_WIDTH - 2 * len(widths) - min(12, max(len(row[-1]) for row in [head, *rows]))
    shift = int(labelled)
    # the caveat gives way first, then the headline, then the label
    for column, least in ((7 + shift, 8), (6 + shift, 12), *(((2, 12),) if labelled else ())):
        while sum(widths) > budget and widths[column] > least:
            widths[column] -= 1
    return ["  ".join([*(_cut(cell, w).ljust(w) for cell, w in zip(row, widths)), row[-1]]).rstrip()
            for row in [head, *rows]]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root)) if path != root else "."
    except ValueError:
        return str(path)


def _body(argv: list[str]) -> int:
    command = cmdline.parse(argv, "")
    if command.overrides:
        raise ProbeInputError(f"unknown option(s) {sorted(command.overrides)}; probe runs takes one directory")
    if len(command.paths) > 1:
        raise ProbeInputError(f"expected at most one directory, got {[str(p) for p in command.paths]}")
    root = command.paths[0] if command.paths else DEFAULT_DIR
    found = list_runs(root)
    if not found:
        print(f"probe runs: no runs under {root}")
        return 0
    print("\n".join(lines(found, root)))
    return 0


def main(argv: list[str] | None = None) -> int:
    """`probe runs` (and `python -m probe runs`)."""
    return cmdline.main("probe runs", __doc__ or "", _body, argv, allow_empty=True)


if __name__ == "__main__":
    sys.exit(main())
