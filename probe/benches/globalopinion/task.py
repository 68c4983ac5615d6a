"""GlobalOpinionQA as a `Task`: its data, prompts, metrics, report and figures.

A forced-choice bench on `ForcedChoice`; what it adds: the prompts table carries each question's
answer shares (design column `human`, JSON, on the prompts of its first prompt group), so every
metric is recomputed from the run's own files, and the metrics hook reads them before the
forced-choice machinery runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from probe.benches import forced
from probe.benches.globalopinion import figures, report
from probe.benches.globalopinion.conclusion import ranked
from probe.benches.globalopinion.countries import table_name
from probe.benches.globalopinion.factors import factor_cube
from probe.benches.globalopinion.data import (
    GlobalOpinionSpec,
    load_questions,
    resolve_source,
    select,
)
from probe.benches.globalopinion.metrics import compute, near_uniform, read_human
from probe.benches.globalopinion.prompts import (
    CONDITION,
    HUMAN,
    PREFILL,
    ROTATION,
    TARGET,
    build_prompts,
    reword,
    text_message,
)
from probe.benches.globalopinion.ranking import agreements, countries_block, ranking_block, ranking_tests
from probe.benches.globalopinion.specificity import specificity_tests
from probe.benches.orders import plan_orders
from probe.benches.task import Column, PreparedBench, Presentation, bench_spec
from probe.errors import ProbeInputError
from probe.files import sha256_file
from probe.metrics.core import AnalysisOptions, replicates_of
from probe.metrics.tree import MetricsTree
from probe.prompts.factors import BUILTIN_FACTORS
from probe.results.run import Run
from probe.results.scores import ScoreTable
from probe.types import LETTERS, Contrast, Design, GroupNoun

NEAR_UNIFORM = 0.9
"""Mean normalised entropy of the model's distributions above which the report warns."""


def prepare(spec: GlobalOpinionSpec, generate: bool, cache_dir: Path) -> PreparedBench:
    """Validated questions (local CSV or the pinned hub download), selected, and their prompts."""
    if not spec.conditions:
        raise ProbeInputError("bench.conditions: empty; choose default and/or cross_national")
    path = resolve_source(spec, cache_dir)
    questions, counts = load_questions(path, spec.sum_tolerance, spec.drop_refusals, spec.drop_volunteered,
                                       spec.strip_question)
    chosen = select(questions, spec)
    if not chosen:
        raise ProbeInputError(f"{path}: no question left after bench.source={spec.source} and bench.countries")
    width = max(len(q.item.options) for q in chosen)
    per_k, record = plan_orders(spec, [len(q.item.options) for q in chosen])
    orders = None if record is None else {k: o.orders for k, o in per_k.items()}
    prompts = build_prompts(chosen, list(dict.fromkeys(spec.conditions)), width, orders)
    source = {"path": str(path), "sha256": sha256_file(path), **vars(counts),
              "questions": len(chosen), "distributions": sum(len(q.shares) for q in chosen),
              "countries": len({c for q in chosen for c, _ in q.shares})}
    if record is not None:  # a default (rotations) run's manifest stays as it was
        source["orders"] = record
    return PreparedBench(name=spec.name, kind=spec.kind, letters=LETTERS[:width], items=[q.item for q in chosen],
                         prompts=prompts, source=source, cue=PREFILL, base_joiner=" ", data_files=(path,))


DESIGN_COLUMNS: tuple[pa.Field, ...] = (
    pa.field(CONDITION, pa.string()), pa.field(TARGET, pa.string()), pa.field(ROTATION, pa.int64()),
    pa.field(HUMAN, pa.string()),
)
"""The prompts table's design columns: condition, cued country, rotation and the answer shares."""

DESIGN = Design(condition=CONDITION, target=TARGET, ordering=ROTATION,
                contrast=Contrast(source="cross_national", dest="default"), reference="default",
                structured=(HUMAN,))
"""Conditions analysed apart, the cued country as target, rotations within a prompt group; the
answer shares (`{country: [share per option]}`) a JSON object."""


def _human(run: Run) -> dict[str, dict[str, np.ndarray]]:
    return read_human(run.prompts.select(["item_id", HUMAN]))


