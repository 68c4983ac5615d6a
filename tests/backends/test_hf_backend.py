"""HF backend exactness on tiny deterministic models: batched = one at a time = the model's own forward."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import prepare, tiny_model

from probe.backends.batching import plan_batches
from probe.backends.hf import HFScorer
from probe.backends.specs import HFBackendSpec
from probe.backends.trie import plan_trie, unique_tokens
from probe.models import LoadedModel, ModelSpec, load_model
from probe.models.tiny import TinySpec, build_model, build_tokenizer
from probe.prompts.render import render_prompts
from probe.types import LetterIds, RenderedPrompt

TOL = 1e-4  # nats, fp32 (docs/concepts/exact-distributions.md#what-always-holds)


def _demo_prompts(n_items: int):
    bench = prepare({"name": "demo", "kind": "disco", "packaged": "demo_disco.csv"})
    keep = {i.item_id for i in bench.items[:n_items]}
    return [p for p in bench.prompts if p.item_id in keep]


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    spec, loaded = tiny_model(request.param, tmp_path_factory)
    rendered, letters = render_prompts(loaded.tokenizer, _demo_prompts(2), ("A", "B", "C", "D"),
                                       spec.render_settings(), spec.name)
    return loaded, rendered, letters


def _score(loaded: LoadedModel, rendered: list[RenderedPrompt], letters: LetterIds, **kw: int):
    scorer = HFScorer(loaded.model, HFBackendSpec(device="cpu", **kw))
    out = {s.prompt_id: s for batch in scorer.score(rendered, letters) for s in batch}
    assert sorted(out) == sorted(r.prompt.prompt_id for r in rendered)
    return out, scorer


@pytest.mark.parametrize("prefix_reuse", [True, False], ids=["prefix", "plain"])
def test_batched_equals_one_at_a_time(tiny, prefix_reuse: bool) -> None:
    loaded, rendered, letters = tiny
    batched, scorer = _score(loaded, rendered, letters, batch_tokens=1 << 20, max_batch_size=64,
                             prefix_reuse=prefix_reuse)
    single, _ = _score(loaded, rendered, letters, batch_tokens=1 << 20, max_batch_size=1, prefix_reuse=False)
    assert max(scorer.stats.batch_sizes) > 1  # really batched, with padding of mixed lengths
    a = np.array([batched[i].letter_logprobs for i in sorted(batched)])
    b = np.array([single[i].letter_logprobs for i in sorted(single)])
    assert np.abs(a - b).max() <= TOL
    assert [batched[i].greedy_valid for i in sorted(batched)] == [single[i].greedy_valid for i in sorted(single)]
    # letters are far from uniform, so agreement is not trivial
    assert np.ptp(a, axis=1).mean() > 0.05
    if prefix_reuse:  # each unique token of the prompt trie really was computed once
        assert scorer.stats.tokens_computed == unique_tokens(rendered) < 0.55 * sum(len(r.token_ids) for r in rendered)


def test_small_budgets_split_the_trie_into_many_chunks_and_passes(tiny) -> None:
    """Small budgets cut items into several chunks (each recomputing its shared ancestors) and
    waves into many passes of mixed starts; scores stay those of one prompt at a time."""
    loaded, rendered, letters = tiny
    mixed, scorer = _score(loaded, rendered, letters, batch_tokens=600, max_batch_size=6)
    single, _ = _score(loaded, rendered, letters, max_batch_size=1, prefix_reuse=False)
    chunks = plan_trie(rendered, 600, 6)
    assert len(chunks) > 4 and scorer.stats.n_batches > 20
    assert scorer.stats.tokens_computed == sum(c.unique_tokens for c in chunks) > unique_tokens(rendered)
    for i in single:
        assert np.abs(np.array(mixed[i].letter_logprobs) - np.array(single[i].letter_logprobs)).max() <= TOL


def test_each_unique_token_runs_once(tiny) -> None:
    """With room for a whole item per chunk, the model computes exactly the trie's nodes."""
    loaded, rendered, letters = tiny
    _, scorer = _score(loaded, rendered, letters, batch_tokens=1 << 20, max_batch_size=64)
    stats = scorer.stats
    assert stats.prompt_tokens == sum(len(r.token_ids) for r in rendered)
    assert stats.tokens_computed == stats.unique_tokens == unique_tokens(rendered) < 0.55 * stats.prompt_tokens
    assert stats.padded_tokens < 1.1 * stats.tokens_computed
    # the work and time by rows per pass add up to the totals (the benchmark's one-row shares)
    assert sum(stats.tokens_by_rows.values()) == stats.tokens_computed
    assert stats.tokens_by_rows.keys() == stats.seconds_by_rows.keys() == stats.batch_sizes.keys()
    assert sum(stats.seconds_by_rows.values()) == pytest.approx(stats.forward_s)


