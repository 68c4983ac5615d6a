"""Cross-run aggregation: one table per bench kind (rows = runs, the task's headline columns with
CIs), base-vs-instruct tables for model pairs present, the tasks' sweep figures, one HTML page.

Reads only `metrics.json` and `manifest.json` (and the tables for figures) of finished runs
(those with `DONE`): no model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probe.benches.registry import task_of, tasks
from probe.benches.task import Column, Task
from probe.errors import ProbeInputError
from probe.metrics.core import get_path
from probe.results.run import Run, load_run
from probe.viz.figures import Figure
from probe.viz.html import write_html


@dataclass(frozen=True)
class RunEntry:
    """One finished run in a sweep."""

    path: Path
    model: str
    revision: str | None
    kind: str
    pair: str | None
    bench: str
    task: Task
    metrics: dict[str, Any]

    @property
    def label(self) -> str:
        return self.model if not self.revision else f"{self.model}@{self.revision}"

    @property
    def step(self) -> int:
        """Training step named by the revision (`step1000`, `stage1-step1000-tokens…`), else -1."""
        m = re.search(r"step[-_]?(\d+)", self.revision or "")
        return int(m.group(1)) if m else -1


def find_runs(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """Finished run directories (with `DONE`) at or below the given paths, and the unfinished
    ones found there (a manifest but no `DONE`), which a report must not mix in."""
    found: list[Path] = []
    unfinished: list[Path] = []
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise ProbeInputError(f"{path}: no such directory")
        candidates = [path] if (path / "manifest.json").is_file() else \
            sorted(p.parent for p in path.rglob("manifest.json"))
        for c in candidates:
            done = (c / "DONE").is_file() and (c / "metrics.json").is_file()
            target = found if done else unfinished
            if c not in target:
                target.append(c)
    if not found:
        raise ProbeInputError(f"no finished probe runs (with DONE) under {list(map(str, paths))}")
    return found, unfinished


def load_entries(paths: Sequence[Path]) -> list[RunEntry]:
    """One entry per finished run, ordered by bench, model and training step."""
    entries = []
    for run in find_runs(paths)[0]:
        manifest = json.loads((run / "manifest.json").read_text())
        model = manifest["model"]
        entries.append(RunEntry(path=run, model=model["name"], revision=model.get("revision"), kind=model["kind"],
                                pair=model.get("pair"), bench=manifest["bench"]["name"], task=task_of(manifest),
                                metrics=json.loads((run / "metrics.json").read_text())))
    return sorted(entries, key=lambda e: (e.bench, e.model, e.step, e.revision or ""))


def _value(e: RunEntry, column: Column) -> Any:
    return get_path(e.task.headline(e.metrics)[0], column.path)


def _cell(e: RunEntry, column: Column) -> str:
    if column.cell is not None:
        return column.cell(e.metrics)
    tree, ci_tree = e.task.headline(e.metrics)
    value, ci = get_path(tree, column.path), get_path(ci_tree, column.path)
    if value is None:
        return "–"
    if ci and ci[0] is not None:
        return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
    return f"{value:.3f}"


def bench_table(entries: Sequence[RunEntry], task: Task) -> str:
    """Markdown table: one row per run of this task, its headline columns with CIs."""
    rows = [e for e in entries if e.task.kind == task.kind]
    head = ["run", "kind", "bench"] + [c.label for c in task.sweep_columns]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for e in rows:
        lines.append("| " + " | ".join([e.label, e.kind, e.bench] + [_cell(e, c) for c in task.sweep_columns]) + " |")
    return "\n".join(lines)


def pair_table(entries: Sequence[RunEntry], task: Task) -> str | None:
    """Base vs instruct: both runs' metrics and the difference (instruct − base), for every
    instruct run whose configured pair also ran on the same bench; None if no pair is present."""
    mine = [e for e in entries if e.task.kind == task.kind]
    by_model = {(e.model, e.bench, e.revision): e for e in mine}
    lines = []
    for e in mine:
        if e.kind != "instruct" or not e.pair:
            continue
        base = by_model.get((e.pair, e.bench, e.revision)) or next(
            (b for (m, bench, _), b in by_model.items() if m == e.pair and bench == e.bench), None)
        if base is None:
            continue
        for column in task.pair_columns:
            a, b = _value(e, column), _value(base, column)
            delta = f"{a - b:+.3f}" if a is not None and b is not None else "–"
            lines.append(f"| {e.label} vs {base.label} | {column.label} | {_cell(e, column)} | "
                         f"{_cell(base, column)} | {delta} |")
    if not lines:
        return None
    return "\n".join(["| pair | metric | instruct | base | Δ (instruct − base) |", "|---|---|---|---|---|", *lines])


def _present_tasks(entries: Sequence[RunEntry]) -> list[Task]:
    """The tasks of the entries, registered ones in registry order, then any others."""
    kinds = {e.task.kind: e.task for e in entries}
    ordered = [t for t in tasks() if t.kind in kinds]
    return ordered + [t for k, t in kinds.items() if t not in ordered]


def sweep_markdown(entries: Sequence[RunEntry], unfinished: Sequence[Path] = ()) -> str:
    """The sweep report: per bench kind a headline table, then base-vs-instruct where pairs ran."""
    parts = [f"# probe sweep report — {len(entries)} runs", ""]
    for task in _present_tasks(entries):
        parts += [f"## {task.title}", "", task.sweep_note, "", bench_table(entries, task), ""]
        pairs = pair_table(entries, task)
        if pairs:
            parts += [f"### {task.title}: base vs instruct", "", pairs, ""]
    parts += ["## Runs", ""] + [f"- {e.label} ({e.bench}): `{e.path}`" for e in entries]
    if unfinished:
        parts += ["", f"## Skipped: {len(unfinished)} unfinished run(s) (no DONE)", ""]
        parts += [f"- `{p}`" for p in unfinished]
    return "\n".join(parts) + "\n"


def sweep_figures(runs: Sequence[Run], labels: Sequence[str], out_dir: Path) -> list[Figure]:
    """Each task's sweep figures over its runs (one label per run), tasks in registry order."""
    if len(runs) != len(labels):
        raise ValueError(f"sweep_figures: {len(runs)} runs but {len(labels)} labels")
    by_task = [(task_of(r.manifest), r, lab) for r, lab in zip(runs, labels)]
    present = {t.kind: t for t, _, _ in by_task}
    ordered = [t for t in tasks() if t.kind in present] + [t for k, t in present.items() if t not in tasks()]
    figures: list[Figure] = []
    for task in ordered:
        mine = [(r, lab) for t, r, lab in by_task if t.kind == task.kind]
        figures += task.sweep_figures([r for r, _ in mine], [lab for _, lab in mine], Path(out_dir))
    return figures


def write_sweep_report(paths: Sequence[Path], out_dir: Path) -> Path:
    """`report.md`, figures and a self-contained `report.html` in `out_dir`; returns the HTML path."""
    entries = load_entries(paths)
    unfinished = find_runs(paths)[1]
    out_dir.mkdir(parents=True, exist_ok=True)
    markdown = sweep_markdown(entries, unfinished)
    (out_dir / "report.md").write_text(markdown)
    figures = sweep_figures([load_run(e.path) for e in entries], [e.label for e in entries], out_dir)
    write_html(out_dir / "report.html", "probe sweep report", markdown, figures)
    return out_dir / "report.html"
