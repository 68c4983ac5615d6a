"""The past runs at or below a directory, one line each (`probe runs`): bench, model, mode,
variants, conditions, status, headline metric, first caveat and path, read through the run's manifest, `DONE` and `metrics.json`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from probe.analyses.view import StoredRun
from probe.errors import ProbeInputError
from probe.report.entries import metric_cell
from probe.report.summary import caveat, conditions_of
from probe.results.launch import read_launch
from probe.results.layout import MANIFEST, METRICS, PROMPTS, RUN_KEY, is_finished, is_run_dir
from probe.results.manifest import read_manifest


@dataclass(frozen=True)
class RunLine:
    """One past run as `probe runs` lists it."""

    path: Path
    bench: str
    model: str
    status: str
    """`done`, `analysed` (metrics but no `DONE`), `scoring` (claimed, no manifest yet: running
    or stopped; rerun its command to resume), `shard i/n`, or `unreadable: …`."""
    headline: str
    """The bench's first headline column with its interval (`KL 0.012 [0.008, 0.020]`), `–` when
    none is defined."""
    mode: str = "–"
    """The backend's scoring mode (`letters`, `generate`, `text`, …)."""
    variants: str = "–"
    """A factor run's variant count, `–` without prompt factors."""
    conditions: str = "–"
    """How many conditions the run analysed apart."""
    caveat: str = "–"
    """The first thing its end-of-run summary warns about (`letter-driven`, `small sample`, …)."""
    label: str = ""
    """Its `run.label` (empty: none)."""


def run_dirs(root: Path) -> list[Path]:
    """Run directories at or below `root` (claimed — `run_key.json` —, scored, or a dry run's
    prompts table alone), sorted by path."""
    if not root.exists():
        raise ProbeInputError(f"{root}: no such directory")
    if is_run_dir(root) or _is_dry(root):
        return [root]
    runs = {p.parent for name in (MANIFEST, RUN_KEY) for p in root.rglob(name)}
    return sorted(runs | {p.parent for p in root.rglob(PROMPTS) if _is_dry(p.parent)})


def _is_dry(path: Path) -> bool:
    """A dry run's directory: its prompts table, no claim and no manifest."""
    return (path / PROMPTS).is_file() and not (path / MANIFEST).exists() and not (path / RUN_KEY).exists()


def list_runs(root: Path) -> list[RunLine]:
    """Every run directory at or below `root`, described (`RunLine`)."""
    return [describe(path) for path in run_dirs(root)]


def describe(path: Path) -> RunLine:
    """What one run directory holds: its bench, model, label, status and headline metric (a dry
    run's bench, model and label from its launch record)."""
    if _is_dry(path):
        launched = read_launch(path)
        return RunLine(path, launched.bench, launched.model, "dry run", "–", label=launched.label or "")
    if not (path / MANIFEST).is_file():
        return RunLine(path, "?", "?", "scoring", "–")
    try:
        manifest = read_manifest(path)
    except (OSError, ValueError, ProbeInputError) as e:
        return RunLine(path, "?", "?", f"unreadable: {e.__class__.__name__}", "–")
    bench, model, label = str(manifest.bench.name), str(manifest.model.name), manifest.label or ""
    if manifest.shard is not None:
        return RunLine(path, bench, model, f"shard {manifest.shard.index}/{manifest.shard.count}", "–", label=label)
    if not (path / METRICS).is_file():
        return RunLine(path, bench, model, "scoring", "–", label=label)
    status = "done" if is_finished(path) else "analysed"
    try:
        stored = StoredRun.open(path)
    except (OSError, ValueError, ProbeInputError) as e:
        return RunLine(path, bench, model, f"{status}; unreadable: {e.__class__.__name__}", "–", label=label)
    variants = len(manifest.raw.get("variants") or [])
    return RunLine(path, bench, model, status, _headline(stored), mode=str((manifest.raw.get("backend") or {}).get("mode") or "–"),
                   variants=str(variants) if variants else "–",
                   conditions=str(len(conditions_of(stored.metrics)) or 1),
                   caveat=caveat(stored.metrics, stored.task.judging.errors(stored.metrics),
                                 stored.task.presentation.caveats(stored.metrics)), label=label)


def _headline(run: StoredRun) -> str:
    """The first of the bench's headline columns that has a value, with its label; a test's
    `, p = 0.29` reads ` p=.29` (the listing is one terminal line: the p-value must not be the
    part cut, and a p-value's leading zero is the one character it can spare)."""
    for column in run.task.presentation.sweep_columns:
        value = metric_cell(run.task, run.metrics, column)
        if value != "–":
            return f"{column.label} {value.replace(', p = 0.', ' p=.').replace(', p = ', ' p=')}"
    return "–"
