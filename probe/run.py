"""One run, end to end, in plain typed Python (the Hydra entry point only builds `RunConfig`).

bench (validated before any model loads) → model → rendered token ids → backend scores →
tables on disk → metrics and report computed from those tables.
"""

from __future__ import annotations

import json
import logging
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from probe import __version__
from probe.analyze import analyze_run
from probe.backends import LetterBackend, make_backend
from probe.benches import OPEN_ANSWER_KINDS, PreparedBench, get_bench
from probe.errors import ProbeInputError
from probe.generation import generate_and_store, judge_rationales
from probe.judges import Judge, make_judge
from probe.models import LoadedModel, ModelSpec, load_model, max_positions
from probe.render import render_prompts, template_hash, tokenizer_hash
from probe.results import ScoreWriter, sha256_file, shared_prefix_lengths, write_json, write_prompts
from probe.mech import ActivationWriter, LensWriter, split_analysis
from probe.types import LetterIds, LetterScore, RenderedPrompt

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunConfig:
    """Everything a run needs. `bench`, `backend` and `analysis` stay mappings here because
    their typed form depends on the bench kind / backend name; each is built strictly later."""

    model: ModelSpec
    bench: Mapping[str, Any]
    out_dir: Path
    backend: Mapping[str, Any] = field(default_factory=lambda: {"name": "hf"})
    analysis: Mapping[str, Any] = field(default_factory=dict)
    judge: Mapping[str, Any] = field(default_factory=lambda: {"name": "keyword"})
    judge_model: ModelSpec | None = None
    """The LLM judge's model; None = the run's own model."""
    progress: bool = True
    shard_size: int = 4096
    """Prompts per score shard; a killed run resumes from its last complete shard."""


def run(cfg: RunConfig) -> Path:
    """Score a bench with a model and write the full run directory; returns its path."""
    out = cfg.out_dir
    out.mkdir(parents=True, exist_ok=True)
    if cfg.bench.get("kind") in OPEN_ANSWER_KINDS:
        return run_locqa(cfg)
    bench_def = get_bench(str(cfg.bench.get("kind", "")))
    generate = cfg.backend.get("mode", "letters") == "generate"
    bench = bench_def.prepare(cfg.bench, generate)
    log.info("%s: %d items → %d prompts", bench.name, len(bench.items), len(bench.prompts))

    t0 = time.perf_counter()
    vllm = cfg.backend.get("name", "hf") == "vllm"
    loaded = load_model(cfg.model, device=str(cfg.backend.get("device", "auto")), weights=not vllm)
    load_s = time.perf_counter() - t0

    settings = replace(cfg.model.render_settings(), cue=bench.cue)
    rendered, letter_ids = render_prompts(
        loaded.tokenizer, bench.prompts, None if generate else bench.letters, settings, cfg.model.name,
        max_positions=max_positions(loaded),
    )
    mech, _ = split_analysis(dict(cfg.analysis))
    if mech.active and (generate or vllm):
        raise ProbeInputError("analysis.logit_lens / capture_layers need backend=hf and backend.mode=letters")
    key = _run_key(cfg, loaded, settings, letter_ids, bench, mech)
    if _resume_or_claim(out, key):
        log.info("%s is already complete for this configuration; nothing to do", out)
        return out
    if mech.active or generate:  # their outputs are not sharded: such runs restart from scratch
        shutil.rmtree(out / "scores.parts", ignore_errors=True)
    write_prompts(out, rendered, shared_prefix_lengths(rendered))
    t0 = time.perf_counter()
    backend = make_backend(cfg.backend, loaded, cfg.model, mech)
    load_s += time.perf_counter() - t0  # a vLLM engine loads its weights here
    t0 = time.perf_counter()
    resumed: set[int] = set()
    if generate:
        rows = generate_and_store(backend, rendered, bench.cue, bench.letters, out, cfg.progress)
        judge_rationales(_judge(cfg, loaded, backend), rows, out)
    else:
        writers = Writers(ScoreWriter(out, bench.letters, cfg.shard_size), LensWriter(out) if mech.logit_lens else None,
                          ActivationWriter(out, len(rendered), backend.capture, _d_model(loaded.model),
                                           mech.capture_dtype) if mech.capture_layers else None)
        resumed = set(writers.scores.done)
        _score_all(backend, rendered, letter_ids, writers, cfg.progress)
        writers.close(bench.letters)
    wall_s = time.perf_counter() - t0

    manifest = {
        **_provenance(cfg, loaded, settings, letter_ids, bench),
        "backend": {**dict(cfg.backend), "n_batches": backend.stats.n_batches,
                    "batch_sizes": {str(k): v for k, v in sorted(backend.stats.batch_sizes.items())},
                    "oom_splits": backend.stats.oom_splits, "tokens_computed": backend.stats.tokens_computed,
                    "prompt_tokens": int(sum(len(r.token_ids) for r in rendered)),
                    "resumed_prompts": len(resumed),
                    "prefix_cache_hit_rate": backend.prefix_cache_hit_rate() if vllm else None},
        "analysis": dict(cfg.analysis),
        "timings": {"load_s": load_s, "scoring_s": backend.stats.forward_s, "scoring_wall_s": wall_s,
                    "prompts_per_s": (len(rendered) - len(resumed)) / wall_s if wall_s > 0 else None},
    }
    write_json(out / "manifest.json", manifest)
    analyze_run(out)
    (out / "DONE").write_text("complete\n")  # written last: its presence means every file is final
    return out


