"""The analysis step of a run, a shard merge and `python -m probe analyze`: `metrics.json`,
what the report shows and the report itself, recomputed from the stored tables (no model); the
bench's task and the registered analyses (`probe.analyses`) say how."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from probe.analyses.base import Analysis
from probe.analyses.registry import analyses
from probe.analyses.view import StoredRun
from probe.files import refuse_links_inside, write_json, write_text
from probe.metrics.core import AnalysisOptions
from probe.metrics.preference import enclose
from probe.report.run_report import RunAnalyses, write_run_report
from probe.results.layout import FIGURES, metrics_file, report_files
from probe.results.manifest import write_manifest
from probe.viz.html import write_html
from probe.viz.markdown import inert_html

Results = dict[str, dict[str, Any] | None]
"""Each applying analysis's result (`Analysis.compute`), by its name."""


def analyze_run(run_dir: Path, analysis: Mapping[str, Any] | None = None,
                record: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Compute metrics from the stored tables, write `metrics.json`, what the registered analyses
    store (`probe.analyses`: their tables and figures), then `report.md` and `report.html`; return
    metrics. The manifest is read once and written once, at the end (with the analysis time).

    `analysis` overrides the analysis options recorded in the manifest (e.g. a temperature);
    the results then go to `metrics-<key>=<value>.json`, `report-….md` and `report-….html`
    (its figures, the bench's only, in `figures/<key>=<value>/`) beside the originals, and the
    manifest is left as it is; only the analyses whose result is a `metrics.json` section run
    then (the others would overwrite the run's own files). `record` replaces the recorded
    analysis options instead (a finished run asked for with other ones): the metrics use them and
    the manifest records them.
    """
    if analysis and record is not None:
        raise ValueError("analyze_run: either analysis overrides (a re-analysis beside the run's own) or new "
                         "options to record, not both")
    t0 = time.perf_counter()
    refuse_links_inside(Path(run_dir))  # before any file is written: a planted `figures/` link is refused here
    stored = StoredRun.open(run_dir)
    if record is not None:
        stored = replace(stored, manifest=stored.manifest.with_analysis(record))
    opts = stored.options(analysis)
    suffix = suffix_of(analysis)
    units = [u for u in analyses() if u.applies(stored) and (u.in_metrics or not suffix)]
    metrics: dict[str, Any] = {"bench": stored.manifest.bench.name, "model": stored.manifest.model.name,
                               **stored.measure(opts)}
    results = _compute(stored, opts, [u for u in units if u.in_metrics])
    metrics.update({name: result for name, result in results.items() if result is not None})
    metrics = enclose(metrics)  # every stored interval holds its own stored estimate
    # Overrides are a re-analysis: written beside the run's own metrics, never over them.
    write_json(run_dir / metrics_file(suffix), metrics)
    stored = replace(stored, metrics=metrics)  # metrics.json's, tables not read again
    results.update(_compute(stored, opts, [u for u in units if not u.in_metrics]))
    report = _markdown(stored, units, results)
    if suffix:
        _write_reanalysis(stored, report, suffix)
        return metrics
    figures_dir = stored.path / FIGURES
    figures = stored.task.scoring.figures(stored, figures_dir)
    figures += [f for unit in units for f in unit.figures(stored, results[unit.name], figures_dir)]
    write_run_report(stored, report, RunAnalyses(figures=tuple(figures), design=stored.task.design))
    write_manifest(run_dir, stored.manifest.with_timing("analysis_s", time.perf_counter() - t0))
    return metrics


def _markdown(stored: StoredRun, units: Sequence[Analysis], results: Results) -> str:
    """The bench's report (`Scoring.report`) with each unit's answer in its opening and each unit's
    section after it, in registry order."""
    report = stored.task.scoring.report(stored.metrics or {}, stored)
    for unit in units:
        report = unit.opening(stored, results[unit.name], report)
    return report + "".join(unit.section(stored, results[unit.name]) for unit in units)


def _write_reanalysis(stored: StoredRun, report: str, suffix: str) -> None:
    """`report-<suffix>.md` and `.html` of a re-analysis beside the run's own, with the bench's
    figures drawn into `figures/<key>=<value>/`."""
    metrics, markdown_name, page = stored.metrics or {}, *report_files(suffix)
    write_text(stored.path / markdown_name, inert_html(report))
    label = suffix.removeprefix("-")
    write_html(stored.path / page, f"{metrics['bench']} — {metrics['model']} ({label})", report,
               stored.task.scoring.figures(stored, stored.path / FIGURES / label))


def _compute(stored: StoredRun, opts: AnalysisOptions, units: Sequence[Analysis]) -> Results:
    """Each unit's result (`Analysis.compute`) on the stored run, by its name."""
    return {unit.name: unit.compute(stored, opts) for unit in units}


def suffix_of(analysis: Mapping[str, Any] | None) -> str:
    """File-name suffix of a re-analysis with these overrides (`-temperature=0.5`)."""
    return "".join(f"-{k}={v}" for k, v in sorted((analysis or {}).items()))
