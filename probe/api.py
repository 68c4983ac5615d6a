"""The Python API over a run directory, for follow-up studies. No model needed.

    run = probe.load_run("runs/demo/smollm2-135m/2026-11-30_12-00-00")
    run.prompts.to_pandas()                      # one row per prompt
    p = run.choice_probs()                       # [prompt, letter], rows in prompt-id order
    run.group_distribution(run.mask(condition="C0"))   # {culture: expected share}
    run.recompute_metrics(run.mask(condition="C0"))    # any metric on a subset
    lens = run.lens()                            # [prompt, layer, letter] (if stored)
"""

from __future__ import annotations

from pathlib import Path

from probe.pipeline.analyze import open_run
from probe.results.run import Run

__all__ = ["Run", "load_run"]


def load_run(path: str | Path) -> Run:
    """Load a run directory of any bench (letter, generation or open-answer mode), with its
    bench's metrics attached for `recompute_metrics`."""
    return open_run(Path(path))[0]
