"""A toy *judged* benchmark defined outside probe: open answers read by a judge task of its own
(its prompt, validator and verdict columns) and a deterministic judge of its own, all in this
one module, plus one bench config (`conf/bench/judgedtoy.yaml`). Nothing under `probe/` names it.

Each question is asked once; the `toy_shape` judge task records how long an answer is and
whether it holds a digit; the metrics are the digit rate and the mean length, with
item-bootstrap CIs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from probe.benches.open_answer import OpenAnswer, kept_prompt_ids, open_answer_task
from probe.benches.registry import register
from probe.benches.task import Column, JudgeJob, PreparedBench, Presentation
from probe.judges.base import JudgeRequest, JudgeResult
from probe.judges.registry import JudgeTask, register_judge, register_task
from probe.metrics.core import AnalysisOptions, bootstrap_weights
from probe.metrics.tree import MetricsTree
from probe.results.generations import read_judgements
from probe.results.run import Run
from probe.types import Prompt

QUESTIONS = ("How many legs does a spider have?", "Name a colour.", "What year is it?", "Say hello.")


def _shape_prompt(payload: Mapping[str, Any]) -> str:
    return (f"Answer: {payload['answer']}\n\nReply with JSON only: "
            '{"n_chars": <characters in the answer>, "has_digit": true | false}')


def _shape_validate(obj: Any, payload: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(obj, dict) or not isinstance(obj.get("n_chars"), int) or not isinstance(obj.get("has_digit"), bool):
        raise ValueError('expected {"n_chars": <int>, "has_digit": <bool>}')
    if obj["n_chars"] < 0:
        raise ValueError(f"'n_chars': expected ≥ 0, got {obj['n_chars']}")
    return {"n_chars": obj["n_chars"], "has_digit": obj["has_digit"]}


SHAPE = register_task(JudgeTask("toy_shape", _shape_prompt, _shape_validate,
                                (pa.field("n_chars", pa.int64()), pa.field("has_digit", pa.bool_()))))


class ShapeJudge:
    """Deterministic: counts the answer's characters and looks for a digit."""

    name = "toyshape"

    def judge(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult]:
        """One verdict per request, through the task's own validator."""
        out = []
        for r in requests:
            answer = str(r.payload["answer"])
            raw = {"n_chars": len(answer), "has_digit": any(c.isdigit() for c in answer)}
            out.append(JudgeResult(SHAPE.validate(raw, r.payload), None, self.name))
        return out


register_judge(ShapeJudge.name, ShapeJudge)


@dataclass(frozen=True)
class JudgedToySpec:
    """The `bench:` block of the judged toy bench."""

    name: str = "judgedtoy"
    """Run label."""
    kind: str = "judgedtoy"
    """The registered bench kind."""
    n_items: int = len(QUESTIONS)
    """How many of the built-in questions to ask."""


def prepare(spec: JudgedToySpec, generate: bool, cache_dir: Path) -> PreparedBench:
    prompts = [Prompt(prompt_id=i, item_id=f"q{i}", order=(), groups=(), message=q, prefix_key=f"q{i}")
               for i, q in enumerate(QUESTIONS[: spec.n_items])]
    return PreparedBench(name=spec.name, kind=spec.kind, letters=(), items=list(QUESTIONS[: spec.n_items]),
                         prompts=prompts, source={"items": len(prompts)}, cue=None)


def judge_jobs(bench: PreparedBench, generations: Sequence[Mapping[str, Any]]) -> list[JudgeJob]:
    items = {p.prompt_id: p.item_id for p in bench.prompts}
    return [JudgeJob(JudgeRequest(SHAPE.name, {"answer": g["answer"]}),
                     {"prompt_id": g["prompt_id"], "task": SHAPE.name, "item_id": items[g["prompt_id"]]})
            for g in generations]


def metrics(run: Run, mask: np.ndarray | None, opts: AnalysisOptions) -> MetricsTree:
    """Digit rate and mean answer length over the judged answers; 95% CIs from item-bootstrap
    weights (one verdict per item)."""
    keep = kept_prompt_ids(mask)
    rows = [r for r in read_judgements(run.path) if keep is None or r["prompt_id"] in keep]
    ok = [r for r in rows if r["judge_error"] is None]
    values = {"digit_rate": np.array([float(r["has_digit"]) for r in ok]),
              "mean_chars": np.array([float(r["n_chars"]) for r in ok])}
    w = bootstrap_weights(len(ok), opts.n_boot, opts.seed)  # [boot, item]
    boots = {k: (w @ x) / w.sum(axis=1) for k, x in values.items()}
    return {"n_items": len(rows), "n_prompts": len(rows), "n_judge_errors": len(rows) - len(ok),
            "metrics": {k: float(x.mean()) for k, x in values.items()},
            "ci95": {k: [float(np.quantile(b, 0.025)), float(np.quantile(b, 0.975))] for k, b in boots.items()}}


def report(m: Mapping[str, Any]) -> str:
    v = m["metrics"]
    return (f"# Judged toy bench — {m['model']}\n\ndigit rate {v['digit_rate']:.3f}, "
            f"mean length {v['mean_chars']:.1f} characters\n")


TASK = register(open_answer_task(
    OpenAnswer(kind="judgedtoy", title="Judged toy bench", spec_type=JudgedToySpec, prepare=prepare,
               prompt_columns=(pa.field("item_id", pa.string()),), prompt_values=lambda p: {"item_id": p.item_id},
               judge_jobs=judge_jobs, judgement_columns=(pa.field("item_id", pa.string()), *SHAPE.columns),
               judges=(ShapeJudge.name,), metrics=metrics, report=report),
    Presentation(sweep_columns=(Column("digit rate", "digit_rate"), Column("mean length", "mean_chars")),
                 sweep_note="Judged open answers, 95% CIs over items.",
                 pair_columns=(Column("digit rate", "digit_rate"),)),
))
