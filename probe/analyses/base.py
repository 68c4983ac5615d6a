"""The interface every generic analysis implements: one module, one `Analysis`, registered in
`probe.analyses.registry`.

A run's analysis (`probe.pipeline.analysis.analyze_run`) asks each registered analysis, in
registry order, whether it `applies` to the run; for those that do it calls `compute` (its
`metrics.json` section when `in_metrics`, else a table it writes beside the run's files), then
`opening` and `section` (the report's markdown) and `figures` (the report page's figures). A
sweep report (`probe.report.sweep`) asks every analysis for its `sweep_columns` and its
`sweep_section` and `sweep_figures`. Every hook reads stored data only: no model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from probe.analyses.view import StoredRun
from probe.benches.task import Column, Task
from probe.metrics.core import AnalysisOptions
from probe.viz.figures import Figure


class Analysis(ABC):
    """One generic analysis of a stored run (any bench's): its result, figures and report text."""

    name: str
    """Its name: the `metrics.json` key of its result when `in_metrics`."""
    in_metrics: bool = False
    """Whether `compute`'s result is a `metrics.json` section (under `name`). An analysis that
    writes its own table file instead (`lens_layers.json`) runs only in a run's own analysis, not
    in a re-analysis with overrides written beside it, which must not overwrite the run's files."""

    @abstractmethod
    def applies(self, view: StoredRun) -> bool:
        """Whether the run has what this analysis reads (a factor run's variants, stored tensors)."""

    def compute(self, view: StoredRun, opts: AnalysisOptions) -> dict[str, Any] | None:
        """Its result from the stored tables with `opts`: the `metrics.json` section when
        `in_metrics`, else the table it wrote beside the run's files; None: nothing to show."""
        return None

    def opening(self, view: StoredRun, result: dict[str, Any] | None, markdown: str) -> str:
        """The bench's report with this analysis's answer added to its opening (unchanged by default)."""
        return markdown

    def section(self, view: StoredRun, result: dict[str, Any] | None) -> str:
        """Its markdown section, appended to the report in registry order ("" for none)."""
        return ""

    def figures(self, view: StoredRun, result: dict[str, Any] | None, figures_dir: Path) -> list[Figure]:
        """Its figures, drawn into `figures_dir`, in page order after the bench's own."""
        return []

    sweep_columns: tuple[Column, ...] = ()
    """Columns of a sweep's tables read from its `metrics.json` section, after the bench's own
    (shown only where some run has a value: mark them `optional`)."""

    def sweep_section(self, entries: Sequence[StoredRun], task: Task) -> str | None:
        """Its block of a sweep report for `task`'s runs among `entries` (None: nothing to show)."""
        return None

    def sweep_figures(self, entries: Sequence[StoredRun], out_dir: Path) -> list[Figure]:
        """Its figures of a sweep report, drawn into `out_dir`."""
        return []
