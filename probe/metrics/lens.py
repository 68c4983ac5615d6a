"""Analyses of the mechanistic outputs: per-layer distributions through the logit lens, and a
linear probe from captured activations to the chosen group.

Both read only stored files (`lens.safetensors`, `activations.safetensors`, the tables).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from probe.errors import ProbeInputError
from probe.metrics.core import jsd_bits
from probe.probs import choice_probs, exposure_shares, group_sums
from probe.results.run import Run
from probe.types import Design


def layer_table(run: Run, design: Design, condition: str | None = None, temperature: float = 1.0) -> dict[str, Any]:
    """Per layer, over the prompts of one condition of the bench's `design` (`None` = all prompts;
    `lens_condition` picks the one a run's report reads):
    the group distribution (CSD), the mean letter-position distribution, `jsd_to_final` — the
    JSD (bits) of the layer's *group* distribution to the final layer's — and
    `letter_jsd_to_final`, the mean over prompts of each prompt's *letter* distribution's JSD
    to its final-layer one.

    They can disagree completely: rotation shows every group at every letter, so a layer that
    prefers a letter whatever it shows moves no group's share (group JSD near 0) while its
    letter distributions are far from the final layer's."""
    lens = run.lens()  # [prompt, layer, letter]
    table = run.table()
    mask = np.ones(len(table.prompt_id), bool) if condition is None else table.conditions(design) == condition
    if not mask.any():
        raise ProbeInputError(f"{run.path}: no prompts of condition {condition!r}")
    groups = table.groups[mask]
    names = sorted({str(g) for g in groups.ravel()})
    csd, letters, per_prompt = [], [], []
    for layer in range(lens.shape[1]):
        probs = choice_probs(lens[table.prompt_id[mask], layer], temperature)
        csd.append(exposure_shares(*group_sums(probs, groups, names)))
        letters.append(probs.mean(axis=0))
        per_prompt.append(probs)
    final = csd[-1]
    return {
        "condition": condition, "groups": names, "letters": run.letters[: lens.shape[2]],
        "csd": [dict(zip(names, map(float, c))) for c in csd],
        "letter_probs": [list(map(float, p)) for p in letters],
        "jsd_to_final": [float(jsd_bits(c, final)) for c in csd],
        "letter_jsd_to_final": [float(jsd_bits(p, per_prompt[-1]).mean()) for p in per_prompt],
    }


def lens_condition(conditions: Sequence[str], design: Design) -> str | None:
    """The condition the lens table of a run with these `conditions` (in prompt order) reads: of
    several, the design's reference condition when the run has it, else the first; of one, None
    (all prompts)."""
    distinct = list(dict.fromkeys(conditions))
    if len(distinct) < 2:
        return None
    return design.reference if design.reference in distinct else distinct[0]


def first_layer_within(table: dict[str, Any], bits: float = 0.01, key: str = "jsd_to_final") -> int:
    """The first layer from which on the distribution `key` names (`jsd_to_final`: groups;
    `letter_jsd_to_final`: letters) stays within `bits` (JSD) of the final layer's."""
    values = table[key]
    return next(i for i in range(len(values)) if all(d <= bits for d in values[i:]))


@dataclass(frozen=True)
class ProbeFit:
    accuracy: float
    """Mean cross-validated accuracy (folds split by item, so no item is in train and test)."""
    accuracy_std: float
    majority_baseline: float
    """Accuracy of always predicting the most frequent class of each training fold."""
    n_classes: int
    n_samples: int


def chosen_groups(run: Run) -> np.ndarray:
    """`[prompt]` the group of each prompt's argmax letter (the greedy choice)."""
    table = run.table()
    assert np.array_equal(table.prompt_id, np.arange(len(table.prompt_id))), "letter runs keep every prompt"
    return table.groups[np.arange(len(table.prompt_id)), table.logprobs.argmax(axis=1)].astype(str)


def fit_linear_probe(x: np.ndarray, y: np.ndarray, groups: np.ndarray, folds: int = 5, seed: int = 0) -> ProbeFit:
    """Cross-validated multinomial logistic regression from activations `x [N, d]` to labels
    `y [N]`, with `GroupKFold` over `groups` (item ids). Needs scikit-learn (`pip install
    scikit-learn`, or the `mech` extra)."""
    try:
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import GroupKFold
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler
    except ImportError:
        raise ProbeInputError("the linear probe needs scikit-learn: pip install scikit-learn "
                              "(or pip install -e '.[mech]' in a clone)") from None
    n_splits = min(folds, len(np.unique(groups)))
    if n_splits < 2 or len(np.unique(y)) < 2:
        raise ProbeInputError("the probe needs ≥ 2 items and ≥ 2 distinct labels")
    accs, base = [], []
    for train, test in GroupKFold(n_splits=n_splits).split(x, y, groups):
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, random_state=seed))
        if len(np.unique(y[train])) < 2:
            continue
        model.fit(x[train], y[train])
        accs.append(float((model.predict(x[test]) == y[test]).mean()))
        values, counts = np.unique(y[train], return_counts=True)
        base.append(float((y[test] == values[counts.argmax()]).mean()))
    return ProbeFit(float(np.mean(accs)), float(np.std(accs)), float(np.mean(base)), len(np.unique(y)), len(y))
