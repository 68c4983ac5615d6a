"""One run, end to end, in plain typed Python (the Hydra entry point only builds `RunConfig`).

The same pipeline for every bench: prepare (data validated before any model loads) → load the
model → render token ids → claim or resume the run directory → score letters | generate and
parse → judge → store → analyze → report → `DONE`. What differs between benches is asked of
the bench's `Task`; what differs between readings is the run's plan (`RunConfig.plan`,
`probe.pipeline.plan`): one pass per reading it holds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from probe.backends.base import Backend
from probe.backends.factory import make_backend
from probe.backends.roofline import predict_chunks
from probe.backends.specs import BackendSpec, backend_record, check_device
from probe.backends.trie import unique_tokens
from probe.backends.units import score_chunks, work_units
from probe.errors import ProbeInputError, os_errors
from probe.files import make_dirs, write_text
from probe.models import cache_root, load_model
from probe.models.memory import BYTES, memory_estimate
from probe.pipeline.analysis import analyze_run
from probe.pipeline.answer_passes import d_model, generate_pass, n_layers, prefix_cache, score_pass
from probe.pipeline.claim import Claim, check_ours, claim
from probe.pipeline.context import RunContext, resolve
from probe.pipeline.intervention import patching_pass, prepare_intervention
from probe.pipeline.provenance import provenance, run_key
from probe.pipeline.shard_plan import Shard, check_outputs, output_checksums, shard_prompts
from probe.pipeline.spec import AnalysisSpec, RunConfig
from probe.pipeline.text_reading import TextReading, describe, prepare_text, prompt_columns, score_texts, text_counters
from probe.prompts.prefix import shared_prefix_lengths
from probe.prompts.variants import VARIANT
from probe.report.summary import run_summary
from probe.results import layout
from probe.results.manifest import ShardRecord, new_manifest, pass_quantiles, read_manifest, write_manifest
from probe.results.records import InterventionRecord, record_or_none
from probe.results.run import checked_manifest
from probe.results.io import read_json_object
from probe.results.scores import write_prompts
from probe.types import RenderedPrompt
from probe.viz.markdown import terminal_line

log = logging.getLogger(__name__)


def run(cfg: RunConfig) -> Path:
    """Run a bench on a model and write the full run directory; returns its path.

    A run that stops with an error lets go of its directory at once (not only when the process
    ends), so a rerun in the same process — once the cause is fixed — resumes it."""
    with ExitStack() as on_exit:
        return _run(cfg, on_exit)


def _run(cfg: RunConfig, on_exit: ExitStack) -> Path:
    ref, out, plan = cfg.bench, cfg.out_dir, cfg.plan  # the config's own checks ran as it was built
    if plan.loads_weights:
        check_device(cfg.backend.device)  # before any download, directory or model
    with os_errors(f"bench {ref.spec.name!r}", "bench.path must be a readable file, and $PROBE_CACHE a writable "
                   "directory (downloads are cached there)"):
        prepared_bench = ref.task.data.prepare(ref.spec, plan.generation, cache_root() / "data")
    log.info("%s: %d items → %d prompts", prepared_bench.name, len(prepared_bench.items), len(prepared_bench.prompts))
    with os_errors(f"run directory {out}", "choose a shorter path, or one where you can write (hydra.run.dir=…)"):
        check_ours(out)  # before the model loads; `claim` checks again under the lock
        make_dirs(out)

    t0 = time.perf_counter()
    loaded = load_model(cfg.model, device=cfg.backend.device, weights=plan.loads_weights)
    load_s = time.perf_counter() - t0
    ctx = resolve(cfg, prepared_bench, loaded)  # from here on the run reads its resolved context only
    own = _own_prompts(ctx.backend, ref.shard, ctx.rendered, plan.generation)
    reading = prepare_text(ctx)
    if cfg.dry_run:
        return _dry_run(ctx, own, reading)
    bench, rendered = ctx.bench, ctx.rendered
    prepared = prepare_intervention(cfg.intervention, rendered, shared_prefix_lengths(rendered),
                                    {**asdict(ctx.model), **loaded.info}, n_layers(loaded.model),
                                    d_model(loaded.model), ref.task.design)
    key = run_key(ctx, prepared.record)
    held = claim(out, key)
    on_exit.callback(_let_go, held)
    if held.state == "done":
        _check_finished(ctx.config, record_or_none(InterventionRecord, prepared.record))
        if ref.shard is None:
            _reanalyse_if_options_changed(out, cfg.analysis)
        return out
    for name, text in cfg.launch_record.items():  # written only once the directory is ours
        make_dirs((out / name).parent)
        write_text(out / name, text)
    _write_prompts(ctx, own, reading)
    t0 = time.perf_counter()
    backend = make_backend(ctx.backend, loaded, ctx.model, cfg.analysis.mech, prepared.plan)
    load_s += time.perf_counter() - t0  # a vLLM engine loads its weights here
    done = _answer_passes(ctx, backend, PassInputs(own, reading))
    patching = {} if plan.generation else patching_pass(out, backend, rendered, ctx.letter_ids, prepared,
                                                        bench.letters)
    work = _backend_work(ctx, backend, own, done)
    timings = {"load_s": load_s, "scoring_s": backend.stats.forward_s, "scoring_wall_s": done.wall_s,
               "prompts_per_s": (len(own) - done.resumed) / done.wall_s if done.wall_s > 0 else None,
               **patching}
    shard = None if ref.shard is None else ShardRecord(
        index=ref.shard.index, count=ref.shard.count, n_prompts=len(own),
        n_items=len({r.prompt.item_id for r in own}), sha256=output_checksums(out))
    manifest = new_manifest(provenance(ctx), work, timings, done.notes, prepared.record, shard)
    write_manifest(out, manifest)
    if shard is not None:
        return _finish_shard(out, ref.shard, held)
    metrics = analyze_run(out)
    layout.mark_done(out)  # written last: its presence means every file is final
    layout.remove_checkpoints(out)  # kept until DONE: a kill in analysis recomputes nothing
    held.release()
    log.info("%s", run_summary(ref.task, metrics))
    return out


@dataclass(frozen=True)
class PassInputs:
    """What the answer passes take besides the run's context."""

    own: Sequence[RenderedPrompt]
    """The prompts this run answers (a shard's; else every prompt)."""
    text: TextReading | None
    """The text reading's prompts (None without a text pass)."""


