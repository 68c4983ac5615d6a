"""Merging the shards of one run (`bench.shard=i/n`) into the run directory an unsharded run
would have written: the same prompts, scores (bit for bit), lens / activation rows,
generations and verdicts, then metrics and reports computed from them as for any run.

Only the manifest says that it was merged: backend counters and timings are sums over the
shards (`merged_from` keeps each shard's own), and any difference in code, packages or device
between the shards is recorded under `merge_warnings` (scores agree bitwise only when those agree).
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from safetensors import safe_open

from probe.backends.trie import unique_token_count
from probe.benches.registry import task_of
from probe.errors import ProbeInputError
from probe.files import write_json
from probe.pipeline.analyze import analyze_run
from probe.pipeline.claim import claim
from probe.report.summary import run_summary
from probe.results.generations import read_judgements, write_judgements
from probe.results.io import write_table
from probe.results.mech import ActivationWriter, write_lens
from probe.results.scores import write_scores_arrays

log = logging.getLogger(__name__)

COUNTERS = ("n_batches", "oom_splits", "tokens_computed", "padded_tokens", "resumed_prompts", "prompt_tokens")
SAME_EVERYWHERE = ("git_commit", "packages", "python", "device", "probe_version")
"""Provenance that shards should share for bitwise-equal scores; differences become warnings."""


@dataclass(frozen=True)
class ShardDir:
    """A finished shard's directory and what it recorded."""

    path: Path
    manifest: dict[str, Any]
    key: dict[str, Any]

    @property
    def index(self) -> int:
        return int(self.manifest["shard"]["index"])


def merge_shards(shard_dirs: Sequence[Path], out: Path) -> Path:
    """Merge the finished shards `shard_dirs` (every `i/n` once, any order; a sweep directory
    stands for its run subdirectories) into `out`, analyse it and write `DONE`. Merging into a directory that holds this merge already done does nothing;
    an interrupted merge is redone."""
    shards = sorted((_read(d) for d in find_shards(shard_dirs)), key=lambda s: s.index)
    _check_set(shards)
    key = _unsharded_key(shards)
    out = Path(out)
    if any(out.resolve() == s.path.resolve() for s in shards):
        raise ProbeInputError(f"--out {out} is one of the shards; merge into a new directory")
    held = claim(out, key)
    if held.state == "done":
        log.info("%s already holds this merged run; nothing to do", out)
        held.release()
        return out
    n_prompts = int(shards[0].manifest["bench"]["n_prompts"])
    prompts = _concat(shards, "prompts.parquet")
    ids = prompts.column("prompt_id").to_numpy()
    if not np.array_equal(ids, np.arange(n_prompts)):
        raise ProbeInputError(f"the shards hold {len(ids)} prompts ({len(np.unique(ids))} distinct) where the run "
                              f"has {n_prompts} (ids 0..{n_prompts - 1}); were they planned with other settings?")
    write_table(out / "prompts.parquet", prompts)
    _merge_outputs(shards, out, ids)
    manifest = _manifest(shards, prompts)
    write_json(out / "manifest.json", manifest)
    metrics = analyze_run(out)
    (out / "DONE").write_text("complete\n")
    held.release()
    log.info("merged %d shards into %s\n%s", len(shards), out, run_summary(task_of(manifest), metrics))
    return out


def find_shards(paths: Sequence[Path]) -> list[Path]:
    """Shard directories among `paths`: each a run directory, or a sweep directory whose run
    subdirectories (`multirun/<time>/*`) are shards."""
    found: list[Path] = []
    for path in map(Path, paths):
        if (path / "manifest.json").is_file() or not path.is_dir():
            found.append(path)  # a non-shard or missing path is reported by the merge
            continue
        runs = sorted(p for p in path.iterdir() if (p / "manifest.json").is_file() and not p.name.startswith("."))
        if not runs:
            raise ProbeInputError(f"{path}: neither a run directory nor a directory of shard runs")
        found += runs
    return found


def _read(path: Path) -> ShardDir:
    manifest_path = path / "manifest.json"
    if not manifest_path.is_file():
        raise ProbeInputError(f"{path}: no manifest.json; not a probe run directory")
    manifest = json.loads(manifest_path.read_text())
    if "shard" not in manifest:
        raise ProbeInputError(f"{path}: not a shard (its run was not started with bench.shard=i/n)")
    if not (path / "DONE").is_file():
        raise ProbeInputError(f"{path}: shard {manifest['shard']['index']}/{manifest['shard']['count']} is not "
                              "finished (no DONE); rerun it with the same command to resume it")
    return ShardDir(path, manifest, json.loads((path / "run_key.json").read_text()))


def _check_set(shards: Sequence[ShardDir]) -> None:
    if not shards:
        raise ProbeInputError("no shard directories given")
    counts = sorted({int(s.manifest["shard"]["count"]) for s in shards})
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
    """The shards' common results key without the shard: the key of the unsharded run."""
    keys = []
    for s in shards:
        key = copy.deepcopy(s.key)
        key["bench"]["config"].pop("shard", None)
        keys.append(key)
    for s, key in zip(shards[1:], keys[1:]):
        if key != keys[0]:
            diff = sorted(k for k in set(key) | set(keys[0]) if key.get(k) != keys[0].get(k))
            raise ProbeInputError(f"{s.path} and {shards[0].path} are shards of different runs (differ in {diff})")
    return keys[0]


