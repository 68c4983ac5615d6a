"""A LocQA run: generate open answers, judge them, store the tables, compute the metrics (SPEC §4).

Tables (results contract, SPEC §6): `prompts.parquet` (`prompt_id`, `template`, `category`,
`language`, `mode`, `locale`, `text`), `generations.parquet` (`prompt_id`, `text`, `answer` —
the text with thinking blocks removed), `judgements.parquet` (one row per semantic match per
template × language, and one implicit or explicit verdict per prompt; failures kept as
`judge_error`). Metrics are recomputed from these and the checksummed data file.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from probe.benches import locqa
from probe.config import build
from probe.errors import ProbeInputError
from probe.generation import JUDGEMENTS_SCHEMA
from probe.judges import Judge, JudgeRequest, JudgeResult
from probe.results import write_table

PROMPTS_SCHEMA = pa.schema([
    ("prompt_id", pa.int64()), ("template", pa.string()), ("category", pa.string()), ("language", pa.string()),
    ("mode", pa.string()), ("locale", pa.string()), ("n_tokens", pa.int64()), ("text", pa.string()),
])
GENERATIONS_SCHEMA = pa.schema([("prompt_id", pa.int64()), ("text", pa.string()), ("answer", pa.string())])
# Reasoning models wrap their deliberation in think tags; only the answer after it is judged.
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)


def strip_thinking(text: str) -> str:
    """The answer without `<think>…</think>` blocks (an unclosed block is removed to the end)."""
    return _THINK.sub("", text).strip()


def prepare(cfg: dict[str, Any], cache_dir: Path) -> tuple[locqa.LocQASpec, Path, list[locqa.LocQAQuestion],
                                                           list[locqa.LocQAPrompt]]:
    """Validated spec, data file, questions and prompts of a LocQA bench config."""
    spec = build(locqa.LocQASpec, cfg, "bench")
    path = locqa.resolve_source(spec, cache_dir)
    questions = locqa.load_questions(path, spec.languages, spec.categories)
    return spec, path, questions, locqa.build_prompts(questions, spec)


def write_prompts(run_dir: Path, prompts: Sequence[locqa.LocQAPrompt], rendered: Sequence[Any]) -> None:
    rows = [{"prompt_id": p.prompt_id, "template": p.template, "category": p.category, "language": p.language,
             "mode": p.mode, "locale": p.locale, "n_tokens": len(r.token_ids), "text": r.text}
            for p, r in zip(prompts, rendered)]
    write_table(run_dir / "prompts.parquet", pa.Table.from_pylist(rows, schema=PROMPTS_SCHEMA))


def generate(generator: Any, rendered: Sequence[Any], run_dir: Path, progress: bool) -> dict[int, str]:
    """Generate every answer; write `generations.parquet`; return prompt_id → answer."""
    from tqdm import tqdm

    rows = []
    with tqdm(total=len(rendered), unit="prompt", desc="generating", disable=not progress) as bar:
        for batch in generator.generate(rendered):
            rows += [{"prompt_id": g.prompt_id, "text": g.text, "answer": strip_thinking(g.text)} for g in batch]
            bar.update(len(batch))
    rows.sort(key=lambda r: r["prompt_id"])
    write_table(run_dir / "generations.parquet", pa.Table.from_pylist(rows, schema=GENERATIONS_SCHEMA))
    return {r["prompt_id"]: r["answer"] for r in rows}


class SemanticCache:
    """Semantic matches depend only on the data and the judge, not on the model being evaluated,
    so a sweep asks the judge once per (judge, template, language) and reuses the verdict.
    Entries are keyed by a hash of the judge's config and the request; only successes are kept."""

    def __init__(self, root: Path | None, judge_cfg: dict[str, Any]) -> None:
        self.root, self.judge_cfg = root, judge_cfg

    def _path(self, request: JudgeRequest) -> Path | None:
        if self.root is None:
            return None
        blob = json.dumps({"judge": self.judge_cfg, "payload": dict(request.payload)}, sort_keys=True)
        return self.root / f"{hashlib.sha256(blob.encode()).hexdigest()}.json"

    def get(self, request: JudgeRequest) -> JudgeResult | None:
        path = self._path(request)
        if path is None or not path.is_file():
            return None
        stored = json.loads(path.read_text())
        return JudgeResult(stored["output"], None, stored["judge"])

    def put(self, request: JudgeRequest, result: JudgeResult) -> None:
        path = self._path(request)
        if path is None or result.output is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"output": result.output, "judge": result.judge}))
        os.replace(tmp, path)


