"""The `intervention:` config group — causal follow-ups read as exact letter distributions.

- `intervention=patch`: after scoring, for each pair of a source prompt (condition `source`)
  and the destination prompt (condition `dest`) of the same item showing the options in the
  same order, and each layer of `layers`, the destination's residual stream after that layer at
  the answer position is replaced by the source's and its letters read
  (`patching.safetensors` `[pair, layer, letter]`, pairs in `patching.parquet`).
- `intervention=steer`: the run's scores are read with `alpha · v_c` added to the residual stream
  after `layer` (answer position, or every position from the end of the shared prefix), where
  `v_c = mean(residual | source prompts targeting c) − mean(residual | dest prompts)` comes from
  the activations a previous run captured (`vectors`).

Null `source` and `dest` are the conditions the bench's `Design.contrast` names (DiSCo: C1, C0).

Both ride on the HF backend's trie passes (`probe.backends.interventions`), so batching and
prefix sharing stay exact.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from probe.backends.base import Patcher
from probe.benches.registry import task_of
from probe.config import build
from probe.errors import ProbeInputError
from probe.results.layout import MANIFEST, PATCHING_PARTS, PATCHING_TENSORS, is_finished
from probe.results.manifest import read_manifest
from probe.results.records import stored_intervention
from probe.types import Design, LetterIds, Prompt, RenderedPrompt

if TYPE_CHECKING:  # torch only when a steered run is built: configs and confgen stay light
    from probe.backends.interventions import InterventionPlan


@dataclass(frozen=True)
class NoIntervention:
    """No intervention: the model as it is."""

    name: Literal["none"] = "none"
    """none | patch (activation patching) | steer (steering vectors)."""

    @property
    def active(self) -> bool:
        """Whether it changes the forward pass (never: the model as it is)."""
        return False


@dataclass(frozen=True)
class PatchSpec:
    """Activation patching between paired prompts, every layer read as exact letter probabilities."""

    name: Literal["patch"] = "patch"
    """none | patch (activation patching) | steer (steering vectors)."""
    source: str | None = None
    """Condition of the source prompts (whose residual is written in), e.g. C1 or C2; null: the bench's (DiSCo: C1)."""
    dest: str | None = None
    """Condition of the destination prompts (same item, same option order); null: the bench's (DiSCo: C0)."""
    layers: tuple[int, ...] = ()
    """Decoder layers to patch, one at a time (negative: from the end); empty = every layer."""

    @property
    def active(self) -> bool:
        """Whether it changes the forward pass (patching does)."""
        return True


@dataclass(frozen=True)
class SteerSpec:
    """Steering vectors from a previous run's captured activations, added while scoring."""

    name: Literal["steer"] = "steer"
    """none | patch (activation patching) | steer (steering vectors)."""
    vectors: str | None = None
    """Run directory whose activations.safetensors holds `layer` (run it with analysis.capture_layers)."""
    layer: int = -1
    """Decoder layer (0-based; negative from the end) after which the vector is added."""
    group: str | None = None
    """The group c steered toward (a target of the source condition); sweep with -m intervention.group=a,b."""
    alpha: float = 1.0
    """Multiple of v_c added (0 = a plain run)."""
    positions: Literal["last", "all"] = "last"
    """last: the answer position; all: every position from the end of the shared prefix."""
    source: str | None = None
    """v_c = mean residual of `source` prompts targeting c … (null: the bench's condition; DiSCo: C1)"""
    dest: str | None = None
    """… minus the mean residual of `dest` prompts (null: the bench's condition; DiSCo: C0)."""

    @property
    def active(self) -> bool:
        """Whether it changes the forward pass (steering does)."""
        return True


InterventionSpec = NoIntervention | PatchSpec | SteerSpec
INTERVENTIONS: dict[str, type] = {"none": NoIntervention, "patch": PatchSpec, "steer": SteerSpec}


def intervention_spec(values: Mapping[str, Any]) -> InterventionSpec:
    """The spec of the intervention `values["name"]` names (none when absent)."""
    name = values.get("name", NoIntervention.name)
    if name not in INTERVENTIONS:
        raise ProbeInputError(f"intervention.name: unknown intervention {name!r}; available: {sorted(INTERVENTIONS)}")
    return build(INTERVENTIONS[name], values, "intervention")


def with_contrast(spec: InterventionSpec, design: Design) -> InterventionSpec:
    """The spec with its source and dest conditions set: null ones are the bench's `design.contrast`'s
    (what the manifest records)."""
    if isinstance(spec, NoIntervention):
        return spec
    source, dest = design.contrast_of(spec.source, spec.dest)
    return replace(spec, source=source, dest=dest)


