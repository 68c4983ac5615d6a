"""Reports that answer first, on one tiny demo run shared by every test: the conclusion in both
readings, the short letter warning with its details, abbreviations defined where they first
appear, the per-culture table and figure in both readings, the HTML of a markdown library, the
run's last printed line; and what reads the same run afterwards: `Run.group_distribution` in
each reading, `probe compare` without metrics constant by construction, `probe runs` and
`probe export`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pandas as pd
import pytest

from conftest import run_probe

import probe
from probe.benches.disco.conclusion import TERMS
from probe.benches.disco.report import report as disco_report
from probe.commands import export as export_command
from probe.report.summary import caveat, scope
from probe.commands import runs as runs_command
from probe.commands.compare import compare_runs
from probe.errors import ProbeInputError
from probe.viz.html import markdown_to_html

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The tiny model on 8 demo items, all four conditions; the directory and what it printed."""
    root = tmp_path_factory.mktemp("answers")
    out = root / "runs" / "demo-run"
    proc = run_probe(["model=tiny", "bench=demo", "bench.limit=8",
                           f"hydra.run.dir={out}", "analysis.n_boot=200", "progress=false"], cwd=REPO_ROOT,
                          env={**os.environ, "PROBE_CACHE": str(root / "cache"), "HF_HUB_OFFLINE": "1"},
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc.stdout


@pytest.fixture(scope="module")
def metrics(demo: tuple[Path, str]) -> dict:
    return json.loads((demo[0] / "metrics.json").read_text())


def test_the_last_printed_line_names_the_report_page(demo: tuple[Path, str]) -> None:
    out, stdout = demo
    assert stdout.rstrip().splitlines()[-1] == f"probe: run written to {out}; open {out / 'report.html'}"


def test_the_first_paragraph_concludes_in_both_readings(demo: tuple[Path, str], metrics: dict) -> None:
    lines = (demo[0] / "report.md").read_text().split("\n")
    first = lines[2]
    assert first.startswith("**In short:** Expected reading (probability-weighted picks): with no cue (C0)")
    kl, ci = metrics["debiased"]["C0"]["KL"], metrics["ci95"]["debiased"]["C0"]["KL"]
    p = metrics["p"]["debiased"]["C0"]["KL"]
    debiased = first.split("Debiased reading (letter prior removed): with no cue (C0) ")[1]
    assert f"KL {kl:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] nats" in debiased and f"p = {p:.3g}" in debiased
    csd = metrics["debiased"]["C0"]["CSD"]
    top = max(csd, key=csd.get)
    if p < 0.05:  # a culture is named only when the test of no preference rejects
        assert debiased.startswith("the picks spread ") and f"most {top} {csd[top]:.3f}" in debiased
    else:
        assert debiased.startswith("there is no detectable preference") and f"most {top}" not in debiased
    cr = metrics["debiased"]["C2"]["CR"]
    assert f"(CR {cr:.3f} [" in first
    # the tiny model's letters drive its answers: the conclusion points at the debiased reading
    assert metrics["letter_warnings"] and first.endswith("the debiased reading is the one that speaks about culture.")
    # the HTML page's first paragraph is the same conclusion
    page = (demo[0] / "report.html").read_text()
    assert re.search(r"</h1>\s*<p><strong>In short:</strong> Expected reading", page)


def test_the_warning_is_a_short_sentence_and_a_table(demo: tuple[Path, str], metrics: dict) -> None:
    text = (demo[0] / "report.md").read_text()
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("> **Warning:**"))
    conditions = ", ".join(w["condition"] for w in metrics["letter_warnings"])
    letter = metrics["letter_warnings"][0]["letter"]
    where = conditions if len(metrics["letter_warnings"]) <= 3 else f"{len(metrics['letter_warnings'])} conditions (table below)"
    assert lines[start] == (f"> **Warning:** Letter {letter} drives the answers in {where}: read the `debiased` "
                            "metrics and the content share first.")
    assert lines[start + 1] == "" and lines[start + 2].startswith("| condition | options | letter | prior (uniform) |")
    w = metrics["letter_warnings"][0]
    assert f"| {w['condition']} | 4 | {letter} | {w['prior']:.2f} (0.25) | " in text
    page = (demo[0] / "report.html").read_text()
    assert not re.search(r"<p>\s*&gt;", page)  # a quote, not a literal `>` opening a paragraph
    assert re.search(r"<blockquote>\s*<p><strong>Warning:</strong> Letter", page) and "<table>" in page


