"""A run's report: `report.md` (the bench's markdown plus generic sections) and a self-contained
`report.html`, assembled from what the analysis computed and stored (`RunAnalyses`: the lens and
activation-patching tables and every figure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from probe.files import write_text
from probe.metrics.lens import first_layer_within
from probe.metrics.patch_effects import PATCHED_GROUPS, POOLED
from probe.report.header import with_header
from probe.results.layout import REPORT, REPORT_PAGE, SAMPLES_PAGE
from probe.results.run import Run
from probe.types import Design, GroupNoun
from probe.viz.figures import Figure
from probe.viz.html import write_html
from probe.viz.markdown import Footnotes, fmt, inert_html, table
from probe.viz.samples import sample_set, write_samples_html

def lens_note(groups: GroupNoun) -> str:
    """What the lens table's two distances are, in the bench's word for its groups."""
    return (f"{groups.one.capitalize()} JSD: the layer's {groups.one} distribution (exposure-normalised shares) "
            f"against the final layer's. Rotation shows every {groups.one} at every letter, so a preference for a "
            f"letter whatever it shows moves no {groups.one}'s share: this column can stay near 0 from the first "
            "layer on while the letters change completely. Letter JSD: each prompt's letter distribution against "
            "its final-layer one, averaged over the prompts; it says when the answer itself settles.")


@dataclass(frozen=True)
class RunAnalyses:
    """What a run's analysis computed and wrote beside `metrics.json` for its report."""

    figures: tuple[Figure, ...]
    """Every figure of `report.html`, in page order (already drawn under `figures/`)."""
    lens: dict[str, Any] | None
    """`lens_layers.json` (runs with a logit lens), else None."""
    patching: dict[str, Any] | None
    """`patching.json` (activation-patching runs), else None."""
    design: Design = Design()
    """The bench's design: the samples page shows its condition and target columns in their places."""
    groups: GroupNoun = GroupNoun()
    """The bench's word for its groups (`Presentation.groups`)."""


def write_run_report(run: Run, markdown: str, analyses: RunAnalyses) -> None:
    """`report.md` and `report.html` of a run whose `metrics.json` is written."""
    markdown = with_header(markdown, run.manifest, run.metrics or {})
    if analyses.lens is not None:
        markdown += lens_section(analyses.lens, analyses.groups)
    if analyses.patching is not None:
        markdown += patching_section(analyses.patching, analyses.groups)
    write_text(run.path / REPORT, inert_html(markdown))
    metrics = run.metrics or {}
    title = f"{metrics.get('bench')} — {metrics.get('model')}"
    write_samples_html(run.path / SAMPLES_PAGE, f"{title}: samples", [sample_set(run, run.path.name, analyses.design)])
    write_html(run.path / REPORT_PAGE, title, markdown, list(analyses.figures),
               links=[(SAMPLES_PAGE, "Per-prompt samples: each prompt beside its probabilities, answer and verdicts")])


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
