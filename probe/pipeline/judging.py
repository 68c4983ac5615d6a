"""Running a task's judge jobs: the configured judge, verdicts cached across runs where they
cannot depend on the evaluated model, every verdict (failures included) kept as a row."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from probe.backends.base import Generator
from probe.backends.generate import HFGenerator
from probe.backends.specs import HFBackendSpec
from probe.benches.task import JudgeJob, verdict_row
from probe.errors import ProbeInputError
from probe.files import make_dirs, write_text
from probe.judges import Judge, JudgeRequest, JudgeResult, make_judge
from probe.judges.spec import RUN_POLICY, TRANSPORT_KEYS
from probe.judges.credentials import redacted
from probe.judges.registry import has_task, judge_task
from probe.models import LoadedModel, load_model
from probe.pipeline.spec import RunConfig

log = logging.getLogger(__name__)


class VerdictCache:
    """Verdicts keyed by a hash of the judge's config and the request; only successes are kept.

    A sweep of many models asks the judge once per data-only question (LocQA's semantic
    matches) and reuses the verdict. An entry is used only when it is intact: its `sha256`
    (over the entry's key, verdict and judge) matches, and the verdict passes the task's
    validator, as a fresh one did. Anything else — an edited, truncated or wrong-typed entry,
    or one from a probe that did not checksum — is asked again (and rewritten), with a warning;
    `rejected` counts why, for the manifest's `verdict_cache_rejected`. The checksum catches
    edits and damage, not a forger who recomputes it: the cache is as trusted as its directory."""

    def __init__(self, root: Path | None, judge_cfg: dict[str, Any]) -> None:
        self.root, self.judge_cfg = root, judge_cfg
        self.rejected: Counter[str] = Counter()
        """Entries not used, by reason (`unreadable`, `checksum`, `schema`)."""

    def _path(self, request: JudgeRequest) -> Path | None:
        if self.root is None:
            return None
        blob = json.dumps({"judge": self.judge_cfg, "payload": dict(request.payload)}, sort_keys=True)
        return self.root / request.task / f"{hashlib.sha256(blob.encode()).hexdigest()}.json"

    def get(self, request: JudgeRequest) -> JudgeResult | None:
        """The cached verdict, or None (none stored, or the stored one is not intact)."""
        path = self._path(request)
        if path is None or not path.is_file():
            return None
        try:
            stored = json.loads(path.read_text())
            output, judge, digest = stored["output"], stored["judge"], stored["sha256"]
        except (OSError, ValueError, KeyError, TypeError):
            return self._reject(path, "unreadable", "not a JSON object with output, judge and sha256")
        if digest != _entry_digest(path.stem, output, judge):
            return self._reject(path, "checksum", "its sha256 does not match its content (edited or damaged)")
        problem = _schema_problem(request, output, judge)
        if problem:
            return self._reject(path, "schema", problem)
        return JudgeResult(output, None, judge)

    def _reject(self, path: Path, reason: str, detail: str) -> None:
        self.rejected[reason] += 1
        log.warning("cached judge verdict %s is not used: %s; asking the judge again", path, detail)
        return None

    def put(self, request: JudgeRequest, result: JudgeResult) -> None:
        """Keep a successful verdict (written atomically: concurrent runs may share the cache)."""
        path = self._path(request)
        if path is None or result.output is None:
            return
        make_dirs(path.parent)
        write_text(path, json.dumps({"output": result.output, "judge": result.judge,
                                     "sha256": _entry_digest(path.stem, result.output, result.judge)}),
                   tag=f".{os.getpid()}")


def _entry_digest(key: str, output: Any, judge: Any) -> str:
    """sha256 of a cache entry's content, bound to its key (a verdict copied under another
    request's name does not match)."""
    blob = json.dumps({"key": key, "output": output, "judge": judge}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _schema_problem(request: JudgeRequest, output: Any, judge: Any) -> str | None:
    """Why a stored verdict is not one the task's validator accepts (None when it is)."""
    if not isinstance(output, dict) or not isinstance(judge, str):
        return f"expected a verdict object and a judge name, got {type(output).__name__} and {type(judge).__name__}"
    dropped = output.get("dropped", [])
    if not isinstance(dropped, list) or not all(isinstance(d, str) for d in dropped):
        return f"'dropped': expected a list of strings, got {dropped!r}"
    try:
        if has_task(request.task):
            judge_task(request.task).validate(output, request.payload)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        return f"not a valid {request.task} verdict ({e})"
    return None


def run_jobs(judge: Judge, jobs: Sequence[JudgeJob], shared: VerdictCache, local: VerdictCache | None = None,
             chunk: int = 64) -> list[dict[str, Any]]:
    """`judgements.parquet` rows of every job, in job order.

    Verdicts are asked `chunk` requests at a time and kept by request: cacheable ones (data-only
    questions) in the cross-run `shared` cache, the others in the run's `local` one, so a killed
    run asks again only what it had not been answered (failures are always asked again)."""
    results: list[JudgeResult | None] = [
        (shared if j.cacheable else local).get(j.request) if (j.cacheable or local) else None for j in jobs]
    todo = [i for i, r in enumerate(results) if r is None]
    for start in range(0, len(todo), chunk):
        part = todo[start:start + chunk]
        for i, result in zip(part, judge.judge([jobs[i].request for i in part])):
            results[i] = result
            cache = shared if jobs[i].cacheable else local
            if cache is not None:
                cache.put(jobs[i].request, result)
    return [verdict_row(job, result) for job, result in zip(jobs, results) if result is not None]


class JudgeFailure(ProbeInputError):
    """Too many verdicts failed: the run stops (its judgements are written) with a non-zero exit."""


def check_error_rate(rows: Sequence[dict[str, Any]], max_rate: float) -> None:
    """Stop when more than `max_rate` of the verdicts are `judge_error`, saying how many and why."""
    errors = [r["judge_error"] for r in rows if r["judge_error"] is not None]
    if rows and len(errors) / len(rows) > max_rate:
        reasons = Counter(e.split(";")[0][:160] for e in errors).most_common(3)
        why = "; ".join(f"{n}× {reason}" for reason, n in reasons)
        raise JudgeFailure(f"{len(errors)} of {len(rows)} judgements failed (more than judge.max_error_rate="
                           f"{max_rate:g}); judgements.parquet keeps them all. Most common: {why}")


def judge_config(cfg: RunConfig) -> dict[str, Any]:
    """The judge's identity for the cache: its config without the key's variable name, and for an
    LLM judge the model it runs on."""
    return cfg.judge.kind.identity(cfg.judge, asdict(cfg.judge_model or cfg.model))


TRANSPORT = (*TRANSPORT_KEYS, *RUN_POLICY)
"""Judge settings that change how verdicts are fetched (or how many failures stop the run), never
what they say."""


def verdict_config(cfg: RunConfig) -> dict[str, Any]:
    """The judge settings a verdict depends on (the run key's judge entry)."""
    return {k: v for k, v in judge_config(cfg).items() if k not in TRANSPORT}


def build_judge(cfg: RunConfig, loaded: LoadedModel, engine: Generator | None = None) -> Judge:
    """The configured judge; an LLM judge runs on `judge_model`, else on the run's own model
    (through the run's vLLM engine when that is the backend)."""
    if not cfg.judge.kind.needs_local_model:  # keyword, rules and http run on no model of ours
        return make_judge(cfg.judge)
    if cfg.judge_model is None and loaded.model is None:
        return make_judge(cfg.judge, chat=engine)
    spec_model = cfg.judge_model or cfg.model
    judge_loaded = loaded if cfg.judge_model is None else load_model(
        cfg.judge_model, device=cfg.backend.device)
    spec = HFBackendSpec(max_new_tokens=cfg.judge.max_new_tokens)
    return make_judge(cfg.judge, chat=HFGenerator(judge_loaded.model, judge_loaded.tokenizer, spec,
                                                  template_kwargs=spec_model.chat_template_kwargs))
