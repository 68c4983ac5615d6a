"""Comparisons between stored runs (no model needed).

    python -m probe compare RUN_A RUN_B [--out DIR] [--common-items] [analysis.n_boot=N]
                            [analysis.seed=S] [analysis.temperature=T] [block=greedy]
    python -m probe compare SCORED_RUN GENERATION_RUN agreement=true [--out DIR]

prints every headline metric's difference `A − B` with its paired-bootstrap 95% interval, a
two-sided bootstrap p-value and its Holm adjustment over the table (metrics constant by
construction in the block, such as DiSCo's PPR in `debiased`, are left out; below 20 items the
p-values are not printed, the intervals and a warning are) (plain text on stdout; `compare.json`
and the markdown table `compare.md` in DIR with `--out`). The two runs must be of one benchmark
with the same items (LocQA: templates) and design; both are resampled identically (see
`probe.metrics.paired`). `--common-items`: runs whose items differ (a run and its `bench.limit`
subset) are compared on the items both have, each re-measured on those alone; the output says
how many of each run's items were left out.
Two factor runs (`factors=…`) with the same variants are compared variant by variant (one table
per variant, `compare.json` keyed by variant name); variant sets that differ are refused.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from probe.analyses.cells import is_number
from probe.analyses.view import StoredRun
from probe.commands import cmdline
from probe.benches.forced import (
    choice_agreement_markdown,
    generated_choice_agreement,
    is_generation_run,
    is_text_only_run,
)
from probe.benches.task import Answers, Task
from probe.errors import ProbeInputError, printable
from probe.escape import inert_markdown, terminal_text
from probe.files import write_json, write_text
from probe.viz.markdown import terminal_line
from probe.viz.plain import plain_text
from probe.metrics.core import SMALL_N, AnalysisOptions, get_path
from probe.metrics.paired import Comparison, Difference
from probe.report.paired_runs import (
    comparable_units,
    compare,
    headline_block,
    scoring_path_note,
    shared_variants,
)
from probe.results.layout import AGREEMENT, COMPARISON, COMPARISON_TABLE, claim_output_dir

__all__ = ["Comparison", "Difference", "compare_runs", "compare_variants", "paired_difference"]

COMMON_ITEMS = "--common-items"
"""Compare runs whose items differ on the items both have (each run re-measured on those alone)."""
COMMAND = "probe compare"
"""Whose output an `--out` directory holds (`probe.results.layout.claim_output_dir`)."""


def paired_difference(run_a: str | Path, run_b: str | Path, metric: str, flavour: str | None = None,
                      n_boot: int | None = None, seed: int | None = None) -> Difference:
    """`a − b` of one metric path of `metrics.json` (e.g. `"C0.KL"`, `"C2.CR_by_culture.Ethiopia"`,
    `"shares.nordic_europe"`, `"B_US_macro"`) with its paired 95% interval and p-value.

    `flavour` picks the block (`expected`, `greedy`; default: the bench's headline block);
    `n_boot` and `seed` default to run A's recorded analysis options. Comparing a run with
    itself gives exactly 0 and `[0, 0]`."""
    return compare_runs(run_a, run_b, [metric], flavour, n_boot, seed).differences[0]


def compare_runs(run_a: str | Path, run_b: str | Path, metrics: list[str] | None = None, flavour: str | None = None,
                 n_boot: int | None = None, seed: int | None = None, temperature: float | None = None,
                 common: bool = False) -> Comparison:
    """Paired differences for `metrics` (default: the bench's headline sweep columns that run A
    reports, less those constant by construction in the block, `Column.constant_in`); of a factor
    run, its protocol variant's. `common`: on the items both runs have (`--common-items`)."""
    a, b = StoredRun.open(run_a), StoredRun.open(run_b)
    task, _ = comparable_units(a, b, common)
    return compare(a, b, _headline_paths(a, task, metrics, flavour), a.options(_overrides(n_boot, seed, temperature)),
                   flavour, common=common)


def compare_variants(run_a: str | Path, run_b: str | Path, metrics: list[str] | None = None,
                     flavour: str | None = None, n_boot: int | None = None, seed: int | None = None,
                     temperature: float | None = None, common: bool = False) -> list[tuple[str, Comparison]]:
    """Of two factor runs with the same variants: `(variant name, paired differences)` per
    variant, in A's variant order, each variant's prompts alone in both runs, resampled on the
    same items (Holm over each variant's table); empty when not both are factor runs. Runs whose
    variant sets differ are refused, naming the difference."""
    a, b = StoredRun.open(run_a), StoredRun.open(run_b)
    task, _ = comparable_units(a, b, common)
    pairs = shared_variants(a, b)
    if not pairs:
        return []
    paths, opts = _headline_paths(a, task, metrics, flavour), a.options(_overrides(n_boot, seed, temperature))
    return [(name, compare(a, b, paths, opts, flavour, variants=(ia, ib), common=common)) for name, ia, ib in pairs]


def _overrides(n_boot: int | None, seed: int | None, temperature: float | None) -> dict[str, Any]:
    return {k: v for k, v in (("n_boot", n_boot), ("seed", seed), ("temperature", temperature)) if v is not None}


def _headline_paths(a: StoredRun, task: Task, metrics: list[str] | None, flavour: str | None) -> list[str]:
    """`metrics`, or the headline columns run A has (a DiSCo run may skip conditions)."""
    if metrics is not None:
        return metrics
    # A run without metrics.json (analysis never finished) is compared from its tables all the same.
    measured = a.metrics if a.metrics is not None else a.recompute_metrics(analysis={"n_boot": 0})
    tree = task.scoring.headline(measured)[0]
    block = flavour or headline_block(task, measured)
    return [c.path for c in task.presentation.sweep_columns
            if c.numeric and block not in c.constant_in and is_number(get_path(tree, c.path))]


def _p(p: float, n_boot: int) -> str:
    """A bootstrap p-value: its resolution is 1/B, so 0 reads `< 1/B`."""
    return f"< {1 / n_boot:.2g}" if p < 1 / n_boot else f"{p:.4f}"


def comparison_markdown(c: Comparison) -> str:
    """The comparison as a markdown table (p-values shown to the bootstrap's resolution). Below
    `SMALL_N` units a warning opens it and its p-values are not printed (`–`; `compare.json`
    keeps them): a bootstrap over a handful of units makes them far too small."""
    intro = "  \n".join(_intro(c))
    notes = [f"**{title}:** {text}" for title, text in _notes(c, lambda x: f"`{x}`")]
    head, rows = _table(c)
    lines = [intro, "", *(line for note in notes for line in (note, "")),
             "| " + " | ".join(head) + " |", "|---" * len(head) + "|", *("| " + " | ".join(r) + " |" for r in rows)]
    return "\n".join(lines) + "\n"


def comparison_text(c: Comparison) -> str:
    """The comparison as a terminal reads it: the same lines and numbers as `comparison_markdown`,
    in plain text — no markdown markup, the table's columns aligned with spaces."""
    notes = [terminal_line(f"{title}: {text}") for title, text in _notes(c, str)]
    head, rows = _table(c)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    table = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in [head, *rows]]
    return "\n".join([*_intro(c), "", *(line for note in notes for line in (note, "")), *table]) + "\n"


