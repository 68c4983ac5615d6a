"""Cross-run aggregation: one table per bench kind (rows = runs, the task's headline columns with
CIs), base-vs-instruct tables for model pairs present, the tasks' sweep figures, one HTML page.

Reads only `metrics.json` and `manifest.json` (and the tables for figures) of finished runs
(those with `DONE`): no model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from probe.analyses.registry import analyses, sweep_columns
from probe.escape import terminal_text
from probe.analyses.view import StoredRun
from probe.benches.registry import task_of, tasks
from probe.benches.task import Task
from probe.report.checkpoints import checkpoint_figures, checkpoint_table
from probe.errors import ProbeInputError
from probe.report.entries import (
    SUMMARY_SCHEMA,
    Skipped,
    cell,
    differing_overrides,
    find_runs,
    is_number,
    load_entries,
    read_entries,
    summary_rows,
    unfinished_reason,
    value,
)
from probe.report.paired_runs import PAIRED_NOTE, delta_cell, p_cell, paired_or_reason
from probe.results.io import write_csv, write_table
from probe.files import refuse_links_inside, write_text
from probe.results.layout import REPORT, REPORT_PAGE, SUMMARY_CSV, SUMMARY_TABLE, claim_output_dir
from probe.results.run import Run
from probe.viz.figures import Figure
from probe.viz.html import write_html
from probe.metrics.core import SMALL_N
from probe.report.header import escape_markdown, weights_line
from probe.viz.markdown import Footnotes, bootstrap_units, fit_table, inert_html, small_sample, split_table, table


__all__ = ["bench_table", "find_runs", "load_entries", "pair_table", "sweep_figures", "sweep_markdown",
           "write_sweep_report"]


LETTER_NOTE = ("⚠: the letter drives this run's answers in some condition — the letter explains more log-prob "
               "variance than the content, or the largest letter prior (of the probabilities or of the greedy picks) "
               "is above `analysis.letter_prior_ratio`/K (at most halfway to 1); `letter_warnings` in its "
               "metrics.json says which, the warning opening its report says what it means: read its debiased "
               "columns and letter share before its other metrics.")


SMALL_MARK = " ‡"
NO_COUNT = "not recorded: metrics.json without `bootstrap.n_units` or `n_items` (written by an older probe)"


def bench_table(entries: Sequence[StoredRun], task: Task) -> str:
    """Markdown table(s): one row per run of this task, its headline columns with CIs, split
    into parts that fit the page; each empty cell footnoted with why, runs with few items and
    runs the letter drives marked."""
    rows = [e for e in entries if e.task.kind == task.kind]
    differ = differing_overrides(rows)
    notes, body = Footnotes(), []
    columns = [c for c in (*task.presentation.sweep_columns, *sweep_columns())
               if not c.optional or any(cell(e, c) != "–" for e in rows)]
    for e in rows:
        label = f"{e.label} ⚠" if e.metrics.get("letter_warnings") else e.label
        n, _ = bootstrap_units(e.metrics)
        size = notes.gap(NO_COUNT) if n is None else f"{n}{SMALL_MARK if small_sample(e.metrics) else ''}"
        body.append([label, *map(escape_markdown, run_labels(rows, e)), e.kind, e.bench, size,
                     *([differ[e.path]] if differ else []),
                     *(cell(e, c, notes) for c in columns)])
    head = ["run", *(["label"] if run_labels(rows) else []), "kind", "bench", f"{_unit(rows)}s",
            *(["overrides"] if differ else []), *(c.label for c in columns)]
    parts = split_table(head, body, keep=4 + bool(differ) + bool(run_labels(rows)))
    lines = [line for i, part in enumerate(parts) for line in ([""] if i else []) + part] + notes.lines()
    if any(small_sample(e.metrics) for e in rows):
        lines += ["", f"‡ fewer than {SMALL_N} {_unit(rows)}s: the bootstrap intervals of this run are too "
                  "narrow and unreliable; read them as descriptive."]
    if any(e.metrics.get("letter_warnings") for e in rows):
        lines += ["", LETTER_NOTE]
    return "\n".join(lines)


def run_labels(entries: Sequence[StoredRun], entry: StoredRun | None = None) -> list[str]:
    """The `label` cell of `entry` (its `run.label`, `–` without one) when some of `entries` has
    a label, else no cell; without `entry`, a non-empty list when the column is shown."""
    if not any(e.manifest.label for e in entries):
        return []
    return [(entry.manifest.label or "–") if entry is not None else "label"]


def _unit(entries: Sequence[StoredRun]) -> str:
    """What the runs' bootstraps resample (`item`, `template`)."""
    return bootstrap_units(entries[0].metrics)[1] if entries else "item"


