"""Mechanistic outputs: logit lens, activation capture, `load_run`, probes, the worked example."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ccd_items, prepare, run_probe, write_json_file

import probe
from probe.backends.hf import HFScorer
from probe.benches.disco.task import TASK as DISCO
from probe.backends.specs import HFBackendSpec
from probe.backends.taps import MechSpec
from probe.errors import ProbeInputError
from probe.metrics.lens import first_layer_within, fit_linear_probe, layer_table
from probe.models import ModelSpec, load_model
from probe.models.tiny import TinySpec
from probe.prompts.render import render_prompts
from probe.results.mech import ActivationWriter

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    os.environ["PROBE_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    arch = request.param
    spec = ModelSpec(name=arch, kind="instruct", source="tiny", tiny=TinySpec(arch=arch, num_layers=4))
    loaded = load_model(spec, device="cpu")
    bench = prepare({"kind": "disco", "packaged": "demo_disco.csv"}, False)
    rendered, letters = render_prompts(loaded.tokenizer, bench.prompts[:52], bench.letters,
                                       spec.render_settings(), spec.name)
    return loaded, rendered, letters


def _scores(loaded, rendered, letters, **kw):
    scorer = HFScorer(loaded.model, HFBackendSpec(device="cpu", max_batch_size=16, **kw),
                      MechSpec(logit_lens=True, capture_layers=(0, 2, -1)))
    return {s.prompt_id: s for b in scorer.score(rendered, letters) for s in b}, scorer


@torch.inference_mode()
def test_lens_last_layer_is_the_scores_and_activations_match_hidden_states(tiny) -> None:
    loaded, rendered, letters = tiny
    scores, scorer = _scores(loaded, rendered, letters)
    assert scorer.capture == (0, 2, 3)
    for r in rendered[::7]:
        s = scores[r.prompt.prompt_id]
        assert s.lens.shape == (4, 4) and s.activations.shape == (3, 64)
        assert np.abs(s.lens[-1] - np.array(s.letter_logprobs)).max() <= 1e-5
        # reference: a plain forward with all hidden states (embeddings first, so layer l is l + 1)
        ref = loaded.model(input_ids=torch.tensor([r.token_ids.tolist()]), output_hidden_states=True)
        for j, layer in enumerate(scorer.capture):
            expected = ref.hidden_states[layer + 1][0, -1].numpy() if layer < 3 else None
            if expected is not None:  # HF's last hidden state is already normed; ours is not
                assert np.abs(s.activations[j] - expected).max() <= 1e-4
        normed = loaded.model.get_decoder().norm(torch.tensor(s.activations[-1]))
        head = loaded.model.get_output_embeddings().weight.float()
        logits = normed @ head.T
        cap = getattr(loaded.model.config, "final_logit_softcapping", None)
        if cap:
            logits = torch.tanh(logits / cap) * cap
        lp = torch.log_softmax(logits, -1)[list(letters.ids)].numpy()
        assert np.abs(lp - np.array(s.letter_logprobs)).max() <= 1e-4


def test_lens_is_the_same_with_and_without_prefix_reuse(tiny) -> None:
    loaded, rendered, letters = tiny
    a, _ = _scores(loaded, rendered, letters, prefix_reuse=True)
    b, _ = _scores(loaded, rendered, letters, prefix_reuse=False)
    for i in a:
        assert np.abs(a[i].lens - b[i].lens).max() <= 1e-4
        assert np.abs(a[i].activations - b[i].activations).max() <= 1e-3


def test_activation_writer_places_rows_by_prompt_id(tmp_path: Path) -> None:
    from safetensors.numpy import load_file

    rows = np.random.default_rng(0).normal(size=(7, 2, 5)).astype(np.float32)
    writer = ActivationWriter(tmp_path, range(7), [3, 9], 5, "float16")
    for i in [4, 0, 6, 2, 1, 5, 3]:
        writer.add(i, rows[i])
    assert not (tmp_path / "activations.safetensors").exists()  # renamed into place only when whole
    writer.close()
    t = load_file(str(tmp_path / "activations.safetensors"))
    assert t["activations"].dtype == np.float16 and t["layers"].tolist() == [3, 9]
    assert t["prompt_id"].tolist() == list(range(7))
    assert np.allclose(t["activations"], rows, atol=2e-3)


def test_capture_layer_out_of_range(tiny) -> None:
    loaded, _, _ = tiny
    with pytest.raises(ProbeInputError, match="layer 9 out of range for 4 layers"):
        HFScorer(loaded.model, HFBackendSpec(), MechSpec(capture_layers=(9,)))


def test_first_layer_within_means_from_that_layer_on() -> None:
    """`from layer L on`: a layer that dips below the threshold and leaves it again is not L."""
    table = {"jsd_to_final": [0.5, 0.005, 0.3, 0.008, 0.0], "letter_jsd_to_final": [0.9, 0.6, 0.2, 0.1, 0.0]}
    assert first_layer_within(table, 0.01) == 3
    assert first_layer_within(table, 0.01, "letter_jsd_to_final") == 4


def test_linear_probe_on_synthetic_activations() -> None:
    rng = np.random.default_rng(0)
    y = np.repeat(np.array(["a", "b", "c"]), 40)
    items = np.repeat(np.arange(30), 4)
    informative = rng.normal(size=(120, 8)) + np.eye(3, 8)[np.searchsorted(["a", "b", "c"], y)] * 4
    fit = fit_linear_probe(informative, y, items)
    assert fit.accuracy > 0.9 and fit.majority_baseline < 0.5 and fit.n_classes == 3
    noise = fit_linear_probe(rng.normal(size=(120, 8)), y, items)
    assert noise.accuracy < 0.6


def _cli(out: Path, cache: Path, *args: str) -> Path:
    proc = run_probe(["model=tiny", f"hydra.run.dir={out}",
                           "analysis.n_boot=50", "progress=false", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, env={**os.environ, "PROBE_CACHE": str(cache)}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def mech_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("mech")
    return _cli(tmp / "run", tmp / "cache", "bench=demo", "analysis.logit_lens=true",
                "analysis.capture_layers=[0,-1]", "analysis.capture_dtype=float16")


def test_run_directory_and_load_run(mech_run: Path) -> None:
    run = probe.load_run(mech_run)
    n = run.prompts.num_rows
    assert run.lens().shape == (n, 2, 4) and run.activations().shape == (n, 2, 64)
    assert run.activations().dtype == np.float16 and run.captured_layers() == [0, 1]
    assert np.abs(run.lens()[:, -1] - run.letter_logprobs()).max() <= 1e-5
    # the lens figure sits with the other figures; the table says which distribution each JSD measures
    assert (mech_run / "figures" / "lens.png").stat().st_size > 1000 and not (mech_run / "lens.png").exists()
    report = (mech_run / "report.md").read_text()
    assert "## Logit lens (C0; figure: figures/lens.png)" in report
    assert "| layer | culture JSD to final (bits) | letter JSD to final (bits) | top culture |" in report
    table = json.loads((mech_run / "lens_layers.json").read_text())
    assert table["jsd_to_final"][-1] == 0.0 == table["letter_jsd_to_final"][-1] and len(table["csd"]) == 2
    assert 'alt="lens.png"' in (mech_run / "report.html").read_text()
    # metrics recomputed through the API equal the stored ones; a subset is its own analysis
    again = probe.recompute_metrics(run)
    assert again["expected"] == run.metrics["expected"]
    c0 = probe.recompute_metrics(run, run.mask(condition="C0"), {"n_boot": 0})
    # without a bootstrap there is no bias correction: the `_corrected` twins are absent, the rest equal
    plain = {k: v for k, v in run.metrics["expected"]["C0"].items() if not k.endswith("_corrected")}
    assert set(c0["expected"]) == {"C0"} and c0["expected"]["C0"] == plain
    food = run.mask(category="food")
    assert food.sum() == 8 * 52
    csd = run.group_distribution(run.mask(condition="C0"))
    assert csd == pytest.approx(run.metrics["expected"]["C0"]["CSD"])
    assert layer_table(run, DISCO.design, "C0")["csd"][-1] == pytest.approx(csd)


@pytest.mark.slow
def test_example_followup_script(mech_run: Path) -> None:
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts/example_followup.py"), str(mech_run)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"the C0 culture distribution is within 0.01 bits \(JSD\) of the final layer's from layer \d+ "
                     r"on; the letter distribution \(per prompt, averaged\) from layer \d+ on", proc.stdout)
    assert "linear probe on layer 1 → chosen culture: accuracy" in proc.stdout


def test_load_run_round_trips_every_bench(tmp_path: Path) -> None:
    data = write_json_file(tmp_path / "CCD-Bench.json", ccd_items(3))
    for name, args in (("ccd", ["bench=ccd", f"bench.path={data}"]),
                       ("ccd-gen", ["bench=ccd", f"bench.path={data}", "backend.mode=generate",
                                    "backend.max_new_tokens=4"])):
        run = probe.load_run(_cli(tmp_path / name, tmp_path / "cache", *args))
        assert run.bench_kind == "ccd" and run.prompts.num_rows == 30
        if name == "ccd":
            assert probe.recompute_metrics(run)["expected"] == run.metrics["expected"]
            assert run.letter_logprobs().shape == (30, 10)
        else:
            assert run.scores is None and run.generations.num_rows == 30
            assert len(run.table().prompt_id) == 30 - run.metrics["n_invalid"]
        with pytest.raises(ProbeInputError, match="no lens.safetensors"):
            run.lens()
