"""Paired differences between two stored runs of one benchmark, for `python -m probe compare` and
the sweep and checkpoint tables: are the runs comparable (same benchmark, design, data file and
bootstrap units), their replicates from the runs' own metric code, and the table cells. The
statistics (intervals, p-values, Holm) are `probe.metrics.paired`'s."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from probe.analyses.view import StoredRun
from probe.backends.reading import Reading
from probe.benches.task import Answers, Task
from probe.errors import ProbeInputError
from probe.metrics.core import SMALL_N, AnalysisOptions, replicates_of
from probe.metrics.paired import Comparison, Difference, difference, holm
from probe.metrics.variant_shares import variant_mask, variant_records
from probe.results.layout import is_finished

PAIRED_NOTE = ("Δ with a paired bootstrap 95% interval: both runs resampled on the same units (the bench's "
               "bootstrap unit: items, or what its note names) with the first run's recorded seed and resample "
               "count; p two-sided, Holm-adjusted over the metrics of each comparison.")


def scoring_path_note(run_a: StoredRun, run_b: StoredRun) -> str | None:
    """One line where the runs were scored by different computations (`backend.path`: eager, the
    fast path): float32 rounding in another order moves log-probs in the last bits (about 1e-5
    nats), so part of a tiny Δ may be that, not the runs' other difference; None where they agree
    or a run does not say (vLLM)."""
    a, b = run_a.manifest.backend.scoring_path, run_b.manifest.backend.scoring_path
    if a is None or b is None or a == b:
        return None
    return (f"Note: A was scored on the {a} path and B on the {b} path (backend.path): their log-probs differ "
            "in float32 rounding too (see docs/performance.md#the-fast-path).")


def comparable_units(run_a: StoredRun, run_b: StoredRun, common: bool = False) -> tuple[Task, list[str]]:
    """The task both runs belong to and their common bootstrap units, or an input error naming
    what differs (benchmark kind, design, data file, units) or which run is not finished.
    `common`: runs whose units differ are compared on the units both have (`--common-items`),
    refused only when they share none."""
    for run in (run_a, run_b):
        if not is_finished(run.path):
            raise ProbeInputError(f"{run.path} is not a finished run (no DONE): finish it with its own command "
                                  "before comparing")
    task_a, task_b = run_a.task, run_b.task
    if task_a.kind != task_b.kind:
        raise ProbeInputError(f"{run_a.path} is a {task_a.kind} run and {run_b.path} a {task_b.kind} run; "
                              "a paired comparison needs two runs of one benchmark")
    design_a, design_b = run_a.manifest.bench.design, run_b.manifest.bench.design
    if design_a != design_b:
        raise ProbeInputError(f"{run_a.path} used design {design_a!r} and {run_b.path} design {design_b!r}; "
                              "paired differences need the same design")
    if _text_form(run_a) != _text_form(run_b):
        raise ProbeInputError(f"{run_a.path} is a {_reading(run_a)} run and {run_b.path} a {_reading(run_b)} run: their "
                              "numbers are different readings, not paired measurements; compare runs of one reading")
    for name in ("sha256", "data_sha256"):  # the pinned file's checksum, the digest of every file read
        a, b = getattr(run_a.manifest.bench, name), getattr(run_b.manifest.bench, name)
        if a and b and a != b:
            raise ProbeInputError(f"{run_a.path} and {run_b.path} read different bench data (bench {name} {a[:12]}… vs "
                                  f"{b[:12]}…): the same ids may name different items, so they are not paired; run "
                                  "both on the same data")
    unit = task_a.scoring.unit
    units_a, units_b = run_units(run_a, unit), run_units(run_b, unit)
    if common and units_a & units_b:
        return task_a, sorted(units_a & units_b)
    if units_a != units_b:
        only_a, only_b = sorted(units_a - units_b), sorted(units_b - units_a)
        hint = ("they share none" if common else
                "compare the ones both have with --common-items" if units_a & units_b else "they share none")
        raise ProbeInputError(f"the runs do not share their {unit}s: {len(only_a)} only in {run_a.path} "
                              f"({', '.join(only_a[:5])}{', …' if len(only_a) > 5 else ''}), {len(only_b)} only in "
                              f"{run_b.path} ({', '.join(only_b[:5])}{', …' if len(only_b) > 5 else ''}); {hint}")
    return task_a, sorted(units_a)


def run_units(run: StoredRun, unit: str) -> set[str]:
    """The bootstrap units (`Scoring.unit` values, as text) a run's prompts hold."""
    return {str(u) for u in run.prompts.column(unit).to_pylist()}


