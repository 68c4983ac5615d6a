"""`backend.fast_path`: fused projections, the last layer only where read, grouped-query attention
without copies, products on packed weights — within 1e-5 nats of the eager path on letters and texts (demo format, CCD's
10 options, Llama and Gemma 3 with sliding windows), checked against the model's own forward,
and off by default."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ccd_items, prepare, write_json_file

from probe.backends.continuations import TextRequest
from probe.backends.fastpass import FastLayers
from probe.backends.hf import HFScorer
from probe.backends.specs import HFBackendSpec, backend_record
from probe.errors import ProbeInputError
from probe.models import LoadedModel, ModelSpec, load_model
from probe.models.tiny import TinySpec
from probe.prompts.render import render_prompts
from probe.types import RenderedPrompt

EXACT = 1e-5  # nats: the fast path's bound against the eager path
LETTERS = ("A", "B", "C", "D")


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> LoadedModel:
    os.environ["PROBE_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    arch = request.param
    # 4 heads on 2 KV heads: grouped-query attention; Gemma 3's window (16) is shorter than a prompt
    spec = ModelSpec(name=f"tiny-{arch}", kind="instruct", source="tiny",
                     tiny=TinySpec(arch=arch, num_layers=4 if arch == "gemma3" else 3, num_heads=4, num_kv_heads=2))
    return load_model(spec, device="cpu")


def _demo(loaded: LoadedModel, n_items: int) -> tuple[list[RenderedPrompt], object]:
    bench = prepare({"name": "demo", "kind": "disco", "packaged": "demo_disco.csv"})
    keep = {i.item_id for i in bench.items[:n_items]}
    return render_prompts(loaded.tokenizer, [p for p in bench.prompts if p.item_id in keep], LETTERS,
                          loaded_settings(loaded), "tiny")


def loaded_settings(loaded: LoadedModel):  # the tiny models' render settings
    return ModelSpec(name="tiny", kind="instruct", source="tiny", tiny=TinySpec()).render_settings()


def _letters(loaded: LoadedModel, rendered, letters, **kw) -> tuple[dict[int, object], HFScorer]:
    scorer = HFScorer(loaded.model, HFBackendSpec(device="cpu", **kw))
    return {s.prompt_id: s for batch in scorer.score(rendered, letters) for s in batch}, scorer


def _gap(a: dict, b: dict) -> float:
    assert sorted(a) == sorted(b)
    return max(float(np.abs(np.array(a[k].letter_logprobs) - np.array(b[k].letter_logprobs)).max()) for k in a)


def test_letters_within_1e5_of_the_eager_path_on_the_demo(tiny: LoadedModel) -> None:
    rendered, letters = _demo(tiny, 2)
    eager, _ = _letters(tiny, rendered, letters)
    fast, scorer = _letters(tiny, rendered, letters, fast_path=True)
    assert scorer._fast is not None  # the fast path ran, not a fallback
    assert scorer._fast.packed == torch.backends.mkldnn.is_available()  # oneDNN's products on CPU
    assert _gap(fast, eager) <= EXACT
    assert all(fast[k].argmax_token_id == eager[k].argmax_token_id for k in eager)
    assert scorer.stats.head_check["max_letter_gap"] <= EXACT  # checked against model(input_ids)
    # small passes: many chunks, one-row passes, passes where no prompt ends
    few, _ = _letters(tiny, rendered, letters, fast_path=True, batch_tokens=300, max_batch_size=3)
    assert _gap(few, eager) <= EXACT
    # the fused weights are views: the eager path reads the same numbers after fusing, bit for bit
    again, _ = _letters(tiny, rendered, letters)
    assert all(again[k].letter_logprobs == eager[k].letter_logprobs for k in eager)


@pytest.mark.parametrize("mix", ["short", "long", "short177"])
def test_letters_within_1e5_of_the_eager_path_on_every_item_mix(tiny: LoadedModel, mix: str) -> None:
    """The benchmark's item mixes (`probe.pipeline.perf.BENCH_MIXES`; the demo is above): one
    item each, all 52 prompts."""
    from probe.pipeline.perf import demo_prompts

    every = demo_prompts(1, 1, mix)  # short177 has 12 items whatever is asked
    prompts = [p for p in every if p.item_id == every[0].item_id]
    rendered, letters = render_prompts(tiny.tokenizer, prompts, LETTERS, loaded_settings(tiny), "tiny")
    assert len(rendered) == 52
    eager, _ = _letters(tiny, rendered, letters)
    fast, _ = _letters(tiny, rendered, letters, fast_path=True)
    assert _gap(fast, eager) <= EXACT


def test_ccd_ten_options(tiny: LoadedModel, tmp_path: Path) -> None:
    path = write_json_file(tmp_path / "ccd.json", ccd_items(3))
    bench = prepare({"kind": "ccd", "path": str(path)}, False)
    letters10 = tuple("ABCDEFGHIJ")
    rendered, letters = render_prompts(tiny.tokenizer, bench.prompts[:30], letters10, loaded_settings(tiny), "tiny")
    eager, _ = _letters(tiny, rendered, letters)
    fast, _ = _letters(tiny, rendered, letters, fast_path=True)
    assert len(next(iter(fast.values())).letter_logprobs) == 10
    assert _gap(fast, eager) <= EXACT


def test_text_scores_within_1e5_of_the_eager_path(tiny: LoadedModel) -> None:
    rendered, _ = _demo(tiny, 1)
    texts = ['bread"}', 'rice porridge with tea"}', 'eggs"}', "noodles and soup"]
    encoded = [np.array(tiny.tokenizer.encode(t, add_special_tokens=False)) for t in texts]
    requests = [TextRequest(r, tuple(encoded[(n + k) % 4] for k in range(4))) for n, r in enumerate(rendered[:24])]

    def score(**kw) -> tuple[dict[int, np.ndarray], object]:
        scorer = HFScorer(tiny.model, HFBackendSpec(device="cpu", **kw)).texts()
        return {s.prompt_id: np.array(s.logprobs) for b in scorer.score(requests) for s in b}, scorer

    eager, _ = score()
    fast, scorer = score(fast_path=True)
    assert scorer.fast is not None
    assert max(float(np.abs(fast[k] - eager[k]).max()) for k in eager) <= EXACT
    assert scorer.stats.head_check["max_token_gap"] <= EXACT


def test_a_nonfinite_weight_stops_the_fast_path_at_the_head_check(tmp_path_factory: pytest.TempPathFactory) -> None:
    os.environ["PROBE_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    loaded = load_model(ModelSpec(name="tiny", kind="instruct", source="tiny", tiny=TinySpec()), device="cpu")
    rendered, letters = _demo(loaded, 1)
    scorer = HFScorer(loaded.model, HFBackendSpec(device="cpu", fast_path=True))
    with torch.no_grad():
        loaded.model.model.layers[0].mlp.up_proj.weight[0, 0] = float("inf")  # a view of the fused weight
    with pytest.raises(ProbeInputError, match=r"not finite \(NaN or \+inf\)"):
        list(scorer.score(rendered, letters))


def test_eager_attention_keeps_the_eager_path(tmp_path_factory: pytest.TempPathFactory) -> None:
    os.environ["PROBE_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    loaded = load_model(ModelSpec(name="tiny", kind="instruct", source="tiny", tiny=TinySpec()), device="cpu")
    loaded.model.config._attn_implementation = "eager"
    assert FastLayers.of(loaded.model.get_decoder()) is None


def test_off_by_default_and_recorded_only_when_on() -> None:
    assert HFBackendSpec().fast_path is False
    assert "fast_path" not in backend_record(HFBackendSpec())  # runs stored before keep their key
    assert backend_record(HFBackendSpec(fast_path=True))["fast_path"] is True


def test_the_benchmark_times_every_step(tiny: LoadedModel) -> None:
    """`bench_scoring.py --fast-steps`: each step of `FAST_STEPS` timed on every pass, per round."""
    from probe.pipeline.perf import FAST_STEPS, step_seconds

    rendered, letters = _demo(tiny, 1)
    rounds = step_seconds(tiny.model, rendered[:12], letters, 2)
    assert len(rounds) == 2 and all(list(r) == list(FAST_STEPS) and min(r.values()) > 0 for r in rounds)


def test_packed_products_equal_the_plain_products(tiny: LoadedModel) -> None:
    """The packed (oneDNN) products against the plain fused ones and the eager path."""
    from probe.backends.fastpass import FastSteps

    rendered, letters = _demo(tiny, 1)
    eager, _ = _letters(tiny, rendered, letters)
    by_step = {}
    for packed in (False, True):
        scorer = HFScorer(tiny.model, HFBackendSpec(device="cpu", fast_path=True),
                          fast_steps=FastSteps(packed_products=packed))
        assert scorer._fast is not None and scorer._fast.packed == (packed and torch.backends.mkldnn.is_available())
        by_step[packed] = {s.prompt_id: s for batch in scorer.score(rendered, letters) for s in batch}
    assert _gap(by_step[True], by_step[False]) <= EXACT
    assert max(_gap(by_step[p], eager) for p in by_step) <= EXACT


def test_a_packed_product_is_the_linear_product() -> None:
    from probe.backends.fastpass import pack, packed_products_available, product

    w, x, b = torch.randn(96, 64), torch.randn(3, 7, 64), torch.randn(96)
    assert not packed_products_available(w.double())  # float32 only
    if not packed_products_available(w):
        pytest.skip("torch without oneDNN")
    got = product(x, w, pack(w), b)
    assert got.shape == (3, 7, 96)
    torch.testing.assert_close(got, torch.nn.functional.linear(x, w, b), rtol=1e-5, atol=1e-5)


def test_gemm_rates_of_both_products() -> None:
    """The GEMM rates behind the benchmark's limits: torch's default product, and oneDNN's on a
    packed weight (NaN without oneDNN)."""
    from probe.pipeline.perf import gemm_peak_flops

    assert gemm_peak_flops(seconds=0.02, size=128) > 0
    packed = gemm_peak_flops(seconds=0.02, size=128, packed=True)
    assert packed > 0 if torch.backends.mkldnn.is_available() else np.isnan(packed)
