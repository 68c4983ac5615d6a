"""The forced-choice task builder: a new K-option bench states only its own parts (spec, prepare,
metric formula, report body, table columns) and `forced_choice_task` supplies the rest — the
letter tables, the metric header, the letter-prior blocks, the headline and the letter report —
so a 2-option bench of ~20 lines runs end to end on the tiny model."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from probe.benches import forced
from probe.benches.task import Column, Judging, PreparedBench, Presentation, no_figures, no_judging
from probe.metrics.core import AnalysisOptions, expected_greedy_ci, ratio, wsum
from probe.results.scores import ScoreTable
from probe.types import LETTERS, Item, Option, Prompt

# --- the whole bench: two options per question, one "x", one "y", shown in both orders ----------
QUESTIONS = (("Pick a drink.", "tea", "coffee"), ("Pick a pet.", "cat", "dog"), ("Pick a sport.", "judo", "golf"))


@dataclass(frozen=True)
class PairSpec:
    """The `bench:` block."""

    name: str = "pair"
    kind: str = "pair"


def prepare(spec: PairSpec, generate: bool, cache_dir: Path) -> PreparedBench:
    items = [Item(f"p{i}", q, (Option("x", a, "x"), Option("y", b, "y"))) for i, (q, a, b) in enumerate(QUESTIONS)]
    prompts = [Prompt(prompt_id=2 * i + k, item_id=it.item_id, order=(k, 1 - k),
                      groups=(it.options[k].group, it.options[1 - k].group),
                      message=f"{it.question}\nA. {it.options[k].text}\nB. {it.options[1 - k].text}",
                      prefix_key=it.item_id, design=(("condition", "pair"), ("rotation", k)))
               for i, it in enumerate(items) for k in range(2)]
    return PreparedBench(name=spec.name, kind=spec.kind, letters=LETTERS[:2], items=items, prompts=prompts,
                         source={"items": len(items)})


def compute(table: ScoreTable, opts: AnalysisOptions, spec: PairSpec) -> dict[str, Any]:
    """`x_share`: the mean probability of the "x" option over prompts (each item shown twice)."""
    items, item = np.unique(table.item_id.astype(str), return_inverse=True)
    is_x = table.groups.astype(str) == "x"

    def reduce(probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return (np.bincount(item, (probs * is_x).sum(axis=1), len(items)),
                np.bincount(item, minlength=len(items)).astype(float))

    def evaluate(sums: tuple[np.ndarray, np.ndarray], w: np.ndarray) -> dict[str, Any]:
        return {"x_share": ratio(wsum(w, sums[0]), wsum(w, sums[1]))}

    return expected_greedy_ci(table.logprobs, len(items), reduce, evaluate, opts.temperature, opts.n_boot, opts.seed)

TASK = forced.forced_choice_task(
    forced.ForcedChoice(kind="pair", title="Pair bench", spec_type=PairSpec, prepare=prepare, compute=compute,
                        report=lambda m: f"# Pair bench — {m['model']}\n\nx share {m['expected']['x_share']:.3f}\n"),
    Presentation(sweep_columns=(Column("x share", "x_share"),), sweep_note="Expected x share, 95% CIs over items."))
# --------------------------------------------------------------------------------------------------


def test_the_builder_supplies_every_shared_part() -> None:
    assert (TASK.kind, TASK.title, TASK.data.spec_type, TASK.answers, TASK.scoring.unit) == (
        "pair", "Pair bench", PairSpec, "letters", "item_id")
    assert TASK.text is None and TASK.factors is not None and TASK.factors.reword is None
    assert TASK.data.prepare is prepare and TASK.tables is forced.LETTER_TABLES
    assert TASK.scoring.headline is forced.headline
    assert TASK.scoring.figures is no_figures and TASK.judging == Judging() and TASK.judging.jobs is no_judging
    p = TASK.presentation
    assert (p.pair_columns, p.curve_metrics, p.steer_columns, p.sweep_figures) == ((), (), (), no_figures)
    assert TASK.judging.judges == () and TASK.judging.jobs(prepare(PairSpec(), False, Path(".")), []) == []


def test_builtin_forced_choice_benches_share_the_letter_parts() -> None:
    from probe.benches.registry import get_task

    for kind in ("disco", "ccd"):
        task = get_task(kind)
        assert task.answers == "letters" and task.tables is forced.LETTER_TABLES
        assert task.scoring.headline is forced.headline
    assert get_task("ccd").judging.judges and not get_task("disco").judging.judges


@pytest.fixture(scope="module")
def pair_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import probe.pipeline.execute as pipeline
    from probe.benches import registry
    from probe.config import package_conf_dir
    from probe.pipeline.spec import run_config

    tmp = tmp_path_factory.mktemp("pair")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROBE_CACHE", str(tmp / "cache"))
        mp.setitem(registry._TASKS, TASK.kind, TASK)  # registered for this run only
        with initialize_config_dir(config_dir=str(package_conf_dir()), version_base="1.3"):
            cfg = compose(config_name="config", overrides=["model=tiny", "bench=disco", "analysis.n_boot=50",
                                                           "progress=false"])
        values = OmegaConf.to_container(cfg, resolve=True)
        values["bench"] = {"name": "pair", "kind": "pair"}  # type: ignore[index]
        pipeline.run(run_config(values, tmp / "run"))  # type: ignore[arg-type]
    return tmp / "run"


def test_a_builder_bench_runs_with_the_shared_letter_metrics(pair_run: Path) -> None:
    m = json.loads((pair_run / "metrics.json").read_text())
    assert (m["bench"], m["n_items"], m["n_prompts"]) == ("pair", 3, 6)
    assert {"letter_mass", "greedy_valid_rate", "temperature", "bootstrap"} <= set(m)
    scores = pq.read_table(pair_run / "scores.parquet").to_pylist()
    prompts = {r["prompt_id"]: r for r in pq.read_table(pair_run / "prompts.parquet").to_pylist()}
    # the bench's own formula on the stored letter log-probs: P(x) averaged over the six prompts
    p_x = []
    for s in scores:
        lp = np.asarray(s["letter_logprobs"], float)
        probs = np.exp(lp - lp.max()) / np.exp(lp - lp.max()).sum()
        p_x.append(probs[list(prompts[s["prompt_id"]]["groups"]).index("x")])
    assert m["expected"]["x_share"] == pytest.approx(float(np.mean(p_x)), abs=1e-6)
    assert len(m["ci95"]["expected"]["x_share"]) == 2 and 0.0 <= m["debiased"]["x_share"] <= 1.0
    assert m["letter_prior_estimator"]["pair"]["estimator"] == "rotations"
    assert pq.read_schema(pair_run / "prompts.parquet").equals(forced.LETTER_TABLES.prompts_schema)


def test_a_builder_bench_report_wraps_its_body(pair_run: Path) -> None:
    text = (pair_run / "report.md").read_text()
    assert text.startswith("# Pair bench — tiny\n") and "x share " in text
    assert "letter prior" in text.lower() and (pair_run / "DONE").is_file()
