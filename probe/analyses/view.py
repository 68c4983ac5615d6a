"""The one view of a stored run: its directory's files (`probe.results.run.Run`) with the bench's
task that made it. The analysis, its units (`probe.analyses`), comparisons, sweep reports,
`probe.load_run` and `probe.recompute_metrics` all read a run through it.

`Run` knows no bench; `StoredRun` adds the task, so its choice distribution has the `debiased`
reading too (the task's way of removing the letter prior), its metrics can be recomputed
(`recompute_metrics`, `measure`) with the analysis options it recorded, updated by overrides
(`options`: the one place they come from), and it is labelled in a report's tables.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from probe.benches.registry import task_of
from probe.benches.task import Task
from probe.config import build
from probe.errors import ProbeInputError
from probe.metrics.core import AnalysisOptions
from probe.metrics.variant_shares import variant_mask, variant_records
from probe.results.manifest import Manifest
from probe.results.records import FORWARD_PASS_OPTIONS, InterventionRecord
from probe.results.run import Run, load_run

METRIC_OPTIONS = frozenset(f.name for f in fields(AnalysisOptions))


def analysis_options(manifest: Manifest, overrides: Mapping[str, Any] | None = None) -> AnalysisOptions:
    """The metric options a run was analysed with (its manifest's `analysis`), updated by
    `overrides` (checked like the config; options that change the forward pass need a new run)."""
    fixed = sorted(set(overrides or {}) - METRIC_OPTIONS)
    if fixed and set(fixed) <= FORWARD_PASS_OPTIONS:
        raise ProbeInputError(f"analysis: {fixed} change what the model's forward pass records, so a stored run "
                              f"cannot be re-analysed with them; re-analysis takes {sorted(METRIC_OPTIONS)}")
    recorded = {} if manifest.analysis is None else manifest.analysis.recorded(METRIC_OPTIONS)
    return build(AnalysisOptions, {**recorded, **dict(overrides or {})}, "analysis")


@dataclass
class StoredRun(Run):
    """A run directory with its bench's task; `tag` tells it apart in a report's table from
    another run that would read alike (its directory, else its path; None: no other)."""

    task: Task = field(kw_only=True, repr=False, compare=False)
    """The bench's task (`probe.benches.registry.task_of` its manifest)."""
    tag: str | None = field(default=None, kw_only=True)

    @classmethod
    def of(cls, run: Run, task: Task, tag: str | None = None) -> StoredRun:
        """`run` (its stored files, read again lazily) with `task`."""
        return cls(path=run.path, manifest=run.manifest, metrics=run.metrics, task=task, tag=tag,
                   debias=task.scoring.debiased or _no_letter_prior)

    @classmethod
    def open(cls, path: str | Path) -> StoredRun:
        """A whole run directory, finished or not (`probe.results.run.load_run`), with its task."""
        run = load_run(path)
        return cls.of(run, task_of(run.manifest))

    def options(self, overrides: Mapping[str, Any] | None = None) -> AnalysisOptions:
        """Its recorded metric options, updated by `overrides` (`analysis_options`)."""
        return analysis_options(self.manifest, overrides)

    def measure(self, opts: AnalysisOptions, mask: np.ndarray | None = None) -> dict[str, Any]:
        """The task's metric tree on the masked prompts (None: all; a factor run's: the protocol's
        variant, `probe.report.format_run`) with `opts`, returned with its bootstrap replicates
        (`probe.metrics.core.replicates_of`)."""
        if mask is None and variant_records(self):
            mask = variant_mask(self, 0)
        return self.task.scoring.metrics(self, mask, opts)

    def recompute_metrics(self, mask: np.ndarray | None = None,
                          analysis: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The bench's metric tree (`expected`, `greedy`, `ci95`, …) on the masked prompts only,
        with the run's analysis options updated by `analysis`."""
        return self.measure(self.options(analysis), mask)

    @property
    def model(self) -> str:
        return str(self.manifest.model.name)

    @property
    def revision(self) -> str | None:
        return self.manifest.model.revision

    @property
    def kind(self) -> str:
        """The model's kind (`base`, `instruct`)."""
        return str(self.manifest.model.kind)

    @property
    def pair(self) -> str | None:
        """The model config it pairs with (base ↔ instruct), if any."""
        return self.manifest.model.pair

    @property
    def bench(self) -> str:
        return str(self.manifest.bench.name)

    @property
    def intervention(self) -> InterventionRecord | None:
        """The run's intervention (None: the model as it is)."""
        return self.manifest.intervention

    @property
    def model_label(self) -> str:
        return self.model if not self.revision else f"{self.model}@{self.revision}"

    @property
    def intervention_label(self) -> str | None:
        """`steer China α=2 L24 last` (`C2−C0` when not the bench's default contrast; `v:<sha>`
        names the vector), or the intervention's name; None without one."""
        iv = self.intervention
        if iv is None:
            return None
        if iv.is_steering:
            default = self.task.design.contrast
            usual = default is not None and (iv.source, iv.dest) == (default.source, default.dest)
            pair = "" if usual else f" {iv.source}−{iv.dest}"
            return (f"steer {iv.group} α={iv.alpha:g} L{iv.layer_resolved} {iv.positions}{pair} "
                    f"v:{str(iv.vector_sha256)[:6]}")
        return str(iv.name)

    @property
    def label(self) -> str:
        extra = self.intervention_label
        label = f"{self.model_label} {extra}" if extra else self.model_label
        return f"{label} [{self.tag}]" if self.tag else label

    @property
    def step(self) -> int:
        """Training step named by the revision (`step1000`, `stage1-step1000-tokens…`), else -1."""
        m = re.search(r"step[-_]?(\d+)", self.revision or "")
        return int(m.group(1)) if m else -1


def _no_letter_prior(run: Run, temperature: float) -> np.ndarray | None:
    """The debiased reading of a bench that has none (its `Scoring.debiased` is None)."""
    raise ProbeInputError(f"{run.path}: a {run.manifest.bench.kind} run has open answers, not letter choices: "
                          "there is no letter prior to remove")
