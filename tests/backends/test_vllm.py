"""vLLM backend tier: parity with the HF backend on the same token ids — letters, generations and
answer texts — (run in the vLLM venv).

    VLLM_ENABLE_V1_MULTIPROCESSING=0 VLLM_CPU_KVCACHE_SPACE=1 .venv-vllm/bin/python -m pytest tests/backends/test_vllm.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ccd_items, disco_rows, prepare, write_csv, write_json_file

from probe.backends.continuations import TextRequest
from probe.backends.generate import HFGenerator
from probe.backends.hf import HFScorer
from probe.backends.specs import HFBackendSpec
from probe.models import ModelSpec, load_model
from probe.models.tiny import TinySpec
from probe.pipeline.spec import bench_ref
from probe.prompts.render import render_prompts
from probe.prompts.text_forms import render_texts, text_design
from probe.results.run import load_run

pytestmark = [pytest.mark.vllm,
              pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed (vLLM venv)")]
REPO_ROOT = Path(__file__).resolve().parents[2]
TOL = 1e-4
MODEL_SPEC = ModelSpec(name="tiny", kind="instruct", source="tiny", tiny=TinySpec())


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory):
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ["PROBE_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    from probe.backends.specs import VLLMSpec
    from probe.backends.vllm import VLLMEngine

    hf = load_model(MODEL_SPEC, device="cpu")
    engine = VLLMEngine(hf.info["ref"], None, False, VLLMSpec(dtype="float32", max_model_len=2048,
                                                               enforce_eager=True, max_new_tokens=6),
                        hf.tokenizer)
    return hf, engine


def _parity(models, prompts, letters) -> None:
    hf, engine = models
    rendered, ids = render_prompts(hf.tokenizer, prompts, letters, MODEL_SPEC.render_settings(), "tiny")
    a = {s.prompt_id: s for b in HFScorer(hf.model, HFBackendSpec(device="cpu")).score(rendered, ids) for s in b}
    b = {s.prompt_id: s for batch in engine.score(rendered, ids) for s in batch}
    assert a.keys() == b.keys()
    diff = max(np.abs(np.array(a[i].letter_logprobs) - np.array(b[i].letter_logprobs)).max() for i in a)
    assert diff <= TOL
    assert all(a[i].greedy_valid == b[i].greedy_valid for i in a)
    # the full-vocabulary argmax token (what the model wanted to say) and its log-prob, from both
    assert all(a[i].argmax_token_id == b[i].argmax_token_id is not None for i in a)
    assert max(abs(a[i].argmax_logprob - b[i].argmax_logprob) for i in a) <= TOL


def test_letter_parity_disco(models) -> None:
    bench = prepare({"kind": "disco", "packaged": "demo_disco.csv"}, False)
    _parity(models, bench.prompts[:104], bench.letters)


@pytest.mark.parametrize("design", ["cyclic", "latin_square"])
def test_letter_parity_ccd(models, tmp_path: Path, design: str) -> None:
    path = write_json_file(tmp_path / "CCD-Bench.json", ccd_items(4))
    bench = prepare({"kind": "ccd", "path": str(path), "design": design}, False)
    _parity(models, bench.prompts, bench.letters)


def test_generation_parity(models) -> None:
    """Greedy continuations after the pre-filled cue: the same tokens, hence text, from both backends."""
    hf, engine = models
    bench = prepare({"kind": "disco", "packaged": "demo_disco.csv"}, True)
    rendered, _ = render_prompts(hf.tokenizer, bench.prompts[:52], None, MODEL_SPEC.render_settings(), "tiny")
    a = {g.prompt_id: g.text for b in HFGenerator(hf.model, hf.tokenizer, HFBackendSpec(max_new_tokens=6))
         .generate(rendered) for g in b}
    b = {g.prompt_id: g.text for batch in engine.generate(rendered) for g in batch}
    assert a == b


def _text_requests(models, form: str) -> list[TextRequest]:
    """The text prompts of two DiSCo demo items in `form`, rendered as a run renders them."""
    hf, _ = models
    ref = bench_ref({"kind": "disco", "packaged": "demo_disco.csv", "text_form": form})
    bench = prepare({"kind": "disco", "packaged": "demo_disco.csv", "limit": 2})
    design = text_design(bench.prompts, bench.items, form, ref.task.text.message)
    rendered = render_texts(hf.tokenizer, design, MODEL_SPEC.render_settings(), "tiny")
    return [TextRequest(r.prompt, r.continuations) for r in rendered]


def _one_forward(model, request: TextRequest) -> np.ndarray:
    """Σ of each continuation's token log-probs from one `model(prompt + continuation)` per option."""
    import torch

    n, out = len(request.prompt.token_ids), []
    with torch.inference_mode():
        for c in request.continuations:
            ids = torch.from_numpy(np.concatenate([request.prompt.token_ids, c]).astype(np.int64))[None]
            lp = torch.log_softmax(model(input_ids=ids).logits[0, n - 1:-1].float(), dim=-1)
            out.append(float(lp[torch.arange(len(c)), torch.from_numpy(c.astype(np.int64))].double().sum()))
    return np.array(out)