def run_locqa(cfg: RunConfig) -> Path:
    """LocQA: open answers generated, judged and scored (probe.locqa_run)."""
    from probe import locqa_run
    from probe.benches.locqa import render
    from probe.models import cache_root

    out = cfg.out_dir
    spec, path, questions, prompts = locqa_run.prepare(dict(cfg.bench), cache_root() / "data")
    backend_cfg = {**dict(cfg.backend), "mode": "generate"}  # open answers: always generated
    vllm = backend_cfg.get("name", "hf") == "vllm"
    t0 = time.perf_counter()
    loaded = load_model(cfg.model, device=str(backend_cfg.get("device", "auto")), weights=not vllm)
    settings = cfg.model.render_settings()
    rendered = render(prompts, loaded.tokenizer, settings, max_positions(loaded), cfg.model.name)
    bench_info = {"kind": "locqa", "sha256": sha256_file(path), "config": dict(cfg.bench)}
    key = {"model": {**asdict(cfg.model), "commit": loaded.info.get("commit")}, "bench": bench_info,
           "tokenizer_sha256": tokenizer_hash(loaded.tokenizer), "backend": backend_cfg,
           "judge": dict(cfg.judge)}
    if _resume_or_claim(out, key):
        return out
    locqa_run.write_prompts(out, prompts, rendered)
    backend = make_backend(backend_cfg, loaded, cfg.model)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    answers = locqa_run.generate(backend, rendered, out, cfg.progress)
    wall_s = time.perf_counter() - t0
    judge_cfg = {k: v for k, v in dict(cfg.judge).items() if k != "api_key_env"}
    if judge_cfg.get("name") == "llm" and not judge_cfg.get("model"):
        judge_cfg["model"] = asdict(cfg.model)  # the run's own model judges: it is part of the key
    cache = locqa_run.SemanticCache(cache_root() / "judgements" / "semantic_match", judge_cfg)
    locqa_run.judge_all(_judge(cfg, loaded, backend), questions, prompts, answers, out, cache)
    bench = PreparedBench(name=spec.name, kind="locqa", letters=(), items=questions, prompts=[],
                          source={"path": str(path), "sha256": bench_info["sha256"], "mode": spec.mode})
    manifest = {
        **_provenance(cfg, loaded, settings, None, bench),
        "backend": {**backend_cfg, "n_batches": backend.stats.n_batches},
        "judge": dict(cfg.judge), "analysis": dict(cfg.analysis),
        "timings": {"load_s": load_s, "scoring_s": backend.stats.forward_s, "scoring_wall_s": wall_s},
    }
    manifest["bench"]["n_prompts"] = len(prompts)
    write_json(out / "manifest.json", manifest)
    analyze_run(out)
    (out / "DONE").write_text("complete\n")
    return out


def _run_key(cfg: RunConfig, loaded: LoadedModel, settings: Any, letter_ids: LetterIds | None,
             bench: Any, mech: Any) -> dict[str, Any]:
    """The results-cache key: everything that changes a number. Unlike lm-eval's request cache,
    it includes the model (id, revision, resolved commit), tokenizer, template and letter ids."""
    return {"model": {**asdict(cfg.model), "commit": loaded.info.get("commit"),
                      "gguf_sha256": loaded.info.get("gguf_sha256")},
            "tokenizer_sha256": tokenizer_hash(loaded.tokenizer),
            "template_sha256": template_hash(loaded.tokenizer, settings),
            "letter_token_ids": None if letter_ids is None else list(letter_ids.ids),
            "bench": {"kind": bench.kind, "sha256": bench.source.get("sha256"), "config": dict(cfg.bench)},
            "backend": dict(cfg.backend), "mech": asdict(mech), "shard_size": cfg.shard_size}


