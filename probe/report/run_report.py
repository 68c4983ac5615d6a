"""A run's report: `report.md` (the bench's markdown plus the sections of the analyses that apply,
`probe.analyses`) and a self-contained `report.html` with every figure (`RunAnalyses`)."""

from __future__ import annotations

from dataclasses import dataclass

from probe.files import write_text
from probe.report.header import with_header
from probe.results.layout import REPORT, REPORT_PAGE, SAMPLES_PAGE
from probe.results.run import Run
from probe.types import Design
from probe.viz.figures import Figure
from probe.viz.html import write_html
from probe.viz.markdown import inert_html
from probe.viz.samples import sample_set, write_samples_html


@dataclass(frozen=True)
class RunAnalyses:
    """What a run's analysis drew for its report page."""

    figures: tuple[Figure, ...]
    """Every figure of `report.html`, in page order (already drawn under `figures/`)."""
    design: Design = Design()
    """The bench's design: the samples page shows its condition and target columns in their places."""


def write_run_report(run: Run, markdown: str, analyses: RunAnalyses) -> None:
    """`report.md` and `report.html` of a run whose `metrics.json` is written: `markdown` (the
    bench's with the analyses' sections) under the run's header."""
    markdown = with_header(markdown, run.manifest, run.metrics or {})
    write_text(run.path / REPORT, inert_html(markdown))
    metrics = run.metrics or {}
    title = f"{metrics.get('bench')} — {metrics.get('model')}"
    write_samples_html(run.path / SAMPLES_PAGE, f"{title}: samples", [sample_set(run, run.path.name, analyses.design)])
    write_html(run.path / REPORT_PAGE, title, markdown, list(analyses.figures),
               links=[(SAMPLES_PAGE, "Per-prompt samples: each prompt beside its probabilities, answer and verdicts")])
