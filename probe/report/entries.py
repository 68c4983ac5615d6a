"""Finished runs of a sweep as entries (`StoredRun`: model, revision (training step), kind, pair,
task and `metrics.json`), and the table cells every sweep table shares."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from probe.analyses.cells import is_number, metric_cell
from probe.analyses.view import StoredRun
from probe.benches.registry import task_of
from probe.benches.task import Column
from probe.bounded import loads_yaml
from probe.errors import ProbeInputError
from probe.metrics.core import get_path
from probe.report.format_run import summary_leaves
from probe.results.layout import HYDRA_OVERRIDES, MANIFEST, METRICS, RUN_KEY, is_finished, is_run_dir
from probe.results.manifest import read_manifest
from probe.results.run import finished_run
from probe.viz.markdown import Footnotes

log = logging.getLogger(__name__)


def find_runs(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """Finished run directories (with `DONE`) at or below the given paths, and the unfinished
    ones found there (claimed — `run_key.json` — or scored, but no `DONE`), which a report must
    not mix in and lists as skipped (`unfinished_reason`)."""
    found: list[Path] = []
    unfinished: list[Path] = []
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise ProbeInputError(f"{path}: no such directory")
        # a run directory holds its key from the moment a run claims it, its manifest once scored
        candidates = [path] if is_run_dir(path) else \
            sorted({p.parent for name in (MANIFEST, RUN_KEY) for p in path.rglob(name)})
        for c in candidates:
            done = is_finished(c) and (c / METRICS).is_file()
            target = found if done else unfinished
            if c not in target:
                target.append(c)
    if not found:
        raise ProbeInputError(f"no finished probe runs (with DONE) under {list(map(str, paths))}")
    return found, unfinished


def unfinished_reason(run: Path) -> str:
    """Why a run directory without `DONE` is not in the report, and what finishes it."""
    if not (run / MANIFEST).is_file():
        return (f"stopped while scoring or generating (no {MANIFEST}); run its command again with "
                f"hydra.run.dir={run} to resume from its checkpoints")
    try:
        shard = read_manifest(run).shard
    except (OSError, ValueError, ProbeInputError):
        shard = None
    if shard:
        return (f"shard {shard.index}/{shard.count} (bench.shard): a slice has no metrics; merge "
                "the shards with python -m probe merge")
    if not (run / METRICS).is_file():
        return f"stopped during analysis (no {METRICS}); finish it with python -m probe analyze {run}"
    return f"stopped before DONE was written (after its analysis); finish it with python -m probe analyze {run}"


def differing_overrides(entries: Sequence[StoredRun]) -> dict[Path, str]:
    """Per run, its command-line overrides (`.hydra/overrides.yaml`) whose value is not the same
    in every run given (`key=value …`; `key=(default)` where another run set it and this one did
    not; `key=(not recorded)` for a run without that file: a merged run, one started from Python);
    empty when none differ. Hydra's own keys, where the run was written and its label (a column of
    its own) are left out."""
    recorded = {e.path: _overrides(e.path) for e in entries}
    known = [o for o in recorded.values() if o is not None]
    keys = sorted({k for o in known for k in o})
    differ = [k for k in keys if len({o.get(k) for o in known}) > 1 or len(known) < len(recorded)]
    if not differ:
        return {}
    return {path: " ".join(f"{k}={'(not recorded)' if o is None else o.get(k, '(default)')}" for k in differ)
            for path, o in recorded.items()}


def _overrides(run: Path) -> dict[str, str] | None:
    """`{key: value}` of a run's recorded overrides (None: no such file; unreadable: empty)."""
    import yaml  # PyYAML, which Hydra installs; only sweep reports read these files

    path = run / HYDRA_OVERRIDES
    try:
        if not path.is_file():
            return None
        recorded = loads_yaml(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ProbeInputError) as e:  # ProbeInputError: too deep
        log.warning("%s: unreadable (%s); its overrides are not compared", path, e)
        return {}
    out = {}
    for text in recorded if isinstance(recorded, list) else []:
        key, sep, val = str(text).partition("=")
        key = key.lstrip("+~")
        if sep and not key.startswith("hydra.") and key not in ("progress", "run.label"):  # the label has its column
            out[key] = val
    return out


@dataclass(frozen=True)
class Skipped:
    """A finished run the report leaves out, and why (named in the report)."""

    path: Path
    reason: str


def load_entries(paths: Sequence[Path]) -> list[StoredRun]:
    """One entry per readable finished run, ordered by bench, model and training step (unreadable
    ones are left out: `read_entries` says which and why)."""
    return read_entries(paths)[0]


def read_entries(paths: Sequence[Path]) -> tuple[list[StoredRun], list[Skipped]]:
    """Entries of the finished runs at or below `paths`, ordered by bench, model and training
    step, and the runs whose `manifest.json`, `metrics.json` or tables cannot be read as a run's
    (truncated, not an object, no headline metrics, a damaged table), with the reason: one bad run among many
    is named and skipped, the report goes on. None readable is an input error."""
    entries, skipped = [], []
    for run in find_runs(paths)[0]:
        try:
            entries.append(_entry(run))
        except ProbeInputError as e:
            log.warning("skipping %s: %s", run, e)
            # the list names the run already: its reason starts at the file (`metrics.json: …`)
            skipped.append(Skipped(run, str(e).removeprefix(f"{run}/").removeprefix(f"{run}: ")))
    if not entries:
        reasons = "; ".join(f"{s.path}: {s.reason}" for s in skipped[:3])
        raise ProbeInputError(f"none of the {len(skipped)} finished run(s) could be read ({reasons}"
                              f"{'; …' if len(skipped) > 3 else ''})")
    return sorted(_tagged(entries), key=lambda e: (e.bench, e.model, e.step, e.revision or "")), skipped