def _provenance(cfg: RunConfig, loaded: LoadedModel, settings: Any, letter_ids: LetterIds | None,
                bench: Any) -> dict[str, Any]:
    """The manifest's record of code, environment, model, tokenizer and bench."""
    return {
        "probe_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_commit": _git_commit(),
        "packages": _versions(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "device": _device_name(loaded.model) if loaded.model is not None else "vllm engine",
        "model": {**asdict(cfg.model), **{k: v for k, v in loaded.info.items() if k != "config"}},
        "tokenizer": {"class": type(loaded.tokenizer).__name__, "name_or_path": loaded.tokenizer.name_or_path,
                      "sha256": tokenizer_hash(loaded.tokenizer)},
        "letters": list(bench.letters),
        "letter_token_ids": None if letter_ids is None else list(letter_ids.ids),
        "answer_cue": settings.cue,
        "template_sha256": template_hash(loaded.tokenizer, settings),
        "bench": {"name": bench.name, "kind": bench.kind, **bench.source,
                  "n_items": len(bench.items), "n_prompts": len(bench.prompts), "config": dict(cfg.bench)},
    }


def _resume_or_claim(out: Path, key: dict[str, Any]) -> bool:
    """True if `out` already holds this exact run, finished. An unfinished run with the same
    key is resumed; a different key is an error (never mix two configurations' shards)."""
    key_path = out / "run_key.json"
    key = json.loads(json.dumps(key))  # the JSON round trip makes tuples lists, as stored
    if key_path.is_file():
        stored = json.loads(key_path.read_text())
        if stored != key:
            diff = sorted(k for k in set(stored) | set(key) if stored.get(k) != key.get(k))
            raise ProbeInputError(f"{out} holds a run with a different configuration (differs in {diff}); "
                                  "choose another output directory")
        return (out / "DONE").is_file()
    if (out / "metrics.json").exists():
        raise ProbeInputError(f"{out} already holds a finished run (metrics.json); choose another output dir")
    write_json(key_path, key)
    return False


def _judge(cfg: RunConfig, loaded: LoadedModel, engine: Any = None) -> Judge:
    """The configured judge; an LLM judge runs on `judge_model`, else on the run's own model
    (through the run's vLLM engine when that is the backend)."""
    if cfg.judge.get("name", "keyword") != "llm":  # keyword, rules and http need no local model
        return make_judge(cfg.judge)
    if cfg.judge_model is None and loaded.model is None:
        return make_judge(cfg.judge, chat=engine)
    from probe.backends.generate import HFGenerator
    from probe.backends.hf import HFBackendSpec

    spec_model = cfg.judge_model or cfg.model
    judge_loaded = loaded if cfg.judge_model is None else load_model(
        cfg.judge_model, device=str(cfg.backend.get("device", "auto")))
    spec = HFBackendSpec(max_new_tokens=int(cfg.judge.get("max_new_tokens", 128)))
    return make_judge(cfg.judge, chat=HFGenerator(judge_loaded.model, judge_loaded.tokenizer, spec,
                                                  template_kwargs=spec_model.chat_template_kwargs))


@dataclass
class Writers:
    """Where a scoring pass streams its outputs."""

    scores: ScoreWriter
    lens: LensWriter | None = None
    activations: ActivationWriter | None = None

    def add(self, batch: Sequence[LetterScore]) -> None:
        self.scores.add(batch)
        for s in batch:
            if self.lens is not None:
                assert s.lens is not None
                self.lens.add(s.prompt_id, s.lens)
            if self.activations is not None:
                assert s.activations is not None
                self.activations.add(s.prompt_id, s.activations)

    def close(self, letters: Sequence[str]) -> None:
        self.scores.close()
        if self.lens is not None:
            self.lens.close(letters)
        if self.activations is not None:
            self.activations.close()


def _score_all(
    backend: LetterBackend, rendered: Sequence[RenderedPrompt], letter_ids: LetterIds, writers: Writers,
    progress: bool,
) -> None:
    """Stream every prompt's scores from the backend to disk, with a prompts/s progress bar."""
    from tqdm import tqdm

    expected = {int(r.prompt.prompt_id) for r in rendered}
    seen: set[int] = set()
    with tqdm(total=len(rendered), unit="prompt", desc="scoring", disable=not progress,
              dynamic_ncols=True) as bar:
        done = writers.scores.done
        seen.update(done)
        bar.update(len(done))
        for batch in backend.score(rendered, letter_ids, done):
            writers.add(batch)
            new = [s.prompt_id for s in batch if s.prompt_id not in seen]
            seen.update(new)
            bar.update(len(new))
    assert seen == expected, "backend must score every prompt exactly once"


def _d_model(model: Any) -> int:
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    return int(config.hidden_size)


def _git_commit() -> str | None:
    """Commit of the probe checkout this code runs from (None when installed from a wheel)."""
    root = Path(__file__).resolve().parent.parent
    try:
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if sha.returncode != 0:
        return None
    return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in ("torch", "transformers", "tokenizers", "accelerate", "numpy", "scipy", "pyarrow",
                 "safetensors", "hydra-core", "vllm"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _device_name(model: Any) -> str:
    import torch

    device = next(model.parameters()).device
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return str(device)


