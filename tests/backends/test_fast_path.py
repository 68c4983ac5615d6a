"""`backend.fast_path`: fused projections, the last layer only where read, grouped-query attention
without copies, products on packed weights. Judged against a float64 forward of the same model
(`probe.backends.reference`): no farther from it than the eager path by the default rule (max and
mean, 1.5×) on letters and texts (the demo, the benchmark's item mixes, CCD's 10 options, Llama
and Gemma 3 with sliding windows), within 1e-5 nats of the eager path, checked against the
model's own forward, and on by default."""

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
from probe.backends.reference import Deviation, float64_model, meets_default_rule, reference_letters, reference_texts
from probe.backends.specs import HFBackendSpec, backend_record
from probe.errors import ProbeInputError
from probe.models import LoadedModel, ModelSpec, load_model
from probe.models.tiny import TinySpec
from probe.prompts.render import render_prompts
from probe.types import RenderedPrompt

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

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


@pytest.fixture(scope="module")
def tiny64(tiny: LoadedModel):
    """The tiny model in float64: the reference every path is judged against."""
    model = float64_model(tiny.model)
    assert next(model.parameters()).dtype == torch.float64 and tiny.model.dtype == torch.float32
    return model


def _rule(tiny64, rendered, letters, eager: dict, fast: dict) -> tuple[Deviation, Deviation]:
    """Both paths' deviations from the float64 reference; the fast path must meet the default
    rule against the eager path, and the eager path be a float32 approximation of it."""
    ref = reference_letters(tiny64, rendered, letters)
    order = [r.prompt.prompt_id for r in rendered]
    dev = {name: Deviation.of(np.array([got[k].letter_logprobs for k in order]), ref)
           for name, got in (("eager", eager), ("fast", fast))}
    assert 0 < dev["eager"].max < 1e-4  # a float32 path: close to float64, not equal to it
    assert meets_default_rule(dev["fast"], dev["eager"])
    return dev["eager"], dev["fast"]


def _gap(a: dict, b: dict) -> float:
    assert sorted(a) == sorted(b)
    return max(float(np.abs(np.array(a[k].letter_logprobs) - np.array(b[k].letter_logprobs)).max()) for k in a)


def test_letters_meet_the_float64_rule_on_the_demo(tiny: LoadedModel, tiny64) -> None:
    rendered, letters = _demo(tiny, 2)
    eager, _ = _letters(tiny, rendered, letters, fast_path=False)
    fast, scorer = _letters(tiny, rendered, letters)  # the default
    assert scorer._fast is not None  # the fast path ran, not a fallback
    _rule(tiny64, rendered, letters, eager, fast)
    assert scorer._fast.packed == torch.backends.mkldnn.is_available()  # oneDNN's products on CPU
    assert _gap(fast, eager) <= EXACT
    assert all(fast[k].argmax_token_id == eager[k].argmax_token_id for k in eager)
    assert scorer.stats.head_check["max_letter_gap"] <= EXACT  # checked against model(input_ids)
    # small passes: many chunks, one-row passes, passes where no prompt ends
    few, _ = _letters(tiny, rendered, letters, fast_path=True, batch_tokens=300, max_batch_size=3)
    assert _gap(few, eager) <= EXACT
    # the fused weights are views: the eager path reads the same numbers after fusing, bit for bit
    again, _ = _letters(tiny, rendered, letters, fast_path=False)
    assert all(again[k].letter_logprobs == eager[k].letter_logprobs for k in eager)


@pytest.mark.parametrize("mix", ["short", "long", "short177"])
def test_letters_meet_the_float64_rule_on_every_item_mix(tiny: LoadedModel, tiny64, mix: str) -> None:
    """The benchmark's item mixes (`probe.benches.disco.perf.BENCH_MIXES`; the demo is above): one
    item each, all 52 prompts."""
    from probe.benches.disco.perf import demo_prompts

    every = demo_prompts(1, 1, mix)  # short177 has 12 items whatever is asked
    prompts = [p for p in every if p.item_id == every[0].item_id]
    rendered, letters = render_prompts(tiny.tokenizer, prompts, LETTERS, loaded_settings(tiny), "tiny")
    assert len(rendered) == 52
    eager, _ = _letters(tiny, rendered, letters, fast_path=False)
    fast, _ = _letters(tiny, rendered, letters, fast_path=True)
    assert _gap(fast, eager) <= EXACT
    _rule(tiny64, rendered, letters, eager, fast)