def patch_pairs(rendered: Sequence[RenderedPrompt], spec: PatchSpec, design: Design) -> list[dict[str, Any]]:
    """`patching.parquet` rows: each source prompt with the destination prompt of its item that
    shows the options in the same order (so letter j means the same option in both); conditions,
    targets and rotations are the design fields `design` names; `spec` has its conditions set
    (`with_contrast`)."""
    condition, target = design.condition_of, design.target_of
    # destinations with targets of their own (a cued condition as another's destination) pair by target too
    targeted = any(target(r.prompt) is not None for r in rendered if condition(r.prompt) == spec.dest)

    def key_of(p: Prompt) -> tuple[Any, ...]:
        return (p.item_id, tuple(p.order), target(p) if targeted else None)

    dest: dict[tuple[Any, ...], RenderedPrompt] = {}
    for r in rendered:
        if condition(r.prompt) == spec.dest:
            key = key_of(r.prompt)
            if key in dest:
                raise ProbeInputError(f"intervention.dest={spec.dest}: item {key[0]!r} has several prompts with "
                                      f"option order {list(key[1])} (prompts {dest[key].prompt.prompt_id} and "
                                      f"{r.prompt.prompt_id}); the pairing needs one")
            dest[key] = r
    conditions = sorted({condition(r.prompt) for r in rendered})
    for name, value in (("source", spec.source), ("dest", spec.dest)):
        if value not in conditions:
            raise ProbeInputError(f"intervention.{name}={value}: no prompts of that condition in this run "
                                  f"(its conditions: {conditions})")
    untargeted = [r.prompt.prompt_id for r in rendered
                  if condition(r.prompt) == spec.source and target(r.prompt) is None]
    if untargeted:
        raise ProbeInputError(f"intervention.source={spec.source}: its prompts name no target group (e.g. prompt "
                              f"{untargeted[0]}), and the share of the cue's effect restored is read at the target's "
                              "option; use a source condition whose prompts name a target")
    rows = []
    for r in rendered:
        p = r.prompt
        if condition(p) != spec.source:
            continue
        d = dest.get(key_of(p))
        if d is None:
            raise ProbeInputError(f"intervention=patch: source prompt {p.prompt_id} (item {p.item_id!r}, order "
                                  f"{list(p.order)}) has no {spec.dest} prompt with the same options in the same order")
        rows.append({"pair": len(rows), "item_id": p.item_id, "rotation": p.value(design.ordering),
                     "target": target(p), "source_id": p.prompt_id, "dest_id": d.prompt.prompt_id})
    return rows


@dataclass(frozen=True)
class Prepared:
    """A run's intervention, ready for the backend: its plan, the pairs to patch, its record."""

    plan: InterventionPlan | None = None
    pairs: tuple[dict[str, Any], ...] = ()
    record: dict[str, Any] | None = None
    """The manifest's and run key's `intervention` (None: no intervention)."""


def steering_setup(spec: SteerSpec, rendered: Sequence[RenderedPrompt], prefix_lens: Sequence[int],
                   model_record: Mapping[str, Any], n_layers: int, d_model: int) -> Prepared:
    """Load `v_c` from the vectors run (checked: same model, the layer captured, c a target, as
    wide as the model's residual stream, `alpha · v_c` finite in float32) and build one `add`
    edit per prompt; `spec` has its conditions set (`with_contrast`); the vectors run's conditions
    and targets are read as its bench's design says."""
    import torch

    from probe.backends.interventions import Edit, InterventionPlan
    from probe.metrics.steering_vectors import steering_vectors
    if spec.vectors is None:
        raise ProbeInputError("intervention.vectors: the run directory whose activations give the steering "
                              "vectors (a run of this model with analysis.capture_layers including the layer)")
    layer = spec.layer + n_layers if spec.layer < 0 else spec.layer
    if not 0 <= layer < n_layers:
        raise ProbeInputError(f"intervention.layer: {spec.layer} out of range for {n_layers} layers")
    path = Path(spec.vectors)
    if not is_finished(path) or not (path / MANIFEST).is_file():
        raise ProbeInputError(f"intervention.vectors={path}: not a finished probe run (no DONE / {MANIFEST})")
    manifest = read_manifest(path)
    if manifest.intervention is not None:
        raise ProbeInputError(f"intervention.vectors={path}: that run was itself made with "
                              f"intervention={manifest.intervention.name}; vectors come from a plain run")
    other = manifest.model
    # a local directory is compared by path (and whatever revision it records), not by its weights
    for k in ("hub_id", "revision", "commit", "gguf_sha256", "tiny"):
        theirs = getattr(other, k)
        if theirs != model_record.get(k):
            raise ProbeInputError(f"intervention.vectors={path}: made with another model ({k}: {theirs!r}, this "
                                  f"run: {model_record.get(k)!r}); steering vectors belong to one model")
    vectors = steering_vectors(path, layer, task_of(manifest).design, spec.source, spec.dest)
    if spec.group not in vectors:
        raise ProbeInputError(f"intervention.group={spec.group}: choose one of {sorted(vectors)} (every one in "
                              "turn: -m intervention.group=" + ",".join(sorted(vectors)) + ")")
    v = np.asarray(vectors[spec.group], dtype=np.float32)
    _check_vector(v, spec, path, d_model)
    vector = torch.from_numpy(spec.alpha * v)
    edits = {r.prompt.prompt_id: Edit(layer=layer, start=len(r.token_ids) - 1 if spec.positions == "last" else min(plen, len(r.token_ids) - 1),
                                      vector=vector, mode="add", key="steer")
             for r, plen in zip(rendered, prefix_lens)}
    record = {**stored_intervention(asdict(spec)), "layer_resolved": layer, "vector_norm": float(np.linalg.norm(v)),
              "vector_sha256": hashlib.sha256(v.tobytes()).hexdigest()}
    return Prepared(InterventionPlan(steer=edits), (), record)