@dataclass(frozen=True)
class PassWork:
    """What the answer passes did, for the manifest."""

    notes: dict[str, Any]
    """What the judging leaves in the manifest (generation only)."""
    resumed: int
    """Prompts an interrupted earlier run had scored (letter pass)."""
    text_work: dict[str, Any]
    """The text pass's counters (none without one)."""
    wall_s: float
    """Wall time of all the passes."""


def _answer_passes(ctx: RunContext, backend: Backend, inputs: PassInputs) -> PassWork:
    """Run each pass the plan holds, in order: generation, the letter pass, the text pass."""
    plan, t0 = ctx.plan, time.perf_counter()
    notes: dict[str, Any] = {}
    resumed = 0
    text_work: dict[str, Any] = {}
    if plan.generation:
        notes = generate_pass(ctx, backend, inputs.own)
    if plan.letters_pass:
        resumed = score_pass(ctx, backend, inputs.own)
    if plan.text_pass:
        assert inputs.text is not None
        scorer, t1 = backend.texts(), time.perf_counter()
        text_work = text_counters(scorer, score_texts(ctx, inputs.text, inputs.own, scorer))
        text_work["text_scoring_wall_s"] = time.perf_counter() - t1
    return PassWork(notes=notes, resumed=resumed, text_work=text_work, wall_s=time.perf_counter() - t0)


def _backend_work(ctx: RunContext, backend: Backend, own: Sequence[RenderedPrompt], done: PassWork) -> dict[str, Any]:
    """The manifest's `backend` block: the backend's settings and what its passes computed."""
    stats = backend.stats
    sizes = {str(k): v for k, v in sorted(stats.batch_sizes.items())}
    path = {"path": stats.path} if stats.path else {}  # the computation that ran (HF only)
    return {**backend_record(ctx.backend), **path, "n_batches": stats.n_batches, "batch_sizes": sizes,
            "rows_per_pass": pass_quantiles(sizes),
            "oom_splits": stats.oom_splits, "head_check": stats.head_check,
            "prompt_tokens": int(sum(len(r.token_ids) for r in own)),
            "unique_tokens": unique_tokens(own) if ctx.config.bench.shard else stats.unique_tokens or unique_tokens(own),
            "tokens_computed": stats.tokens_computed, "padded_tokens": stats.padded_tokens,
            "resumed_prompts": done.resumed, **done.text_work,
            **prefix_cache(backend)}


