"""Steering vectors from stored activations: `v_c = mean(residual | source prompts targeting c)
− mean(residual | dest prompts)` at one layer, per target group c, the source and dest conditions
those of the bench's `Design.contrast` unless named (DiSCo: prompts whose location cue names
group c, minus prompts without a cue).

Computed from a finished run's `activations.safetensors` (`analysis.capture_layers`), so the
vectors can be studied (norms, cosines) without a model, and a steered run can be reproduced
from the stored run alone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from probe.errors import ProbeInputError
from probe.results.io import open_tensors
from probe.results.layout import ACTIVATIONS
from probe.results.run import load_run
from probe.types import Design


def steering_vectors(run_dir: str | Path, layer: int, design: Design, source: str | None = None,
                     dest: str | None = None) -> dict[str, np.ndarray]:
    """`{c: v_c}` (float64 `[d_model]`) at decoder layer `layer` (0-based, as captured) for every
    target c of the `source` prompts; conditions and targets are read as the bench's `design` says,
    `source` and `dest` (None) are its contrast's."""
    source, dest = design.contrast_of(source, dest)
    run = load_run(run_dir)
    captured = run.captured_layers()
    if layer not in captured:
        raise ProbeInputError(f"{run_dir}: layer {layer} was not captured (captured: {captured})")
    # one layer's slice only: a capture of every layer of a large run does not fit in memory
    with open_tensors(Path(run_dir) / ACTIVATIONS) as f:
        acts = f.get_slice("activations")[:, captured.index(layer)].astype(np.float64)
    table = run.table()
    conditions, target = table.conditions(design), table.targets(design)
    base = conditions == dest
    if not base.any():
        raise ProbeInputError(f"{run_dir}: no prompts of condition {dest!r} (intervention.dest) to subtract")
    src = conditions == source
    targets = sorted({str(t) for t in target[src] if t is not None})
    if not targets:
        raise ProbeInputError(f"{run_dir}: no prompts of condition {source!r} with a target (intervention.source)")
    mean_dest = acts[table.prompt_id[base]].mean(axis=0)
    return {c: acts[table.prompt_id[src & (target == c)]].mean(axis=0) - mean_dest for c in targets}