def _check_vector(v: np.ndarray, spec: SteerSpec, path: Path, d_model: int) -> None:
    """A vector the residual stream can take: as wide as it, and finite once scaled by alpha (a
    NaN would make every steered score NaN; the scoring pass would stop only at its first batch)."""
    where = f"intervention.vectors={path}"
    if v.shape != (d_model,):
        raise ProbeInputError(f"{where}: the steering vector of {spec.group!r} at layer {spec.layer} has shape "
                              f"{list(v.shape)}, this model's residual stream is {d_model} wide; the vectors come "
                              "from another model's activations (or a damaged activations.safetensors)")
    with np.errstate(over="ignore", invalid="ignore"):
        bad = int((~np.isfinite(np.float32(spec.alpha) * v)).sum())
    if bad:
        cause = "the vector holds NaN or inf" if not np.isfinite(v).all() else f"alpha={spec.alpha:g} overflows float32"
        raise ProbeInputError(f"{where}: {bad} of the {d_model} entries of alpha · v_{spec.group} are not finite "
                              f"({cause}); rerun the vectors run, or choose a smaller intervention.alpha")


def prepare_intervention(spec: InterventionSpec, rendered: Sequence[RenderedPrompt], prefix_lens: Sequence[int],
                         model_record: Mapping[str, Any], n_layers: int, d_model: int, design: Design) -> Prepared:
    """Pairs or steering edits of the run, checked before the run directory is claimed; conditions
    the config leaves null are the bench's (`design`)."""
    if isinstance(spec, NoIntervention):
        return Prepared()
    spec = with_contrast(spec, design)
    from probe.backends.interventions import InterventionPlan

    if isinstance(spec, PatchSpec):
        layers = tuple(spec.layers) or tuple(range(n_layers))
        bad = [layer for layer in layers if not -n_layers <= layer < n_layers]
        if bad:
            raise ProbeInputError(f"intervention.layers: {bad} out of range for {n_layers} layers")
        pairs = tuple(patch_pairs(rendered, spec, design))
        resolved = sorted({layer % n_layers for layer in layers})
        return Prepared(InterventionPlan(patch_layers=tuple(resolved)), pairs,
                        {**asdict(spec), "layers_resolved": resolved, "n_pairs": len(pairs)})
    assert isinstance(spec, SteerSpec)
    return steering_setup(spec, rendered, prefix_lens, model_record, n_layers, d_model)


def patching_pass(out: Path, backend: Patcher, rendered: Sequence[RenderedPrompt], letter_ids: LetterIds,
                  prepared: Prepared, letters: Sequence[str]) -> dict[str, float]:
    """Run activation patching and write its files (`probe.results.patch_tables`); a run resumed
    after they were written does nothing. Returns its timings and work for the manifest
    (`patching_s`, `patching_forward_s`, `patching_tokens`), which the backend's scoring
    counters then exclude."""
    import time

    import pyarrow as pa

    from probe.results.parts import PartStore
    from probe.results.patch_tables import write_patching

    if prepared.plan is None or not prepared.plan.patch_layers or (out / PATCHING_TENSORS).is_file():
        return {}
    t0 = time.perf_counter()
    stats = backend.stats
    before = copy.deepcopy(stats)
    layers = prepared.plan.patch_layers
    shape = (len(layers), len(letters))
    schema = pa.schema([("pair", pa.int64()), ("logprobs", pa.list_(pa.float32()))])
    store = PartStore(out / PATCHING_PARTS, schema, key="pair")  # a killed pass resumes by source group
    pairs = [(p["source_id"], p["dest_id"]) for p in prepared.pairs]
    for idx, lp in backend.patch(rendered, letter_ids, pairs, set(store.done)):
        store.append(pa.table({"pair": pa.array(idx, pa.int64()),
                               "logprobs": [row.ravel().tolist() for row in lp]}, schema=schema))
    table = store.read()
    logprobs = np.full((len(prepared.pairs), *shape), np.nan, dtype=np.float32)
    logprobs[table.column("pair").to_numpy()] = np.asarray(table.column("logprobs").to_pylist(),
                                                           dtype=np.float32).reshape(-1, *shape)
    write_patching(out, prepared.pairs, logprobs, layers, letters)
    work = {"patching_s": time.perf_counter() - t0, "patching_forward_s": stats.forward_s - before.forward_s,
            "patching_tokens": float(stats.tokens_computed - before.tokens_computed)}
    for f in fields(stats):  # the manifest's backend counters describe the scoring pass
        setattr(stats, f.name, getattr(before, f.name))
    return work
