"""Helpers for the scoring benchmark (`scripts/bench_scoring.py`): fixed prompt sets, timing,
peak memory, and model FLOPs for MFU. Kept in the package so the script stays thin; in DiSCo's
package because its prompt mixes are DiSCo-format prompts built with DiSCo's loaders."""

from __future__ import annotations

import resource
import sys
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from transformers import Gemma3TextConfig

from probe.backends.batching import BackendStats
from probe.backends.continuations import TextRequest
from probe.backends.fastpass import FastSteps, pack, packed_products_available, product
from probe.backends.hf import HFScorer
from probe.backends.reference import Deviation, default_rule_text, meets_default_rule
from probe.backends.roofline import rate
from probe.backends.specs import HFBackendSpec
from probe.backends.treekv import KVStore
from probe.backends.units import score_chunks
from probe.benches.disco.data import (
    DiscoSpec,
    build_prompts,
    load_items,
    resolve_source,
)
from probe.types import Item, LetterIds, Prompt, RenderedPrompt


MIXES: tuple[str, ...] = ("demo", "short", "long")
"""Item mixes of the scoring benchmark, by prompt length: the demo as published; `short`, every
option and context fact cut to its first three words (short prompts, where the chat header
and the question are most of each prompt); `long`, the question preceded by a background
passage of ~300 words made of the item's own context facts (a long shared context)."""
BENCH_MIXES: tuple[str, ...] = (*MIXES, "short177")
"""`MIXES` and `short177`: always the first 12 items, every option and context fact cut to its
first four words (~175 tokens per prompt with SmolLM2's template): the shape of the
side-by-side lm-eval measurement of 12 items at ~177 tokens per prompt."""
MIX_ITEMS: dict[str, int] = {"short177": 12}
"""Mixes with a fixed number of items (the others take the caller's)."""


def demo_items(n_items: int | None = None, repeat: int = 1, mix: str = "demo") -> list[Item]:
    """The demo bench's items, optionally the first `n_items`, in one of `MIXES`, `repeat`
    times over with distinct item ids."""
    if mix not in BENCH_MIXES:
        raise ValueError(f"mix {mix!r}: expected one of {BENCH_MIXES}")
    demo = load_items(resolve_source(DiscoSpec(name="demo", packaged="demo_disco.csv")))
    n_items = MIX_ITEMS.get(mix, n_items)
    items = [_mixed(item, mix) for item in (demo[:n_items] if n_items else demo)]
    return synthetic_items(items, len(items) * repeat)


