"""Merging the shards of one run (`bench.shard=i/n`) into the run directory an unsharded run
would have written: the same prompts, scores (bit for bit), lens / activation rows,
generations and verdicts, then metrics and reports computed from them as for any run.

Only the manifest says that it was merged: backend counters and timings are sums over the
shards (`merged_from` keeps each shard's own), and any difference in code, packages or device
between the shards is recorded under `merge_warnings` (scores agree bitwise only when those agree).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from safetensors import safe_open

from probe.backends.trie import unique_token_count
from probe.benches.registry import task_of
from probe.errors import ProbeInputError
from probe.pipeline.analysis import analyze_run
from probe.pipeline.claim import claim
from probe.pipeline.shard_plan import check_outputs
from probe.report.summary import run_summary
from probe.results.generations import read_judgements, write_judgements
from probe.results.io import write_table
from probe.results.layout import (
    ACTIVATIONS,
    GENERATIONS,
    JUDGEMENTS,
    LENS,
    MANIFEST,
    MERGED_OUTPUTS,
    PROMPTS,
    RUN_KEY,
    SCORES,
    is_finished,
    is_run_dir,
    mark_done,
)
from probe.results.manifest import Manifest, ShardSource, merge_manifests, read_manifest, write_manifest
from probe.results.mech import ActivationWriter, write_lens
from probe.results.run_key import changed_inputs, key_device, key_shard, read_run_key, unsharded, with_device
from probe.results.run import not_a_run
from probe.results.scores import argmax_columns, write_scores_arrays

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShardDir:
    """A finished shard's directory and what it recorded."""

    path: Path
    manifest: Manifest
    key: dict[str, Any]

    @property
    def index(self) -> int:
        assert self.manifest.shard is not None, "read as a shard"
        return int(self.manifest.shard.index)


def merge_shards(shard_dirs: Sequence[Path], out: Path) -> Path:
    """Merge the finished shards `shard_dirs` (every `i/n` once, any order; a sweep directory
    stands for its run subdirectories) into `out`, analyse it and write `DONE`. Everything is
    checked before `out` is touched (each shard's files against the checksums it recorded at its
    `DONE`); merging into a directory that holds this merge already done does nothing, and an
    interrupted merge is redone."""
    out = Path(out)
    found = find_shards(shard_dirs)
    _check_out(out, [*map(Path, shard_dirs), *found])
    shards = sorted((_read(d) for d in found), key=lambda s: s.index)
    if not shards:
        raise ProbeInputError("no shard directories given")
    key = _unsharded_key(shards)
    _check_set(shards)
    n_prompts = int(shards[0].manifest.bench.n_prompts or 0)
    prompts = _concat(shards, PROMPTS)
    ids = prompts.column("prompt_id").to_numpy()
    if not np.array_equal(ids, np.arange(n_prompts)):
        raise ProbeInputError(f"the shards hold {len(ids)} prompts ({len(np.unique(ids))} distinct) where the run "
                              f"has {n_prompts} (ids 0..{n_prompts - 1}); were they planned with other settings?")
    present, tables = _check_outputs(shards, ids)
    held = claim(out, key)
    if held.state == "done":
        log.info("%s already holds this merged run; nothing to do", out)
        held.release()
        return out
    write_table(out / PROMPTS, prompts)
    _merge_outputs(shards, out, ids, present, tables)
    manifest = _manifest(shards, prompts)
    write_manifest(out, manifest)
    metrics = analyze_run(out)
    mark_done(out)
    held.release()
    log.info("merged %d shards into %s\n%s", len(shards), out, run_summary(task_of(manifest), metrics))
    return out


def find_shards(paths: Sequence[Path]) -> list[Path]:
    """Shard directories among `paths`: each a run directory, or a sweep directory whose run
    subdirectories (`multirun/<time>/*`; unfinished ones too, to be named) are shards."""
    found: list[Path] = []
    for path in map(Path, paths):
        if is_run_dir(path) or not path.is_dir():
            found.append(path)  # a non-shard or missing path is reported by the merge
            continue
        runs = sorted(p for p in path.iterdir() if is_run_dir(p) and not p.name.startswith("."))
        if not runs:
            raise ProbeInputError(f"{path}: neither a run directory nor a directory of shard runs")
        found += runs
    return found


def _check_out(out: Path, inputs: Sequence[Path]) -> None:
    """`out` must be apart from every input (a shard or a sweep directory given): not one of them,
    not inside one (a merge written into a sweep would be read as one of its runs) and not
    holding one (the merge would write over its own input)."""
    target = out.resolve()
    for path in inputs:
        source = path.resolve()
        where = ("is" if target == source else "is inside" if source in target.parents
                 else "holds" if target in source.parents else None)
        if where:
            raise ProbeInputError(f"--out {out} {where} {path}, an input of this merge; merge into a directory "
                                  "outside the shards and their sweep directory")


