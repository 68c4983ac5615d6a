"""Comparisons between stored runs (no model needed)."""

from __future__ import annotations

import json
from pathlib import Path

from probe.errors import ProbeInputError
from probe.metrics.core import symmetric_kl


def run_shares(run_dir: Path, flavour: str = "expected") -> dict[str, float]:
    """A CCD run's cluster shares from its `metrics.json`."""
    path = Path(run_dir) / "metrics.json"
    if not path.is_file():
        raise ProbeInputError(f"{run_dir}: no metrics.json; is this a finished probe run?")
    metrics = json.loads(path.read_text())
    block = metrics.get(flavour) or {}
    if "shares" not in block:
        raise ProbeInputError(f"{path}: no `{flavour}.shares` (not a CCD-Bench run?)")
    return block["shares"]


def sym_kl_between_runs(run_a: Path, run_b: Path, flavour: str = "expected", eps: float = 1e-10) -> float:
    """Symmetrized KL (paper eq. 5: ½[KL(p‖q) + KL(q‖p)], ε added) between two runs' cluster
    distributions; the distance behind the sweep's average-linkage dendrogram."""
    return symmetric_kl(run_shares(run_a, flavour), run_shares(run_b, flavour), eps)