def _let_go(held: Claim) -> None:
    """Release the claim unless the run already did."""
    if not held.lock.closed:
        held.release()


def _own_prompts(backend: BackendSpec, shard: Shard | None, rendered: Sequence[RenderedPrompt],
                 generate: bool) -> list[RenderedPrompt]:
    """Every prompt, or with `bench.shard=i/n` the shard's: whole units of the backend's plan
    over all prompts, whole items (`probe.pipeline.shard_plan`)."""
    if shard is None:
        return list(rendered)
    units = work_units(backend, rendered, generate)
    own = sorted(shard_prompts(units, shard), key=lambda r: r.prompt.prompt_id)
    log.info("shard %s: %d of %d prompts (%d items)", shard, len(own), len(rendered),
             len({r.prompt.item_id for r in own}))
    if not own:
        log.warning("shard %s holds no prompts: the plan has fewer blocks of whole items than shards", shard)
    if len(own) > 2 * len(rendered) / shard.count:
        log.warning("shard %s holds %d of %d prompts, over twice its share: the plan's blocks of whole items are "
                    "coarse (generation batches span items; lower backend.batch_tokens for finer ones)",
                    shard, len(own), len(rendered))
    return own


def _write_prompts(ctx: RunContext, own: Sequence[RenderedPrompt], text: TextReading | None = None) -> None:
    """`prompts.parquet` of the prompts this run scores; columns computed over all prompts, so a
    shard's rows are the unsharded run's rows; with a text reading, each row's text prompt too."""
    rendered, tables = ctx.rendered, ctx.task.tables
    ids = {r.prompt.prompt_id for r in own}
    rows = tables.prompt_rows(rendered, shared_prefix_lengths(rendered))
    rows, schema = [row for row in rows if row["prompt_id"] in ids], tables.prompts_schema
    if ctx.variants is not None:  # the column exists only in a factor run: a run without factors stores what it always did
        variant = {r.prompt.prompt_id: r.prompt.value(VARIANT) for r in rendered}
        rows = [{**row, VARIANT: variant[row["prompt_id"]]} for row in rows]
        schema = schema.append(pa.field(VARIANT, pa.int64()))
    if text is not None:
        rows, schema = prompt_columns(text, rows, schema)
    write_prompts(ctx.config.out_dir, rows, schema)


def _finish_shard(out: Path, shard: Shard, held: Any) -> Path:
    """A shard ends without metrics (a slice of a bench is no benchmark): `DONE`, parts removed."""
    layout.mark_done(out)
    layout.remove_checkpoints(out)
    held.release()
    log.info("shard %s done; once all %d are, merge them: python -m probe merge --out <dir> <shard dirs…>",
             shard, shard.count)
    return out


def _dry_run(ctx: RunContext, own: Sequence[RenderedPrompt], text: TextReading | None) -> Path:
    """Write `prompts.parquet` and print what the run would do; no weights were loaded."""
    out = ctx.config.out_dir
    if out.is_dir() and any(out.iterdir()):  # even a probe run's: its prompts table is the run's, not ours
        raise ProbeInputError(f"{out} is not empty; a dry run writes into a new or empty directory (hydra.run.dir=…)")
    out.mkdir(parents=True, exist_ok=True)
    for name, text_of in ctx.config.launch_record.items():  # what `probe runs` reads a dry run's bench and model from
        make_dirs((out / name).parent)
        write_text(out / name, text_of)
    _write_prompts(ctx, own, text)
    rendered = own
    if not rendered:
        log.info("dry run: shard %s holds no prompts", ctx.config.bench.shard)
        return out
    log.info("%s", "\n".join(_dry_run_lines(ctx, rendered, text)))
    return out


