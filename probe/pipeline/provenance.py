"""What a run directory records about how it was made: the results key a resumed run must match,
and the manifest's provenance (code, environment, model, tokenizer, bench)."""

from __future__ import annotations

import platform
import shlex
import subprocess
import sys
from dataclasses import asdict
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from probe.backends.specs import backend_record
from probe.benches.sources import data_digest
from probe.judges.credentials import redacted
from probe.pipeline.judging import judge_config, verdict_config
from probe.pipeline.context import RunContext
from probe.prompts.render import template_hash, tokenizer_hash
from probe.version import __version__

PACKAGES = ("torch", "transformers", "tokenizers", "accelerate", "numpy", "scipy", "pyarrow", "safetensors",
            "hydra-core", "vllm")


BENCH_TRANSPORT = ("max_download_bytes",)
"""Bench options that change how the data file is fetched, never what it holds (its sha256 is in
the key): left out of the key, so a resumed run may change them."""


def run_key(ctx: RunContext, intervention: dict[str, Any] | None = None) -> dict[str, Any]:
    """The results-cache key: everything that changes a stored number, nothing else. Unlike lm-eval's
    request cache, it includes the model (id, revision, resolved commit), tokenizer, template and
    letter ids; unlike the full config, it leaves out the analysis options (a finished run is
    re-analysed instead), the shard size and the transport settings of the judge and of the
    data download. The bench's `data_sha256` is the digest of the data files it read (pinned
    checksum or not); a model loaded from a local directory adds its `weights_sha256`
    (`probe.models.weights`). An intervention (with its steering vector's hash) is in the key only
    when there is one, and so is a weights digest (and a factor run's variants), so other runs keep
    the key they had."""
    cfg, loaded, bench, letter_ids = ctx.config, ctx.loaded, ctx.bench, ctx.letter_ids
    weights = loaded.info.get("weights_sha256")
    key = {"model": {**asdict(cfg.model), "commit": loaded.info.get("commit"),
                      "gguf_sha256": loaded.info.get("gguf_sha256"), **({"weights_sha256": weights} if weights else {})},
            "tokenizer_sha256": tokenizer_hash(loaded.tokenizer),
            "template_sha256": template_hash(loaded.tokenizer, ctx.settings),
            "letter_token_ids": None if letter_ids is None else list(letter_ids.ids),
            "bench": {"kind": bench.kind, "sha256": bench.source.get("sha256"),
                      "data_sha256": data_digest(bench.data_files),
                      "config": {k: v for k, v in cfg.bench.record(cfg.text_reading).items()
                                 if k not in BENCH_TRANSPORT}},
            "backend": backend_record(cfg.backend), "mech": asdict(cfg.analysis.mech),
            "judge": verdict_config(cfg) if cfg.judged else None,
            **({"intervention": intervention} if intervention else {})}
    return key if ctx.variants is None else {**key, "variants": ctx.variants.record}


def command_line() -> str:
    """The command line that started this process, as the user would retype it (`probe …`; a
    sweep's job records the sweep's command), with any URL's credentials taken out."""
    return redacted(shlex.join(["probe", *sys.argv[1:]]))


def provenance(ctx: RunContext) -> dict[str, Any]:
    """The manifest's record of code, environment, model, tokenizer and bench (and a factor run's
    variants)."""
    cfg, loaded, bench, letter_ids, settings = ctx.config, ctx.loaded, ctx.bench, ctx.letter_ids, ctx.settings
    made = {
        "probe_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "command": command_line(),
        **cfg.run.record(),  # the run's label, only when given (presentation: not in the run key)
        "packages": versions(),
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
                  "data_sha256": data_digest(bench.data_files), "n_items": len(bench.items),
                  "n_prompts": len(bench.prompts), "config": cfg.bench.record(cfg.text_reading)},
        "judge": judge_config(cfg) if cfg.judged else None,
        "analysis": asdict(cfg.analysis),
    }
    return made if ctx.variants is None else {**made, "variants": ctx.variants.record}


def git_commit() -> str | None:
    """Commit of the probe checkout this code runs from (None when installed from a wheel)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
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


def versions() -> dict[str, str | None]:
    """Installed versions of the packages that change numbers."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _device_name(model: Any) -> str:
    device = next(model.parameters()).device
    if device.type == "cuda":
        import torch

        return str(torch.cuda.get_device_name(device))
    return str(device)
