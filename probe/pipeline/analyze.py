"""Recompute `metrics.json`, `report.md` and `report.html` of a run directory from its stored
tables (no model): the bench's task says how."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from probe.benches.registry import task_of
from probe.benches.task import Task
from probe.config import build
from probe.errors import ProbeInputError
from probe.files import refuse_links_inside, write_json, write_text
from probe.metrics.core import AnalysisOptions
from probe.pipeline.spec import AnalysisSpec
from probe.report.run import write_run_report
from probe.results.manifest import Manifest, read_manifest, write_manifest
from probe.results.run import Run, load_run
from probe.viz.html import write_html


def analysis_spec(manifest: Manifest, overrides: Mapping[str, Any] | None = None) -> AnalysisSpec:
    """The run's recorded analysis options, updated by metric-option `overrides` (checked like the
    config; options that change the forward pass need a new run)."""
    metric_options = {f.name for f in fields(AnalysisOptions)}
    fixed = sorted(set(overrides or {}) - metric_options)
    if fixed and set(fixed) <= {f.name for f in fields(AnalysisSpec)}:
        raise ProbeInputError(f"analysis: {fixed} change what the model's forward pass records, so a stored run "
                              f"cannot be re-analysed with them; re-analysis takes {sorted(metric_options)}")
    return build(AnalysisSpec, {**(manifest.analysis or {}), **dict(overrides or {})}, "analysis")


def open_run(path: Path) -> tuple[Run, Task]:
    """A stored run with its bench's metrics attached (`run.recompute_metrics` works)."""
    if not (Path(path) / "manifest.json").is_file():
        raise ProbeInputError(f"{path}: no manifest.json; not a probe run directory")
    task = task_of(read_manifest(Path(path)))

    def metrics(run: Run, mask: np.ndarray | None, overrides: Mapping[str, Any] | None) -> dict[str, Any]:
        return task.metrics(run, mask, analysis_spec(run.manifest, overrides).options)

    return load_run(path, metrics_fn=metrics), task


def analyze_run(run_dir: Path, analysis: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Compute metrics from the stored tables, write `metrics.json`, `report.md` and
    `report.html`, return metrics.

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
    write_run_report(run, task, report)
    write_manifest(run_dir, run.manifest.with_timing("analysis_s", time.perf_counter() - t0))
    return metrics


def suffix_of(analysis: Mapping[str, Any] | None) -> str:
    """File-name suffix of a re-analysis with these overrides (`-temperature=0.5`)."""
    return "".join(f"-{k}={v}" for k, v in sorted((analysis or {}).items()))