def _read(path: Path) -> ShardDir:
    if not (path / MANIFEST).is_file():
        key = read_run_key(path)
        shard = None if key is None else key_shard(key)
        if shard is not None:
            raise ProbeInputError(f"{path}: shard {shard} is not finished (no DONE); rerun it with the same "
                                  "command to resume it")
        raise ProbeInputError(not_a_run(path))
    manifest = read_manifest(path)
    if manifest.shard is None:
        raise ProbeInputError(f"{path}: not a shard (its run was not started with bench.shard=i/n)")
    shard = f"shard {manifest.shard.index}/{manifest.shard.count}"
    if not is_finished(path):
        raise ProbeInputError(f"{path}: {shard} is not finished (no DONE); rerun it with the same command to resume it")
    check_outputs(path, manifest)
    reading = manifest.backend.reading
    answers = GENERATIONS if reading.generates else SCORES
    if not (path / answers).is_file():  # its checksums say it never had them: a manifest edited or not probe's
        raise ProbeInputError(f"{path}: {shard} holds no {answers}, which a {reading} run "
                              "writes; score the shard again (remove its directory and rerun its command)")
    key = read_run_key(path)
    if key is None:  # checked above: it finished without one, so not by probe
        raise ProbeInputError(f"{path}: {shard} holds no {RUN_KEY}; score the shard again (remove its directory and "
                              "rerun its command)")
    return ShardDir(path, manifest, key)


def _check_set(shards: Sequence[ShardDir]) -> None:
    counts = sorted({int(s.manifest.shard.count) for s in shards if s.manifest.shard is not None})
    if len(counts) > 1:
        raise ProbeInputError(f"the shards split the run in different ways (n = {counts})")
    n = counts[0]
    have = [s.index for s in shards]
    missing = sorted(set(range(n)) - set(have))
    twice = sorted({i for i in have if have.count(i) > 1})
    if missing or twice:
        raise ProbeInputError(f"a merge needs each of the {n} shards once: "
                              + "; ".join(x for x in (missing and f"missing {[f'{i}/{n}' for i in missing]}",
                                                      twice and f"given twice {[f'{i}/{n}' for i in twice]}") if x))


def _unsharded_key(shards: Sequence[ShardDir]) -> dict[str, Any]:
    """The shards' common results key without the shard: the key of the unsharded run. The
    device each shard ran on (`${shard_gpu:}` gives each its own) is not compared; the merged
    key records the shards' common device, else `auto`, and the manifest their differences."""
    keys = [unsharded(s.key) for s in shards]
    for s, key in zip(shards[1:], keys[1:]):
        if key != keys[0]:
            changed = changed_inputs(keys[0], key)
            if changed:
                raise ProbeInputError(f"{s.path} and {shards[0].path} read different inputs, {changed}: they are "
                                      "not shards of one run; score every shard on the same data and model")
            raise ProbeInputError(f"{s.path} and {shards[0].path} are shards of different runs (differ in "
                                  f"{_differences(key, keys[0])})")
    devices = {key_device(s.key) for s in shards}
    return with_device(keys[0], devices.pop() if len(devices) == 1 else "auto")


def _differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Keys (one level down for blocks) whose values differ."""
    out: list[str] = []
    for k in sorted(set(a) | set(b)):
        x, y = a.get(k), b.get(k)
        if x == y:
            continue
        if isinstance(x, dict) and isinstance(y, dict):
            out += [f"{k}.{g}" for g in sorted(set(x) | set(y)) if x.get(g) != y.get(g)]
        else:
            out.append(k)
    return out


def _concat(shards: Sequence[ShardDir], name: str) -> pa.Table:
    return pa.concat_tables([pq.read_table(s.path / name) for s in shards]).sort_by("prompt_id")


def _check_outputs(shards: Sequence[ShardDir], ids: np.ndarray) -> tuple[set[str], dict[str, pa.Table]]:
    """The output files every shard has (one in some shards only stops the merge), checked to
    cover the prompts one to one and to agree in layers and dtypes, before anything is written;
    and the shards' score / generation tables, concatenated in prompt-id order."""
    present = set()
    for name in MERGED_OUTPUTS:
        have = [(s.path / name).is_file() for s in shards]
        if any(have) and not all(have):
            raise ProbeInputError(f"{name} is in some shards only: {[str(s.path) for s, h in zip(shards, have) if h]}")
        if all(have):
            present.add(name)
    tables = {name: _concat(shards, name) for name in (SCORES, GENERATIONS) if name in present}
    for name, table in tables.items():
        if not np.array_equal(table.column("prompt_id").to_numpy(), ids):
            raise ProbeInputError(f"the shards' {name} rows do not cover their prompts one to one")
    for name in (LENS, ACTIVATIONS):
        if name not in present:
            continue
        heads = [_header(s.path / name) for s in shards]
        if not np.array_equal(np.sort(np.concatenate([h["prompt_id"] for h in heads])), ids):
            raise ProbeInputError(f"the shards' {name} rows do not cover their prompts one to one")
        shapes = {(h["dtype"], h["shape"][1:], tuple(h["layers"])) for h in heads if h["shape"][0]}
        if len(shapes) > 1:
            raise ProbeInputError(f"the shards' {name} differ in dtype, layers or width: {sorted(map(str, shapes))}")
    return present, tables


