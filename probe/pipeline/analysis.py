"""The analysis step of a run, a shard merge and `python -m probe analyze`: `metrics.json`,
what the report shows and the report itself, recomputed from the stored tables (no model); the
bench's task says how."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from probe.files import refuse_links_inside, write_json, write_text
from probe.pipeline.analysis_outputs import run_analyses
from probe.report.format_run import format_block, variant_records
from probe.report.run_report import write_run_report
from probe.report.stored_run import StoredRun
from probe.results.layout import FIGURES, metrics_file, report_files
from probe.results.manifest import write_manifest
from probe.viz.format_report import format_section, with_wording_answer
from probe.viz.html import write_html
from probe.viz.markdown import inert_html


def analyze_run(run_dir: Path, analysis: Mapping[str, Any] | None = None,
                record: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Compute metrics from the stored tables, write `metrics.json`, the lens and patching
    tables and the figures (`analysis_outputs`), then `report.md` and `report.html`; return metrics.
    The manifest is read once and written once, at the end (with the analysis time).

    `analysis` overrides the analysis options recorded in the manifest (e.g. a temperature);
    the results then go to `metrics-<key>=<value>.json`, `report-….md` and `report-….html`
    (its figures in `figures/<key>=<value>/`) beside the originals, and the manifest is left as
    it is. `record` replaces the recorded analysis options instead (a finished run asked for
    with other ones): the metrics use them and the manifest records them.
    """
    if analysis and record is not None:
        raise ValueError("analyze_run: either analysis overrides (a re-analysis beside the run's own) or new "
                         "options to record, not both")
    t0 = time.perf_counter()
    refuse_links_inside(Path(run_dir))  # before any file is written: a planted `figures/` link is refused here
    stored = StoredRun.open(run_dir)
    if record is not None:
        stored = replace(stored, run=replace(stored.run, manifest=stored.manifest.with_analysis(record)))
    opts = stored.options(analysis)
    metrics: dict[str, Any] = {"bench": stored.manifest.bench.name, "model": stored.manifest.model.name,
                               **stored.measure(opts)}
    if variant_records(stored.run):  # a factor run: the key exists only there
        metrics["format"] = format_block(stored.run, stored.task, opts)
    suffix = suffix_of(analysis)
    # Overrides are a re-analysis: written beside the run's own metrics, never over them.
    write_json(run_dir / metrics_file(suffix), metrics)
    stored = replace(stored, run=replace(stored.run, metrics=metrics))  # metrics.json's, tables not read again
    report = stored.task.report(metrics, stored.run)
    if "format" in metrics:
        groups = stored.task.presentation.groups
        report = with_wording_answer(report, metrics["format"], groups) + format_section(metrics["format"], groups)
    if suffix:
        markdown, page = report_files(suffix)
        write_text(run_dir / markdown, inert_html(report))
        label = suffix.removeprefix("-")
        write_html(run_dir / page, f"{metrics['bench']} — {metrics['model']} ({label})", report,
                   stored.task.figures(stored.run, run_dir / FIGURES / label))
        return metrics
    write_run_report(stored.run, report, run_analyses(stored, opts))
    write_manifest(run_dir, stored.manifest.with_timing("analysis_s", time.perf_counter() - t0))
    return metrics


def suffix_of(analysis: Mapping[str, Any] | None) -> str:
    """File-name suffix of a re-analysis with these overrides (`-temperature=0.5`)."""
    return "".join(f"-{k}={v}" for k, v in sorted((analysis or {}).items()))
