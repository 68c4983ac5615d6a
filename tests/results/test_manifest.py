"""`manifest.json` through its typed record: read and written again it is the same file (a tiny
run's, and an older run's that lacks newer fields and holds entries probe does not type); the
shard-merge rule sums the work and records what differs."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import probe_env, run_probe

from probe.errors import ProbeInputError
from probe.files import write_json
from probe.results.manifest import Manifest, ShardSource, merge_manifests, read_manifest, write_manifest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("manifest")
    out = tmp / "run"
    proc = run_probe(["model=tiny", "bench=demo", "bench.limit=2",
                           "analysis.n_boot=10", "progress=false", f"hydra.run.dir={out}"], cwd=REPO_ROOT,
                          env=probe_env(tmp / "cache"), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return out


def _round_trip(run_dir: Path, tmp: Path) -> tuple[Manifest, bytes]:
    manifest = read_manifest(run_dir)
    write_manifest(tmp, manifest)
    return manifest, (tmp / "manifest.json").read_bytes()


def test_a_runs_manifest_reads_typed_and_writes_back_byte_for_byte(tiny_run: Path, tmp_path: Path) -> None:
    manifest, written = _round_trip(tiny_run, tmp_path)
    assert written == (tiny_run / "manifest.json").read_bytes()
    raw = json.loads(written)
    assert (manifest.bench.name, manifest.bench.kind, manifest.bench.n_prompts) == ("demo", "disco",
                                                                                     raw["bench"]["n_prompts"])
    assert manifest.letters == ("A", "B", "C", "D") and manifest.model.source == "tiny"
    assert manifest.backend.mode == "letters" and manifest.backend.counters()["prompt_tokens"] > 0
    assert manifest.timings.analysis_s is not None and manifest.timings.analysis_s > 0
    assert manifest.analysis is not None and manifest.analysis.to_dict() == raw["analysis"]
    assert manifest.analysis.n_boot == 10 and manifest.temperature == 1.0
    assert manifest.shard is None and manifest.merged is None and manifest.intervention is None


def test_an_older_manifest_loads_with_none_and_keeps_what_probe_does_not_type(tiny_run: Path,
                                                                              tmp_path: Path) -> None:
    raw = json.loads((tiny_run / "manifest.json").read_text())
    for key in ("judge", "template_sha256"):
        del raw[key]
    for key in ("resumed_prompts", "unique_tokens", "mode"):
        del raw["backend"][key]
    del raw["timings"]["scoring_wall_s"], raw["bench"]["config"]
    raw["bench"]["source_url"] = "https://example.org/items.csv"  # a bench's own source entry
    raw["verdict_cache_rejected"] = {"checksum": 2}               # a judging note
    old = tmp_path / "old"
    old.mkdir()
    write_json(old / "manifest.json", raw)
    manifest, written = _round_trip(old, tmp_path)
    assert written == (old / "manifest.json").read_bytes()
    assert manifest.judge is None and manifest.backend.resumed_prompts is None and manifest.backend.mode is None
    assert manifest.timings.scoring_wall_s is None and manifest.bench.config == {} and manifest.bench.module is None
    assert manifest.bench.source["source_url"] == "https://example.org/items.csv"
    assert "judge" not in json.loads(written) and "config" not in json.loads(written)["bench"]


def test_the_manifest_reads_like_its_json_for_users(tiny_run: Path) -> None:
    manifest = read_manifest(tiny_run)
    raw = json.loads((tiny_run / "manifest.json").read_text())
    assert manifest["model"] == raw["model"] and manifest.get("shard") is None and dict(manifest) == raw
    manifest["model"]["name"] = "changed"  # a copy: the record stays as stored
    assert manifest.model.name == raw["model"]["name"] == manifest["model"]["name"]


def _shard(base: dict, index: int, **changes: object) -> ShardSource:
    raw = copy.deepcopy(base)
    raw["bench"]["config"]["shard"] = f"{index}/2"
    raw["shard"] = {"index": index, "count": 2, "n_prompts": 3 + index, "n_items": 1, "sha256": {}}
    for path, value in changes.items():  # `block__key`, or a top-level key
        block, _, key = path.partition("__")
        if key:
            raw[block][key] = value
        else:
            raw[block] = value
    return ShardSource(Path(f"/runs/s{index}"), Manifest.from_json(raw), raw["backend"]["device"])


def test_merging_shards_sums_their_work_and_records_what_differs(tiny_run: Path) -> None:
    base = json.loads((tiny_run / "manifest.json").read_text())
    base["backend"].update(n_batches=2, batch_sizes={"4": 1, "1": 1}, oom_splits=0, prompt_tokens=10,
                           resumed_prompts=1)
    base["timings"].update(load_s=1.0, scoring_s=2.0, scoring_wall_s=3.0)
    shards = [_shard(base, 0), _shard(base, 1, backend__n_batches=3, backend__batch_sizes={"2": 3},
                                      backend__oom_splits=1, backend__device="cuda:1", timings__scoring_wall_s=5.0,
                                      git_commit="other")]
    merged = merge_manifests(shards, n_prompts=7, unique_tokens=42)
    out = merged.to_json()
    assert "shard" not in out and "shard" not in out["bench"]["config"] and merged.shard is None
    assert list(out)[:-3] == [k for k in base if k != "shard"]
    assert list(out)[-3:] == ["merged", "merged_from", "merge_warnings"]
    assert (merged.backend.n_batches, merged.backend.oom_splits, merged.backend.resumed_prompts) == (5, 1, 2)
    assert merged.backend.batch_sizes == {"1": 1, "2": 3, "4": 1} and merged.backend.unique_tokens == 42
    assert (merged.timings.load_s, merged.timings.scoring_wall_s, merged.timings.prompts_per_s) == (2.0, 8.0, 5 / 8)
    assert [(m["shard"], m["n_prompts"], m["backend"]["n_batches"]) for m in out["merged_from"]] == [
        ("0/2", 3, 2), ("1/2", 4, 3)]
    warnings = merged.merge_warnings or ()
    assert len(warnings) == 3 and warnings[0] == f"shards differ in git_commit: 0: {base['git_commit']}, 1: other"
    assert warnings[1] == f"shards ran with backend.device {sorted([base['backend']['device'], 'cuda:1'])}"
    assert warnings[2].startswith("shards [1] halved passes after running out of memory")


def test_rows_per_pass_quantiles_are_row_counts_of_real_passes() -> None:
    from probe.results.manifest import pass_quantiles

    # passes of 4, 1, 2, 2, 2 rows → sorted 1 2 2 2 4: p10 the first, p50 and p90 a 2 (lower neighbour)
    assert pass_quantiles({"4": 1, "1": 1, "2": 3}) == {"p10": 1, "p50": 2, "p90": 2}
    assert pass_quantiles({"1": 2, "32": 40}) == {"p10": 32, "p50": 32, "p90": 32}
    assert pass_quantiles({"1": 24, "4": 36, "32": 40}) == {"p10": 1, "p50": 4, "p90": 32}
    assert pass_quantiles({}) is None


def test_nested_records_read_typed_and_write_back_key_for_key(tmp_path: Path) -> None:
    """The intervention, analysis, judge and tokenizer records are typed; written back, the
    manifest is the same file, keys a newer probe adds included."""
    steer = {"name": "steer", "vectors": "runs/capture", "layer": -1, "culture": "Assam", "alpha": 2.0,
             "positions": "last", "source": "C1", "dest": "C0", "layer_resolved": 23, "vector_norm": 1.5,
             "vector_sha256": "ab" * 32, "added_later": [1, 2]}
    raw = {"tokenizer": {"class": "GPT2TokenizerFast", "name_or_path": "tiny", "sha256": "cd" * 32},
           "judge": {"name": "http", "model": "m", "base_url": "http://127.0.0.1:8000/v1", "retries": 2},
           "analysis": {"temperature": 0.5, "n_boot": 10, "seed": 3, "capture_layers": [0, -1]},
           "intervention": steer}
    (tmp_path / "old").mkdir()
    write_json(tmp_path / "old" / "manifest.json", raw)
    manifest, written = _round_trip(tmp_path / "old", tmp_path)
    assert written == (tmp_path / "old" / "manifest.json").read_bytes()
    iv = manifest.intervention
    assert iv is not None and iv.is_steering and not iv.is_patching
    assert (iv.group, iv.alpha, iv.layer_resolved, iv.n_pairs) == ("Assam", 2.0, 23, None)  # stored as `culture`
    assert iv.to_dict() == steer
    assert manifest.analysis is not None and manifest.temperature == 0.5 and manifest.analysis.capture_layers == [0, -1]
    assert manifest.analysis.recorded({"seed", "n_boot", "letter_prior_ratio"}) == {"n_boot": 10, "seed": 3}
    assert manifest.analysis.same_as({"temperature": 0.5, "n_boot": 10, "seed": 3, "capture_layers": (0, -1)})
    assert manifest.judge is not None and (manifest.judge.name, manifest.judge.model) == ("http", "m")
    assert manifest.tokenizer is not None and manifest.tokenizer.class_name == "GPT2TokenizerFast"
    with pytest.raises(ProbeInputError, match="`intervention` must be a JSON object"):
        Manifest.from_json({"intervention": "steer"})


def test_the_layout_names_a_re_analysis_and_marks_a_finished_run(tmp_path: Path) -> None:
    from probe.results import layout

    assert layout.metrics_file() == layout.METRICS and layout.report_files() == (layout.REPORT, layout.REPORT_PAGE)
    assert layout.metrics_file("-temperature=0.5") == "metrics-temperature=0.5.json"
    assert not layout.is_run_dir(tmp_path) and not layout.is_finished(tmp_path)
    (tmp_path / layout.SCORE_PARTS).mkdir()
    layout.mark_done(tmp_path)
    layout.remove_checkpoints(tmp_path)
    assert layout.is_finished(tmp_path) and not (tmp_path / layout.SCORE_PARTS).exists()
    assert set(layout.SHARD_FILES) >= set(layout.MERGED_OUTPUTS)