def _header(path: Path) -> dict[str, Any]:
    """Row ids, dtype, shape and (activations) layers of a lens or activations file, without its data."""
    with safe_open(str(path), framework="numpy") as f:
        name = "activations" if "activations" in f.keys() else "lens"
        part = f.get_slice(name)
        return {"prompt_id": f.get_tensor("prompt_id"), "dtype": part.get_dtype(), "shape": tuple(part.get_shape()),
                "layers": f.get_tensor("layers").tolist() if "layers" in f.keys() else []}


def _merge_outputs(shards: Sequence[ShardDir], out: Path, ids: np.ndarray, present: set[str],
                   tables: dict[str, pa.Table]) -> None:
    """Scores (with lens and activations) or generations (with verdicts), rows in prompt-id order."""
    letters = list(shards[0].manifest.letters)
    if SCORES in present:
        scores = tables[SCORES]
        lp = np.asarray(scores.column("letter_logprobs").to_pylist(), dtype=np.float32).reshape(len(ids), -1)
        write_scores_arrays(out, ids, lp, scores.column("greedy_valid").to_numpy(zero_copy_only=False), letters,
                            argmax_columns(scores))
    if LENS in present:
        parts = [_tensors(s.path / LENS, ("lens", "prompt_id")) for s in shards]
        parts = [p for p in parts if len(p["prompt_id"])]  # an empty shard's lens has no layer axis to join
        order = np.argsort(np.concatenate([p["prompt_id"] for p in parts]), kind="stable")
        write_lens(out, ids, np.concatenate([p["lens"] for p in parts])[order], letters)
    if ACTIVATIONS in present:
        _merge_activations(shards, out, ids)
    if GENERATIONS in present:
        write_table(out / GENERATIONS, tables[GENERATIONS])
    if JUDGEMENTS in present:
        # The shards' own schema (they were written by one task), so the merge needs no task.
        schema = pq.read_schema(shards[0].path / JUDGEMENTS)
        write_judgements(out, [row for s in shards for row in read_judgements(s.path)], schema)


def _tensors(path: Path, names: Sequence[str]) -> dict[str, np.ndarray]:
    with safe_open(str(path), framework="numpy") as f:
        return {n: f.get_tensor(n) for n in names}


def _merge_activations(shards: Sequence[ShardDir], out: Path, ids: np.ndarray) -> None:
    """Row by row through the writer an unsharded run uses, so the file is the same byte for
    byte; rows are read a block at a time, so memory stays bounded."""
    first = next(h for h in (_header(s.path / ACTIVATIONS) for s in shards) if h["shape"][0])
    dtype = {"F32": "float32", "F16": "float16"}[first["dtype"]]
    writer = ActivationWriter(out, ids.tolist(), first["layers"], first["shape"][2], dtype)
    for s in shards:
        with safe_open(str(s.path / ACTIVATIONS), framework="numpy") as f:
            pids, rows = f.get_tensor("prompt_id").tolist(), f.get_slice("activations")
            for start in range(0, len(pids), 256):  # safetensors slices do not clip at the end
                block = rows[start:min(start + 256, len(pids))]
                for pid, row in zip(pids[start:start + 256], block):
                    writer.add(pid, row)
    writer.close()


def _manifest(shards: Sequence[ShardDir], prompts: pa.Table) -> Manifest:
    """The merged run's manifest (`merge_manifests`), its warnings logged."""
    unique = unique_token_count([np.asarray(t) for t in prompts.column("token_ids").to_pylist()])
    manifest = merge_manifests([ShardSource(s.path, s.manifest, key_device(s.key)) for s in shards],
                               prompts.num_rows, unique)
    for w in manifest.merge_warnings or ():
        log.warning("%s (scores are bitwise those of one run only where these agree)", w)
    return manifest
