"""CCD-Bench as a `Task`: its data, designs, metrics, rationale judging, report and figures."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from probe.benches import forced
from probe.benches.ccd import figures, report
from probe.benches.ccd.data import (
    RATIONALE_CUE,
    CCDSpec,
    K,
    build_prompts,
    design_name,
    load_items,
    resolve_source,
    reword,
    text_message,
)
from probe.benches.ccd.judging import DIMENSIONS, JUDGEMENT_COLUMNS, KeywordJudge
from probe.benches.ccd.metrics import compute, pluralism
from probe.benches.ccd.designs import balance_score
from probe.benches.orders import BALANCES, plan_orders
from probe.benches.task import Column, JudgeJob, Judging, PreparedBench, Presentation
from probe.files import sha256_file
from probe.judges.base import JudgeRequest
from probe.metrics.core import AnalysisOptions, get_path
from probe.prompts.factors import BUILTIN_FACTORS
from probe.prompts.render import ANSWER_CUE
from probe.results.generations import read_judgements
from probe.results.run import Run
from probe.results.schemas import judgements_schema
from probe.results.scores import ScoreTable
from probe.types import LETTERS, GroupNoun

log = logging.getLogger(__name__)

def prepare(spec: CCDSpec, generate: bool, cache_dir: Path) -> PreparedBench:
    """Validated dilemmas (local file or the cached download) and the prompts of the design;
    generation mode asks for `SELECTED OPTION:` and a rationale instead of JSON."""
    path = resolve_source(spec, cache_dir)
    items = load_items(path)[: spec.limit]
    name = design_name(spec)
    if spec.design == "latin_square":
        log.info("bench.design=latin_square is read as bench.orders=latin_square")
    orders, record = None, None
    if name not in ("rotations", "latin_square"):
        per_item, record = plan_orders(spec, [K])
        orders = per_item[K].orders
    prompts = build_prompts(items, spec, generate, orders)
    source: dict[str, Any] = {"path": str(path), "sha256": sha256_file(path), "design": spec.design}
    if name == "latin_square":
        source["balance_score"] = balance_score([p.order for p in prompts], K)
    if spec.orders == "latin_square" and spec.design != "latin_square":
        source["orders"] = {"design": "latin_square", "balances": BALANCES["latin_square"]}
    if record is not None:  # a default (rotations) run's manifest stays as it was
        source["orders"] = record
    return PreparedBench(name=spec.name, kind=spec.kind, letters=LETTERS[:K], items=items, prompts=prompts,
                         source=source, cue=RATIONALE_CUE if generate else ANSWER_CUE, data_files=(path,))


def _compute(table: ScoreTable, opts: AnalysisOptions, spec: CCDSpec) -> dict[str, Any]:
    out = compute(table, opts)
    if design_name(spec) == "latin_square":
        out["balance_score"] = balance_score(list(table.order), K)
    return out


def pluralism_metrics(run: Run, mask: np.ndarray | None) -> dict[str, Any]:
    """Rationale pluralism when generated rationales were judged (beyond the forced-choice metrics)."""
    if not (forced.is_generation_run(run) and run.judgements is not None):
        return {}
    keep = None if mask is None else set(np.nonzero(np.asarray(mask, bool))[0].tolist())
    return {"pluralism": pluralism([j for j in read_judgements(run.path) if keep is None or j["prompt_id"] in keep])}


def rationale_jobs(bench: PreparedBench, generations: Sequence[Mapping[str, Any]]) -> list[JudgeJob]:
    """One GLOBE-dimensions verdict per generated rationale (the pluralism metric's input)."""
    return [JudgeJob(JudgeRequest(DIMENSIONS.name, {"rationale": g["rationale"]}),
                     {"prompt_id": g["prompt_id"], "task": DIMENSIONS.name})
            for g in generations if g["rationale"]]


def judge_errors(metrics: Mapping[str, Any]) -> int:
    """Failed verdicts on generated rationales, which the pluralism block counts."""
    return int(metrics.get("n_judge_errors") or 0) + int(get_path(metrics, "pluralism.n_judge_errors") or 0)


def _top_clusters(metrics: Mapping[str, Any], tree: str = "expected") -> str:
    shares = (metrics.get(tree) or {}).get("shares") or {}
    return ", ".join(f"{c} {v:.2f}" for c, v in sorted(shares.items(), key=lambda kv: -kv[1])[:3]) or "–"


_HEADLINE = (Column("entropy (bits)", "entropy_bits"), Column("Gini", "gini"), Column("position V", "position_V"))

TASK = forced.forced_choice_task(
    forced.ForcedChoice(kind="ccd", title="CCD-Bench", spec_type=CCDSpec, prepare=prepare, compute=_compute,
                        report=report.report, figures=figures.run_figures, extra_metrics=pluralism_metrics,
                        text_message=text_message, factors=tuple(BUILTIN_FACTORS), reword=reword),
    Presentation(
        sweep_columns=(Column("top clusters", "shares", cell=_top_clusters), *_HEADLINE,
                       Column("top clusters, debiased", "shares", cell=lambda m: _top_clusters(m, "debiased"),
                              undefined="no debiased shares: the run's letter prior could not be estimated (its "
                                        "report says why)"),
                       *forced.letter_columns(), *forced.text_columns()),
        sweep_note="Expected (probability-weighted) metrics with 95% bootstrap CIs over items.",
        pair_columns=_HEADLINE,
        curve_metrics=(Column("entropy of cluster shares, bits", "entropy_bits"),
                       Column("Cramér's V, position", "position_V")),
        sweep_figures=figures.sweep_figures, groups=GroupNoun("culture", "cultures")),
    Judging(jobs=rationale_jobs, judges=(KeywordJudge.name, "llm", "http"),
            schema=judgements_schema(JUDGEMENT_COLUMNS), errors=judge_errors),
)