def _mixed(item: Item, mix: str) -> Item:
    if mix in ("short", "short177"):
        words = 3 if mix == "short" else 4
        cut = lambda text: " ".join((text or "").split()[:words])  # noqa: E731
        return replace(item, options=tuple(replace(o, text=cut(o.text), context=cut(o.context)) for o in item.options))
    if mix == "long":
        facts = " ".join(o.context or o.text for o in item.options).split()
        passage = " ".join((facts * (300 // max(len(facts), 1) + 1))[:300])
        return replace(item, question=f"Background: {passage}\n{item.question}")
    return item


def demo_prompts(n_items: int | None = None, repeat: int = 1, mix: str = "demo") -> list[Prompt]:
    """The demo bench's DiSCo-protocol prompts (all conditions and rotations), optionally for
    the first `n_items` items, in one of `MIXES`, and `repeat` times over with distinct item and
    prompt ids."""
    return build_prompts(demo_items(n_items, repeat, mix))


def synthetic_items(base: list[Item], n: int) -> list[Item]:
    """`n` items cycling through `base`, renamed so every item id (and prefix group) is unique.
    Repeats also differ in text (the question gains `(set r)`): the trie shares identical
    prompts, so verbatim copies would cost nothing and inflate throughput and predictions."""
    out = []
    for i in range(n):
        item, r = base[i % len(base)], i // len(base)
        question = item.question if r == 0 else f"{item.question} (set {r + 1})"
        out.append(replace(item, item_id=f"{item.item_id}-r{r}", question=question))
    return out


@dataclass
class Timing:
    engine: str
    n_prompts: int
    seconds: float
    prompt_tokens: int
    tokens_computed: int
    peak_rss_mb: float
    unique_tokens: int = 0
    """Nodes of the prompts' token trie (the least work exact scoring can do)."""
    padded_tokens: int = 0
    """Token slots of the forward passes, padding included (0 when not measured)."""
    passes: PassShares | None = None
    cpu_seconds: float = 0.0
    """This process's CPU time over the same span as `seconds` (steadier than wall time on a
    shared machine; with n threads busy it is up to n × `seconds`)."""
    setup_seconds: float = 0.0
    """Building the scorer before the timed span (`backend.fast_path`: fusing the weights; no
    compilation happens on either path)."""

    @property
    def prompts_per_s(self) -> float:
        return self.n_prompts / self.seconds


@dataclass(frozen=True)
class PassShares:
    """How many passes held one row, and their share of the tokens and forward time: what
    merging them could win at most (were they as fast per token as the rest, the time saved
    would be their time share minus their token share)."""

    n_passes: int
    one_row: int
    one_row_token_share: float
    one_row_time_share: float

    @classmethod
    def of(cls, stats: BackendStats) -> PassShares:
        """The shares of `stats`; NaN where no pass ran (no work has no share, and 0% would
        read as a measurement)."""
        tokens, seconds = sum(stats.tokens_by_rows.values()), sum(stats.seconds_by_rows.values())
        return cls(stats.n_batches, stats.batch_sizes.get(1, 0),
                   stats.tokens_by_rows.get(1, 0) / tokens if tokens else float("nan"),
                   stats.seconds_by_rows.get(1, 0.0) / seconds if seconds else float("nan"))


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1 << 20) if sys.platform == "darwin" else peak / 1024


def score_with_probe(
    model: Any, rendered: list[RenderedPrompt], letters: LetterIds, prefix_reuse: bool,
    batch_tokens: int, max_batch_size: int, fast_path: bool | str | FastSteps = False,
) -> tuple[np.ndarray, Timing]:
    """Letter log-probs `[prompt, letter]` in `rendered` order, and the wall time of scoring
    (the head check included, as a run pays it; building the scorer is `setup_seconds`).
    `fast_path`: as `backend.fast_path` (false, true, `auto`), or the fast path's `FastSteps`."""
    s0 = time.perf_counter()
    steps = fast_path if isinstance(fast_path, FastSteps) else FastSteps()
    setting = True if isinstance(fast_path, FastSteps) else fast_path
    scorer = HFScorer(model, HFBackendSpec(batch_tokens=batch_tokens, max_batch_size=max_batch_size,
                                           prefix_reuse=prefix_reuse, fast_path=setting), fast_steps=steps)
    setup = time.perf_counter() - s0
    t0, c0 = time.perf_counter(), time.process_time()
    got = {s.prompt_id: s.letter_logprobs for batch in scorer.score(rendered, letters) for s in batch}
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    lp = np.array([got[r.prompt.prompt_id] for r in rendered], dtype=np.float64)
    name = ("probe" if prefix_reuse else "probe-noprefix") + ("-fast" if scorer.stats.path != "eager" else "")
    stats = scorer.stats
    return lp, Timing(name, len(rendered), seconds, stats.prompt_tokens, stats.tokens_computed, peak_rss_mb(),
                      stats.unique_tokens, stats.padded_tokens, PassShares.of(stats), cpu, setup)


def score_texts_with_probe(
    model: Any, requests: list[TextRequest], prefix_reuse: bool, batch_tokens: int, max_batch_size: int,
    fast_path: bool = False,
) -> tuple[np.ndarray, Timing]:
    """Answer-text log-probs `[request, option]` (sums over each continuation's tokens) in
    `requests` order, and the wall time of scoring (the scorer's once-per-run exactness check
    included, as a run pays it)."""
    s0 = time.perf_counter()
    scorer = HFScorer(model, HFBackendSpec(batch_tokens=batch_tokens, max_batch_size=max_batch_size,
                                           prefix_reuse=prefix_reuse, fast_path=fast_path)).texts()
    setup = time.perf_counter() - s0
    t0, c0 = time.perf_counter(), time.process_time()
    got = {s.prompt_id: s.logprobs for batch in scorer.score(requests) for s in batch}
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    lp = np.array([got[r.prompt.prompt.prompt_id] for r in requests], dtype=np.float64)
    stats = scorer.stats
    name = ("probe" if prefix_reuse else "probe-noprefix") + ("-fast" if fast_path else "")
    return lp, Timing(name, len(requests), seconds, stats.prompt_tokens, stats.tokens_computed, peak_rss_mb(),
                      stats.unique_tokens, stats.padded_tokens, PassShares.of(stats), cpu, setup)


FAST_STEPS: dict[str, FastSteps | None] = {
    "eager": None,
    "fused projections": FastSteps(shared_kv_heads=False, last_layer_reads=False, packed_products=False),
    "+ shared KV heads": FastSteps(last_layer_reads=False, packed_products=False),
    "+ last layer where read": FastSteps(packed_products=False),
    "+ packed products": FastSteps(),
}
"""The fast path's steps, each on top of the ones before (None: the eager path)."""


GPU_STEPS: dict[str, FastSteps | None] = {
    "eager": None,
    "fused projections": FastSteps(shared_kv_heads=False, last_layer_reads=False, packed_products=False),
    "+ last layer where read": FastSteps(),
}
"""The fast path's steps that apply on CUDA, each on top of the one before (`bench_scoring.py
--gpu`): grouped-query heads are repeated and products are plain there whatever `FastSteps`
asks (`FastLayers.of`), so the last row is `backend.fast_path=true` there."""


def reference_rows(n_prompts: int, n_reference: int) -> np.ndarray:
    """Rows of the prompts the float64 reference scores: `n_reference` spread evenly over
    `n_prompts` (all of them when `n_reference` is 0 or more than there are)."""
    if n_reference <= 0 or n_reference >= n_prompts:
        return np.arange(n_prompts)
    return np.unique(np.linspace(0, n_prompts - 1, n_reference).round().astype(int))


def deviation_lines(logprobs: dict[str, np.ndarray], reference: np.ndarray, rows: np.ndarray,
                    baseline: str) -> list[str]:
    """A markdown table: each engine's max and mean |Δ log p| against the float64 reference on
    `rows`, as multiples of `baseline`'s (the eager path), and whether it meets the default rule
    against it (`probe.backends.reference.meets_default_rule`)."""
    devs = {name: Deviation.of(lp[rows], reference) for name, lp in logprobs.items()}
    base = devs[baseline]
    lines = [f"float64 reference on {len(rows)} prompts ({base.n} values); the default rule: max and mean each "
             f"{default_rule_text(baseline)}", "",
             "| engine | max \\|Δ log p\\| vs float64 | mean \\|Δ log p\\| vs float64 | max / eager's | mean / eager's "
             "| default rule |", "|---|---|---|---|---|---|"]
    for name, d in devs.items():
        ratio = f"{d.max / base.max:.2f}× | {d.mean / base.mean:.2f}×" if base.max and base.mean else "– | –"
        verdict = "–" if name == baseline else "meets" if meets_default_rule(d, base) else "FAILS"
        lines.append(f"| {name} | {d.max:.2e} | {d.mean:.2e} | {ratio} | {verdict} |")
    return lines


def step_seconds(model: Any, rendered: list[RenderedPrompt], letters: LetterIds, rounds: int) -> list[dict[str, float]]:
    """CPU seconds of each of `FAST_STEPS` over the prompts' passes, per round.

    The steps run pass by pass in turn (A B C D on one pass, D C B A on the next), so a machine
    whose speed drifts — other jobs on a shared CPU — slows every step alike; a pass's ancestors'
    KV comes from the last step run (they agree within 1e-5 nats)."""
    import torch

    scorers = {name: HFScorer(model, HFBackendSpec(fast_path=steps is not None),
                              fast_steps=steps or FastSteps()) for name, steps in FAST_STEPS.items()}
    letter_ids = torch.tensor(letters.ids)
    names = list(scorers)
    out = []
    for r in range(rounds):
        seconds = dict.fromkeys(names, 0.0)
        for chunk in score_chunks(rendered, HFBackendSpec(), None):
            store = KVStore.for_chunk(chunk)
            for k, step in enumerate(chunk.steps):
                for name in names if (r + k) % 2 == 0 else names[::-1]:
                    c0 = time.process_time()
                    scorers[name].forward_pass(chunk, step, store, letter_ids)  # one pass, as scoring runs it
                    seconds[name] += time.process_time() - c0
                store.ran(chunk, step)
        out.append(seconds)
    return out


def gemm_peak_flops(seconds: float = 2.0, size: int = 2048, clock: Any = time.perf_counter,
                    packed: bool = False) -> float:
    """Float32 FLOP/s of a large matrix product on this process's threads: the practical peak
    a dense forward pass can approach on a CPU (vendor peaks assume clocks and units that a
    shared 2-core machine does not sustain). `clock=time.process_time` measures it in this
    process's CPU time (one thread: what other jobs on a shared machine leave it). `packed`:
    oneDNN's product on a packed weight (the fast path's products), not torch's default BLAS;
    NaN where torch has no oneDNN."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    if packed and not packed_products_available(b):
        return float("nan")
    weight = pack(b) if packed else None
    flops = 2 * size**3
    return rate(lambda: product(a, b, weight), flops, seconds, clock)


def model_gemm_flops(config: Any, rows: int = 4096, seconds: float = 2.0, clock: Any = time.perf_counter,
                     packed: bool = False) -> float:
    """Float32 FLOP/s of one decoder layer's matrix products at the model's own shapes (Q, K, V,
    O, gate, up, down) on `rows` token rows, this process's threads: the rate a forward pass of
    this model can reach when every pass is `rows` tokens wide. It can differ from the 2048²
    rate of `gemm_peak_flops` for a small model, whose products have an inner dimension of a few
    hundred; `rows` is ours to choose, the other two dimensions are the model's. `packed`: as in
    `gemm_peak_flops`."""
    import torch

    h = config.hidden_size
    head_dim = getattr(config, "head_dim", None) or h // config.num_attention_heads
    q, kv, ffn = config.num_attention_heads * head_dim, config.num_key_value_heads * head_dim, config.intermediate_size
    shapes = [(h, q), (h, kv), (h, kv), (q, h), (h, ffn), (h, ffn), (ffn, h)]
    inputs = {k: torch.randn(rows, k) for k in {k for k, _ in shapes}}
    weights = [torch.randn(n, k) for k, n in shapes]
    if packed and not packed_products_available(weights[0]):
        return float("nan")
    packs = [pack(w) if packed else None for w in weights]
    flops = sum(2 * rows * k * n for k, n in shapes)

    def layer() -> None:
        for (k, _), w, p in zip(shapes, weights, packs):
            product(inputs[k], w, p)

    return rate(layer, flops, seconds, clock)


def gemma3_12b_text_config() -> Any:
    """The Gemma 3 12B text decoder's architecture (published config), for random-weight runs."""
    layers = 48
    return Gemma3TextConfig(
        vocab_size=262208, hidden_size=3840, intermediate_size=15360, num_hidden_layers=layers,
        num_attention_heads=16, num_key_value_heads=8, head_dim=256, query_pre_attn_scalar=256,
        sliding_window=1024, max_position_embeddings=131072, rope_theta=1_000_000.0,
        layer_types=["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(layers)],
    )


def forward_flops(config: Any, tokens: int, mean_context: float, head_rows: int) -> float:
    """Model FLOPs of a forward pass: 2 × non-embedding params per token, attention
    `4 × layers × heads × head_dim × context` per token, and the LM head for `head_rows` rows."""
    h, l = config.hidden_size, config.num_hidden_layers
    head_dim = getattr(config, "head_dim", None) or h // config.num_attention_heads
    q = config.num_attention_heads * head_dim
    kv = config.num_key_value_heads * head_dim
    per_layer = h * (q + 2 * kv) + q * h + 3 * h * config.intermediate_size
    attention = 4 * l * config.num_attention_heads * head_dim * mean_context
    return 2 * l * per_layer * tokens + attention * tokens + 2 * h * config.vocab_size * head_rows
