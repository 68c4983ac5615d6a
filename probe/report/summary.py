"""The few lines a run prints when it ends: its headline metrics with intervals, and warnings
about what makes them less trustworthy (a letter that drives the answers, low letter mass, invalid
generations, judge errors)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from probe.benches.task import Task
from probe.escape import terminal_text
from probe.metrics.core import get_path
from probe.metrics.letters import NONE
from probe.report.entries import metric_cell
from probe.report.format_run import summary_line
from probe.viz.letters import letter_warnings
from probe.viz.markdown import small_sample

LOW_LETTER_MASS = 0.5
"""Below this mean letter mass the model mostly wants to say something other than a letter."""


def run_summary(task: Task, metrics: Mapping[str, Any]) -> str:
    """Headline columns (the sweep table's) with 95% intervals, then any warnings; terminal-safe
    (`probe.escape.terminal_text`)."""
    lines = [f"{task.title}, {metrics.get('model')} on {metrics.get('bench')}: {scope(metrics)}"]
    for column in task.presentation.sweep_columns:
        value = metric_cell(task, metrics, column)
        if value != "–":
            lines.append(f"  {column.label}: {value}")
    if "format" in metrics:  # a factor run: the group share of the variance and the verdicts
        lines.append(f"  {summary_line(metrics['format'])}")
    said = warnings(metrics, task.judging.errors(metrics), task.presentation.caveats(metrics))
    return terminal_text("\n".join(lines + [f"  warning: {w}" for w in said]))  # a model or group name is data


def scope(metrics: Mapping[str, Any]) -> str:
    """What the run scored: items, the prompts actually scored (a factor run: every variant's),
    its variants and conditions — `2 items, 936 prompts scored (9 variants × 104; the numbers
    below are the protocol variant's); conditions C0, C1`."""
    n_items, n_prompts = metrics.get("n_items"), metrics.get("n_prompts")
    variants = len((metrics.get("format") or {}).get("variants") or [])
    if variants and isinstance(n_prompts, int):
        text = (f"{n_items} items, {variants * n_prompts} prompts scored ({variants} variants × {n_prompts}; "
                "the numbers below are the protocol variant's)")
    else:
        text = f"{n_items} items, {n_prompts} prompts"
    conditions = conditions_of(metrics)
    return text + (f"; conditions {', '.join(conditions)}" if len(conditions) > 1 else "")


def conditions_of(metrics: Mapping[str, Any]) -> list[str]:
    """The conditions the run analysed apart (the keys of its per-condition letter prior; none
    for a run without one)."""
    prior = metrics.get("letter_prior")
    return [str(c) for c in prior] if isinstance(prior, Mapping) else []


def caveat(metrics: Mapping[str, Any], judge_errors: int = 0, bench: Sequence[str] = ()) -> str:
    """The first of `warnings` as a few words (`probe runs`' column): what to know before
    reading the headline; `–` when there is none."""
    first = next(iter(warnings(metrics, judge_errors, bench)), None)
    if first is None:
        return "–"
    for said, tag in (("mean letter mass", "low letter mass"), ("drives the answers", "letter-driven"),
                      ("fewer than", "small sample"), ("no `debiased`", "no debiased reading"),
                      ("generations had no valid answer", "invalid answers"), ("judge verdicts failed", "judge errors"),
                      ("near-uniform", "near-uniform")):
        if said in first.split("\n")[0]:
            return tag
    return first.split(":")[0][:24]


def warnings(metrics: Mapping[str, Any], judge_errors: int = 0, bench: Sequence[str] = ()) -> list[str]:
    """What a reader of these numbers should know first, one short sentence each (a letter
    warning's details follow it on indented `- ` lines); `judge_errors` is how many judge verdicts
    failed (the task's count, `Judging.errors`); `bench`: the bench's own caveats
    (`Presentation.caveats`), after the letter warnings."""
    out = []
    mass = get_path(metrics, "letter_mass.mean")
    if mass is not None and mass < LOW_LETTER_MASS:
        out.append(f"mean letter mass {mass:.2f} < {LOW_LETTER_MASS}: the model often would not answer with a "
                   f"letter (argmax is a letter in {metrics.get('greedy_valid_rate', float('nan')):.0%} of "
                   "prompts); consider backend.mode=generate or a base/instruct check")
    if metrics.get("n_invalid"):
        out.append(f"{metrics['n_invalid']} of {metrics.get('n_prompts')} generations had no valid answer "
                   f"({metrics.get('invalid_rate', float('nan')):.1%}); they are excluded and listed in report.md")
    out += [w.sentence + "".join(f"\n    - {d}" for d in w.details)
            for w in letter_warnings(metrics.get("letter_warnings") or [])]
    out += list(bench)
    if "debiased" in metrics and metrics["debiased"] is None and metrics.get("expected") is not None:
        out.append("no `debiased` metrics: " + "; ".join(
            f"{c}: {e.get('reason')}" for c, e in (metrics.get("letter_prior_estimator") or {}).items()
            if e.get("estimator") == NONE))
    small = small_sample(metrics)
    if small:
        out.append(small)
    if judge_errors:
        out.append(f"{judge_errors} judge verdicts failed and were left out (judgements.parquet, judge_error)")
    return out
