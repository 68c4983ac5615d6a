"""The activation-patching figure: the share of a cue's effect restored at each patched layer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from probe.metrics.patch_effects import PATCHED_GROUPS, POOLED
from probe.types import GroupNoun
from probe.viz.figures import num, pyplot, write_png

def patching_caption(groups: GroupNoun) -> str:
    """The patching figure's caption, in the bench's word for its groups."""
    return ("Activation patching: the residual stream at the answer position after each layer is copied from the "
            "cued (source) prompt into the uncued (destination) prompt. Share restored = (CR_patched − CR_dest) / "
            f"(CR_source − CR_dest), CR = mean probability of the cued {groups.one}'s option: 0 = the patch moves "
            f"nothing, 1 = it carries the whole cue effect. Thin lines: one per {groups.one}; bold: all pairs, with "
            "its 95% item-bootstrap band.")


def plot_patching(table: dict[str, Any], path: Path) -> None:
    """Share restored against layer: a thin line per group, the pooled line bold with its 95%
    band (when the table has intervals), and reference lines at 0 (nothing restored) and 1 (the
    whole cue effect). The y axis shows the pooled line and band in full but a group's line only
    within [−1, 2]: a group whose cue barely moved its option divides near-zero terms, and one such
    line would otherwise flatten the rest."""
    plt = pyplot()
    layers = np.asarray(table["layers"])
    fig, ax = plt.subplots(figsize=(7.5, 4.2), constrained_layout=True)
    # Markers keep a single patched layer visible; lines alone would draw nothing.
    for group in table[PATCHED_GROUPS]:
        ax.plot(layers, [num(v) for v in table["restored"][group]], lw=0.9, alpha=0.7, marker=".", ms=4,
                label=f"{group} (n={table['n_pairs'][group]})")
    pooled = np.array([num(v) for v in table["restored"][POOLED]])
    shown = [pooled, np.clip([num(v) for c in table[PATCHED_GROUPS] for v in table["restored"][c]], -1.0, 2.0)]
    ci = (table.get("ci95") or {}).get(POOLED)
    if ci:
        bounds = np.array([[num(b) for b in interval] for interval in ci])
        ax.fill_between(layers, bounds[:, 0], bounds[:, 1], color="black", alpha=0.15, lw=0, label="all: 95% CI")
        shown.append(bounds.ravel())
    ax.plot(layers, pooled, color="black", lw=2.4, marker="o", ms=4, label=f"all pairs (n={table['n_pairs'][POOLED]})")
    finite = np.concatenate([np.ravel(a) for a in shown] + [np.array([0.0, 1.0])])
    finite = finite[np.isfinite(finite)]
    pad = 0.05 * (finite.max() - finite.min())
    ax.set_ylim(finite.min() - pad, finite.max() + pad)
    ax.axhline(0, color="grey", ls=":", lw=1)
    ax.axhline(1, color="grey", ls="--", lw=1)
    direction = f"{table.get('source') or 'source'} → {table.get('dest') or 'dest'}"
    ax.set(xlabel="patched layer (residual stream after decoder layer)", ylabel="share of cue effect restored",
           title=f"Activation patching ({direction}, T = {table.get('temperature', 1.0):g})")
    if len(layers):
        ax.set_xticks(layers if len(layers) <= 16 else layers[:: int(np.ceil(len(layers) / 16))])
    ax.legend(fontsize=7, ncol=2 if len(table[PATCHED_GROUPS]) > 6 else 1, loc="best")
    write_png(fig, path)
