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
from probe.pipeline.stored_run import analysis_spec, open_run
from probe.report.run_report import write_run_report
from probe.results.manifest import write_manifest
from probe.viz.html import write_html


def analyze_run(run_dir: Path, analysis: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Compute metrics from the stored tables, write `metrics.json`, the lens and patching
    tables and the figures (`analysis_outputs`), then `report.md` and `report.html`; return metrics.

    `analysis` overrides the analysis options recorded in the manifest (e.g. a temperature);
    the results then go to `metrics-<key>=<value>.json`, `report-….md` and `report-….html`
    (its figures in `figures/<key>=<value>/`) beside the originals.
    """
    t0 = time.perf_counter()
    refuse_links_inside(Path(run_dir))  # before any file is written: a planted `figures/` link is refused here
    run, task = open_run(run_dir)
    opts = analysis_spec(run.manifest, analysis).options
    metrics: dict[str, Any] = {"bench": run.manifest.bench.name, "model": run.manifest.model.name,
                               **task.metrics(run, None, opts)}
    suffix = suffix_of(analysis)
    # Overrides are a re-analysis: written beside the run's own metrics, never over them.
    write_json(run_dir / f"metrics{suffix}.json", metrics)
    run = replace(run, metrics=metrics)  # what metrics.json now holds, without reading the tables again
    report = task.report(metrics, run)
    if suffix:
        write_text(run_dir / f"report{suffix}.md", report)
        label = suffix.removeprefix("-")
        write_html(run_dir / f"report{suffix}.html", f"{metrics['bench']} — {metrics['model']} ({label})", report,
                   task.figures(run, run_dir / "figures" / label))
        return metrics
    write_run_report(run, report, run_analyses(run, task, opts))
    write_manifest(run_dir, run.manifest.with_timing("analysis_s", time.perf_counter() - t0))
    return metrics


def suffix_of(analysis: Mapping[str, Any] | None) -> str:
    """File-name suffix of a re-analysis with these overrides (`-temperature=0.5`)."""
    return "".join(f"-{k}={v}" for k, v in sorted((analysis or {}).items()))
