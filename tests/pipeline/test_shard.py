"""`bench.shard=i/n` and `python -m probe merge`: shards merged are the unsharded run.

The shards run as a Hydra multirun, in this process (Hydra's basic launcher: one shard after
the other; a launcher's fresh process per job is tests/cli/test_sweep.py's `cluster=local` sweep, in
the slow tier); their merge must hold the unsharded run's prompts, scores (bitwise), logit-lens
and activation rows and metrics.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import probe_env, run_probe, shared_dir

from probe.errors import ProbeInputError
from probe.pipeline.shard_merge import merge_shards
from probe.pipeline.shard_plan import Shard, shard_prompts
from probe.types import Prompt, RenderedPrompt

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
# 12 of the demo's 24 items (624 prompts): three shards of whole items, every condition
ARGS = ["model=tiny", "bench=demo", "bench.limit=12", "analysis.n_boot=100", "progress=false",
        "analysis.logit_lens=true", "analysis.capture_layers=[0,1]"]
BITWISE = ("scores.safetensors", "lens.safetensors", "activations.safetensors", "metrics.json")


def _probe(cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = run_probe([*args], cwd=REPO_ROOT, env=probe_env(cache),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def _merge(*args: str) -> subprocess.CompletedProcess[str]:
    return run_probe(["merge", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300)


def _same_run(a: Path, b: Path, tables: tuple[str, ...]) -> None:
    for name in tables:
        assert pq.read_table(a / name).equals(pq.read_table(b / name)), name
    for name in BITWISE:
        if (a / name).exists() or (b / name).exists():
            assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert json.loads((a / "run_key.json").read_text()) == json.loads((b / "run_key.json").read_text())
    assert (b / "DONE").is_file() and (b / "report.md").is_file()


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[Path]]:
    """An unsharded run, and the same run as three shards of a multirun (basic launcher, in-process)."""
    tmp = tmp_path_factory.mktemp("shard")
    cache = tmp / "cache"
    _probe(cache, *ARGS, f"hydra.run.dir={tmp / 'full'}")
    sweep = tmp / "sweep"
    _probe(cache, "-m", *ARGS, "bench.shard=0/3,1/3,2/3", f"hydra.sweep.dir={sweep}")
    shards = sorted(p for p in sweep.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert len(shards) == 3
    return tmp, sweep, shards


def test_merged_shards_equal_the_unsharded_run(sharded: tuple[Path, Path, list[Path]]) -> None:
    tmp, sweep, shards = sharded
    full = tmp / "full"
    proc = _merge("--out", str(tmp / "merged"), str(sweep))  # the sweep dir: its shard runs
    assert proc.returncode == 0, proc.stderr[-3000:]
    merged = tmp / "merged"
    _same_run(full, merged, ("prompts.parquet", "scores.parquet"))
    manifest = json.loads((merged / "manifest.json").read_text())
    assert "shard" not in manifest and "shard" not in manifest["bench"]["config"]
    assert [m["shard"] for m in manifest["merged_from"]] == ["0/3", "1/3", "2/3"]
    assert sum(m["n_prompts"] for m in manifest["merged_from"]) == 12 * 52
    full_manifest = json.loads((full / "manifest.json").read_text())
    assert manifest["backend"]["prompt_tokens"] == full_manifest["backend"]["prompt_tokens"]
    assert manifest["backend"]["unique_tokens"] == full_manifest["backend"]["unique_tokens"]
    # shards hold whole items, disjoint, balanced
    items = [set(pq.read_table(s / "prompts.parquet").column("item_id").to_pylist()) for s in shards]
    assert sum(len(i) for i in items) == len(set().union(*items)) == 12
    assert all(3 <= len(i) <= 5 for i in items)
    # merging again (shards listed, any order) is a no-op; a shard is not a run
    again = _merge("--out", str(merged), *map(str, shards[::-1]))
    assert again.returncode == 0 and "already holds this merged run" in again.stderr
    with pytest.raises(ProbeInputError, match=r"shard \d/3 of a run, not a run: merge the shards first"):
        import probe
        probe.load_run(shards[0])


def test_merge_refuses_incomplete_or_mixed_sets(sharded: tuple[Path, Path, list[Path]], tmp_path: Path) -> None:
    tmp, _, shards = sharded
    full = tmp / "full"
    proc = _merge("--out", str(tmp_path / "a"), str(shards[0]), str(shards[2]))
    assert proc.returncode == 2 and "missing ['1/3']" in proc.stderr
    proc = _merge("--out", str(tmp_path / "b"), *map(str, shards), str(shards[1]))
    assert proc.returncode == 2 and "given twice ['1/3']" in proc.stderr
    proc = _merge("--out", str(tmp_path / "c"), str(full))
    assert proc.returncode == 2 and "not a shard" in proc.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_merge_refuses_shards_of_different_runs(sharded: tuple[Path, Path, list[Path]], tmp_path: Path) -> None:
    tmp, _, shards = sharded
    other = tmp_path / "other"
    _probe(tmp / "cache", *ARGS, "bench.shard=1/3", "bench.conditions=[C0]", f"hydra.run.dir={other}")
    with pytest.raises(ProbeInputError, match="are shards of different runs"):
        merge_shards([shards[0], other, shards[2]], tmp_path / "m")
    unfinished = tmp_path / "unfinished"
    _probe(tmp / "cache", *ARGS, "bench.shard=1/3", f"hydra.run.dir={unfinished}")
    (unfinished / "DONE").unlink()
    with pytest.raises(ProbeInputError, match=r"shard 1/3 is not finished \(no DONE\); rerun it"):
        merge_shards([shards[0], unfinished, shards[2]], tmp_path / "m")


SHARD_FILES = {"run_key.json", "prompts.parquet", "scores.parquet", "scores.safetensors", "lens.safetensors",
               "activations.safetensors"}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _copy(sweep: Path, dest: Path) -> list[Path]:
    shutil.copytree(sweep, dest, ignore=shutil.ignore_patterns(".submitit"))
    return sorted(p for p in dest.iterdir() if p.is_dir())


def test_shards_record_the_checksums_of_their_outputs(sharded: tuple[Path, Path, list[Path]], tmp_path: Path) -> None:
    """At DONE each shard's manifest holds the sha256 of every output; a resumed shard records the same."""
    tmp, _, shards = sharded
    for shard in shards:
        recorded = json.loads((shard / "manifest.json").read_text())["shard"]["sha256"]
        assert recorded == {name: _sha256(shard / name) for name in SHARD_FILES}
    resumed = tmp_path / "s1"
    shutil.copytree(shards[1], resumed)
    for name in ("DONE", "manifest.json"):  # killed before its end
        (resumed / name).unlink()
    _probe(tmp / "cache", *ARGS, "bench.shard=1/3", f"hydra.run.dir={resumed}")
    assert json.loads((resumed / "manifest.json").read_text())["shard"]["sha256"] == \
        json.loads((shards[1] / "manifest.json").read_text())["shard"]["sha256"]


