"""Bench registry: one entry per benchmark *kind*; `conf/bench/*.yaml` names the kind.

A forced-choice bench provides: a typed spec built from its config block, a `prepare` that
loads and validates items and expands them into prompts, a `metrics` over a stored
`ScoreTable`, and a markdown `report` over its metrics. Adding a bench = its module, one
line in `REGISTRY`, its config, its tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probe.config import build
from probe.errors import ProbeInputError
from probe.render import ANSWER_CUE
from probe.results import ScoreTable, sha256_file
from probe.types import Item, Prompt


@dataclass(frozen=True)
class PreparedBench:
    """A bench ready to score: validated items and the prompts of its design."""

    name: str
    kind: str
    letters: tuple[str, ...]
    items: Sequence[Item]
    prompts: Sequence[Prompt]
    source: dict[str, Any]
    """Provenance for the manifest: file path, sha256, design facts."""
    cue: str = ANSWER_CUE
    """What the answer starts with; pre-filled so the next token is the letter (or the answer)."""


@dataclass(frozen=True)
class BenchDef:
    kind: str
    prepare: Callable[[Mapping[str, Any], bool], PreparedBench]
    """`(bench config, generate mode?) → PreparedBench`."""
    metrics: Callable[[ScoreTable, Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]
    """`(table, analysis options, bench config) → {"expected", "greedy", "ci95", …}`."""
    report: Callable[[dict[str, Any]], str]


def _disco_prepare(cfg: Mapping[str, Any], generate: bool = False) -> PreparedBench:
    from probe.benches import disco

    spec = build(disco.DiscoSpec, cfg, "bench")
    path = disco.resolve_source(spec)
    items = disco.load_items(path, spec.cultures)
    prompts = disco.build_prompts(items, disco.DiscoDesign(conditions=spec.conditions))
    return PreparedBench(name=spec.name, kind="disco", letters=("A", "B", "C", "D"), items=items,
                         prompts=prompts, source={"path": str(path), "sha256": sha256_file(path)})


def _disco_metrics(table: ScoreTable, analysis: Mapping[str, Any], bench: Mapping[str, Any]) -> dict[str, Any]:
    from probe.metrics import disco

    return disco.compute(table, build(disco.DiscoAnalysis, analysis, "analysis"))


def _disco_report(metrics: dict[str, Any]) -> str:
    from probe.report import disco_report

    return disco_report(metrics)


def _ccd_prepare(cfg: Mapping[str, Any], generate: bool = False) -> PreparedBench:
    from probe.benches import ccd
    from probe.models import cache_root

    spec = build(ccd.CCDSpec, cfg, "bench")
    path = ccd.resolve_source(spec, cache_root() / "data")
    items = ccd.load_items(path)[: spec.limit]
    prompts = ccd.build_prompts(items, spec, generate)
    source: dict[str, Any] = {"path": str(path), "sha256": sha256_file(path), "design": spec.design}
    if spec.design == "latin_square":
        from probe.designs import balance_score

        source["balance_score"] = balance_score([p.order for p in prompts], ccd.K)
    return PreparedBench(name=spec.name, kind="ccd", letters=tuple("ABCDEFGHIJ"), items=items, prompts=prompts,
                         source=source, cue=ccd.RATIONALE_CUE if generate else ANSWER_CUE)


def _ccd_metrics(table: ScoreTable, analysis: Mapping[str, Any], bench: Mapping[str, Any]) -> dict[str, Any]:
    from probe.metrics import ccd

    out = ccd.compute(table, build(ccd.CCDAnalysis, analysis, "analysis"))
    if bench.get("design") == "latin_square":
        from probe.designs import balance_score

        out["balance_score"] = balance_score(list(table.order), 10)
    return out


def _ccd_report(metrics: dict[str, Any]) -> str:
    from probe.report import ccd_report

    return ccd_report(metrics)


REGISTRY: dict[str, BenchDef] = {
    "disco": BenchDef(kind="disco", prepare=_disco_prepare, metrics=_disco_metrics, report=_disco_report),
    "ccd": BenchDef(kind="ccd", prepare=_ccd_prepare, metrics=_ccd_metrics, report=_ccd_report),
}


OPEN_ANSWER_KINDS: tuple[str, ...] = ("locqa",)
"""Benches with open answers (generated, then judged): their runs go through probe.locqa_run."""


def get_bench(kind: str) -> BenchDef:
    """The registered bench of this kind, or an error listing the kinds there are."""
    if kind not in REGISTRY:
        raise ProbeInputError(f"bench.kind: unknown bench kind {kind!r}; registered: {sorted(REGISTRY)} "
                              f"(forced choice) and {list(OPEN_ANSWER_KINDS)} (open answers)")
    return REGISTRY[kind]