def test_every_abbreviation_is_defined_where_it_first_appears(demo: tuple[Path, str]) -> None:
    """The first time the report uses a term it is either spelt out beside it in the conclusion
    or defined in the Terms paragraph (`X = …`), before any table."""
    text = (demo[0] / "report.md").read_text()
    spelt = {"CSD": "cultural selection distribution, CSD", "KL": "Kullback–Leibler (KL)",
             "CR": "compliance rate, CR"}
    terms = text.index("**Terms:**")
    for name, _ in TERMS:
        if name == "C0–C3":
            continue
        first = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text)
        assert first is not None, name
        if name in spelt:
            assert text.index(spelt[name]) <= first.start() < terms, name
        elif name in ("C0", "C2"):
            continue
        else:
            assert first.start() == text.index(f"; {name} = ", terms) + 2, name
    assert text.index("**Terms:**") < text.index("| metric |")


def test_per_culture_table_and_figure_show_both_readings(demo: tuple[Path, str], metrics: dict) -> None:
    text = (demo[0] / "report.md").read_text()
    culture = sorted(metrics["expected"]["C0"]["CSD"])[0]
    exp, deb = metrics["expected"], metrics["debiased"]
    assert (f"| {culture} | expected | {exp['C0']['CSD'][culture]:.3f} | {exp['C1']['CR_by_culture'][culture]:.3f} |"
            in text)
    assert f"|  | debiased | {deb['C0']['CSD'][culture]:.3f} | {deb['C1']['CR_by_culture'][culture]:.3f} |" in text
    page = (demo[0] / "report.html").read_text()
    assert "share of expected selections (blue) and of the debiased ones" in page  # csd.png's caption


def test_reading_bars_draws_each_reading() -> None:
    from probe.viz.figures import pyplot, reading_bars

    fig, ax = pyplot().subplots()
    keys = ["a", "b", "c"]
    reading_bars(ax, [("expected", {"a": 0.5, "b": 0.3, "c": 0.2}, None),
                      ("debiased", {"a": 0.3, "b": 0.3, "c": 0.4}, {k: [0.1, 0.6] for k in keys})], keys)
    heights = [round(p.get_height(), 3) for p in ax.patches]
    assert heights == [0.5, 0.3, 0.2, 0.3, 0.3, 0.4]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["uniform", "expected", "debiased"]
    pyplot().close(fig)


def test_group_names_stay_text_in_the_page(metrics: dict) -> None:
    """A culture named `<b>Greece</b>` is shown as that text in report.html, never as markup."""
    m = json.loads(json.dumps(metrics))
    for block in ("expected", "debiased"):
        for cond, key in (("C0", "CSD"), ("C1", "CR_by_culture")):
            tree = m[block][cond][key]
            tree["<b>Greece</b>"] = tree.pop("Greece")
    body = markdown_to_html(disco_report(m))
    assert "&lt;b&gt;Greece&lt;/b&gt;" in body and "<b>" not in body