def _reverse_groups(shard: Path) -> None:
    table = pq.read_table(shard / "prompts.parquet")
    i = table.schema.get_field_index("groups")
    groups = pa.array([g[::-1] for g in table.column("groups").to_pylist()], table.schema.field(i).type)
    pq.write_table(table.set_column(i, table.schema.field(i), groups), shard / "prompts.parquet")


def _edit_scores(shard: Path) -> None:
    table = pq.read_table(shard / "scores.parquet")
    i = table.schema.get_field_index("letter_logprobs")
    lp = pa.array([[v - 1.0 for v in row] for row in table.column(i).to_pylist()], table.schema.field(i).type)
    pq.write_table(table.set_column(i, table.schema.field(i), lp), shard / "scores.parquet")


@pytest.mark.parametrize(("attack", "message"), [
    ("groups reversed", "1/3: prompts.parquet changed since the shard finished (sha256 "),
    ("scores edited", "1/3: scores.parquet changed since the shard finished (sha256 "),
    ("scores deleted", "0/3: scores.parquet is missing (the shard finished with it); score the shard again"),
    ("file added", "1/3: generations.parquet was not there when the shard finished; remove it"),
])
def test_a_changed_shard_stops_the_merge_before_anything_is_written(attack: str, message: str, tmp_path: Path,
                                                                    sharded: tuple[Path, Path, list[Path]]) -> None:
    _, sweep, _ = sharded
    shards = _copy(sweep, tmp_path / "sweep")
    if attack == "groups reversed":
        _reverse_groups(shards[1])
    elif attack == "scores edited":
        _edit_scores(shards[1])
    elif attack == "scores deleted":  # every shard's: a merge would have nothing to score
        for shard in shards:
            (shard / "scores.parquet").unlink()
    else:
        shutil.copy(shards[1] / "prompts.parquet", shards[1] / "generations.parquet")
    proc = _merge("--out", str(tmp_path / "merged"), str(tmp_path / "sweep"))
    index = 0 if attack == "scores deleted" else 1
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert f"probe: error: {shards[index]}: shard {message}" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "merged").exists()


