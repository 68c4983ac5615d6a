"""The logit lens: each layer's group and letter distributions against the final layer's, from a
run's stored lens tensors (`lens.npz`), stored as `lens_layers.json`, drawn as `lens.png` and
shown as a table in the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from probe.analyses.base import Analysis
from probe.analyses.view import StoredRun
from probe.files import make_dirs, write_json
from probe.metrics.core import AnalysisOptions
from probe.metrics.lens import first_layer_within, layer_table, lens_condition
from probe.results.layout import LENS, LENS_FIGURE, LENS_TABLE
from probe.types import GroupNoun
from probe.viz.figures import Figure, lens_caption, plot_layers
from probe.viz.markdown import table


class LogitLens(Analysis):
    """The logit lens of a run that stored its lens tensors."""

    name = "lens"

    def applies(self, view: StoredRun) -> bool:
        return (view.path / LENS).is_file()

    def compute(self, view: StoredRun, opts: AnalysisOptions) -> dict[str, Any] | None:
        return lens_table(view)

    def section(self, view: StoredRun, result: dict[str, Any] | None) -> str:
        return "" if result is None else lens_section(result, view.task.presentation.groups)

    def figures(self, view: StoredRun, result: dict[str, Any] | None, figures_dir: Path) -> list[Figure]:
        if result is None:
            return []
        plot_layers(result, make_dirs(figures_dir) / LENS_FIGURE)
        return [Figure(LENS_FIGURE, figures_dir / LENS_FIGURE, lens_caption(view.task.presentation.groups))]


def lens_table(view: StoredRun) -> dict[str, Any]:
    """The logit lens's per-layer table (`lens_layers.json`, written here) over the condition
    `lens_condition` picks by the task's design."""
    design = view.task.design
    lens = layer_table(view, design, lens_condition(view.table().conditions(design), design))
    write_json(view.path / LENS_TABLE, lens)
    return lens


def lens_note(groups: GroupNoun) -> str:
    """What the lens table's two distances are, in the bench's word for its groups."""
    return (f"{groups.one.capitalize()} JSD: the layer's {groups.one} distribution (exposure-normalised shares) "
            f"against the final layer's. Rotation shows every {groups.one} at every letter, so a preference for a "
            f"letter whatever it shows moves no {groups.one}'s share: this column can stay near 0 from the first "
            "layer on while the letters change completely. Letter JSD: each prompt's letter distribution against "
            "its final-layer one, averaged over the prompts; it says when the answer itself settles.")


def lens_section(lens: dict[str, Any], groups: GroupNoun = GroupNoun()) -> str:
    """The logit lens's per-layer table (`lens_layers.json`), pointing at its figure."""
    condition = lens["condition"]
    head = ["layer", f"{groups.one} JSD to final (bits)", "letter JSD to final (bits)", f"top {groups.one}",
            *(f"P({x})" for x in lens["letters"])]
    rows = []
    for i, (csd, letters) in enumerate(zip(lens["csd"], lens["letter_probs"])):
        top = max(csd, key=csd.get)
        rows.append([i, f"{lens['jsd_to_final'][i]:.4f}", f"{lens['letter_jsd_to_final'][i]:.4f}",
                     f"{top} {csd[top]:.3f}", *(f"{p:.3f}" for p in letters)])
    lines = ["", f"## Logit lens ({condition or 'all prompts'}; figure: figures/lens.png)", "", lens_note(groups), "",
             *table(head, rows), "", _settles(lens, groups)]
    return "\n".join(lines) + "\n"


def _settles(lens: dict, groups: GroupNoun) -> str:
    """Where each distribution comes within 0.01 bits of the final layer's, for good."""
    shares, letters = (first_layer_within(lens, 0.01, key) for key in ("jsd_to_final", "letter_jsd_to_final"))
    return (f"The {groups.one} distribution is within 0.01 bits (JSD) of the final layer's from layer {shares} on; "
            f"the letter distribution from layer {letters} on.")