def test_group_distribution_in_each_reading(demo: tuple[Path, str], metrics: dict) -> None:
    """Expected and debiased C0 shares by hand: per item and culture, the rotation estimator's
    debiased probability is ∝ exp(mean over the item's four C0 rotations of the log-prob of the
    letter showing the culture); shares are exposure-normalised over cultures."""
    out = demo[0]
    run = probe.load_run(out)
    mask = run.mask(condition="C0")
    prompts = pq.read_table(out / "prompts.parquet").sort_by("prompt_id").to_pylist()
    lp = np.array(pq.read_table(out / "scores.parquet").sort_by("prompt_id").column("letter_logprobs").to_pylist())
    rows = [i for i, p in enumerate(prompts) if p["condition"] == "C0"]
    logp = lp[rows] - np.log(np.exp(lp[rows]).sum(axis=1, keepdims=True))
    sel_e: dict[str, float] = {}
    sel_d: dict[str, float] = {}
    app: dict[str, float] = {}
    by_item: dict[str, list[int]] = {}
    for r, i in enumerate(rows):
        by_item.setdefault(prompts[i]["item_id"], []).append(r)
    for members in by_item.values():
        mean_lp: dict[str, list[float]] = {}
        for r in members:
            for j, g in enumerate(prompts[rows[r]]["groups"]):
                mean_lp.setdefault(g, []).append(logp[r, j])
                sel_e[g] = sel_e.get(g, 0.0) + float(np.exp(logp[r, j]))
                app[g] = app.get(g, 0.0) + 1.0
        content = {g: np.mean(v) for g, v in mean_lp.items()}
        z = sum(np.exp(c) for c in content.values())
        for g, c in content.items():
            sel_d[g] = sel_d.get(g, 0.0) + len(members) * float(np.exp(c) / z)

    def shares(sel: dict[str, float]) -> dict[str, float]:
        rate = {g: sel[g] / app[g] for g in sel}
        return {g: v / sum(rate.values()) for g, v in rate.items()}

    for reading, hand in (("expected", shares(sel_e)), ("debiased", shares(sel_d))):
        got = run.group_distribution(mask, reading=reading)
        assert got == pytest.approx(hand, abs=1e-9), reading
        assert got == pytest.approx(metrics[reading]["C0"]["CSD"], abs=1e-9)
    greedy = run.group_distribution(mask, reading="greedy")
    assert greedy == run.group_distribution(mask, greedy=True) and greedy != run.group_distribution(mask)
    with pytest.raises(ProbeInputError, match="reading: expected one of"):
        run.group_distribution(mask, reading="sampled")  # type: ignore[arg-type]


def test_compare_leaves_out_metrics_constant_by_construction(demo: tuple[Path, str], metrics: dict) -> None:
    out = demo[0]
    assert metrics["debiased"]["C3"]["PPR"] == pytest.approx(0.25)  # 1/K by construction
    expected = [d.metric for d in compare_runs(out, out, n_boot=20).differences]
    debiased = [d.metric for d in compare_runs(out, out, flavour="debiased", n_boot=20).differences]
    assert "C3.PPR" in expected and "C3.PPR" not in debiased
    assert [m for m in expected if m != "C3.PPR"] == debiased


CAVEATS = ("–", "letter-driven", "small sample", "low letter mass", "no debiased reading")


def test_the_first_caveat_is_the_summarys_first_warning() -> None:
    small = {"n_items": 4, "bootstrap": {"unit": "item", "n_units": 4, "n_boot": 50}}
    assert caveat({}) == "–" and caveat(small) == "small sample"
    assert caveat({"letter_mass": {"mean": 0.2}, "greedy_valid_rate": 0.1, **small}) == "low letter mass"
    driven = {"letter_warnings": [{"condition": "C0", "letter": "C", "prior": 0.6, "uniform": 0.25, "threshold": 0.5,
                                   "pick_share": 0.9, "greedy_picks": 9, "n_prompts": 10, "picks": "greedy",
                                   "reasons": ["prior"]}]}
    assert caveat({**driven, **small}) == "letter-driven"
    assert scope({"n_items": 2, "n_prompts": 104, "format": {"variants": [{}] * 9},
                  "letter_prior": {"C0": {}, "C1": {}}}) == (
        "2 items, 936 prompts scored (9 variants × 104; the numbers below are the protocol variant's); "
        "conditions C0, C1")