def test_ccd_ten_options(tiny: LoadedModel, tiny64, tmp_path: Path) -> None:
    path = write_json_file(tmp_path / "ccd.json", ccd_items(3))
    bench = prepare({"kind": "ccd", "path": str(path)}, False)
    letters10 = tuple("ABCDEFGHIJ")
    rendered, letters = render_prompts(tiny.tokenizer, bench.prompts[:30], letters10, loaded_settings(tiny), "tiny")
    eager, _ = _letters(tiny, rendered, letters, fast_path=False)
    fast, _ = _letters(tiny, rendered, letters, fast_path=True)
    assert len(next(iter(fast.values())).letter_logprobs) == 10
    assert _gap(fast, eager) <= EXACT
    _rule(tiny64, rendered, letters, eager, fast)


def test_text_scores_meet_the_float64_rule(tiny: LoadedModel, tiny64) -> None:
    rendered, _ = _demo(tiny, 1)
    texts = ['bread"}', 'rice porridge with tea"}', 'eggs"}', "noodles and soup"]
    encoded = [np.array(tiny.tokenizer.encode(t, add_special_tokens=False)) for t in texts]
    requests = [TextRequest(r, tuple(encoded[(n + k) % 4] for k in range(4))) for n, r in enumerate(rendered[:24])]

    def score(**kw) -> tuple[dict[int, np.ndarray], object]:
        scorer = HFScorer(tiny.model, HFBackendSpec(device="cpu", **kw)).texts()
        return {s.prompt_id: np.array(s.logprobs) for b in scorer.score(requests) for s in b}, scorer

    eager, _ = score(fast_path=False)
    fast, scorer = score()
    assert scorer.fast is not None and scorer.stats.path == ("fast+packed" if scorer.fast.packed else "fast")
    assert max(float(np.abs(fast[k] - eager[k]).max()) for k in eager) <= EXACT
    ref = reference_texts(tiny64, requests)
    order = [r.prompt.prompt.prompt_id for r in requests]
    dev = {name: Deviation.of(np.array([got[k] for k in order]), ref) for name, got in (("eager", eager), ("fast", fast))}
    assert 0 < dev["eager"].max < 1e-4 and meets_default_rule(dev["fast"], dev["eager"])
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
    # the default falls back without a word beyond the manifest's backend.path
    assert HFScorer(loaded.model, HFBackendSpec(device="cpu")).stats.path == "eager"


def test_auto_by_default_and_the_eager_path_keeps_the_old_key() -> None:
    assert HFBackendSpec().fast_path == "auto"
    assert backend_record(HFBackendSpec())["fast_path"] == "auto"
    assert backend_record(HFBackendSpec(fast_path=True))["fast_path"] is True  # as runs that opted in have it
    # fast_path=false computes what every run stored before computed by default, under the key they have
    assert "fast_path" not in backend_record(HFBackendSpec(fast_path=False))


def test_the_benchmark_times_every_step(tiny: LoadedModel) -> None:
    """`bench_scoring.py --fast-steps`: each step of `FAST_STEPS` timed on every pass, per round."""
    from probe.benches.disco.perf import FAST_STEPS, step_seconds

    rendered, letters = _demo(tiny, 1)
    rounds = step_seconds(tiny.model, rendered[:12], letters, 2)
    assert len(rounds) == 2 and all(list(r) == list(FAST_STEPS) and min(r.values()) > 0 for r in rounds)


def test_packed_products_equal_the_plain_products(tiny: LoadedModel) -> None:
    """The packed (oneDNN) products against the plain fused ones and the eager path."""
    from probe.backends.fastpass import FastSteps

    rendered, letters = _demo(tiny, 1)
    eager, _ = _letters(tiny, rendered, letters, fast_path=False)
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
    from probe.benches.disco.perf import gemm_peak_flops

    assert gemm_peak_flops(seconds=0.02, size=128) > 0
    packed = gemm_peak_flops(seconds=0.02, size=128, packed=True)
    assert packed > 0 if torch.backends.mkldnn.is_available() else np.isnan(packed)


