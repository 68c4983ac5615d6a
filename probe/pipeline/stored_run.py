"""A stored run opened with its bench's task: `open_run` (behind the API's `probe.load_run`,
`python -m probe compare` and every analysis) and the analysis options a stored run is analysed
with (`analysis_spec`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from probe.benches.registry import task_of
from probe.benches.task import Task
from probe.config import build
from probe.errors import ProbeInputError
from probe.metrics.core import AnalysisOptions
from probe.pipeline.spec import AnalysisSpec
from probe.results.manifest import Manifest, read_manifest
from probe.results.run import Run, load_run


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
