"""The Python API over a run directory, for follow-up studies (no model needed): `load_run` gives
a `probe.results.run.Run` (tables, tensors, manifest, `metrics.json`); `recompute_metrics(run, …)`
recomputes its bench's metrics on any subset of prompts, with other analysis options;
`run.patching()` gives an activation-patching run's raw results and `patching_table(run, …)` the
share of the cue's effect restored per layer; `steering_vectors(run_dir, layer)` the per-group
vectors a steered run adds, from a run's captured activations."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from probe.analyses.view import StoredRun
from probe.benches.registry import task_of
from probe.metrics import steering_vectors as vectors
from probe.metrics.patch_effects import patching_table, restored_share
from probe.results.manifest import read_manifest
from probe.results.run import Run
from probe.results.run import load_run as _load_run

__all__ = ["Run", "load_run", "patching_table", "recompute_metrics", "restored_share", "steering_vectors"]


def load_run(path: str | Path) -> Run:
    """Load a run directory of any bench (letter, generation or open-answer mode), with its
    bench's way of removing the letter prior (`run.group_distribution(reading="debiased")`)."""
    run = _load_run(Path(path))
    return StoredRun.of(run, task_of(run.manifest))


def recompute_metrics(run: Run, mask: np.ndarray | None = None,
                      analysis: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The run's bench metrics (`expected`, `greedy`, `ci95`, …) on the prompts `mask` keeps (a
    boolean `[prompt]` array, e.g. `run.mask(condition="C0")`; None: all), with the analysis
    options the run recorded updated by `analysis` (e.g. `{"temperature": 0.5, "n_boot": 0}`)."""
    return StoredRun.of(run, task_of(run.manifest)).recompute_metrics(mask, analysis)


def steering_vectors(run_dir: str | Path, layer: int, source: str | None = None,
                     dest: str | None = None) -> dict[str, np.ndarray]:
    """`{c: v_c}` at decoder `layer` from a run's captured activations
    (`probe.metrics.steering_vectors.steering_vectors`), between the conditions its bench compares by
    default unless `source` and `dest` name others."""
    design = task_of(read_manifest(Path(run_dir))).design
    return vectors.steering_vectors(run_dir, layer, design, source, dest)
