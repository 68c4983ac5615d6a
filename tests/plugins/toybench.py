"""A toy 3-option benchmark defined outside probe: adding a benchmark is this one module (a `Task`
registered on import) and one bench config (`conf/bench/toy.yaml`, which names this module).

Three regions, each item's options shown in all 3 cyclic rotations; the metrics are the
exposure-normalised region shares and their KL to uniform, with item-bootstrap CIs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from probe.benches import forced
from probe.benches.registry import register
from probe.benches.task import Column, Presentation, PreparedBench
from probe.metrics.core import (
    AnalysisOptions,
    expected_greedy_ci,
    get_path,
    kl_to_uniform,
    ratio,
    wsum,
)
from probe.results.run import Run
from probe.results.scores import ScoreTable
from probe.types import LETTERS, Item, Option, Prompt
from probe.viz.figures import Figure, bars, pyplot, save

REGIONS = ("east", "north", "south")
QUESTIONS = (
    ("What do people drink in the morning?", ("tea", "coffee", "juice")),
    ("Which dish is served at a wedding?", ("rice", "stew", "bread")),
    ("What sport do children play after school?", ("football", "cricket", "basketball")),
    ("Which instrument is played at festivals?", ("drum", "flute", "guitar")),
)
K = len(REGIONS)


@dataclass(frozen=True)
class ToySpec:
    """The `bench:` block of the toy bench."""

    name: str = "toy"
    """Run label."""
    kind: str = "toy"
    """The registered bench kind."""
    n_items: int = len(QUESTIONS)
    """How many of the built-in questions to ask."""


def prepare(spec: ToySpec, generate: bool, cache_dir: Path) -> PreparedBench:
    items = [Item(item_id=f"toy-{i}", question=q,
                  options=tuple(Option(key=r, text=t, group=r) for r, t in zip(REGIONS, texts)))
             for i, (q, texts) in enumerate(QUESTIONS[: spec.n_items])]
    prompts = []
    for item in items:
        for k in range(K):
            order = tuple((i + k) % K for i in range(K))
            lines = [f"Question: {item.question}", "Options:",
                     *(f"{LETTERS[i]}. {item.options[o].text}" for i, o in enumerate(order)),
                     'Return ONLY valid JSON in exactly this format: {"answer_choice":"X"} (where X is one of A, B, C).']
            prompts.append(Prompt(prompt_id=len(prompts), item_id=item.item_id, order=order,
                                  groups=tuple(item.options[o].group for o in order), message="\n".join(lines),
                                  prefix_key=item.item_id, design=(("condition", "toy"), ("rotation", k))))
    return PreparedBench(name=spec.name, kind=spec.kind, letters=LETTERS[:K], items=items, prompts=prompts,
                         source={"items": len(items)})


def compute(table: ScoreTable, opts: AnalysisOptions, spec: ToySpec) -> dict[str, Any]:
    """Region shares `(sel/app) / Σ (sel/app)` and KL(shares ‖ uniform), per-item sums bootstrapped."""
    items, item = np.unique(table.item_id.astype(str), return_inverse=True)
    region = np.searchsorted(REGIONS, table.groups.astype(str))  # [prompt, letter]

    def reduce(probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sel, app = np.zeros((len(items), K)), np.zeros((len(items), K))
        np.add.at(sel, (item[:, None], region), probs)
        np.add.at(app, (item[:, None], region), 1.0)
        return sel, app

    def evaluate(sums: tuple[np.ndarray, np.ndarray], w: np.ndarray) -> dict[str, Any]:
        rate = ratio(wsum(w, sums[0]), wsum(w, sums[1]))
        shares = rate / rate.sum(axis=-1, keepdims=True)
        return {"shares": {r: shares[..., i] for i, r in enumerate(REGIONS)}, "KL": kl_to_uniform(shares)}

    return expected_greedy_ci(table.logprobs, len(items), reduce, evaluate, opts.temperature, opts.n_boot,
                              opts.seed)


def report(m: Mapping[str, Any]) -> str:
    lines = [f"# Toy bench — {m['model']}", "", f"KL to uniform: {m['expected']['KL']:.3f}", "",
             "| region | share |", "|---|---|"]
    return "\n".join(lines + [f"| {r} | {v:.3f} |" for r, v in m["expected"]["shares"].items()]) + "\n"


def figures(run: Run, out_dir: Path) -> list[Figure]:
    shares = get_path(run.metrics, "expected", "shares")
    if not shares:
        return []
    fig, ax = pyplot().subplots(figsize=(4, 3), constrained_layout=True)
    bars(ax, shares, get_path(run.metrics, "ci95", "expected", "shares"), list(REGIONS))
    return [save(fig, out_dir, "toy_shares.png", "Region shares with 95% CIs (dotted: uniform).")]


TASK = register(forced.forced_choice_task(
    forced.ForcedChoice(kind="toy", title="Toy bench", spec_type=ToySpec, prepare=prepare, compute=compute,
                        report=report, figures=figures),
    Presentation(sweep_columns=(Column("KL", "KL"), Column("north", "shares.north")),
                 sweep_note="Expected region shares, 95% CIs over items.",
                 pair_columns=(Column("KL", "KL"),), curve_metrics=(Column("KL to uniform", "KL"),)),
))