def _intro(c: Comparison) -> list[str]:
    """What was compared and how, one line each."""
    blocks = sorted({d.block for d in c.differences})
    return [f"A = {c.run_a}", f"B = {c.run_b}",
            f"{'paired' if c.paired else 'unpaired'} bootstrap over {c.n_units} {c.unit}s, {c.n_boot} resamples, "
            f"seed {c.seed}, temperature {c.temperature:g}; block {', '.join(blocks) or '–'};",
            "p-values two-sided, Holm-adjusted over the table"]


def _notes(c: Comparison, code: Callable[[str], str]) -> list[tuple[str, str]]:
    """`(title, text)` of what the reader must know before the table (`code` marks a config key)."""
    notes = []
    if c.dropped is not None:
        notes.append(("Common items", f"compared on the {c.n_units} {c.unit}s both runs have; {c.dropped[0]} of A's "
                                      f"and {c.dropped[1]} of B's were left out ({code('--common-items')})."))
    if c.orders is not None:
        notes.append(("Designs differ", f"A shows the options under {code('bench.orders=' + c.orders[0])}, B under "
                                        f"{code('bench.orders=' + c.orders[1])}; Δ compares the two designs' "
                                        "readings of the same items."))
    if c.n_units < SMALL_N:
        notes.append(("Warning", f"only {c.n_units} {c.unit}s (fewer than {SMALL_N}): a bootstrap over so few "
                                 "resamples the same handful, so its intervals are too narrow; treat them as "
                                 "descriptive. p-values are not printed."))
    return notes


def _table(c: Comparison) -> tuple[list[str], list[list[str]]]:
    """The table's head and rows (no p-value below `SMALL_N` units)."""
    small, several = c.n_units < SMALL_N, len({d.block for d in c.differences}) > 1
    rows = []
    for d in c.differences:
        p, holm = ("–", "–") if small else (_p(d.p_value, c.n_boot), _p(d.p_holm, c.n_boot))
        rows.append([f"{d.block}.{d.metric}" if several else d.metric, f"{d.a:.4f}", f"{d.b:.4f}", f"{d.delta:+.4f}",
                     f"[{d.ci95[0]:+.4f}, {d.ci95[1]:+.4f}]", p, holm])
    return ["metric", "A", "B", "Δ (A − B)", "95% CI", "p", "p (Holm)"], rows