def test_duplicates_and_prompts_that_are_prefixes_of_others(tiny) -> None:
    """A prompt may end inside another's path (its node has children) and identical prompts
    share a node; each still gets the scores of its own forward."""
    loaded, rendered, letters = tiny
    base = rendered[0]
    ids = base.token_ids
    variants = [ids, ids, ids[:-3], np.concatenate([ids, ids[-5:]]), np.concatenate([ids[:-3], ids[:4]])]
    prompts = [RenderedPrompt(replace(base.prompt, prompt_id=k), "", v) for k, v in enumerate(variants)]
    got, scorer = _score(loaded, prompts, letters, batch_tokens=1 << 20, max_batch_size=64)
    ref, _ = _score(loaded, prompts, letters, max_batch_size=1, prefix_reuse=False)
    assert scorer.stats.tokens_computed == len(ids) + 5 + 4
    for k in ref:
        assert np.abs(np.array(got[k].letter_logprobs) - np.array(ref[k].letter_logprobs)).max() <= TOL
    assert got[0].letter_logprobs == got[1].letter_logprobs


def test_out_of_memory_halves_the_batch_with_identical_results(tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    loaded, rendered, letters = tiny
    reference, _ = _score(loaded, rendered, letters, batch_tokens=1 << 20, max_batch_size=64)
    scorer = HFScorer(loaded.model, HFBackendSpec(device="cpu", batch_tokens=1 << 20, max_batch_size=64))
    real_forward = scorer.forward_pass

    def tight_memory(chunk, rows, store, letter_ids):  # pretend anything above 10 rows does not fit
        if len(rows) > 10:
            raise torch.OutOfMemoryError("fake: CUDA out of memory")
        return real_forward(chunk, rows, store, letter_ids)

    monkeypatch.setattr(scorer, "forward_pass", tight_memory)
    got = {s.prompt_id: s.letter_logprobs for b in scorer.score(rendered, letters) for s in b}
    assert got.keys() == reference.keys()
    for i in got:
        assert np.abs(np.array(got[i]) - np.array(reference[i].letter_logprobs)).max() <= TOL
    assert scorer.stats.oom_splits >= 1 and max(scorer.stats.batch_sizes) <= 10


@torch.inference_mode()
def test_matches_the_models_own_forward(tiny) -> None:
    """Our decoder → gather → fp32 head (→ softcap) path equals `model(ids).logits` at the end."""
    loaded, rendered, letters = tiny
    scores, _ = _score(loaded, rendered, letters, batch_tokens=4096, max_batch_size=16)
    for r in rendered[::13]:
        logits = loaded.model(input_ids=torch.tensor([r.token_ids.tolist()])).logits[0, -1].float()
        ref = torch.log_softmax(logits, -1)[list(letters.ids)].numpy()
        assert np.abs(np.array(scores[r.prompt.prompt_id].letter_logprobs) - ref).max() <= TOL
        assert scores[r.prompt.prompt_id].greedy_valid == (int(logits.argmax()) in letters.ids)


def test_eager_attention_matches(tiny, tmp_path_factory: pytest.TempPathFactory) -> None:
    """`attn_implementation` is selectable; eager attention with prefix reuse gives the same scores."""
    loaded, rendered, letters = tiny
    arch = loaded.model.config.model_type
    spec = ModelSpec(name="eager", kind="instruct", source="tiny", attn_implementation="eager",
                     tiny=TinySpec(arch="gemma3" if arch == "gemma3_text" else "llama",
                                   num_layers=4 if arch == "gemma3_text" else 2))
    eager = load_model(spec, device="cpu")
    assert eager.info["attn_implementation"] == "eager"
    a, _ = _score(eager, rendered, letters, batch_tokens=1 << 20, max_batch_size=64)
    b, _ = _score(loaded, rendered, letters, max_batch_size=1, prefix_reuse=False)
    assert max(np.abs(np.array(a[i].letter_logprobs) - np.array(b[i].letter_logprobs)).max() for i in b) <= TOL


def test_gemma3_fixture_exercises_sliding_window_and_softcap(tiny) -> None:
    loaded, rendered, _ = tiny
    config = loaded.model.config
    if config.model_type != "gemma3_text":
        pytest.skip("llama fixture")
    assert "sliding_attention" in config.layer_types and config.final_logit_softcapping == 30.0
    assert min(len(r.token_ids) for r in rendered) > 4 * config.sliding_window
    # the option blocks (trie leaves) start beyond the window and span more than it
    leaves = [n for c in plan_trie(rendered, 1 << 20, 64) for n in c.nodes if not n.n_children]
    assert min(n.start for n in leaves) > config.sliding_window < min(len(n.tokens) for n in leaves)


def test_plan_batches_respects_budget_and_covers_all(tiny) -> None:
    _, rendered, _ = tiny
    batches = plan_batches(rendered, batch_tokens=2000, max_batch_size=8)
    ids = [r.prompt.prompt_id for b in batches for r in b]
    assert sorted(ids) == sorted(r.prompt.prompt_id for r in rendered)
    for b in batches:
        assert len(b) <= 8 and len(b) * max(len(r.token_ids) for r in b) <= max(2000, len(b[0].token_ids))


def test_tiny_build_is_deterministic() -> None:
    spec = TinySpec()
    tok1, tok2 = build_tokenizer(spec), build_tokenizer(spec)
    assert tok1.get_vocab() == tok2.get_vocab()
    m1, m2 = build_model(spec, len(tok1)), build_model(spec, len(tok2))
    for (k1, v1), (k2, v2) in zip(m1.state_dict().items(), m2.state_dict().items()):
        assert k1 == k2 and torch.equal(v1, v2)
    assert m1.config.head_dim == 32


def test_tiny_cache_dir_is_reused(tmp_path: Path) -> None:
    from probe.models.tiny import tiny_model_dir

    first = tiny_model_dir(TinySpec(), tmp_path)
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert tiny_model_dir(TinySpec(), tmp_path) == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp
    assert tiny_model_dir(TinySpec(seed=1), tmp_path) != first


@torch.inference_mode()
def test_gemma3_multimodal_wrapper() -> None:
    """`google/gemma-3-*-it` loads as Gemma3ForConditionalGeneration; scoring goes through its
    text decoder and must still equal the wrapper's own forward."""
    from transformers import (
        Gemma3Config,
        Gemma3ForConditionalGeneration,
        Gemma3TextConfig,
        SiglipVisionConfig,
    )

    from probe.types import Prompt

    torch.manual_seed(0)
    text = Gemma3TextConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                            num_attention_heads=2, num_key_value_heads=1, head_dim=32, sliding_window=8,
                            layer_types=["sliding_attention", "full_attention"], initializer_range=0.2)
    vision = SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                image_size=28, patch_size=14)
    model = Gemma3ForConditionalGeneration(Gemma3Config(
        text_config=text, vision_config=vision, mm_tokens_per_image=4, image_token_index=299,
        boi_token_index=297, eoi_token_index=298)).eval()
    rendered = [RenderedPrompt(Prompt(i, "i", "C0", None, 0, None, (0, 1), ("a", "b"), "m", "k"), "t",
                               tuple(range(2, 30 + 5 * i))) for i in range(3)]
    letters = LetterIds(("A", "B"), (5, 6))
    scorer = HFScorer(model, HFBackendSpec(device="cpu"))
    got = {s.prompt_id: s.letter_logprobs for b in scorer.score(rendered, letters) for s in b}
    for r in rendered:
        ref = torch.log_softmax(model(input_ids=torch.tensor([r.token_ids.tolist()])).logits[0, -1].float(), -1)[[5, 6]]
        assert np.abs(np.array(got[r.prompt.prompt_id]) - ref.numpy()).max() <= TOL


