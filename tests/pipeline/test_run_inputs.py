"""A run is tied to the exact inputs it read: the run key holds a digest of the bench data files
(pinned checksum or not) and of a local model directory's weights; a resumed run, a merge and a
comparison refuse other inputs in one line naming which changed (tiny model, in-process runs
shared by the module)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import blend_dir, disco_rows, write_csv

from probe.errors import ProbeInputError
from probe.pipeline.claim import claim
from probe.results.run_key import read_run_key


def _run(out: Path, *overrides: str) -> Path:
    """A tiny-model run in-process."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import probe.pipeline.execute as pipeline
    from probe.config import package_conf_dir
    from probe.pipeline.spec import run_config

    with initialize_config_dir(config_dir=str(package_conf_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["model=tiny", "analysis.n_boot=20", "progress=false",
                                                       *overrides])
    return pipeline.run(run_config(OmegaConf.to_container(cfg, resolve=True), out))


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("inputs")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROBE_CACHE", str(path / "cache"))
        yield path


def _whose(data: Path, out: Path) -> Path:
    return _run(out, "bench=blend", f"bench.path={data}", "bench.sha256=null", "bench.mode=whose_answer",
                "backend.mode=text", "bench.limit=2")


def _edit_answer(data: Path) -> None:
    """Spain's first question gets another top answer: the same ids, other candidate texts."""
    path = data / "annotations" / "Spain_data.json"
    obj = json.loads(path.read_text(encoding="utf-8"))
    first = next(iter(obj.values()))
    first["annotations"][0]["answers"] = ["an edited answer"]
    first["annotations"][0]["en_answers"] = ["an edited answer"]
    path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")


@pytest.fixture(scope="module")
def blend_runs(root: Path) -> tuple[Path, Path, Path]:
    """A finished whose-answer run on a copy of the files (no pinned checksum), the copy edited
    afterwards, and a second run on the edited copy."""
    data = root / "blend"
    shutil.copytree(blend_dir(), data)
    first = _whose(data, root / "first")
    _edit_answer(data)
    return data, first, _whose(data, root / "second")


def test_the_key_and_manifest_hold_the_data_digest(blend_runs: tuple[Path, Path, Path]) -> None:
    _, first, second = blend_runs
    keys = [read_run_key(r) for r in (first, second)]
    assert all(k is not None and len(k["bench"]["data_sha256"]) == 64 for k in keys)
    assert keys[0]["bench"]["sha256"] is None and keys[0]["bench"]["data_sha256"] != keys[1]["bench"]["data_sha256"]
    manifest = json.loads((first / "manifest.json").read_text())
    assert manifest["bench"]["data_sha256"] == keys[0]["bench"]["data_sha256"]


def test_edited_data_is_not_served_old_scores(blend_runs: tuple[Path, Path, Path]) -> None:
    """Before: the rerun on the edited copy said the run was complete and kept the old scores."""
    data, first, _ = blend_runs
    with pytest.raises(ProbeInputError, match=r"^\S+first: the bench data \(data_sha256 \w+… vs \w+…\) changed since "
                                              r"this run started"):
        _whose(data, first)


def test_a_run_whose_key_predates_the_digest_is_not_resumed(blend_runs: tuple[Path, Path, Path], root: Path) -> None:
    """A run directory an older probe started (no `data_sha256` in its key) is refused in words
    that say so, not as a configuration that merely differs."""
    data, _, second = blend_runs
    old = root / "older"
    shutil.copytree(second, old)
    key = json.loads((old / "run_key.json").read_text())
    del key["bench"]["data_sha256"]
    (old / "run_key.json").write_text(json.dumps(key, indent=2))
    with pytest.raises(ProbeInputError, match=r"started by an older probe, whose run key holds no digest of the "
                                              r"bench data"):
        _whose(data, old)


def test_compare_refuses_runs_on_other_data(blend_runs: tuple[Path, Path, Path]) -> None:
    """Before: two runs on different files with the same question ids were paired."""
    from probe.commands.compare import compare_runs

    _, first, second = blend_runs
    with pytest.raises(ProbeInputError, match="read different bench data"):
        compare_runs(first, second)


def test_merge_names_the_changed_input() -> None:
    """Shards of one configuration that read other data are refused, naming the data."""
    from probe.pipeline.shard_merge import ShardDir, _unsharded_key
    from probe.results.run_key import changed_inputs

    key = {"model": {"name": "m"}, "bench": {"data_sha256": "a" * 64, "config": {"shard": "0/2"}},
           "backend": {"device": "cpu"}}
    other = {**key, "bench": {"data_sha256": "b" * 64, "config": {"shard": "1/2"}}}
    shards = [ShardDir(Path("s0"), None, key), ShardDir(Path("s1"), None, other)]  # type: ignore[arg-type]
    with pytest.raises(ProbeInputError, match=r"read different inputs, the bench data \(data_sha256 aaaa"):
        _unsharded_key(shards)
    assert changed_inputs(key, key) is None


def _disco(root: Path, model_dir: Path, out: Path) -> Path:
    csv = root / "disco.csv"
    if not csv.is_file():
        write_csv(csv, disco_rows(2))
    return _run(out, "bench=disco", f"bench.path={csv}", "bench.conditions=[C0]", "model=hub",
                f"model.hub_id={model_dir}", "model.name=local")


def test_swapped_local_weights_are_refused(root: Path) -> None:
    """Before: a local model directory swapped between runs resumed (here: reread) the old run."""
    from probe.models import ModelSpec, load_model
    from probe.models.tiny import TinySpec
    from probe.models.weights import weights_digest

    built = [load_model(ModelSpec(name="tiny", kind="instruct", source="tiny", tiny=TinySpec(seed=s)), weights=False)
             for s in (0, 1)]
    local = root / "local"
    shutil.copytree(built[0].info["path"], local)
    run = _disco(root, local, root / "local-run")
    stored = read_run_key(run)
    t0 = time.perf_counter()
    assert stored is not None and stored["model"]["weights_sha256"] == weights_digest(local)
    print(f"weights digest of the tiny model: {time.perf_counter() - t0:.4f} s")
    shutil.copy(Path(built[1].info["path"]) / "model.safetensors", local / "model.safetensors")
    with pytest.raises(ProbeInputError, match=r"the model weights \(weights_sha256 \w+… vs \w+…\) changed since"):
        _disco(root, local, root / "local-run")


@pytest.mark.parametrize(("block", "name", "what"), [("bench", "data_sha256", "bench data"),
                                                      ("model", "weights_sha256", "model weights")])
def test_a_key_missing_a_digest_today_s_key_has_is_refused_in_words(tmp_path: Path, block: str, name: str,
                                                                     what: str) -> None:
    """Any input digest a newer key records (the converted GGUF weights' among them) and an older
    key lacks: the claim names it, leaves the directory as it was, and does not resume."""
    key = {"bench": {"config": {}, "data_sha256": "d" * 64}, "model": {"name": "m", "weights_sha256": "w" * 64},
           "backend": {}}
    older = json.loads(json.dumps(key))
    del older[block][name]
    (tmp_path / "run_key.json").write_text(json.dumps(older))
    with pytest.raises(ProbeInputError, match=rf"older probe, whose run key holds no digest of the {what} "
                                              rf"\({block}\.{name}\)"):
        claim(tmp_path, key)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run_key.json"]
    assert json.loads((tmp_path / "run_key.json").read_text()) == older