USAGE = f"{__doc__}\nOptions (defaults: run A's recorded values):\n{cmdline.options_help(AnalysisOptions, 'analysis.')}"


def _body(argv: list[str]) -> int:
    common = COMMON_ITEMS in argv
    command = cmdline.parse([a for a in argv if a != COMMON_ITEMS], "", flags={"--out": "out"})
    if len(command.paths) != 2:
        raise ProbeInputError(f"expected two run directories, got {[str(p) for p in command.paths]}")
    opts = {k.removeprefix("analysis."): v for k, v in command.overrides.items() if k.startswith("analysis.")}
    unknown = sorted(set(command.overrides) - {"out", "block", "agreement"} - {f"analysis.{k}" for k in opts})
    if unknown or set(opts) - {"n_boot", "seed", "temperature"}:
        raise ProbeInputError(f"unknown option(s) {unknown or sorted(opts)}; valid: out, block, agreement, "
                              "analysis.n_boot, analysis.seed, analysis.temperature")
    if command.overrides.get("agreement", False) not in (True, False):
        raise ProbeInputError(f"agreement: expected true or false, got {command.overrides['agreement']!r}")
    if command.overrides.get("agreement") is True:
        return _choice_agreement(command.paths[0], command.paths[1], opts, command.overrides.get("out"))
    note = scoring_path_note(StoredRun.open(command.paths[0]), StoredRun.open(command.paths[1]))
    if note:
        print(terminal_text(note) + "\n")
    block = command.overrides.get("block")
    flavour = None if block is None else str(block)
    per_variant = compare_variants(*command.paths, flavour=flavour, common=common, **opts)
    if per_variant:  # two factor runs: every variant's headline, variant by variant
        print(terminal_text("\n".join(f"Variant {name}:\n\n{comparison_text(c)}" for name, c in per_variant)), end="")
        markdown = "\n".join(f"### Variant {name}\n\n{comparison_markdown(c)}" for name, c in per_variant)
        record: dict[str, Any] = {"variants": {name: asdict(c) for name, c in per_variant}}
    else:
        result = compare_runs(*command.paths, flavour=flavour, common=common, **opts)
        print(terminal_text(comparison_text(result)), end="")
        markdown, record = comparison_markdown(result), asdict(result)
    if "out" in command.overrides:
        out = claim_output_dir(Path(str(command.overrides["out"])), COMMAND)
        write_json(out / COMPARISON, record)
        write_text(out / COMPARISON_TABLE, inert_markdown(markdown))
        print(printable(f"probe compare: wrote {out / COMPARISON} and {out / COMPARISON_TABLE}"), file=sys.stderr)
    return 0


def _choice_agreement(path_a: Path, path_b: Path, opts: dict[str, object], out: object) -> int:
    """`agreement=true`: each reading of scored run A against generation run B's answers."""
    a, b = StoredRun.open(path_a), StoredRun.open(path_b)
    task, _ = comparable_units(a, b)  # one benchmark, one data file, one design
    if task.answers is not Answers.LETTERS:
        raise ProbeInputError(f"agreement=true compares forced-choice runs; {a.path} is a {task.kind} run")
    if is_generation_run(a) or not is_generation_run(b):
        mode = {True: "a generation run", False: "a scored run"}
        raise ProbeInputError(f"agreement=true compares a scored run (A) with a generation run (B) of the same "
                              f"design; got {mode[is_generation_run(a)]} {a.path} and "
                              f"{mode[is_generation_run(b)]} {b.path}")
    if is_text_only_run(a):
        raise ProbeInputError(f"{a.path}: a backend.mode=text run has no letter reading; score it with "
                              "backend.mode=letters+text")
    options = a.options(opts)
    result = generated_choice_agreement(a, b, task.design, options)
    print(terminal_text(f"A = {a.path}\nB = {b.path}\n") + f"bootstrap over A's items, {options.n_boot} resamples, seed "
          f"{options.seed}, temperature {options.temperature:g}\n", end="")
    print(terminal_text(plain_text(choice_agreement_markdown(result.block, result.ci, options.n_boot))), end="")
    if out is not None:
        folder = claim_output_dir(Path(str(out)), COMMAND)
        write_json(folder / AGREEMENT, {"agreement": result.block, "ci95": result.ci})
        print(f"probe compare: wrote {folder / AGREEMENT}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m probe compare`."""
    return cmdline.main("probe compare", USAGE, _body, argv)


if __name__ == "__main__":
    sys.exit(main())