def _concat(shards: Sequence[ShardDir], name: str) -> pa.Table:
    return pa.concat_tables([pq.read_table(s.path / name) for s in shards]).sort_by("prompt_id")


def _has(shards: Sequence[ShardDir], name: str) -> bool:
    present = [(s.path / name).is_file() for s in shards]
    if any(present) and not all(present):
        raise ProbeInputError(f"{name} is in some shards only: {[str(s.path) for s, p in zip(shards, present) if p]}")
    return all(present)


def _merge_outputs(shards: Sequence[ShardDir], out: Path, ids: np.ndarray) -> None:
    """Scores (with lens and activations) or generations (with verdicts), rows in prompt-id order."""
    letters = shards[0].manifest["letters"]
    if _has(shards, "scores.parquet"):
        scores = _concat(shards, "scores.parquet")
        if not np.array_equal(scores.column("prompt_id").to_numpy(), ids):
            raise ProbeInputError("the shards' scores do not cover their prompts one to one")
        lp = np.asarray(scores.column("letter_logprobs").to_pylist(), dtype=np.float32).reshape(len(ids), -1)
        write_scores_arrays(out, ids, lp, scores.column("greedy_valid").to_numpy(zero_copy_only=False), letters)
    if _has(shards, "lens.safetensors"):
        parts = [_tensors(s.path / "lens.safetensors", ("lens", "prompt_id")) for s in shards]
        order = np.argsort(np.concatenate([p["prompt_id"] for p in parts]), kind="stable")
        write_lens(out, ids, np.concatenate([p["lens"] for p in parts])[order], letters)
    if _has(shards, "activations.safetensors"):
        _merge_activations(shards, out, ids)
    if _has(shards, "generations.parquet"):
        write_table(out / "generations.parquet", _concat(shards, "generations.parquet"))
    if _has(shards, "judgements.parquet"):
        write_judgements(out, [row for s in shards for row in read_judgements(s.path)])


def _tensors(path: Path, names: Sequence[str]) -> dict[str, np.ndarray]:
    with safe_open(str(path), framework="numpy") as f:
        return {n: f.get_tensor(n) for n in names}


def _merge_activations(shards: Sequence[ShardDir], out: Path, ids: np.ndarray) -> None:
    """Row by row through the writer an unsharded run uses, so the file is the same byte for byte."""
    first = _tensors(shards[0].path / "activations.safetensors", ("activations", "layers"))
    layers, shape, dtype = first["layers"].tolist(), first["activations"].shape, first["activations"].dtype
    writer = ActivationWriter(out, ids.tolist(), layers, shape[2], str(dtype))
    for s in shards:
        t = _tensors(s.path / "activations.safetensors", ("activations", "layers", "prompt_id"))
        if t["layers"].tolist() != layers or t["activations"].dtype != dtype:
            raise ProbeInputError(f"{s.path}: activations of other layers or dtype than {shards[0].path}'s")
        for pid, row in zip(t["prompt_id"].tolist(), t["activations"]):
            writer.add(pid, row)
    writer.close()


def _manifest(shards: Sequence[ShardDir], prompts: pa.Table) -> dict[str, Any]:
    """Shard 0's manifest without the shard; counters and timings summed, each shard's kept."""
    manifest = copy.deepcopy(shards[0].manifest)
    manifest.pop("shard")
    manifest["bench"]["config"].pop("shard", None)
    backend = manifest["backend"]
    for name in COUNTERS:
        values = [s.manifest["backend"].get(name) for s in shards]
        backend[name] = None if any(v is None for v in values) else sum(values)
    sizes: dict[str, int] = {}
    for s in shards:
        for k, v in s.manifest["backend"].get("batch_sizes", {}).items():
            sizes[k] = sizes.get(k, 0) + v
    backend["batch_sizes"] = dict(sorted(sizes.items(), key=lambda kv: int(kv[0])))
    backend["unique_tokens"] = unique_token_count([np.asarray(t) for t in prompts.column("token_ids").to_pylist()])
    timings = {name: sum(s.manifest["timings"].get(name) or 0.0 for s in shards)
               for name in ("load_s", "scoring_s", "scoring_wall_s")}
    wall = timings["scoring_wall_s"]
    timings["prompts_per_s"] = (prompts.num_rows - (backend["resumed_prompts"] or 0)) / wall if wall else None
    manifest["timings"] = timings
    manifest["merged"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    manifest["merged_from"] = [{"path": str(s.path.resolve()), "shard": f"{s.index}/{len(shards)}",
                                **{k: s.manifest.get(k) for k in ("created", *SAME_EVERYWHERE)},
                                "n_prompts": s.manifest["shard"]["n_prompts"], "timings": s.manifest["timings"],
                                "backend": {k: s.manifest["backend"].get(k) for k in COUNTERS}} for s in shards]
    warnings = [f"shards differ in {k}: " + ", ".join(f"{s.index}: {s.manifest.get(k)}" for s in shards)
                for k in SAME_EVERYWHERE if any(s.manifest.get(k) != shards[0].manifest.get(k) for s in shards)]
    for w in warnings:
        log.warning("%s (scores are bitwise those of one run only where these agree)", w)
    manifest["merge_warnings"] = warnings
    return manifest