@pytest.mark.parametrize("form", ["hybrid", "cloze"])
def test_text_parity(models, form: str) -> None:
    """Each option's text score from the engine (`prompt_logprobs` on prompt + continuation)
    equals the HF trie scorer's and one plain forward per option within 1e-4 nats; the engine
    reads no prefix from its cache, so it computes every leaf whole."""
    hf, engine = models
    requests = _text_requests(models, form)
    scorer = engine.texts()
    got = {s.prompt_id: s for batch in scorer.score(requests) for s in batch}
    trie = HFScorer(hf.model, HFBackendSpec(device="cpu")).texts()
    want = {s.prompt_id: s for batch in trie.score(requests) for s in batch}
    assert got.keys() == want.keys() == {q.prompt.prompt.prompt_id for q in requests}
    for q in requests[:6]:
        assert np.abs(np.array(got[q.prompt.prompt.prompt_id].logprobs) - _one_forward(hf.model, q)).max() <= TOL
    assert max(np.abs(np.array(got[i].logprobs) - np.array(want[i].logprobs)).max() for i in got) <= TOL
    assert all(got[i].token_ids == want[i].token_ids and got[i].n_tokens == want[i].n_tokens for i in got)
    assert scorer.stats.unique_tokens == trie.stats.unique_tokens < trie.stats.prompt_tokens
    assert scorer.stats.tokens_computed == scorer.stats.prompt_tokens == trie.stats.prompt_tokens


def test_prefix_cache_is_used(models) -> None:
    _, engine = models
    rate = engine.prefix_cache_hit_rate()
    assert rate is not None and rate > 0.2  # rotations of an item share their prefix blocks


def _numeric_leaves(tree, prefix=""):
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _numeric_leaves(v, f"{prefix}.{k}")
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _numeric_leaves(v, f"{prefix}[{i}]")
    elif isinstance(tree, (int, float)):
        yield prefix, float(tree)