def test_merge_out_must_be_apart_from_its_inputs(sharded: tuple[Path, Path, list[Path]]) -> None:
    """`--out` is none of the inputs, inside none (a sweep directory included) and holds none."""
    tmp, sweep, shards = sharded
    before = {p: _sha256(p) for p in sorted(sweep.rglob("*")) if p.is_file()}
    cases = [(sweep, list(map(str, shards)), "holds", shards[0]), (sweep, [str(sweep)], "is", sweep),
             (sweep / "merged", [str(sweep)], "is inside", sweep),
             (shards[2] / "merged", list(map(str, shards)), "is inside", shards[2]), (tmp, [str(sweep)], "holds", sweep)]
    for out, inputs, where, named in cases:
        proc = _merge("--out", str(out), *inputs)
        assert proc.returncode == 2, proc.stderr[-3000:]
        assert f"probe: error: --out {out} {where} {named}, an input of this merge" in proc.stderr
    assert {p: _sha256(p) for p in sorted(sweep.rglob("*")) if p.is_file()} == before
    assert not (tmp / "DONE").exists() and not (tmp / "run_key.json").exists()


def _prompt(pid: int, item: str, n_tokens: int) -> RenderedPrompt:
    p = Prompt(prompt_id=pid, item_id=item, order=(0,), groups=("g",), message="", prefix_key=item)
    return RenderedPrompt(p, "", np.arange(n_tokens))