def test_probe_runs_lists_the_run(demo: tuple[Path, str], metrics: dict, capsys: pytest.CaptureFixture[str]) -> None:
    out = demo[0]
    assert runs_command.main([str(out.parent)]) == 0
    lines = capsys.readouterr().out.splitlines()
    kl, ci = metrics["expected"]["C0"]["KL"], metrics["ci95"]["expected"]["C0"]["KL"]
    assert lines[0].split() == ["bench", "model", "mode", "vars", "conds", "status", "headline", "caveat", "path"]
    cells = lines[1].split()
    p = metrics["p"]["expected"]["C0"]["KL"]
    assert cells[:11] == ["demo", "tiny", "letters", "–", str(len(metrics["letter_prior"])), "done", "KL",
                          f"{kl:.3f}", f"[{ci[0]:.3f},", f"{ci[1]:.3f}]", f"p={p:.2g}".replace("=0.", "=.")]
    assert cells[-1] == "demo-run" and " ".join(cells[11:-1]) in CAVEATS
    assert max(map(len, lines)) <= 100
    assert runs_command.main(["--help"]) == 0 and "probe runs [DIR]" in capsys.readouterr().out


def test_probe_export_writes_one_line_per_prompt(demo: tuple[Path, str], metrics: dict, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = demo[0]
    target = tmp_path / "demo.jsonl"
    assert export_command.main([str(out), "--format", "jsonl", "--out", str(target)]) == 0
    lines = target.read_text().splitlines()
    assert len(lines) == metrics["n_prompts"]
    first = json.loads(lines[0])
    prompts = pq.read_table(out / "prompts.parquet").sort_by("prompt_id").to_pylist()
    lp = np.array(pq.read_table(out / "scores.parquet").sort_by("prompt_id").column("letter_logprobs")[0].as_py())
    p = np.exp(lp) / np.exp(lp).sum()
    assert first["prompt_id"] == 0 and first["item_id"] == prompts[0]["item_id"]
    assert [first["probabilities"][x] for x in "ABCD"] == pytest.approx(p.tolist(), abs=1e-6)
    groups = prompts[0]["groups"]
    assert {x: o["group"] for x, o in first["options"].items()} == dict(zip("ABCD", groups))
    top = "ABCD"[int(np.argmax(lp))]
    assert first["readings"]["greedy"]["letter"] == top == first["readings"]["expected"]["letter"]
    assert first["readings"]["greedy"]["group"] == groups["ABCD".index(top)]
    q = probe.load_run(out).choice_probs(reading="debiased")[0]
    assert [first["readings"]["debiased"]["probabilities"][x] for x in "ABCD"] == pytest.approx(q.tolist())
    assert first["verdicts"] == {} and first["prompt"].endswith('{"answer_choice":"')
    for fmt in ("csv", "parquet"):  # the same records, flattened: one row per prompt, nested keys dotted
        flat = tmp_path / f"demo.{fmt}"
        assert export_command.main([str(out), "--format", fmt, "--out", str(flat)]) == 0
        table = pd.read_csv(flat) if fmt == "csv" else pd.read_parquet(flat)
        assert len(table) == len(lines) and table["prompt_id"].tolist()[:2] == [0, 1]
        assert table["probabilities.B"][0] == pytest.approx(first["probabilities"]["B"])
        assert table["readings.greedy.group"][0] == first["readings"]["greedy"]["group"]
    assert export_command.main([str(out), "--format", "xml"]) == 2
    assert "--format: expected one of ['jsonl', 'csv', 'parquet']" in capsys.readouterr().err
    assert export_command.main(["--help"]) == 0 and "--format jsonl|csv|parquet" in capsys.readouterr().out
