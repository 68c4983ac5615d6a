"""The answer passes of a run: scoring the letters (streamed to disk with the lens and captured
activations) and generating answers (parsed, then judged), each planned with every prompt and
resumable from its parts; and the model facts the pipeline reads (layers, width)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from tqdm import tqdm

from probe.backends.base import Backend, Generator, PrefixCacheCounters, Scorer
from probe.models import cache_root
from probe.pipeline.context import RunContext
from probe.pipeline.judging import (
    VerdictCache,
    build_judge,
    check_error_rate,
    run_jobs,
    verdict_config,
)
from probe.prompts.tokenizer import Tokenizer
from probe.results import layout
from probe.results.generations import write_generations, write_judgements
from probe.results.mech import ActivationWriter
from probe.results.parts import PartStore
from probe.results.scores import ScoreWriter
from probe.types import LetterScore, RenderedPrompt

if TYPE_CHECKING:
    from transformers import PreTrainedModel


def generate_pass(ctx: RunContext, generator: Generator, own: Sequence[RenderedPrompt]) -> dict[str, Any]:
    """Decode the run's own prompts (planned with all of them), parse each text as the task says,
    store; then let the judge read them. Returns what the manifest notes about the judging
    (`verdict_cache_rejected`: cached verdicts not used, by reason; only when there were any)."""
    cfg, bench, rendered = ctx.config, ctx.bench, ctx.rendered
    task, by_id = cfg.bench.task, {r.prompt.prompt_id: r for r in rendered}
    store = PartStore(cfg.out_dir / layout.GENERATION_PARTS, task.tables.generations_schema)
    others = set(by_id) - {r.prompt.prompt_id for r in own}
    with tqdm(total=len(own), unit="prompt", desc="generating", disable=not cfg.progress) as bar:
        bar.update(len(store.done))
        for batch in generator.generate(rendered, set(store.done) | others):
            rows = [{"prompt_id": g.prompt_id, "text": g.text,
                     **task.tables.parse_generation(by_id[g.prompt_id], g.text, bench)} for g in batch]
            store.append(pa.Table.from_pylist(rows, schema=task.tables.generations_schema))  # one part per batch
            bar.update(len(batch))
    rows = store.read().to_pylist()
    write_generations(cfg.out_dir, rows, task.tables.generations_schema)
    jobs = task.judging.jobs(bench, rows)
    if cfg.judged and not jobs:  # nothing to ask (all rationales empty, an empty shard): an empty table
        write_judgements(cfg.out_dir, [], task.judging.schema)
    elif jobs and cfg.judged:
        shared = VerdictCache(cache_root() / "judgements", verdict_config(cfg))
        local = VerdictCache(cfg.out_dir / layout.JUDGEMENT_PARTS, verdict_config(cfg))
        verdicts = run_jobs(build_judge(cfg, ctx.loaded, generator), jobs, shared, local)
        write_judgements(cfg.out_dir, verdicts, task.judging.schema)
        check_error_rate(verdicts, cfg.judge.max_error_rate)
        rejected = shared.rejected + local.rejected
        if rejected:
            return {"verdict_cache_rejected": dict(sorted(rejected.items()))}
    return {}


@dataclass
class Writers:
    """Where a scoring pass streams its outputs."""

    scores: ScoreWriter
    activations: ActivationWriter | None = None

    def add(self, batch: Sequence[LetterScore]) -> None:
        # Activations first: once a prompt's scores are in a part, its row is already written.
        for s in batch:
            if self.activations is not None:
                assert s.activations is not None
                self.activations.add(s.prompt_id, s.activations)
        self.scores.add(batch)

    def close(self) -> None:
        self.scores.close()
        if self.activations is not None:
            self.activations.close()


def prefix_cache(backend: Backend) -> dict[str, float | None]:
    """vLLM: the share of prompt tokens its prefix cache served, and the most whole shared
    blocks could serve (the trie's unique tokens bound it further; see the manifest)."""
    if not isinstance(backend, PrefixCacheCounters):
        return {"prefix_cache_hit_rate": None, "prefix_cache_limit": None}
    total = backend.stats.prompt_tokens
    return {"prefix_cache_hit_rate": backend.prefix_cache_hit_rate(),
            "prefix_cache_limit": backend.cacheable_tokens / total if total else None,
            "prefix_cache_block": backend.block_size}


def score_pass(ctx: RunContext, backend: Scorer, own: Sequence[RenderedPrompt]) -> int:
    """Stream the scores (and lens / activations) of the run's own prompts to disk, planned with
    all of them; returns how many prompts an interrupted earlier run had already scored. In a
    factor run, every variant's label tokens are read and each prompt keeps its own labels'."""
    cfg, rendered, loaded, variants = ctx.config, ctx.rendered, ctx.loaded, ctx.variants
    letter_ids = ctx.letter_ids
    assert letter_ids is not None  # a letter pass reads letters
    mech = cfg.analysis.mech
    expected = sorted(int(r.prompt.prompt_id) for r in own)
    decode = token_text(loaded.tokenizer)
    writers = Writers(score_writer(ctx, decode))
    if mech.capture_layers:
        writers.activations = ActivationWriter(cfg.out_dir, expected, backend.capture,
                                               d_model(loaded.model), mech.capture_dtype, writers.scores.done)
        if writers.scores.done and not writers.activations.resumed:  # rows lost: score those prompts again
            writers.scores.store.remove()
            writers.scores = score_writer(ctx, decode)
    done = set(writers.scores.done)
    others = {int(r.prompt.prompt_id) for r in rendered} - set(expected)
    seen: set[int] = set(done)
    with tqdm(total=len(own), unit="prompt", desc="scoring", disable=not cfg.progress,
              dynamic_ncols=True) as bar:
        bar.update(len(done))
        batches = backend.score(rendered, letter_ids if variants is None else variants.union, done | others)
        for batch in batches if variants is None else variants.columns.stream(batches):
            writers.add(batch)
            new = [s.prompt_id for s in batch if s.prompt_id not in seen]
            seen.update(new)
            bar.update(len(new))
    assert seen == set(expected), "backend must score every prompt it owns, and only those"
    writers.close()
    return len(done)


def score_writer(ctx: RunContext, decode: Callable[[int], str]) -> ScoreWriter:
    cfg = ctx.config
    return ScoreWriter(cfg.out_dir, ctx.bench.letters, cfg.shard_size, lens=cfg.analysis.mech.logit_lens,
                       part_seconds=cfg.part_seconds, decode=decode)


def token_text(tokenizer: Tokenizer) -> Callable[[int], str]:
    """Token id → the text it decodes to alone (`argmax_token`: what the model wanted to say)."""
    return lambda token_id: str(tokenizer.decode([token_id]))


def text_config(model: PreTrainedModel) -> Any:
    return model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config


def n_layers(model: PreTrainedModel | None) -> int:
    return 0 if model is None else int(text_config(model).num_hidden_layers)  # None: vLLM, no weights here


def d_model(model: PreTrainedModel | None) -> int:
    return 0 if model is None else int(text_config(model).hidden_size)