def test_whole_runs_give_the_same_metrics(tmp_path: Path) -> None:
    data = write_csv(tmp_path / "DiSCo Bench.csv", disco_rows(2))
    env = {**os.environ, "PROBE_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1",
           "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}
    metrics = {}
    for backend in ("hf", "vllm"):
        extra = ["backend.dtype=float32", "backend.enforce_eager=true", "backend.max_model_len=2048"] \
            if backend == "vllm" else []
        out = tmp_path / backend
        proc = subprocess.run([sys.executable, "-m", "probe", "model=tiny", "bench=disco", f"bench.path={data}",
                               f"backend={backend}", f"hydra.run.dir={out}", "analysis.n_boot=100", "progress=false",
                               *extra], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        metrics[backend] = json.loads((out / "metrics.json").read_text())
    manifest = json.loads((tmp_path / "vllm" / "manifest.json").read_text())
    backend = manifest["backend"]
    assert backend["name"] == "vllm"
    # requests in trie order and cache waves: the engine's cache serves (nearly) every whole
    # shared block (vLLM's CPU blocks are 128 tokens, so that is half the trie's sharing here)
    assert backend["prefix_cache_hit_rate"] >= 0.95 * backend["prefix_cache_limit"] > 0.2
    assert backend["prefix_cache_limit"] < 1 - backend["unique_tokens"] / backend["prompt_tokens"]
    a, b = dict(_numeric_leaves(metrics["hf"]["expected"])), dict(_numeric_leaves(metrics["vllm"]["expected"]))
    assert a.keys() == b.keys() and max(abs(a[k] - b[k]) for k in a) <= 1e-4
    assert metrics["hf"]["greedy"] == metrics["vllm"]["greedy"]
    argmax = {name: load_run(tmp_path / name).scores for name in ("hf", "vllm")}
    for column in ("argmax_token_id", "argmax_token"):
        assert argmax["hf"].column(column).to_pylist() == argmax["vllm"].column(column).to_pylist()
    assert np.abs(argmax["hf"].column("argmax_logprob").to_numpy()
                  - argmax["vllm"].column("argmax_logprob").to_numpy()).max() <= TOL
    # two vLLM shards (whole items each), merged: the unsharded vLLM run within the engine's tolerance
    vllm_args = ["backend=vllm", "backend.dtype=float32", "backend.enforce_eager=true", "backend.max_model_len=2048"]
    for i in range(2):
        proc = subprocess.run([sys.executable, "-m", "probe", "model=tiny", "bench=disco", f"bench.path={data}",
                               *vllm_args, f"bench.shard={i}/2", f"hydra.run.dir={tmp_path / f'shard{i}'}",
                               "analysis.n_boot=100", "progress=false"], cwd=REPO_ROOT, env=env, capture_output=True,
                              text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
    from probe.pipeline.shard_merge import merge_shards

    merged = load_run(merge_shards([tmp_path / "shard0", tmp_path / "shard1"], tmp_path / "merged"))
    whole = load_run(tmp_path / "vllm")
    assert merged.prompts.equals(whole.prompts)
    assert np.abs(merged.letter_logprobs() - whole.letter_logprobs()).max() <= 1e-4
    assert merged.metrics["greedy"] == metrics["vllm"]["greedy"]
    assert merged.scores.column("argmax_token_id").equals(whole.scores.column("argmax_token_id"))


def test_text_runs_store_the_hf_runs_text_columns(tmp_path: Path) -> None:
    """Whole runs, vLLM against HF: letters+text (hybrid) and text (cloze) store the same text
    columns within 1e-4 nats, and the manifest's text counters say the vLLM path computed every
    leaf token (no prefix sharing) where the HF trie computed each unique token once; the letter
    reading of a vLLM letters+text run is the vLLM letters-only run's, bit for bit."""
    data = write_csv(tmp_path / "DiSCo Bench.csv", disco_rows(2))
    vllm_args = ["backend=vllm", "backend.dtype=float32", "backend.enforce_eager=true", "backend.max_model_len=2048"]
    for mode, form in (("letters+text", "hybrid"), ("text", "cloze")):
        runs = {backend: _probe_run(tmp_path / f"{form}-{backend}", data, f"backend.mode={mode}",
                                    f"bench.text_form={form}", *(vllm_args if backend == "vllm" else []))
                for backend in ("hf", "vllm")}
        tables = {b: load_run(runs[b]).scores for b in runs}
        hf_scores, vllm_scores = (np.array(tables[b].column("text_logprobs").to_pylist()) for b in ("hf", "vllm"))
        assert hf_scores.shape == vllm_scores.shape and np.abs(hf_scores - vllm_scores).max() <= TOL
        for column in ("text_token_ids", "text_n_tokens", "text_n_bytes"):
            assert tables["hf"].column(column).equals(tables["vllm"].column(column))
        hf, vllm = (json.loads((runs[b] / "manifest.json").read_text())["backend"] for b in ("hf", "vllm"))
        assert vllm["mode"] == mode and vllm["name"] == "vllm"
        assert vllm["text_unique_tokens"] == hf["text_unique_tokens"] <= hf["text_tokens_computed"]
        assert vllm["text_tokens_computed"] == vllm["text_leaf_tokens"] == hf["text_leaf_tokens"]
        assert hf["text_tokens_computed"] < vllm["text_tokens_computed"]
        metrics = {b: json.loads((runs[b] / "metrics.json").read_text()) for b in runs}
        assert metrics["hf"]["greedy"] == metrics["vllm"]["greedy"]
    letters = _probe_run(tmp_path / "letters-vllm", data, *vllm_args)
    both = tmp_path / "hybrid-vllm"
    assert (both / "scores.safetensors").read_bytes() == (letters / "scores.safetensors").read_bytes()
    only = load_run(letters).scores
    assert load_run(both).scores.select(only.column_names).equals(only)


def _probe_run(out: Path, data: Path, *overrides: str) -> Path:
    """`python -m probe model=tiny bench=disco` on `data` into `out`, in a subprocess."""
    env = {**os.environ, "PROBE_CACHE": str(out.parent / "cache"), "HF_HUB_OFFLINE": "1",
           "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}
    proc = subprocess.run([sys.executable, "-m", "probe", "model=tiny", "bench=disco", f"bench.path={data}",
                           f"hydra.run.dir={out}", "analysis.n_boot=100", "progress=false", *overrides],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out
