"""GlobalOpinionQA through the generic tools, on one Hydra multirun of the tiny model over three
questions of the shared subset (the letter reading, the cloze text reading and both), shared by
every test here: the text reading recomputed from its stored scores, the letter-vs-text agreement
per number of options, `probe compare` paired over questions, the sweep table and `probe view`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import probe_env, run_probe
from test_globalopinion_data import subset
from test_globalopinion_run import recompute
from test_view import _dom, _listed

from probe.benches.globalopinion.conclusion import TERMS
from probe.benches.globalopinion.countries import display_name, table_name
from probe.benches.globalopinion.report import report
from probe.commands.compare import compare_runs
from probe.commands.view import main as view
from probe.errors import ProbeInputError
from probe.results.run import load_run

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
MEANS = ("default.mean.similarity", "default.mean.lift", "default.mean.macro_lift", "cross_national.mean.gain",
         "cross_national.mean.specificity")


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """`probe -m model=tiny bench=globalopinion bench.limit=3 bench.min_questions=1
    backend.mode=letters,text,letters+text` (every national sample ranked):
    the sweep directory and what the multirun printed."""
    root = tmp_path_factory.mktemp("goqa_sweep")
    proc = run_probe(["-m", "model=tiny", "bench=globalopinion",
                      f"bench.path={subset()}", "bench.limit=3", "bench.min_questions=1", "backend.mode=letters,text,letters+text",
                           f"hydra.sweep.dir={root / 'sweep'}", "analysis.n_boot=100", "progress=false"],
                          cwd=REPO, env=probe_env(root / "cache"), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return root / "sweep", proc.stdout


MODES = ("letters", "text", "letters+text")


def _run(sweep: tuple[Path, str], mode: str) -> Path:
    return sweep[0] / f"{MODES.index(mode)}_globalopinion_tiny_backend.mode-{mode}"


def _metrics(run: Path) -> dict[str, Any]:
    return json.loads((run / "metrics.json").read_text())


def _at(tree: dict[str, Any], path: str) -> Any:
    for key in path.split("."):
        tree = tree[key]
    return tree


def test_text_reading_is_the_softmax_of_the_stored_option_loglikelihoods(sweep) -> None:
    run = _run(sweep, "text")
    prompts = pq.read_table(run / "prompts.parquet").sort_by("prompt_id").to_pylist()
    scores = pq.read_table(run / "scores.parquet").sort_by("prompt_id").to_pylist()
    assert all(s["letter_logprobs"] is None for s in scores)  # text mode reads no letter
    by_text: dict[int, list[float]] = {}
    for p, s in zip(prompts, scores):
        k = sum(o >= 0 for o in p["order"])
        # cloze: the question alone (cued when cross_national), no option list
        assert "Here are the options:" not in p["text_prompt"]
        cue = f"How would someone from {display_name(p['target'])} answer" if p["target"] else "How would someone"
        assert (cue in p["text_prompt"]) == (p["condition"] == "cross_national")
        # letters beyond the question's K have no continuation
        assert s["text_logprobs"][k:] == [float("-inf")] * (len(p["order"]) - k)
        assert s["text_n_bytes"][k:] == [0] * (len(p["order"]) - k) and all(n > 0 for n in s["text_n_bytes"][:k])
        # every rotation reads its text prompt's scores in its own letter order
        source = by_text.setdefault(p["text_prompt_id"], [0.0] * k)
        for letter, option in enumerate(p["order"][:k]):
            source[option] = s["text_logprobs"][letter]
        assert [source[o] for o in p["order"][:k]] == s["text_logprobs"][:k]
    assert len(by_text) == len({(p["item_id"], p["target"]) for p in prompts})  # one per question and cue
    metrics = _metrics(run)
    assert metrics["mode"] == "text"
    for tree, score in (("expected", lambda r: r["text_logprobs"]),
                        ("text_norm", lambda r: [lp / max(n, 1) for lp, n in zip(r["text_logprobs"], r["text_n_bytes"])])):
        expected = recompute(run, score)
        for cond, by_country in expected.items():
            got = metrics[tree][cond]["similarity"]
            assert set(got) == set(by_country)
            assert all(abs(got[c] - v) <= 1e-9 for c, v in by_country.items()), (tree, cond)


def test_letter_text_agreement_reads_each_questions_own_letters(sweep) -> None:
    run = _run(sweep, "letters+text")
    prompts = pq.read_table(run / "prompts.parquet").sort_by("prompt_id").to_pylist()
    scores = pq.read_table(run / "scores.parquet").sort_by("prompt_id").to_pylist()
    same: dict[str, list[bool]] = {}
    for p, s in zip(prompts, scores):
        k = sum(o >= 0 for o in p["order"])
        picks = (int(np.argmax(s["letter_logprobs"][:k])), int(np.argmax(s["text_logprobs"][:k])))
        same.setdefault(f"{p['condition']} (K={k})", []).append(picks[0] == picks[1])
    agreement = _metrics(run)["agreement"]
    assert set(agreement) == set(same)
    for key, block in agreement.items():
        k = int(key.rsplit("=", 1)[1].rstrip(")"))
        assert block["n_prompts"] == len(same[key]) and block["argmax"] == pytest.approx(np.mean(same[key]))
        assert "" not in block["by_group"] and len(block["by_group"]) == k  # the question's K options, no padding


def test_compare_is_paired_over_questions(sweep) -> None:
    """Paired over questions between runs of one reading (the letters of `letters` and of
    `letters+text`); a letters run and a text run are different readings and are refused."""
    letters, both = _run(sweep, "letters"), _run(sweep, "letters+text")
    with pytest.raises(ProbeInputError, match="different readings"):
        compare_runs(letters, _run(sweep, "text"), n_boot=200, seed=1)
    a, b = _metrics(letters), _metrics(both)
    c = compare_runs(letters, both, n_boot=200, seed=1)
    assert c.paired and c.unit == "item_id" and c.n_units == 3
    assert [d.metric for d in c.differences] == list(MEANS)
    for d in c.differences:
        assert (d.a, d.b) == (_at(a["expected"], d.metric), _at(b["expected"], d.metric))
        assert d.delta == pytest.approx(d.a - d.b, abs=1e-12) and d.ci95[0] <= d.delta <= d.ci95[1]
    same = compare_runs(letters, letters, n_boot=200, seed=1)
    assert all((d.delta, d.ci95) == (0.0, (0.0, 0.0)) for d in same.differences)


def test_sweep_table_shows_every_run_with_its_intervals(sweep) -> None:
    """The printed table keeps the columns that fit a terminal (the rest counted and left to the
    sweep report); every run's headline means and intervals are in the summary."""
    root, printed = sweep
    table = printed[printed.rindex("GlobalOpinionQA:"):]
    header = next(line for line in table.splitlines() if line.startswith("| run |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    summary = pq.read_table(root / "report" / "summary.parquet").to_pylist()
    for mode in ("letters", "text"):
        m = _metrics(_run(sweep, mode))
        row = next(line for line in table.splitlines() if f"backend.mode-{mode}]" in line)
        cells = dict(zip(columns, (c.strip() for c in row.strip("|").split("|"))))
        for path in MEANS:
            value, (lo, hi) = _at(m["expected"], path), _at(m["ci95"]["expected"], path)
            stored = next(r for r in summary if r["metric"] == path and r["flavour"] == "expected"
                          and r["run"].endswith(f"mode-{mode}"))
            assert (stored["value"], stored["lo"], stored["hi"]) == (value, lo, hi), (mode, path)
            if path.replace(".", " ") in cells:
                assert cells[path.replace(".", " ")] == f"{value:.3f} [{lo:.3f}, {hi:.3f}]", (mode, path)
        lift = m["expected"]["default"]["lift"]
        ranked = sorted(((c, lift[c]) for c in m["ranking"]["ranked"]), key=lambda kv: kv[1])
        for label, (country, value) in (("lowest lift", ranked[0]), ("highest lift", ranked[-1])):
            if label in cells:
                assert cells[label].startswith(f"{table_name(country)} {value:+.3f}")
    assert "highest lift" in columns and re.search(r"\(\d+ more columns? in ", table)


def test_view_lists_the_hand_counted_prompts(sweep, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = sweep[0]
    view([str(root), f"out={tmp_path / 'out'}"])
    assert "probe view: wrote" in capsys.readouterr().out
    rows = [p for mode in MODES for p in pq.read_table(_run(sweep, mode) / "prompts.parquet").to_pylist()]
    country = next(p["target"] for p in rows if p["target"] is not None)
    want = sum(p["condition"] == "cross_national" and (p["target"] == country or country in p["groups"]) for p in rows)
    dom = _dom(tmp_path / "out" / "samples.html", f"condition=cross_national&group={country}", tmp_path)
    assert f'data-rows="{len(rows)}"' in dom and _listed(dom)[0] == want > 0
    # a letter a question does not show is no filter value and gets no probability
    assert "<option value=\"\"></option>" not in dom
    samples = load_run(_run(sweep, "letters")).samples()
    p = samples[[c for c in samples.columns if re.fullmatch(r"p_[A-Z]", c)]].to_numpy()
    shown = samples[[c for c in samples.columns if re.fullmatch(r"option_[A-Z]", c)]].to_numpy() >= 0
    assert (p[~shown] == 0).all() and np.allclose(p.sum(axis=1), 1.0) and (~shown).any()


def test_report_finds_countries_whose_names_hold_dots(sweep) -> None:
    m = _metrics(_run(sweep, "letters"))
    country = m["ranking"]["ranked"][0]
    renamed = json.loads(json.dumps(m).replace(json.dumps(country), json.dumps("S. Korea")))
    renamed.pop("countries")  # its names were renamed too; without it a table names the label's display name
    renamed["p"]["expected"]["default"]["lift"] = 0.001  # as if the test rejected: the headline names countries
    before = next(line for line in report(m).splitlines() if line.startswith(f"| 1 | {table_name(country)}"))
    after = next(line for line in report(renamed).splitlines() if "| South Korea (`S. Korea`) |" in line)
    assert after == before.replace(table_name(country), "South Korea (`S. Korea`)") and "| – |" not in after[:60]
    assert "gain most on **South Korea** (lift " in report(renamed)


def test_the_report_opens_with_its_conclusion_in_both_readings(sweep) -> None:
    """The first paragraph names the ranked countries with the highest and lowest lift (found
    again from the independent recomputation), their lifts and intervals, the pooled and macro
    mean lift, the debiased reading's, τ, the survey-order reading, the cue's specificity and the
    near-uniform and letter caveats."""
    run = _run(sweep, "letters")
    m, text = _metrics(run), (run / "report.md").read_text()
    stored = text.split("\n")[2]
    if m["p"]["expected"]["default"]["lift"] >= 0.05:  # no country stands out: none is named
        assert "no detectable difference between the" in stored and "**" not in stored.removeprefix("**In short:**")
    # the sentence that names countries, as a rejecting test would have it (simultaneous intervals)
    m = {**m, "p": {b: {"default": {"lift": 0.001}} for b in ("expected", "debiased")}}
    first = report(m).split("\n")[2]
    by_hand = recompute(run)["default"]
    uniform = m["expected"]["default"]["uniform"]
    lift = {c: by_hand[c] - uniform[c] for c in m["ranking"]["ranked"]}
    top, low = max(lift, key=lift.get), min(lift, key=lift.get)
    exp, cis = m["expected"]["default"], m["sim95"]["expected"]["default"]
    n = m["n_questions"]["default"]

    def cell(tree: dict, ci: dict, country: str) -> str:
        lo, hi = ci["lift"][country]
        interval = ", n = 1, no interval" if n[country] == 1 else f" [{lo:.3f}, {hi:.3f}]"
        return (f"**{table_name(country)}** (lift {tree['lift'][country]:.3f}{interval}, similarity "
                f"{tree['similarity'][country]:.3f}, {n[country]} question{'s' * (n[country] != 1)})")

    assert first.startswith("**In short:** Expected reading (probability-weighted answers): with no country named "
                            f"(`default`), ranked by lift over a uniform model among the {len(lift)} countries with at "
                            "least 1 question (national samples), the model's answers gain most on ")
    assert f"gain most on {cell(exp, cis, top)} and least on {cell(exp, cis, low)} (test of equal lifts" in first
    mean_lift, lift_ci = exp["mean"]["similarity"] - exp["mean"]["uniform"], m["ci95"]["expected"]["default"]["mean"]["lift"]
    assert f"mean lift {mean_lift:.3f} [{lift_ci[0]:.3f}, {lift_ci[1]:.3f}] over all (question, country) pairs" in first
    deb, dcis = m["debiased"]["default"], m["sim95"]["debiased"]["default"]
    dlift = {c: deb["lift"][c] for c in lift}
    dtop, dlow = max(dlift, key=dlift.get), min(dlift, key=dlift.get)
    assert (f"Debiased reading (letter prior removed): highest lift {cell(deb, dcis, dtop)}, lowest "
            f"{cell(deb, dcis, dlow)}; mean lift ") in first
    assert f"The two readings rank the countries' lifts with τ = {m['ranking_tau']:.3f} (1 = same order)." in first
    assert "Read once in the survey's order (the paper's protocol), the mean lift is " in first
    assert f"Cue specificity {m['expected']['cross_national']['mean']['specificity']:.3f} [" in first
    # the tiny model is near uniform and letter-driven: the conclusion says what that does to the reading
    assert m["near_uniform"] and (f"(mean normalised entropy {m['model_entropy']:.3f}, 1 = uniform): its lifts are "
                                  "small") in first
    assert m["letter_warnings"] and ("the model shows no measurable opinion" in first
                                     or first.endswith("the debiased reading is the one that speaks about the countries."))
    terms = text.split("\n")[4]
    assert terms.startswith("**Terms:** similarity = 1 − Jensen–Shannon distance (base 2)")
    assert all(f"{name} = " in terms for name, _ in TERMS) and text.index(terms) < text.index("| rank |")


def test_the_conclusion_says_why_a_reading_is_missing(sweep) -> None:
    m = _metrics(_run(sweep, "letters"))
    none = {**m, "debiased": None, "near_uniform": False, "letter_warnings": [],
            "letter_prior_estimator": {"default (K=4)": {"estimator": "none", "reason": "one ordering per item"}}}
    first = report(none).split("\n")[2]
    assert "No debiased reading: no letter prior could be estimated (default (K=4): one ordering per item)." in first
    assert "close to uniform" not in first
