"""Activation patching: the share of the cue's effect restored per layer when the residual stream
is copied from the source prompt into the destination, from a run's stored patching tensors,
stored as `patching.json`, drawn as `patching.png` and shown as a table in the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probe.analyses.base import Analysis
from probe.analyses.view import StoredRun
from probe.files import make_dirs, write_json
from probe.metrics.core import AnalysisOptions
from probe.metrics.patch_effects import PATCHED_GROUPS, POOLED, patching_table
from probe.results.layout import PATCHING_FIGURE, PATCHING_TABLE, PATCHING_TENSORS
from probe.types import GroupNoun
from probe.viz.figures import Figure
from probe.viz.markdown import Footnotes, fmt, table
from probe.viz.patch_figures import patching_caption, plot_patching


class Patching(Analysis):
    """Activation patching of a run that stored its patching tensors."""

    name = "patching"

    def applies(self, view: StoredRun) -> bool:
        # The tensors, not merely patching.png on disk: a stale figure of removed patching files stays out.
        return (view.path / PATCHING_TENSORS).is_file()

    def compute(self, view: StoredRun, opts: AnalysisOptions) -> dict[str, Any] | None:
        """Per-layer restored shares at the run's analysis options (`patching.json`, written here)."""
        result = patching_table(view, opts.temperature, opts.n_boot, opts.seed)
        write_json(view.path / PATCHING_TABLE, result)
        return result

    def section(self, view: StoredRun, result: dict[str, Any] | None) -> str:
        return "" if result is None else patching_section(result, view.task.presentation.groups)

    def figures(self, view: StoredRun, result: dict[str, Any] | None, figures_dir: Path) -> list[Figure]:
        if result is None:
            return []
        plot_patching(result, make_dirs(figures_dir) / PATCHING_FIGURE)
        return [Figure(PATCHING_FIGURE, figures_dir / PATCHING_FIGURE, patching_caption(view.task.presentation.groups))]


def patching_section(result: dict[str, Any], groups: GroupNoun = GroupNoun()) -> str:
    """Per-layer share of the cue effect restored by activation patching (pooled, with CIs), from
    its table (`patching.json`), pointing at its figure."""
    n_boot = result["bootstrap"]["n_boot"]
    undefined = undefined_share(groups)
    direction = f"{result['source'] or 'source'} → {result['dest'] or 'destination'}"
    lines = ["", f"## Activation patching ({direction}; figure: figures/patching.png)", "",
             (f"Share of the cue's effect restored when the residual stream after a layer (answer position) is "
              f"copied from the source prompt into the destination: "
              f"`(CR_patched − CR_dest) / (CR_source − CR_dest)`, CR = mean probability of the cued {groups.one}'s "
              f"option at T = {result['temperature']:g}. "
              f"{result['n_pairs'][POOLED]} pairs (CR_dest {fmt(result['CR_dest'][POOLED])}, CR_source "
              f"{fmt(result['CR_source'][POOLED])}); {result['n_left_out']} left out (no target, or the target "
              f"not shown)."), ""]
    notes, rows = Footnotes(), []
    intervals = (result["ci95"] or {}).get(POOLED) or [None] * len(result["layers"])
    for layer, value, interval, cr in zip(result["layers"], result["restored"][POOLED], intervals,
                                          result["CR_patched"][POOLED]):
        rows.append([layer, notes.value(value, undefined), notes.interval(interval, value, undefined, n_boot),
                     notes.value(cr, NO_PAIRS)])
    lines += [*table(["layer", "restored (all)", "95% CI", "CR patched"], rows), *notes.lines()]
    half = next((layer for layer, v in zip(result["layers"], result["restored"][POOLED]) if v is not None and v >= 0.5),
                None)
    lines += ["", f"First layer restoring at least half the effect: {half if half is not None else 'none'}."]
    last = {c: result["restored"][c][-1] for c in result[PATCHED_GROUPS] if result["layers"]}
    ranked = sorted((v, c) for c, v in last.items() if v is not None)
    if len(ranked) > 1:
        lines.append(f"At the last patched layer ({result['layers'][-1]}): most restored {ranked[-1][1]} "
                     f"{ranked[-1][0]:.3f}, least {ranked[0][1]} {ranked[0][0]:.3f}.")
    return "\n".join(lines) + "\n"


def undefined_share(groups: GroupNoun) -> str:
    """The footnote of a layer whose share restored is undefined."""
    return f"undefined: the cue does not move the cued {groups.one}'s probability (CR_source ≈ CR_dest)"


NO_PAIRS = "undefined: no pair left to patch"