def test_the_default_rule_by_hand() -> None:
    """Deviations and the rule on hand-computed numbers: max and mean, each within 1.5× (or the floor)."""
    ref = np.array([[-1.0, -2.0], [-3.0, -4.0]])
    dev = Deviation.of(ref + np.array([[1e-4, -3e-4], [0.0, 0.0]]), ref)
    assert dev.n == 4 and dev.max == pytest.approx(3e-4) and dev.mean == pytest.approx(1e-4)
    eager = Deviation(max=2e-4, mean=1e-4, n=4)
    assert meets_default_rule(Deviation(3e-4, 1.5e-4, 4), eager)  # exactly 1.5×
    assert not meets_default_rule(Deviation(3.1e-4, 1e-4, 4), eager)  # max over
    assert not meets_default_rule(Deviation(2e-4, 1.6e-4, 4), eager)  # mean over
    assert meets_default_rule(Deviation(1.9e-5, 1e-5, 4), Deviation(1e-7, 1e-8, 4))  # under the floor
    with pytest.raises(ValueError, match="shapes differ"):
        Deviation.of(ref[:1], ref)


def test_the_manifest_names_the_path_older_runs_included() -> None:
    """`backend.path` as written, and what an older manifest's backend block implies."""
    from types import SimpleNamespace

    from probe.report.paired_runs import scoring_path_note
    from probe.results.manifest import Manifest

    def path(backend: dict) -> str | None:
        return Manifest.from_json({"backend": backend}).backend.scoring_path

    assert path({"name": "hf", "fast_path": True, "path": "fast+packed"}) == "fast+packed"
    assert path({"name": "hf", "fast_path": True, "path": "eager"}) == "eager"  # a fallback, as it ran
    assert path({"name": "hf"}) == "eager"  # stored before the fast path: eager
    assert path({"name": "hf", "fast_path": True}) == "fast"  # opted in before backend.path was recorded
    assert path({"name": "vllm"}) is None

    def run(backend: dict) -> SimpleNamespace:
        return SimpleNamespace(manifest=Manifest.from_json({"backend": backend}))

    note = scoring_path_note(run({"name": "hf", "path": "fast+packed"}), run({"name": "hf"}))
    assert note is not None and "\n" not in note and "fast+packed" in note and "eager" in note
    assert scoring_path_note(run({"name": "hf"}), run({"name": "hf", "path": "eager"})) is None
    assert scoring_path_note(run({"name": "hf"}), run({"name": "vllm"})) is None


def test_the_scorer_records_the_path_it_runs(tiny: LoadedModel, tiny64) -> None:
    """`auto` (the default) runs the fast path where its packed products apply (CPU, float32) and
    the eager path elsewhere (here a float64 model), naming it in `stats.path` only."""
    packed = torch.backends.mkldnn.is_available()
    assert HFScorer(tiny.model, HFBackendSpec(device="cpu")).stats.path == ("fast+packed" if packed else "eager")
    assert HFScorer(tiny.model, HFBackendSpec(device="cpu", fast_path=False)).stats.path == "eager"
    assert HFScorer(tiny64, HFBackendSpec(device="cpu")).stats.path == "eager"  # no packed products in float64
    assert HFScorer(tiny64, HFBackendSpec(device="cpu", fast_path=True)).stats.path == "fast"  # asked for: plain products


def test_the_benchmark_reference_rows_and_verdicts() -> None:
    """`bench_scoring.py`'s float64 engine: which prompts it scores, and the table's verdicts on planted gaps."""
    from probe.benches.disco.perf import deviation_lines, reference_rows

    assert reference_rows(10, 4).tolist() == [0, 3, 6, 9]
    assert reference_rows(5, 0).tolist() == reference_rows(5, 9).tolist() == [0, 1, 2, 3, 4]
    ref = np.zeros((3, 2))
    eager, fast, bad = (np.zeros((6, 2)) for _ in range(3))
    rows = np.array([0, 2, 4])
    eager[0, 0], fast[2, 1], bad[4, 0] = 4e-5, 5e-5, 1e-3  # bad: 25× eager's max, over the floor
    eager[:] += 1e-6
    lines = deviation_lines({"probe": eager, "probe-fast": fast, "bad": bad}, ref, rows, "probe")
    assert lines[0].startswith("float64 reference on 3 prompts (6 values)")
    table = {line.split(" | ")[0][2:]: line.split(" | ") for line in lines if line.startswith("| ") and "---" not in line}
    assert table["probe"][1] == "4.10e-05" and table["probe"][-1] == "– |"
    assert table["probe-fast"][3] == "1.22×" and table["probe-fast"][-1] == "meets |"
    assert table["bad"][-1] == "FAILS |"
