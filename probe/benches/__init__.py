"""Bench registry: one entry per benchmark *kind*; `conf/bench/*.yaml` names the kind.

A forced-choice bench provides: a typed spec built from its config block, a `prepare` that
loads and validates items and expands them into prompts, a `metrics` over a stored
`ScoreTable`, and a markdown `report` over its metrics. Adding a bench = its module, one
line in `REGISTRY`, its config, its tests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probe.config import build
from probe.errors import ProbeInputError
from probe.results import ScoreTable
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
    """Provenance for the manifest: file path and sha256."""


@dataclass(frozen=True)
class BenchDef:
    kind: str
    prepare: Callable[[Mapping[str, Any]], PreparedBench]
    metrics: Callable[[ScoreTable, Mapping[str, Any]], dict[str, Any]]
    report: Callable[[dict[str, Any]], str]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _disco_prepare(cfg: Mapping[str, Any]) -> PreparedBench:
    from probe.benches import disco

    spec = build(disco.DiscoSpec, cfg, "bench")
    path = disco.resolve_source(spec)
    items = disco.load_items(path, spec.cultures)
    prompts = disco.build_prompts(items, disco.DiscoDesign(conditions=spec.conditions))
    return PreparedBench(name=spec.name, kind="disco", letters=("A", "B", "C", "D"), items=items,
                         prompts=prompts, source={"path": str(path), "sha256": sha256_file(path)})


def _disco_metrics(table: ScoreTable, analysis: Mapping[str, Any]) -> dict[str, Any]:
    from probe.metrics import disco

    return disco.compute(table, build(disco.DiscoAnalysis, analysis, "analysis"))


def _disco_report(metrics: dict[str, Any]) -> str:
    from probe.report import disco_report

    return disco_report(metrics)


REGISTRY: dict[str, BenchDef] = {
    "disco": BenchDef(kind="disco", prepare=_disco_prepare, metrics=_disco_metrics, report=_disco_report),
}


def get_bench(kind: str) -> BenchDef:
    """The registered bench of this kind, or an error listing the kinds there are."""
    if kind not in REGISTRY:
        raise ProbeInputError(f"bench.kind: unknown bench kind {kind!r}; registered: {sorted(REGISTRY)}")
    return REGISTRY[kind]