def _dry_run_lines(ctx: RunContext, rendered: Sequence[RenderedPrompt], text: TextReading | None) -> list[str]:
    """What a dry run prints: token counts, the ordering design (`probe.benches.orders.design_record`,
    when not the default), the letter ids, two prompts, the text reading, a memory and time estimate."""
    out, orders, letter_ids = ctx.config.out_dir, ctx.bench.source.get("orders"), ctx.letter_ids
    backend, model = ctx.backend, ctx.model
    total = sum(len(r.token_ids) for r in rendered)
    longest = max(rendered, key=lambda r: len(r.token_ids))
    # the summary lines wrap to the terminal; a prompt prints as the model sees it
    lines = [terminal_line(f"dry run: {len(rendered)} prompts, {total} tokens (longest {len(longest.token_ids)}; the "
                           f"prompt trie holds {unique_tokens(rendered)} unique tokens); {layout.PROMPTS} written to "
                           f"{out}")]
    if orders is not None:
        per = ", ".join(f"{n} orderings of {k} options" for k, n in orders.get("orderings", {}).items())
        lines.append(terminal_line(f"ordering design {orders['design']}: {per or 'one ordering'} per item and "
                                   f"condition{' (sampled, seed ' + str(orders['seed']) + ')' if orders.get('sampled') else ''}"
                                   f"; the trie limit above is this design's token cost"))
    if letter_ids is not None:
        lines.append(terminal_line(f"letters {list(letter_ids.letters)} → token ids {list(letter_ids.ids)} (checked in "
                                   "context)"))
    for r in (rendered[0], longest):
        lines += [f"--- prompt {r.prompt.prompt_id} ({len(r.token_ids)} tokens) ---", r.text]
    if text is not None:
        lines += describe(text)
    config = ctx.loaded.info.get("config")
    if config is not None and backend.capabilities.on_weights:
        est = memory_estimate(config, model.dtype, backend.batch_tokens)
        lines.append(terminal_line(f"memory estimate (GiB, backend.batch_tokens={backend.batch_tokens}): "
                                   + ", ".join(f"{k} {v:.2f}" for k, v in est.items())))
        if letter_ids is not None and ctx.plan.letters_pass and ctx.config.predicts:
            chunks = score_chunks(rendered, backend)
            lines.append(terminal_line(predict_chunks(config, chunks, ctx.config.predict_device,
                                                      BYTES.get(model.dtype, 4)).line()))
    return lines


def _check_finished(cfg: RunConfig, intervention: InterventionRecord | None) -> None:
    """A finished run's stored tables must all be there and intact (readable, the rows its
    manifest records; a shard's as its checksums say): its checkpoints were removed at `DONE`,
    so a missing or damaged table cannot be resumed, only restored or scored again elsewhere
    (derived files — metrics, report — are recomputed from the tables instead)."""
    mech, patched = cfg.analysis.mech, intervention is not None and intervention.is_patching
    names = [layout.MANIFEST, layout.PROMPTS,
             *cfg.plan.answer_files(),
             *([layout.JUDGEMENTS] if cfg.judged else []),
             *([layout.LENS] if mech.logit_lens else []),
             *([layout.ACTIVATIONS] if mech.capture_layers else []),
             *([layout.PATCHING_TENSORS, layout.PATCHING_PAIRS] if patched else [])]
    missing = [n for n in names if not (cfg.out_dir / n).is_file()]
    if missing:
        raise ProbeInputError(f"{cfg.out_dir} holds a finished run (DONE) whose {', '.join(missing)} "
                              f"{'is' if len(missing) == 1 else 'are'} missing; a finished run keeps no checkpoints to "
                              "resume from: restore the file(s), or run into a fresh directory (hydra.run.dir=…)")
    manifest = checked_manifest(cfg.out_dir)  # a damaged file makes the run not complete: one line
    if manifest.shard is not None:
        check_outputs(cfg.out_dir, manifest)


def _reanalyse_if_options_changed(out: Path, analysis: AnalysisSpec) -> None:
    """A finished run asked for with other analysis options, or whose metrics are missing or
    damaged, is re-analysed from its stored tables (the scores do not depend on them); with the
    same options and its metrics in place there is nothing to do."""
    recorded = read_manifest(out).analysis
    same = recorded is not None and recorded.same_as(asdict(analysis))
    metrics = out / layout.METRICS
    if same and _readable(metrics):
        log.info("%s is already complete for this configuration; nothing to do", out)
        return
    if metrics.is_file() and not _readable(metrics):
        metrics.unlink()  # derived from the tables, recomputed below; a cut copy would stop the reading
    log.info("%s is complete; re-analysing its stored tables %s", out,
             f"({layout.METRICS} was missing or damaged)" if same else "with the new analysis options")
    analyze_run(out, record=asdict(analysis))


def _readable(path: Path) -> bool:
    """Whether the derived JSON file `path` is there and a JSON object (a cut one is recomputed)."""
    try:
        read_json_object(path)
    except ProbeInputError:
        return False
    return True
