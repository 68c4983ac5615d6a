"""Activation patching: how much of a cue's effect on the choice returns when one layer's residual
stream at the answer position is copied from the cued (source) prompt into the uncued (dest) one.

Reads only stored files: `patching.safetensors` (`logprobs [pair, layer, letter]`, `layers`,
`pair`), `patching.parquet` (one row per pair: `pair`, `item_id`, `rotation`, `target`,
`source_id`, `dest_id`) and the run's own scores. Per pair k with target c, j_k is the letter at
which the destination shows c; with choice probabilities at temperature T,

    CR_x(c) = mean over pairs targeting c of P(j_k | x),  x ∈ {dest, source, patched at layer l}
    restored(c, l) = (CR_patched(c, l) − CR_dest(c)) / (CR_source(c) − CR_dest(c))

0 = patching that layer moves nothing, 1 = it carries the whole cue effect. The pooled row
(`"all"`) uses the same formula with means over every pair. Intervals resample items.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from probe.errors import ProbeInputError
from probe.metrics.core import bootstrap_weights, percentile_ci, ratio, wsum
from probe.probs import choice_probs
from probe.results.layout import PATCHING_PAIRS, PATCHING_TENSORS, SCORES
from probe.results.patch_tables import PATCHED_GROUPS, load_patching
from probe.results.run import Run

POOLED = "all"
"""Key of the row pooled over every pair (not a macro mean over groups)."""



def _div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """`num / den`, NaN where `den` is 0 or NaN (the cue moved nothing: no effect to restore).
    Unlike `ratio`, a negative denominator is valid (a cue that lowers its target's probability)."""
    ok = np.isfinite(den) & (den != 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, num / np.where(ok, den, 1.0), np.nan)


def _value(v: Any) -> float | None:
    """A float for JSON, None for NaN (and 0.0 for −0.0, which reads oddly in a report)."""
    v = float(v) + 0.0
    return v if np.isfinite(v) else None


def _interval(ci: list[float]) -> list[float | None]:
    return [_value(ci[0]), _value(ci[1])]


def restored_share(p_dest: np.ndarray, p_source: np.ndarray, p_patched: np.ndarray, target: np.ndarray,
                   item_id: np.ndarray, n_boot: int, seed: int) -> dict[str, Any]:
    """Per group and pooled: the share of the cue's effect restored by patching each layer.

    `p_dest`, `p_source` `[pair]` and `p_patched` `[pair, layer]` are the probabilities of the
    target's letter; `target` `[pair]` names the group (None: the pair is left out), `item_id`
    `[pair]` the bootstrap unit. Returns a JSON-ready dict (NaN → None): the groups (sorted,
    under `PATCHED_GROUPS`), `restored` and `ci95` (`{group | "all": [per layer]}`, `ci95` None
    when n_boot = 0), `CR_dest`, `CR_source` (`{key: v}`), `CR_patched` (`{key: [per layer]}`),
    `n_pairs`.
    A group no resampled item targets is left out of that replicate (NaN, ignored by the
    percentile interval).
    """
    p_dest, p_source = np.asarray(p_dest, np.float64), np.asarray(p_source, np.float64)
    p_patched = np.asarray(p_patched, np.float64)
    target, item_id = np.asarray(target, dtype=object), np.asarray(item_id, dtype=object)
    n = len(p_dest)
    if p_patched.ndim != 2 or p_patched.shape[0] != n or any(len(a) != n for a in (p_source, target, item_id)):
        raise ValueError(f"restored_share: expected p_dest, p_source, target, item_id of length {n} and p_patched "
                         f"[{n}, layer]; got {p_source.shape}, {target.shape}, {item_id.shape}, {p_patched.shape}")
    n_layers = p_patched.shape[1]
    keep = np.array([t is not None for t in target], dtype=bool)
    groups = sorted({str(t) for t in target[keep]})
    if POOLED in groups:
        raise ProbeInputError(f"field 'target': expected group names other than {POOLED!r} (the pooled row's "
                              f"key), got {POOLED!r}")
    keys = [*groups, POOLED]
    items, item_idx = np.unique(item_id[keep].astype(str), return_inverse=True)
    index = {c: i for i, c in enumerate(groups)}
    cidx = np.array([index[str(t)] for t in target[keep]], dtype=np.int64)
    # Per-item sums by group; the last column pools every group. Bootstrap replicates are then
    # weighted sums of these rows, all B at once (`wsum`).
    shape = (len(items), len(keys))
    counts, dest, source = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    patched = np.zeros((*shape, n_layers))
    at = (item_idx, cidx)
    np.add.at(counts, at, 1.0)
    np.add.at(dest, at, p_dest[keep])
    np.add.at(source, at, p_source[keep])
    np.add.at(patched, at, p_patched[keep])
    for a in (counts, dest, source, patched):
        a[:, -1] = a[:, :-1].sum(axis=1)

    def evaluate(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """`(CR_dest, CR_source [..., key], CR_patched, restored [..., key, layer])` for weights w."""
        n_w = wsum(w, counts)
        cr_d, cr_s = ratio(wsum(w, dest), n_w), ratio(wsum(w, source), n_w)
        cr_p = ratio(wsum(w, patched), n_w[..., None])
        return cr_d, cr_s, cr_p, _div(cr_p - cr_d[..., None], (cr_s - cr_d)[..., None])

    cr_d, cr_s, cr_p, restored = evaluate(np.ones(len(items)))
    ci95: dict[str, Any] | None = None
    if n_boot > 0:
        if len(items):
            boot = evaluate(bootstrap_weights(len(items), n_boot, seed))[3]  # [B, key, layer]
            tree = percentile_ci({k: [boot[:, i, j] for j in range(n_layers)] for i, k in enumerate(keys)})
            ci95 = {k: [_interval(c) for c in v] for k, v in tree.items()}
        else:
            ci95 = {k: [[None, None] for _ in range(n_layers)] for k in keys}
    return {
        PATCHED_GROUPS: groups,
        "restored": {k: [_value(v) for v in restored[i]] for i, k in enumerate(keys)},
        "ci95": ci95,
        "CR_dest": {k: _value(cr_d[i]) for i, k in enumerate(keys)},
        "CR_source": {k: _value(cr_s[i]) for i, k in enumerate(keys)},
        "CR_patched": {k: [_value(v) for v in cr_p[i]] for i, k in enumerate(keys)},
        "n_pairs": {k: int(counts[:, i].sum()) for i, k in enumerate(keys)},
    }


def patching_table(run: Run, temperature: float, n_boot: int, seed: int) -> dict[str, Any]:
    """The share of the cue's effect restored at each patched layer (`restored_share`), from the
    run's stored patching files and scores, with `layers`, the intervention's `source` and
    `dest` conditions, `n_left_out` (pairs whose target is null or not shown to the destination)
    and the `temperature` the probabilities were read at."""
    logprobs, layers, pairs = load_patching(run.path)
    where = run.path / PATCHING_PAIRS
    table = run.table()
    n_prompts = len(table.prompt_id)
    if not np.array_equal(table.prompt_id, np.arange(n_prompts)):
        raise ProbeInputError(f"{run.path}: activation patching needs the scores of every prompt (ids 0..n-1)")
    if logprobs.shape[2] != table.logprobs.shape[1]:
        raise ProbeInputError(f"{run.path / PATCHING_TENSORS}: field 'logprobs': expected {table.logprobs.shape[1]} "
                              f"letters (as {SCORES}), got {logprobs.shape[2]}")
    src, dst = pairs.column("source_id").to_numpy(), pairs.column("dest_id").to_numpy()
    for name, ids in (("source_id", src), ("dest_id", dst)):
        bad = np.flatnonzero((ids < 0) | (ids >= n_prompts))
        if len(bad):
            raise ProbeInputError(f"{where}: pair {bad[0]}, column {name!r}: expected a prompt id in "
                                  f"0..{n_prompts - 1}, got {ids[bad[0]]}")
    item_id = np.asarray(pairs.column("item_id").to_pylist(), dtype=object)
    for name, ids in (("source_id", src), ("dest_id", dst)):
        bad = np.flatnonzero(table.item_id[ids].astype(str) != item_id.astype(str))
        if len(bad):
            k = bad[0]
            raise ProbeInputError(f"{where}: pair {k}, column {name!r}: expected a prompt of item {item_id[k]!r}, "
                                  f"got prompt {ids[k]} of item {table.item_id[ids[k]]!r}")
    bad = np.flatnonzero((table.groups[src] != table.groups[dst]).any(axis=1))
    if len(bad):
        k = bad[0]
        raise ProbeInputError(f"{where}: pair {k}: expected source and destination to show the same options in the "
                              f"same order, got {table.groups[src[k]].tolist()} vs {table.groups[dst[k]].tolist()}")
    target = np.asarray(pairs.column("target").to_pylist(), dtype=object)
    named = np.array([t is not None for t in target], dtype=bool)
    shown = (table.groups[dst] == np.where(named, target, "").astype(str)[:, None]) & named[:, None]  # [pair, letter]
    keep = shown.any(axis=1)
    j = shown.argmax(axis=1)  # the (first) letter showing the target; unused for left-out pairs
    rows = np.arange(len(j))
    p_dest = choice_probs(table.logprobs[dst], temperature)[rows, j]
    p_source = choice_probs(table.logprobs[src], temperature)[rows, j]
    p_patched = choice_probs(logprobs, temperature)[rows, :, j]  # [pair, layer]
    share = restored_share(p_dest[keep], p_source[keep], p_patched[keep], target[keep], item_id[keep], n_boot, seed)
    intervention = run.manifest.intervention
    source, dest = (None, None) if intervention is None else (intervention.source, intervention.dest)
    return {"source": source, "dest": dest, "layers": layers.tolist(),
            "temperature": float(temperature), "bootstrap": {"n_boot": int(n_boot), "seed": int(seed), "unit": "item"},
            "n_left_out": int((~keep).sum()), **share}