def test_units_sharing_an_item_stay_together_and_blocks_split_by_tokens() -> None:
    a, b, c, d = (_prompt(i, "ab"[i // 2], 10) for i in range(4))
    e, f = _prompt(4, "c", 30), _prompt(5, "d", 10)
    units = [[a], [b, c], [d], [e], [f]]  # item a in units 0, 1; item b in units 1, 2: one block of 40 tokens
    owned = [[r.prompt.prompt_id for r in shard_prompts(units, Shard(i, 3))] for i in range(3)]
    assert owned == [[0, 1, 2, 3], [], [4, 5]]  # block midpoints 20, 55, 75 of 80 tokens: ⌊3·m/80⌋ = 0, 2, 2
    two = [[r.prompt.prompt_id for r in shard_prompts(units, Shard(i, 2))] for i in range(2)]
    assert two == [[0, 1, 2, 3], [4, 5]]
    many = [shard_prompts(units, Shard(i, 8)) for i in range(8)]
    assert sorted(r.prompt.prompt_id for s in many for r in s) == list(range(6))
    assert sum(1 for s in many if not s) == 5  # three blocks, eight shards


@pytest.mark.parametrize(("text", "ok"), [("3/8", True), (" 0 / 1 ", True), ("8/8", False), ("a/b", False),
                                         ("-1/2", False), ("2", False)])
def test_shard_parse(text: str, ok: bool) -> None:
    if ok:
        assert str(Shard.parse(text)) == text.replace(" ", "")
    else:
        with pytest.raises(ProbeInputError, match="bench.shard"):
            Shard.parse(text)


def test_shard_gpu_resolver_puts_one_shard_per_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    from hydra import compose, initialize_config_dir

    import probe.commands.run  # noqa: F401  (registers the resolvers)

    with initialize_config_dir(config_dir=str(REPO_ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["bench.shard=5/8", "backend.device=${shard_gpu:}"])
    assert cfg.bench.shard == "5/8"
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert cfg.backend.device == "cuda:1"  # 16 shards on 4 GPUs: shard 5 shares GPU 1 with shards 1, 9, 13
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    with pytest.raises(Exception, match="no GPU is visible to this job"):
        _ = cfg.backend.device


def test_generation_shards_merge_to_the_unsharded_run(tmp_path: Path) -> None:
    """LocQA (open answers, rules judge): generations and verdicts of the shards are the run's."""
    root = shared_dir()
    if root is None or not (root / "data" / "locqa" / "locqa.json").is_file():
        pytest.skip("the LocQA file needs $PROBE_SHARED_DIR/data/locqa/locqa.json")
    args = ["model=tiny", "bench=locqa", f"bench.path={root / 'data' / 'locqa' / 'locqa.json'}", "bench.limit=6",
            "judge=rules", "backend.max_new_tokens=8", "analysis.n_boot=100", "progress=false"]
    _probe(tmp_path / "cache", *args, f"hydra.run.dir={tmp_path / 'full'}")
    for i in range(2):
        _probe(tmp_path / "cache", *args, f"bench.shard={i}/2", f"hydra.run.dir={tmp_path / f's{i}'}")
    merge_shards([tmp_path / "s1", tmp_path / "s0"], tmp_path / "merged")
    _same_run(tmp_path / "full", tmp_path / "merged", ("prompts.parquet", "generations.parquet", "judgements.parquet"))
    assert os.path.getsize(tmp_path / "s0" / "judgements.parquet") > 0


def test_dry_run_of_a_shard_writes_its_prompts(tmp_path: Path) -> None:
    proc = _probe(tmp_path / "cache", "model=tiny", "bench=demo", "bench.shard=1/4", "dry_run=true",
                  f"hydra.run.dir={tmp_path / 'dry'}")
    prompts = pq.read_table(tmp_path / "dry" / "prompts.parquet")
    assert "shard 1/4: 312 of 1248 prompts (6 items)" in proc.stdout + proc.stderr
    assert prompts.num_rows == 312 and len(set(prompts.column("item_id").to_pylist())) == 6
    assert not (tmp_path / "dry" / "scores.parquet").exists()


def test_slurm_array_of_shards_composes_into_typed_shard_runs(tmp_path: Path) -> None:
    """`-m bench.shard=0/8,…,7/8 cluster=slurm`: each array task's config is a typed shard run."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from probe.pipeline.spec import run_config

    for i in (0, 7):
        with initialize_config_dir(config_dir=str(REPO_ROOT / "conf"), version_base="1.3"):
            cfg = compose(config_name="config", overrides=["cluster=slurm", "bench=disco", f"bench.shard={i}/8"])
        values = OmegaConf.to_container(cfg, resolve=True)
        cfg_run = run_config(values, tmp_path)
        assert cfg_run.bench.shard == Shard(i, 8) and cfg_run.bench.record()["shard"] == f"{i}/8"
    with initialize_config_dir(config_dir=str(REPO_ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["bench=disco", "bench.shard=8/8"])
    with pytest.raises(ProbeInputError, match=r"bench.shard: 8/8: expected i/n with 0 ≤ i < n"):
        run_config(OmegaConf.to_container(cfg, resolve=True), tmp_path)


def test_shards_on_other_devices_merge_into_one_run(sharded: tuple[Path, Path, list[Path]], tmp_path: Path) -> None:
    """`${shard_gpu:}` gives shards different devices: still one run; merging again does nothing;
    an unfinished shard is named."""
    tmp, sweep, shards = sharded
    other = tmp_path / "sweep"
    shutil.copytree(sweep, other, ignore=shutil.ignore_patterns(".submitit"))
    moved = sorted(p for p in other.iterdir() if p.is_dir())[1]
    shutil.rmtree(moved)
    _probe(tmp / "cache", *ARGS, "bench.shard=1/3", "backend.device=cpu", f"hydra.run.dir={moved}")
    for _ in range(2):  # the second merge finds its own output done and does nothing
        proc = _merge("--out", str(tmp_path / "merged"), str(other))
        assert proc.returncode == 0, proc.stderr[-3000:]
    merged = tmp_path / "merged"
    _same_run(tmp / "full", merged, ("prompts.parquet", "scores.parquet"))
    manifest = json.loads((merged / "manifest.json").read_text())
    assert any("backend.device" in w for w in manifest["merge_warnings"])
    (moved / "DONE").unlink()
    (moved / "manifest.json").unlink()  # as a shard killed before its end has none
    proc = _merge("--out", str(tmp_path / "again"), str(other))
    assert proc.returncode == 2 and "shard 1/3 is not finished (no DONE)" in proc.stderr


def test_empty_shards_with_lens_merge(tmp_path: Path) -> None:
    """More shards than blocks of whole items: the empty ones finish too, and the merge is the run."""
    args = ["model=tiny", "bench=demo", "bench.limit=2", "analysis.n_boot=50", "progress=false",
            "analysis.logit_lens=true", "analysis.capture_layers=[1]"]
    _probe(tmp_path / "cache", *args, f"hydra.run.dir={tmp_path / 'full'}")
    sizes = []
    for i in range(5):
        _probe(tmp_path / "cache", *args, f"bench.shard={i}/5", f"hydra.run.dir={tmp_path / 'shards' / str(i)}")
        sizes.append(pq.read_table(tmp_path / "shards" / str(i) / "prompts.parquet").num_rows)
    assert 0 in sizes and sum(sizes) == 104
    merge_shards([tmp_path / "shards"], tmp_path / "merged")
    _same_run(tmp_path / "full", tmp_path / "merged", ("prompts.parquet", "scores.parquet"))
