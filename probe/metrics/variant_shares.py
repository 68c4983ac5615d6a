"""The per item × variant × group selection shares of a factor run's stored scores: the input of
`probe.metrics.format_robustness.analyse`.

An item's share of group g under a variant is its exposure-normalised share
(`probe.probs.exposure_shares`) over that variant's prompts of the item: the choice probability
(softmax of the letter log-probs at the analysis temperature) that went to g's options, per
prompt showing g, normalised to sum to 1 over the groups the item shows; a group the item does
not show has share 0 and is marked not shown (`ShareCube.shown`), so the analysis compares a
group only with the items that show it. One condition is read (the bench's reference condition, else the first):
conditions that name a group in the prompt would mix a cue's effect into the wording's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from probe.metrics.factorial_shares import Factorial, ShareCube
from probe.probs import choice_probs, exposure_shares, group_sums
from probe.results.run import Run
from probe.results.scores import ScoreTable
from probe.types import Design

VARIANT = "variant"


def variant_records(run: Run) -> list[dict[str, Any]]:
    """The manifest's `variants` (empty: not a factor run)."""
    return list(run.manifest.raw.get("variants") or [])


def variant_mask(run: Run, index: int) -> np.ndarray:
    """`[prompt_id]` whether each prompt belongs to variant `index`."""
    return np.asarray(run.prompts.column(VARIANT).to_numpy(zero_copy_only=False) == index)


def analysed_condition(table: ScoreTable, design: Design) -> str | None:
    """The condition the shares read: the design's reference condition when the run has it, else the
    first in prompt order; None when the bench has no condition field (every prompt)."""
    if design.condition is None:
        return None
    conditions = list(dict.fromkeys(table.conditions(design).tolist()))
    return design.reference if design.reference in conditions else conditions[0]


def share_cube(table: ScoreTable, design: Design, names: Sequence[str], temperature: float = 1.0) -> ShareCube:
    """`[item, variant, group]` shares of the analysed condition (`analysed_condition`); `names[v]`
    names variant index v (the table's `variant` column)."""
    condition = analysed_condition(table, design)
    if condition is not None:
        table = table.subset(table.conditions(design) == condition)
    variant = np.asarray(table.column(VARIANT))
    probs = choice_probs(table.logprobs, temperature)
    shown = table.groups
    if table.order is not None:  # letters a prompt does not show carry no group
        shown = np.where(np.asarray(table.order) >= 0, shown, None)
    groups = sorted({str(g) for g in shown.ravel() if g is not None})
    items = list(dict.fromkeys(str(i) for i in table.item_id))
    item = np.array([str(i) for i in table.item_id], dtype=object)
    cube = np.zeros((len(items), len(names), len(groups)))
    seen = np.zeros((len(items), len(groups)), dtype=bool)
    for i, it in enumerate(items):
        for v in range(len(names)):
            rows = (item == it) & (variant == v)
            if not rows.any():
                cube[i, v] = np.nan
                continue
            sel, app = group_sums(probs[rows], shown[rows], groups)
            seen[i] |= app > 0
            cube[i, v] = np.nan_to_num(exposure_shares(sel, app), nan=0.0)
    return ShareCube(items=tuple(items), variants=tuple(names), groups=tuple(groups), shares=cube, shown=seen)


def factorial_of(levels: Sequence[Mapping[str, str]], names: Sequence[str],
                 order: Mapping[str, Sequence[str]] | None = None) -> Factorial:
    """The `Factorial` of variants named `names` with factor levels `levels` (a manifest's)."""
    return Factorial.of({n: dict(lv) for n, lv in zip(names, levels)}, order)