def test_kv_paths_are_kept_per_device_run_of_layers() -> None:
    """A model spread over GPUs keeps each layer's KV on its own device: paths are stacked per
    run of consecutive layers on one device, never across devices."""
    from probe.backends.treekv import _device_runs

    cpu, meta = torch.device("cpu"), torch.device("meta")
    assert _device_runs([cpu, cpu, meta, meta, cpu]) == [[0, 1], [2, 3], [4]]
    assert _device_runs([cpu] * 3) == [[0, 1, 2]]


@torch.inference_mode()
def test_pass_buffers_give_the_concatenating_cache_bit_for_bit(tiny) -> None:
    """Every pass of a chunk on the shared pass buffer (poisoned with NaN before each pass, as
    stale contents of an earlier pass would be) returns exactly the hidden states and kept
    paths of the same pass on transformers' concatenating cache (`right_aligned` + DynamicCache)."""
    from transformers import DynamicCache

    from probe.backends.treekv import KVStore, PassBuffers, decoder_and_cache_kw, run_pass

    loaded, rendered, _ = tiny
    decoder, cache_kw = decoder_and_cache_kw(loaded.model)
    chunk = plan_trie(rendered, 1 << 20, 6)[0]
    buffers = PassBuffers()
    new, old = KVStore.for_chunk(chunk, buffers=buffers), KVStore.for_chunk(chunk)

    def concatenating(store: KVStore):
        def pass_cache(paths, past, width):
            return DynamicCache(ddp_cache_data=store.right_aligned(paths, past))
        return pass_cache

    old.pass_cache = concatenating(old)  # the cache probe built before the pass buffers
    deep = 0
    for step in chunk.steps:
        for flat in buffers.flat.values():
            flat.fill_(float("nan"))
        h_new, last_new = run_pass(decoder, cache_kw, chunk, step, new)
        h_old, last_old = run_pass(decoder, cache_kw, chunk, step, old)
        assert torch.equal(h_new, h_old) and torch.equal(last_new, last_old)
        for i in step:
            if i in new.paths:
                assert all(torch.equal(a, b) for a, b in zip(new.paths[i], old.paths[i]))
        deep += max(chunk.nodes[i].start for i in step) > 0
        new.ran(chunk, step)
        old.ran(chunk, step)
    assert deep >= 3 and len(chunk.steps) > deep  # passes on ancestors, with rows of mixed starts