def _unit_mask(run: StoredRun, unit: str, units: set[str], variant: int | None) -> np.ndarray:
    """`[prompt_id]` whether a prompt is of one of `units` (and of `variant`; of a factor run
    compared without one, its protocol variant 0, as `StoredRun.measure` reads it)."""
    values = np.asarray([str(u) for u in run.prompts.column(unit).to_pylist()], dtype=object)
    mask = np.isin(values, sorted(units))
    if variant is None and variant_records(run):
        variant = 0
    return mask if variant is None else mask & variant_mask(run, variant)


def _text_form(run: StoredRun) -> str | None:
    """The text form a `backend.mode=text` run's headline numbers read (None: they read letters,
    or generated answers; a `letters+text` run's text reading is an extra block)."""
    if run.manifest.backend.reading is not Reading.TEXT:
        return None
    return str(run.manifest.bench.config.get("text_form"))


def _reading(run: StoredRun) -> str:
    form = _text_form(run)
    return f"backend.mode={run.manifest.backend.reading}" + ("" if form is None else f" bench.text_form={form}")


def _with_replicates(run: StoredRun, opts: AnalysisOptions, variant: int | None = None,
                     units: tuple[str, set[str]] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's metrics and replicates on its prompts of `variant` (None: all, or a factor run's
    protocol variant) and, with `units` (`(unit, values)`), of those units only."""
    if units is not None:
        mask: np.ndarray | None = _unit_mask(run, units[0], units[1], variant)
    else:
        mask = None if variant is None else variant_mask(run, variant)
    metrics = run.measure(opts, mask)
    return metrics, replicates_of(metrics)


def shared_variants(run_a: StoredRun, run_b: StoredRun) -> list[tuple[str, int, int]]:
    """`(name, index in A, index in B)` of every variant of two factor runs, in A's order (empty:
    not both factor runs); refused in one line naming the variants only one run has."""
    a = {str(r["name"]): int(r["index"]) for r in variant_records(run_a)}
    b = {str(r["name"]): int(r["index"]) for r in variant_records(run_b)}
    if not a or not b:
        return []
    if set(a) != set(b):
        only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
        raise ProbeInputError(f"the factor runs score different variants: only in {run_a.path}: "
                              f"{', '.join(only_a) or 'none'}; only in {run_b.path}: {', '.join(only_b) or 'none'}")
    wording = {str(r["name"]): r for r in variant_records(run_b)}
    for r in variant_records(run_a):
        if not _same_wording(r, wording[str(r["name"])]):
            raise ProbeInputError(f"variant {r['name']} is worded differently in {run_a.path} and {run_b.path} "
                                  "(a levels file gave one level name two texts): they are two variants, not one")
    return [(name, i, b[name]) for name, i in a.items()]


def _same_wording(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two variant records say the same (level texts, labels, cue, system message): one
    level name with two wordings is two variants. A run recorded before `texts` compares by the rest."""
    keys = ["labels", "cue", "system_prompt", *(["texts"] if "texts" in a and "texts" in b else [])]
    return all(a.get(k) == b.get(k) for k in keys)


def headline_block(task: Task, metrics: Mapping[str, Any]) -> str:
    """The name of the block (`expected`, `metrics`, …) holding the task's headline tree."""
    tree = task.scoring.headline(metrics)[0]
    return next(k for k, v in metrics.items() if v is tree)