def pair_table(entries: Sequence[StoredRun], task: Task) -> str | None:
    """Base vs instruct: both runs' metrics and the difference (instruct − base) with its paired
    bootstrap interval and Holm-adjusted p-value, for every instruct run whose configured pair
    also ran on the same bench; None if no pair is present."""
    mine = [e for e in entries if e.task.kind == task.kind and not e.intervention]
    by_model = {(e.model, e.bench, e.revision): e for e in mine}
    lines, notes, marks = [], [], Footnotes()
    for e in mine:
        if e.kind != "instruct" or not e.pair:
            continue
        base = by_model.get((e.pair, e.bench, e.revision)) or next(
            (b for (m, bench, _), b in by_model.items() if m == e.pair and bench == e.bench), None)
        if base is None:
            continue
        columns = [c for c in task.presentation.pair_columns
                   if c.numeric and is_number(value(e, c)) and is_number(value(base, c))]
        diffs, reason = paired_or_reason(e, base, [c.path for c in columns])
        if reason:
            notes.append(f"- {e.label} vs {base.label}: {reason}")
        for column in task.presentation.pair_columns:
            a, b = value(e, column), value(base, column)
            delta = a - b if a is not None and b is not None else None
            diff = diffs.get(column.path)
            d = delta_cell(delta, diff)
            p = p_cell(diff)
            lines.append([f"{e.label} vs {base.label}", column.label, cell(e, column, marks), cell(base, column, marks),
                          marks.gap(NO_DELTA) if d == "–" else d, marks.gap(NO_P) if p == "–" else p])
    if not lines:
        return None
    head = ["pair", "metric", "instruct", "base", "Δ (instruct − base) [paired 95% CI]", "p (Holm)"]
    return "\n".join(table(head, lines) + marks.lines() + (["", "Without a paired interval:", *notes] if notes else []))


NO_DELTA = "no difference: one of the two runs has no value"
NO_P = ("no p-value: fewer than 20 items (too few for a bootstrap p-value), or no paired bootstrap for this pair or "
        "metric (see *Without a paired interval*, or a run lacks the value)")


def _present_tasks(entries: Sequence[StoredRun]) -> list[Task]:
    """The tasks of the entries, registered ones in registry order, then any others."""
    kinds = {e.task.kind: e.task for e in entries}
    ordered = [t for t in tasks() if t.kind in kinds]
    return ordered + [t for k, t in kinds.items() if t not in ordered]


def sweep_markdown(entries: Sequence[StoredRun], unfinished: Sequence[Path] = (), skipped: Sequence[Skipped] = ()) -> str:
    """The sweep report: per bench kind a headline table, then base-vs-instruct where pairs ran;
    at the end the runs left out (unfinished, or finished but unreadable, with the reason)."""
    parts = [f"# probe sweep report — {len(entries)} runs", ""]
    for task in _present_tasks(entries):
        parts += [f"## {task.title}", "", task.presentation.sweep_note, "", bench_table(entries, task), ""]
        pairs = pair_table(entries, task)
        if pairs:
            parts += [f"### {task.title}: base vs instruct", "", PAIRED_NOTE, "", pairs, ""]
        parts += [block for unit in analyses() if (block := unit.sweep_section(entries, task))]
        steps = checkpoint_table(entries, task)
        if steps:
            parts += [f"### {task.title}: checkpoint to checkpoint", "", PAIRED_NOTE, "", steps, ""]
    parts += ["## Runs", ""] + [f"- {e.label} ({e.bench}): `{e.path}` — "
                                 f"{weights_line(e.manifest.model).removeprefix('Weights: ')}"
                                 for e in entries]
    if unfinished:
        parts += ["", f"## Skipped: {len(unfinished)} unfinished run(s) (no DONE) or unmerged shard(s)", ""]
        parts += [f"- `{p}`: {unfinished_reason(p)}" for p in unfinished]
    if skipped:
        parts += ["", f"## Skipped: {len(skipped)} finished run(s) that could not be read", ""]
        parts += [f"- `{s.path}`: {s.reason}" for s in skipped]
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
        figures += task.presentation.sweep_figures([r for r, _ in mine], [lab for _, lab in mine], Path(out_dir))
    return figures