def judge_all(judge: Judge, questions: Sequence[locqa.LocQAQuestion], prompts: Sequence[locqa.LocQAPrompt],
              answers: dict[int, str], run_dir: Path, cache: SemanticCache | None = None) -> None:
    """Semantic matching once per template × language (cached across runs), then one verdict per
    response; every verdict, failures included, becomes a `judgements.parquet` row."""
    cache = cache or SemanticCache(None, {})
    by_key = {(q.template, q.language): q for q in questions}
    semantic = [JudgeRequest("semantic_match", {"question": q.question, "us_answer": q.us_answer,
                                                 "answers": {a.locale: a.answer for a in q.answers}})
                for q in questions]
    cached = [cache.get(r) for r in semantic]
    todo = [r for r, c in zip(semantic, cached) if c is None]
    fresh = iter(judge.judge(todo))
    semantic_results = []
    for r, c in zip(semantic, cached):
        if c is None:
            c = next(fresh)
            cache.put(r, c)
        semantic_results.append(c)
    requests: list[JudgeRequest] = []
    meta: list[dict[str, Any]] = []
    for p in prompts:
        q, response = by_key[(p.template, p.language)], answers[p.prompt_id]
        if p.mode == "explicit":
            local = next(a.answer for a in q.answers if a.locale == p.locale)
            requests.append(JudgeRequest("explicit", {"question": q.question, "response": response, "locale": p.locale,
                                                      "locale_answer": local, "us_answer": q.us_answer}))
        else:
            requests.append(JudgeRequest("implicit", {"question": q.question, "response": response,
                                                      "language": q.language, "us_answer": q.us_answer,
                                                      "gold_answers": [a.answer for a in q.answers]}))
        meta.append({"prompt_id": p.prompt_id, "task": "explicit" if p.mode == "explicit" else "implicit",
                     "template": p.template, "language": p.language})
    rows = []
    for q, r in zip(questions, semantic_results):
        out = r.output or {}
        rows.append({"prompt_id": None, "task": "semantic_match", "template": q.template, "language": q.language,
                     "matches": out.get("matches"), "judge_error": r.error, "judge": r.judge,
                     "dropped": out.get("dropped") or None})
    for m, r in zip(meta, judge.judge(requests)):
        out = r.output or {}
        rows.append({**m, "matches": out.get("matches"), "mentioned_answers": out.get("mentioned_answers"),
                     "framing_style": out.get("framing_style"), "match_locale": out.get("match_locale"),
                     "mentions_us_answer": out.get("mentions_us_answer"), "judge_error": r.error, "judge": r.judge,
                     "dropped": out.get("dropped") or None})
    write_table(run_dir / "judgements.parquet", pa.Table.from_pylist(rows, schema=JUDGEMENTS_SCHEMA))


def metrics(run_dir: Path, manifest: dict[str, Any], opts: dict[str, Any]) -> dict[str, Any]:
    """LocQA metrics from the stored tables and the (checksum-verified) data file."""
    from probe.metrics.locqa import Judgement, LocQAAnalysis, PromptRef, compute
    from probe.results import sha256_file

    bench = manifest["bench"]
    path = Path(bench["path"])
    if not path.is_file() or sha256_file(path) != bench["sha256"]:
        raise ProbeInputError(f"{run_dir}: the LocQA data file {path} is missing or changed (sha256 in manifest.json)")
    spec = build(locqa.LocQASpec, bench["config"], "bench")
    questions = locqa.load_questions(path, spec.languages, spec.categories)
    prompts = [PromptRef(r["prompt_id"], r["template"], r["language"], r["mode"], r["locale"])
               for r in pq.read_table(run_dir / "prompts.parquet").to_pylist()]
    judgements = [Judgement.from_record(r) for r in pq.read_table(run_dir / "judgements.parquet").to_pylist()]
    allowed = {k: v for k, v in opts.items() if k in ("n_boot", "seed")}
    return compute(questions, prompts, judgements, build(LocQAAnalysis, allowed, "analysis"))


def report(m: dict[str, Any]) -> str:
    """Markdown: the headline numbers, per-language B_US and |B_R − 1|, the taxonomy."""
    M, ci = m["metrics"], m.get("ci95", {})

    def f(v: Any) -> str:
        return "–" if v is None else f"{v:.3f}"

    def c(path: str) -> str:
        node: Any = ci
        for k in path.split("."):
            node = node.get(k) if isinstance(node, dict) else None
        return "–" if not node or node[0] is None else f"[{node[0]:.3f}, {node[1]:.3f}]"

    lines = [f"# LocQA — {m['model']} on `{m['bench']}` ({m.get('mode')})", "",
             f"{m['n_prompts']} prompts; {m.get('n_judge_errors', 0)} judge errors (excluded, counted).", "",
             "| metric | value | 95% CI |", "|---|---|---|",
             f"| B_US macro (11 non-English languages) | {f(M['B_US_macro'])} | {c('B_US_macro')} |",
             f"| mean \\|B_R − 1\\| macro | {f(M['B_R_dev_macro'])} | {c('B_R_dev_macro')} |",
             f"| no-answer rate | {f(M['no_answer_rate'])} | {c('no_answer_rate')} |",
             f"| answer multiplicity | {f(M['multiplicity'])} | {c('multiplicity')} |"]
    lines += [f"| taxonomy: {k} | {f(v)} | {c('taxonomy.' + k)} |" for k, v in M["taxonomy"].items()]
    if "explicit" in M:
        lines += [f"| explicit: {k} | {f(v)} | {c('explicit.' + k)} |" for k, v in M["explicit"].items()]
    lines += ["", "| language | B_US | mean \\|B_R − 1\\| |", "|---|---|---|"]
    lines += [f"| {lang} | {f(v)} | {f(M['B_R_dev'].get(lang))} |" for lang, v in M["B_US"].items()]
    return "\n".join(lines) + "\n"