def _tagged(entries: list[StoredRun]) -> list[StoredRun]:
    """Runs of one bench that would read alike in a table (same model, revision, intervention:
    e.g. the same model run twice) get their directory name as a tag, or their path where the
    names collide too."""
    same: dict[tuple[str, str], list[int]] = {}
    for i, e in enumerate(entries):
        same.setdefault((e.bench, e.label), []).append(i)
    out = list(entries)
    for members in (m for m in same.values() if len(m) > 1):
        names = [entries[i].path.name for i in members]
        for i, name in zip(members, names):
            out[i] = replace(entries[i], tag=name if names.count(name) == 1 else str(entries[i].path))
    return out


def _entry(path: Path) -> StoredRun:
    run = finished_run(path)
    model, bench = run.manifest.model, run.manifest.bench
    missing = [name for name, v in (("model.name", model.name), ("model.kind", model.kind), ("bench.name", bench.name),
                                    ("bench.kind", bench.kind)) if v is None]
    if missing:
        raise ProbeInputError(f"{MANIFEST}: a field is missing or of the wrong type ({', '.join(missing)})")
    entry = StoredRun.of(run, task_of(run.manifest))
    headline = entry.task.scoring.headline(entry.metrics)[0]
    if not isinstance(headline, Mapping) or not headline:
        raise ProbeInputError(f"{METRICS} has no {entry.task.title} headline metrics (an empty or partial file)")
    return entry


def value(e: StoredRun, column: Column) -> Any:
    """The run's headline value at the column's path (None when absent)."""
    return get_path(e.task.scoring.headline(e.metrics)[0], column.path)


def cell(e: StoredRun, column: Column, notes: Footnotes | None = None) -> str:
    """The value with its 95% interval, `–` when absent (marked with why when `notes` is given)."""
    return metric_cell(e.task, e.metrics, column, notes)


SUMMARY_SCHEMA = pa.schema([
    ("run", pa.string()), ("model", pa.string()), ("revision", pa.string()), ("bench", pa.string()),
    ("metric", pa.string()), ("flavour", pa.string()), ("value", pa.float64()), ("lo", pa.float64()),
    ("hi", pa.float64()), ("intervention", pa.string()),
])
"""`summary.parquet` / `summary.csv` of a sweep: one row per (run, metric, flavour)."""


def summary_rows(entries: Sequence[StoredRun]) -> list[dict[str, Any]]:
    """Every numeric metric of every run in long format, with its 95% interval where stored.
    Forced-choice runs give their `expected`, `greedy` and `debiased` blocks; other runs their
    headline block; factor runs also the `format` block's split, Kendall's W and verdict counts."""
    rows = []
    for e in entries:
        cis = e.metrics.get("ci95") or {}
        blocks = [(k, e.metrics[k], cis.get(k)) for k in ("expected", "greedy", "debiased")
                  if isinstance(e.metrics.get(k), dict)]
        if not blocks:
            tree, ci_tree = e.task.scoring.headline(e.metrics)
            name = next((k for k, v in e.metrics.items() if v is tree), "metrics")
            blocks = [(name, tree, ci_tree)]
        for flavour, tree, ci_tree in blocks:
            for path, v in _leaves(tree):
                if not is_number(v):
                    continue
                ci = get_path(ci_tree, path) if ci_tree else None
                lo, hi = (ci if isinstance(ci, list) and len(ci) == 2 else (None, None))
                rows.append({"run": str(e.path), "model": e.model, "revision": e.revision, "bench": e.bench,
                             "metric": path, "flavour": flavour, "value": float(v),
                             "lo": None if lo is None else float(lo), "hi": None if hi is None else float(hi),
                             "intervention": e.intervention_label})
        if isinstance(e.metrics.get("format"), dict):  # a factor run: the wording analysis too
            rows += [{"run": str(e.path), "model": e.model, "revision": e.revision, "bench": e.bench, "metric": path,
                      "flavour": "format", "value": float(v), "lo": _float(lo), "hi": _float(hi),
                      "intervention": e.intervention_label}
                     for path, v, lo, hi in summary_leaves(e.metrics["format"]) if is_number(v)]
    return rows


def _float(x: Any) -> float | None:
    return float(x) if is_number(x) else None


def _leaves(tree: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """`(dotted path, leaf)` of nested dicts; list entries get their index as a path part."""
    if isinstance(tree, Mapping):
        return [x for k, v in tree.items() for x in _leaves(v, f"{prefix}{k}.")]
    if isinstance(tree, list):
        return [x for i, v in enumerate(tree) for x in _leaves(v, f"{prefix}{i}.")]
    return [(prefix.rstrip("."), tree)]
