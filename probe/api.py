"""The Python API over a run directory, for follow-up studies (no model needed): `load_run` gives
a `probe.results.run.Run` with the bench's metrics attached, so `run.recompute_metrics` works;
`run.patching()` gives an activation-patching run's raw results and `patching_table(run, …)` the
share of the cue's effect restored per layer; `steering_vectors(run_dir, layer)` the per-culture
vectors a steered run adds, from a run's captured activations."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from probe.benches.registry import task_of
from probe.metrics import steering_vectors as vectors
from probe.metrics.patch_effects import patching_table, restored_share
from probe.pipeline.stored_run import open_run
from probe.results.manifest import read_manifest
from probe.results.run import Run

__all__ = ["Run", "load_run", "patching_table", "restored_share", "steering_vectors"]


def load_run(path: str | Path) -> Run:
    """Load a run directory of any bench (letter, generation or open-answer mode), with its
    bench's metrics attached for `recompute_metrics`."""
    return open_run(Path(path))[0]


def steering_vectors(run_dir: str | Path, layer: int, source: str | None = None,
                     dest: str | None = None) -> dict[str, np.ndarray]:
    """`{c: v_c}` at decoder `layer` from a run's captured activations
    (`probe.metrics.steering_vectors.steering_vectors`), between the conditions its bench compares by
    default unless `source` and `dest` name others."""
    design = task_of(read_manifest(Path(run_dir))).design
    return vectors.steering_vectors(run_dir, layer, design, source, dest)