REPORT_COMMAND = "probe report"
"""Whose output a sweep report's directory holds (`probe.results.layout.claim_output_dir`): the
command's, also when a multirun writes it as it ends."""


def write_sweep_report(paths: Sequence[Path], out_dir: Path) -> Path:
    """`report.md`, figures and a self-contained `report.html` in `out_dir` (new, empty, or holding
    an earlier sweep report: `claim_output_dir`); returns the HTML path."""
    entries, skipped = read_entries(paths)
    unfinished = find_runs(paths)[1]
    entries = _load_tables(entries, skipped)
    claim_output_dir(out_dir, REPORT_COMMAND)
    refuse_links_inside(out_dir)  # a planted link is refused before anything is written
    markdown = sweep_markdown(entries, unfinished, skipped)
    write_text(out_dir / REPORT, inert_html(markdown))
    figures = sweep_figures([e for e in entries], [e.label for e in entries], out_dir)
    figures += checkpoint_figures(entries, out_dir)
    figures += [f for unit in analyses() for f in unit.sweep_figures(entries, out_dir)]
    write_html(out_dir / REPORT_PAGE, "probe sweep report", markdown, figures)
    summary = pa.Table.from_pylist(summary_rows(entries), schema=SUMMARY_SCHEMA)
    write_table(out_dir / SUMMARY_TABLE, summary)
    write_csv(out_dir / SUMMARY_CSV, summary)
    return out_dir / REPORT_PAGE


def _load_tables(entries: Sequence[StoredRun], skipped: list[Skipped]) -> list[StoredRun]:
    """The entries whose stored tables (read here, for the figures and paired intervals) can be
    read; one that cannot joins `skipped` and leaves the report."""
    kept = []
    for e in entries:
        try:
            e.tables()
        except (ProbeInputError, OSError, ValueError) as err:  # ValueError: pyarrow's ArrowInvalid
            skipped.append(Skipped(e.path, f"its tables cannot be read ({err})"))
            continue
        kept.append(e)
    if not kept:
        raise ProbeInputError(f"none of the finished runs' tables could be read ({skipped[0].path}: {skipped[0].reason})")
    return kept


def sweep_headlines(entries: Sequence[StoredRun], unfinished: Sequence[Path] = (), full: Path | None = None) -> str:
    """What a multirun prints when it ends: per bench kind, its runs' headline columns with CIs
    within `TERMINAL_WIDTH` characters (columns no run has a value in left out; the columns that
    do not fit are counted and left to `full`, the sweep's report), then the runs that did not
    finish."""
    lines = []
    for task in _present_tasks(entries):
        mine = [e for e in entries if e.task.kind == task.kind]
        columns = [c for c in (*task.presentation.sweep_columns, *sweep_columns())
                   if any(cell(e, c) != "–" for e in mine)]
        head = ["run", *(["label"] if run_labels(mine) else []), "bench"] + [c.label for c in columns]
        rows = [[f"{e.label} ⚠" if e.metrics.get("letter_warnings") else e.label, *run_labels(mine, e), e.bench]
                + [cell(e, c) for c in columns] for e in mine]
        shown, left_out = fit_table(head, rows, keep=2 + bool(run_labels(mine)))
        lines += [f"{task.title}:", *shown]
        if left_out:
            lines.append(f"({left_out} more column{'s' if left_out > 1 else ''} in {full or 'the sweep report'})")
        lines += ["(⚠: the letter drives this run's answers; see its report)", ""] \
            if any(e.metrics.get("letter_warnings") for e in mine) else [""]
    if unfinished:
        lines += [f"{len(unfinished)} run(s) did not finish (no DONE): " + ", ".join(map(str, unfinished)), ""]
    return terminal_text("\n".join(lines).rstrip("\n"))  # run labels and names are data
