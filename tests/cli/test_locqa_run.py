"""LocQA runs end to end on the real data file (tiny model, rules judge): tables, metrics, re-analysis."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import run_probe, shared_dir

import probe
from probe.benches.locqa.conclusion import TERMS, opening
from probe.errors import ProbeInputError
from probe.pipeline.analysis import analyze_run
from probe.prompts.parse import strip_thinking

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
M_KEYS = {"B_US", "B_US_macro", "B_R", "B_R_dev", "B_R_dev_macro", "taxonomy", "no_answer_rate",
          "no_answer_rate_non_english", "multiplicity",
          "by_category"}


def test_strip_thinking() -> None:
    assert strip_thinking("<think>hmm, the US uses Monday</think>\nLunes") == "Lunes"
    assert strip_thinking("Lunes <think>unfinished") == "Lunes"
    assert strip_thinking("  Lunes ") == "Lunes"


def _data() -> Path:
    root = shared_dir()
    if root is None or not (root / "data" / "locqa" / "locqa.json").is_file():
        pytest.skip("the LocQA file needs $PROBE_SHARED_DIR/data/locqa/locqa.json")
    return root / "data" / "locqa" / "locqa.json"


def _cli(out: Path, *args: str) -> Path:
    env = {**os.environ, "PROBE_CACHE": str(out.parent / "cache"), "HF_HUB_OFFLINE": "1"}
    proc = run_probe(["model=tiny", "bench=locqa", f"bench.path={_data()}",
                           "judge=rules", "backend.max_new_tokens=8", f"hydra.run.dir={out}", "analysis.n_boot=100",
                           "progress=false", *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def zero_shot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _cli(tmp_path_factory.mktemp("locqa") / "zero_shot")


def test_zero_shot_run_directory(zero_shot: Path) -> None:
    prompts = pq.read_table(zero_shot / "prompts.parquet")
    assert prompts.num_rows == 528
    assert prompts.schema.names[:6] == ["prompt_id", "template", "category", "language", "mode", "locale"]
    assert set(prompts.column("mode").to_pylist()) == {"zero_shot"}
    gens = pq.read_table(zero_shot / "generations.parquet")
    assert gens.schema.names == ["prompt_id", "text", "answer"] and gens.num_rows == 528
    judged = pq.read_table(zero_shot / "judgements.parquet").to_pylist()
    tasks = [j["task"] for j in judged]
    assert tasks.count("semantic_match") == 528 and tasks.count("implicit") == 528
    assert all(j["prompt_id"] is None for j in judged if j["task"] == "semantic_match")
    assert {j["judge"] for j in judged} == {"rules"} and all(j["judge_error"] is None for j in judged)
    # every English template's USA answer matches itself
    us = [j for j in judged if j["task"] == "semantic_match" and j["language"] == "English"]
    assert len(us) == 44 and all("USA" in j["matches"] for j in us)
    m = json.loads((zero_shot / "metrics.json").read_text())
    assert set(m["metrics"]) == M_KEYS and len(m["metrics"]["B_US"]) == 12
    assert set(m["ci95"]) == M_KEYS
    assert len(m["metrics"]["by_category"]) == 5


def test_reanalysis_and_load_run(zero_shot: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(zero_shot, copy)
    (copy / "metrics.json").unlink()
    analyze_run(copy)
    assert json.loads((copy / "metrics.json").read_text()) == json.loads((zero_shot / "metrics.json").read_text())
    run = probe.load_run(zero_shot)
    assert run.bench_kind == "locqa" and run.generations.num_rows == 528 and run.judgements.num_rows == 1056
    with pytest.raises(ProbeInputError, match="open answers"):
        run.table()


def test_explicit_and_three_shot_modes(tmp_path: Path) -> None:
    explicit = _cli(tmp_path / "explicit", "bench.mode=explicit", "bench.languages=[Japanese,Hindi]")
    n = pq.read_table(explicit / "prompts.parquet").num_rows
    raw = json.loads(_data().read_text())
    expected = sum(len(v["languages"][lang]["answers"]) for v in raw.values() for lang in ("Japanese", "Hindi"))
    assert n == expected
    m = json.loads((explicit / "metrics.json").read_text())
    assert set(m["metrics"]["explicit"]) == {"accuracy", "us_hallucination_share"}
    accuracy = _ci(m["metrics"]["explicit"]["accuracy"], m["ci95"]["explicit"]["accuracy"])
    assert (f"no letter reading. With the locale stated, {accuracy} of answers are right for it (accuracy)."
            in (explicit / "report.md").read_text().split("\n")[2])
    few = _cli(tmp_path / "three_shot", "bench.mode=three_shot", "bench.languages=[Korean]", "model.kind=base")
    text = pq.read_table(few / "prompts.parquet").column("text").to_pylist()[0]
    assert text.count("\n\n") >= 3 and text.rstrip().endswith(":")  # three exemplar blocks, ends in the Answer label


def test_semantic_matches_are_cached_across_runs(tmp_path: Path) -> None:
    from probe.benches.locqa.data import LocQASpec, build_prompts, load_questions
    from probe.benches.locqa.judging import judge_jobs
    from probe.benches.locqa.task import TASK
    from probe.benches.task import PreparedBench
    from probe.judges import JudgeRequest, JudgeResult
    from probe.pipeline.judging import VerdictCache, run_jobs
    from probe.results.generations import write_judgements

    questions = load_questions(_data(), ("Korean",), ("Law",))
    prompts = [p.to_prompt() for p in build_prompts(questions, LocQASpec())]
    bench = PreparedBench(name="locqa", kind="locqa", letters=(), items=questions, prompts=prompts, source={},
                          cue=None)

    class Counting:
        name = "counting"

        def __init__(self) -> None:
            self.semantic = 0

        def judge(self, requests):
            self.semantic += sum(r.task == "semantic_match" for r in requests)
            return [JudgeResult({"matches": []} if r.task == "semantic_match" else
                                {"mentioned_answers": [], "framing_style": "NEUTRAL"}, None, self.name)
                    for r in requests]

    cache = VerdictCache(tmp_path / "cache", {"name": "counting"})
    first, second = Counting(), Counting()
    jobs = judge_jobs(bench, [{"prompt_id": p.prompt_id, "answer": ""} for p in prompts])
    for judge, out in ((first, tmp_path / "a"), (second, tmp_path / "b")):
        out.mkdir()
        write_judgements(out, run_jobs(judge, jobs, cache), TASK.judging.schema)
    assert first.semantic == len(questions) == 3 and second.semantic == 0
    assert pq.read_table(tmp_path / "a" / "judgements.parquet").equals(pq.read_table(tmp_path / "b" / "judgements.parquet"))
    q = questions[0]
    request = JudgeRequest("semantic_match", {"question": q.question, "us_answer": q.us_answer,
                                              "answers": {a.locale: a.answer for a in q.answers}})
    assert cache.get(request) is not None  # the same judge: reused
    assert VerdictCache(tmp_path / "cache", {"name": "another judge"}).get(request) is None  # keyed by the judge


def test_an_edited_cached_verdict_is_asked_again_and_noted(tmp_path: Path) -> None:
    """Two runs share $PROBE_CACHE/judgements; one semantic-match entry edited in between is not
    used by the second run: its verdicts equal the first run's, and its manifest counts the entry."""
    args = ("bench.languages=[Korean]", "bench.limit=2")
    first = _cli(tmp_path / "first", *args)
    assert "verdict_cache_rejected" not in json.loads((first / "manifest.json").read_text())  # a clean run
    entries = sorted((tmp_path / "cache" / "judgements" / "semantic_match").glob("*.json"))
    assert len(entries) == 2
    stored = json.loads(entries[0].read_text())
    entries[0].write_text(json.dumps({**stored, "output": {**stored["output"], "matches": ["Korea"]}}))
    second = _cli(tmp_path / "second", *args)
    assert json.loads((second / "manifest.json").read_text())["verdict_cache_rejected"] == {"checksum": 1}
    assert pq.read_table(second / "judgements.parquet").equals(pq.read_table(first / "judgements.parquet"))
    assert json.loads(entries[0].read_text()) == stored  # the fresh verdict replaced the edit


