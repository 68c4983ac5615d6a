"""DiSCo as a `Task`: its data, design, metrics, report, figures and table columns."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from probe.benches import forced
from probe.benches.disco import figures, report
from probe.benches.disco.data import (
    DiscoDesign,
    DiscoSpec,
    K,
    build_prompts,
    load_items,
    resolve_source,
    reword,
    text_message,
)
from probe.benches.disco.metrics import DiscoAnalysis, compute
from probe.benches.orders import plan_orders
from probe.benches.task import Column, PreparedBench, Presentation
from probe.files import sha256_file
from probe.metrics.core import AnalysisOptions, get_path
from probe.prompts.factors import BUILTIN_FACTORS
from probe.results.scores import ScoreTable
from probe.types import LETTERS, Contrast
from probe.viz.markdown import value_ci


def prepare(spec: DiscoSpec, generate: bool, cache_dir: Path) -> PreparedBench:
    """Validated items (CSV from a path, the package or the hub) and their 52-prompt design."""
    path = resolve_source(spec)
    items = load_items(path, spec.cultures)[: spec.limit]
    per_item, record = plan_orders(spec, [K])
    prompts = build_prompts(items, DiscoDesign(conditions=spec.conditions, orders=per_item[K].orders))
    source: dict[str, Any] = {"path": str(path), "sha256": sha256_file(path)}
    if record is not None:  # a default (rotations) run's manifest stays as it was
        source["orders"] = record
    return PreparedBench(name=spec.name, kind=spec.kind, letters=LETTERS[:K], items=items, prompts=prompts,
                         source=source, data_files=(path,))


def _compute(table: ScoreTable, opts: AnalysisOptions, spec: DiscoSpec) -> dict[str, Any]:
    return compute(table, DiscoAnalysis(temperature=opts.temperature, n_boot=opts.n_boot, seed=opts.seed,
                                        high=spec.high_resource, low=spec.low_resource))


def _greedy_csc(m: Mapping[str, Any]) -> str:
    """The paper's CSC is a greedy metric: read it from the greedy block. † where the letter drives
    C3's answers: a letter-locked model scores CSC = 1 by construction."""
    value = get_path(m.get("greedy"), "C3.CSC")
    if value is None:
        return "–"
    mark = " †" if any(w["condition"] == "C3" for w in m.get("letter_warnings") or []) else ""
    return value_ci(value, get_path((m.get('ci95') or {}).get('greedy'), 'C3.CSC')) + mark


def _debiased(path: str) -> Callable[[Mapping[str, Any]], str]:
    """A cell of the `debiased` tree (letter prior removed)."""
    def cell(m: Mapping[str, Any]) -> str:
        value = get_path(m.get("debiased"), path)
        return value_ci(value, get_path((m.get('ci95') or {}).get('debiased'), path))

    return cell


def _tested(path: str, block: str = "expected") -> Callable[[Mapping[str, Any]], str]:
    """A divergence from uniform with its interval and the test of no preference
    (`0.012 [0.000, 0.031], p = 0.41`): the value alone says nothing about whether there is one."""
    def cell(m: Mapping[str, Any]) -> str:
        value = get_path(m.get(block), path)
        if value is None:
            return "–"
        text = value_ci(value, get_path((m.get("ci95") or {}).get(block), path))
        p = get_path((m.get("p") or {}).get(block), path)
        return text if p is None else f"{text}, p = {p:.2g}"

    return cell


SPD_UNDEFINED = "SPD undefined: the items hold no high-resource or no low-resource culture"
NO_DEBIASED = "no debiased value: the run's letter prior could not be estimated (its report says why), or C0/C1 was not run"
SWEEP_COLUMNS = (Column("KL", "C0.KL", cell=_tested("C0.KL"), is_value=True), Column("Gini", "C0.Gini"), Column("CR(C1)", "C1.CR"),
                 Column("CR(C2)", "C2.CR"), Column("PSI", "C2.PSI"),
                 Column("SPD(C0)", "C0.SPD", undefined=SPD_UNDEFINED), Column("SPD(C2)", "C2.SPD", undefined=SPD_UNDEFINED),
                 Column("SPD reduction", "SPD_reduction", undefined=SPD_UNDEFINED),
                 Column("SPD_compliance(C2)", "C2.SPD_compliance", undefined=SPD_UNDEFINED),
                 Column("JSD (bits)", "C3.JSD"), Column("PPR", "C3.PPR", constant_in=("debiased",)),
                 Column("CSC (greedy)", "C3.CSC", cell=_greedy_csc, undefined="no CSC: C3 was not run"),
                 Column("KL, debiased", "C0.KL", cell=_tested("C0.KL", "debiased"), undefined=NO_DEBIASED),
                 Column("CR(C1), debiased", "C1.CR", cell=_debiased("C1.CR"), undefined=NO_DEBIASED),
                 *forced.letter_columns("C0"), *forced.text_columns("C0"))

DESIGN = replace(forced.ROTATION_DESIGN, contrast=Contrast(source="C1", dest="C0"), reference="C0")
"""Conditions, cue targets and rotations as every forced-choice bench stores them; interventions
and steering vectors compare the located user (C1) with no context (C0), and the lens reads C0."""

LETTER_NOTE = ("At C3, letter × group also holds the primacy of the fact in slot 1, whose letter moves with the "
               "context rotation; PPR, a metric of position, is 1/K under `debiased` by construction.")
"""DiSCo's addition to the letter-prior section (`forced.LETTER_READING`)."""

TASK = forced.forced_choice_task(
    forced.ForcedChoice(kind="disco", title="DiSCo", spec_type=DiscoSpec, prepare=prepare, compute=_compute,
                        report=report.report, figures=figures.run_figures, text_message=text_message,
                        design=DESIGN, factors=tuple(BUILTIN_FACTORS), reword=reword, letter_note=LETTER_NOTE),
    Presentation(
        sweep_columns=SWEEP_COLUMNS,
        sweep_note=("Expected (probability-weighted) metrics with 95% bootstrap CIs over items; debiased = the "
                    "letter prior removed. KL's interval is bias-corrected (it reaches 0 when the CSD may be "
                    "uniform) and p is the test of no cultural preference (cultures exchanged within items): "
                    "a KL with p ≥ 0.05 is no detectable preference. † on CSC: the letter drives C3's answers, and a letter-locked model "
                    "scores CSC = 1 by construction."),
        pair_columns=(Column("KL", "C0.KL"), Column("CR(C1)", "C1.CR"), Column("CR(C2)", "C2.CR"),
                      Column("PSI", "C2.PSI"), Column("SPD(C0)", "C0.SPD"), Column("SPD(C2)", "C2.SPD"),
                      Column("SPD_compliance(C2)", "C2.SPD_compliance"), Column("JSD (bits)", "C3.JSD")),
        curve_metrics=(Column("KL(CSD‖uniform), C0, nats", "C0.KL"), Column("PSI, C2", "C2.PSI")),
        sweep_figures=figures.sweep_figures,
        steer_columns=(Column("CSD(c), C0", "C0.CSD.{group}"), Column("CR(c), C1", "C1.CR_by_culture.{group}"),
                       Column("KL(CSD‖uniform), C0, nats", "C0.KL")),
        groups=figures.GROUPS),
)