def metrics(run: Run, mask: np.ndarray | None, opts: AnalysisOptions) -> MetricsTree:
    """The forced-choice metrics with this bench's formulas, the countries' names and samples,
    the ranking by lift (`ranking.py`) with its rank agreements, and the near-uniform check."""
    human = _human(run)
    out = forced.letter_metrics(lambda t, o, s: compute(t, o, human), GlobalOpinionSpec, DESIGN)(run, mask, opts)
    out["countries"] = countries_block(out)
    if out.get("expected") is not None:
        out["ranking"] = ranking_block(out, bench_spec(GlobalOpinionSpec, run.manifest.bench.config))
        out.update(agreements(out, out["ranking"]["ranked"]))
        tests = ranking_tests(out, replicates_of(out), out["ranking"]["ranked"])
        spec = bench_spec(GlobalOpinionSpec, run.manifest.bench.config)
        for block, tree in specificity_tests(out, replicates_of(out), spec.min_questions).items():
            tests["p"].setdefault(block, {}).update(tree)
        out.update(tests)
    else:
        out["ranking_tau"] = None
    if not forced.is_generation_run(run) and out.get("expected") is not None:
        table = run.table()
        if mask is not None:
            table = table.subset(np.asarray(mask, bool)[table.prompt_id])
        out["model_entropy"] = near_uniform(table, opts)
        out["near_uniform"] = out["model_entropy"] > NEAR_UNIFORM
    return out


def _top(m: Mapping[str, Any], tree: str = "expected", n: int = 3, furthest: bool = False) -> str:
    """The `n` ranked countries with the highest lift in one reading (`furthest`: the `n` lowest,
    lowest first). Never one country at both ends: of L ranked countries the highest take at most
    ⌈L/2⌉, the lowest at most ⌊L/2⌋ (`–` when one country alone is ranked)."""
    order = ranked(m, tree)
    if furthest:
        order, n = order[::-1], min(n, len(order) // 2)
    else:
        n = min(n, (len(order) + 1) // 2)
    return ", ".join(f"{table_name(c)} {v:+.3f}" for c, v in order[:n]) or "–"


def caveats(m: Mapping[str, Any]) -> list[str]:
    """The report's near-uniform caveat, for the end-of-run summary and `probe runs`."""
    if not m.get("near_uniform"):
        return []
    entropy = m.get("model_entropy")
    said = f"mean normalised entropy {entropy:.3f}, 1 = uniform" if isinstance(entropy, (int, float)) else "entropy"
    return [f"near-uniform model ({said}): read the lifts, not the ranking"]


def _mean(path: str) -> Column:
    """A headline number (value and interval from the expected tree); no custom cell, so `probe
    compare` and a sweep's pair and checkpoint tables take it as a default metric."""
    return Column(path.replace(".", " "), path)


_TASK = forced.forced_choice_task(
    forced.ForcedChoice(kind="globalopinion", title="GlobalOpinionQA", spec_type=GlobalOpinionSpec, prepare=prepare,
                        run_metrics=metrics, report=report.report, figures=figures.run_figures,
                        design_columns=DESIGN_COLUMNS, design=DESIGN, text_message=text_message,
                        factors=tuple(BUILTIN_FACTORS), reword=reword),
    Presentation(
        sweep_columns=(Column("highest lift", "default.lift", cell=_top),
                       Column("lowest lift", "default.lift", cell=lambda m: _top(m, furthest=True)),
                       Column("highest lift, debiased", "default.lift", cell=lambda m: _top(m, "debiased"),
                              undefined="no debiased lift: the letter prior could not be estimated"),
                       _mean("default.mean.similarity"), _mean("default.mean.lift"), _mean("default.mean.macro_lift"),
                       _mean("cross_national.mean.gain"), _mean("cross_national.mean.specificity"),
                       *forced.letter_columns()),
        sweep_note="Similarity = 1 − Jensen–Shannon distance (base 2) to each country's answer shares; lift = "
                   "similarity − a uniform model's; countries ranked by lift (those with enough questions, national "
                   "samples); expected (probability-weighted) values with 95% bootstrap CIs over questions.",
        pair_columns=(Column("mean similarity", "default.mean.similarity"), Column("lift", "default.mean.lift")),
        curve_metrics=(Column("mean similarity (default)", "default.mean.similarity"),),
        groups=GroupNoun("country", "countries"), caveats=caveats),
)
assert _TASK.factors is not None  # the builder gives every forced-choice task its factors
TASK = replace(_TASK, factors=replace(_TASK.factors, cube=factor_cube))