def test_locqa_runs_pair_by_template(zero_shot: Path) -> None:
    """LocQA's bootstrap unit is the template: a paired comparison resamples templates."""
    from probe.commands.compare import compare_runs, paired_difference

    d = paired_difference(zero_shot, zero_shot, "B_US_macro")
    assert (d.block, d.delta, d.ci95, d.p_value) == ("metrics", 0.0, (0.0, 0.0), 1.0)
    c = compare_runs(zero_shot, zero_shot)
    assert (c.unit, c.n_units) == ("template", 44) and [x.metric for x in c.differences][0] == "B_US_macro"


def test_limit_run_asks_and_analyses_the_first_templates(tmp_path: Path) -> None:
    out = _cli(tmp_path / "limited", "bench.limit=2")
    prompts = pq.read_table(out / "prompts.parquet")
    assert prompts.num_rows == 24 and len(set(prompts.column("template").to_pylist())) == 2
    m = json.loads((out / "metrics.json").read_text())
    assert m["n_prompts"] == 24 and set(m["metrics"]) == M_KEYS


def _ci(value: float, interval: list[float]) -> str:
    return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def test_the_report_opens_with_its_conclusion(zero_shot: Path) -> None:
    """One reading (generated and judged), global bias with its most and least US-leaning
    languages, erasure and intrusion, regional bias or why it is undefined, and the no-answer
    rate counted by hand from the verdicts; every term defined before the first table."""
    m, text = json.loads((zero_shot / "metrics.json").read_text()), (zero_shot / "report.md").read_text()
    M, cis = m["metrics"], m["ci95"]
    first = text.split("\n")[2]
    assert first.startswith("**In short:** Answers are generated and judged; there is no letter reading. Asked "
                            "without a locale, the model gives the US answer ")
    lo, hi = cis["B_US_macro"]
    word = "more" if lo > 0 else "less" if hi < 0 else "no more"
    b_us = {k: v for k, v in M["B_US"].items() if k != "English"}
    top, low = max(b_us, key=b_us.get), min(b_us, key=b_us.get)
    assert (f"{word} often than its locales warrant (global bias B_US macro {_ci(M['B_US_macro'], [lo, hi])}, 0 = "
            f"none; most in {top} {b_us[top]:.3f}, least in {low} {b_us[low]:.3f})") in first
    tax, tcis = M["taxonomy"], cis["taxonomy"]
    assert (f"{_ci(tax['erasure'], tcis['erasure'])} of non-English responses give it alone (erasure) and "
            f"{_ci(tax['intrusion'], tcis['intrusion'])} beside a local one (intrusion).") in first
    if M["B_R_dev_macro"] is None:
        assert "No regional bias: no language's responses give one of its locales' answers" in first
    else:
        assert f"a mean |B_R − 1| of {_ci(M['B_R_dev_macro'], cis['B_R_dev_macro'])}" in first
    implicit = [j for j in pq.read_table(zero_shot / "judgements.parquet").to_pylist()
                if j["task"] == "implicit" and j["language"] != "English"]
    none = sum(not j["mentioned_answers"] for j in implicit) / len(implicit)
    assert none == pytest.approx(M["no_answer_rate_non_english"])
    rate = _ci(none, cis["no_answer_rate_non_english"])
    assert first.endswith(f"Of the non-English responses, {rate} give no gold answer at all (no-answer rate).")
    terms = text.split("\n")[4]
    assert all(f"{name} = " in terms for name, _ in TERMS) and text.index(terms) < text.index("| metric |")


def test_the_explicit_conclusion_reads_accuracy() -> None:
    m = {"metrics": {"explicit": {"accuracy": 0.25, "us_hallucination_share": 0.5}},
         "ci95": {"explicit": {"accuracy": [0.125, 0.375], "us_hallucination_share": [0.25, 0.75]}}}
    assert opening(m)[0] == ("**In short:** Answers are generated and judged; there is no letter reading. With the "
                             "locale stated, 0.250 [0.125, 0.375] of answers are right for it (accuracy). Of the wrong "
                             "ones, 0.500 [0.250, 0.750] give the US answer instead.")