def compare(run_a: StoredRun, run_b: StoredRun, paths: Sequence[str], opts: AnalysisOptions, block: str | None = None,
            paired: bool = True, variants: tuple[int, int] | None = None, common: bool = False) -> Comparison:
    """`a − b` for each metric path (in the task's headline block unless `block` is given),
    from one bootstrap over the common units; `paired=False` resamples `b` independently
    (seed + 1), the unpaired reference. `variants`: of two factor runs, the variant of each
    compared (its prompts alone; default: a factor run's protocol variant). `common`: runs of
    different units are compared on the units both have, each re-measured on those alone, and
    `Comparison.dropped` counts the units left out of each."""
    task, units = comparable_units(run_a, run_b, common)
    if opts.n_boot < 1:
        raise ProbeInputError("a paired comparison needs analysis.n_boot ≥ 1")
    va, vb = variants or (None, None)
    shared = (task.scoring.unit, set(units)) if common else None
    ma, ra = _with_replicates(run_a, opts, va, shared)
    mb, rb = _with_replicates(run_b, opts if paired else replace(opts, seed=opts.seed + 1), vb, shared)
    for run in (run_a, run_b):  # forced choice: the bootstrap resamples the items its table holds
        if task.answers is Answers.LETTERS:
            scored = len({str(u) for u in run.table().item_id} & set(units))
            if scored != len(units):
                raise ProbeInputError(f"{run.path}: only {scored} of the {len(units)} {task.scoring.unit}s have a valid "
                                      "answer (generation mode), so its resamples cannot be paired")
    block = block or headline_block(task, ma)
    for run, m, r in ((run_a, ma, ra), (run_b, mb, rb)):
        if block not in r:
            raise ProbeInputError(f"{run.path}: no bootstrap replicates for block {block!r}{_why_missing(m, block)}; "
                                  f"blocks: {sorted(r)}")
    diffs = [difference(path, block, ma, mb, ra, rb) for path in paths]
    adjusted = holm([d.p_value for d in diffs])
    return Comparison(run_a=str(run_a.path), run_b=str(run_b.path), unit=task.scoring.unit, n_units=len(units),
                      n_boot=opts.n_boot, seed=opts.seed, temperature=opts.temperature, paired=paired,
                      differences=tuple(replace(d, p_holm=p) for d, p in zip(diffs, adjusted)),
                      orders=ordering_designs(run_a, run_b),
                      dropped=_dropped(run_a, run_b, task.scoring.unit, set(units)) if common else None)


def _dropped(run_a: StoredRun, run_b: StoredRun, unit: str, units: set[str]) -> tuple[int, int]:
    """How many units of A and of B a comparison on `units` leaves out."""
    return len(run_units(run_a, unit) - units), len(run_units(run_b, unit) - units)


def ordering_designs(run_a: StoredRun, run_b: StoredRun) -> tuple[str, str] | None:
    """The two runs' `bench.orders` designs where they differ (a run recorded without one used the
    default `rotations`); None when they agree."""
    a, b = (str(r.manifest.bench.config.get("orders", "rotations")) for r in (run_a, run_b))
    return None if a == b else (a, b)


def paired_or_reason(run_a: StoredRun, run_b: StoredRun,
                     paths: Sequence[str]) -> tuple[dict[str, Difference], str | None]:
    """Paired differences `a − b` of two stored runs with run A's recorded bootstrap options, or
    no differences and the reason (the runs do not share their items, a table is missing): a
    sweep table then prints the plain Δ and says why it has no interval. Below `SMALL_N` units
    the p-values are dropped (NaN; the tables print none), the intervals kept."""
    try:
        result = compare(run_a, run_b, paths, run_a.options())
    except ProbeInputError as e:
        return {}, str(e)
    diffs = result.differences
    if result.n_units < SMALL_N:
        diffs = tuple(replace(d, p_value=float("nan"), p_holm=float("nan")) for d in diffs)
    return {d.metric: d for d in diffs}, None


def delta_cell(delta: float | None, diff: Difference | None) -> str:
    """`+0.050 [+0.031, +0.069]` (with the interval when paired), `–` when undefined."""
    if delta is None:
        return "–"
    if diff is None or np.isnan(diff.ci95[0]):
        return f"{delta:+.3f}"
    return f"{delta:+.3f} [{diff.ci95[0]:+.3f}, {diff.ci95[1]:+.3f}]"


def p_cell(diff: Difference | None) -> str:
    return "–" if diff is None or np.isnan(diff.p_holm) else f"{diff.p_holm:.3g}"


def _why_missing(metrics: Mapping[str, Any], block: str) -> str:
    """Why a run has no `block` tree, where its metrics say (a letter prior the design cannot estimate)."""
    if block != "debiased" or metrics.get("debiased") is not None:
        return ""
    reasons = [f"{c}: {e['reason']}" for c, e in (metrics.get("letter_prior_estimator") or {}).items()
               if e.get("reason")]
    return f" (no letter-prior estimate — {'; '.join(reasons)})" if reasons else ""
