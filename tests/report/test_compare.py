"""Paired differences between runs: hand-computed Δ, self-comparison, paired vs unpaired width,
refusals, the command line, and the sweep report's pair and checkpoint tables."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import run_probe

from probe.analyses.view import StoredRun
from probe.commands.compare import compare_runs, main, paired_difference
from probe.errors import ProbeInputError
from probe.metrics.core import SMALL_N
from probe.metrics.paired import holm
from probe.pipeline.analysis import analyze_run
from probe.report.paired_runs import compare
from probe.report.sweep import load_entries, sweep_markdown, write_sweep_report

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
BOOST = np.log(3.0)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """Run A: the tiny model on the demo bench (C0, C1). Run B: A with one culture's letter made
    3× likelier in every C0 prompt, so B differs from A by a known shift in that culture."""
    root = tmp_path_factory.mktemp("compare")
    env = {**os.environ, "PROBE_CACHE": str(root / "cache"), "HF_HUB_OFFLINE": "1"}
    proc = run_probe(["model=tiny", "bench=demo", "bench.conditions=[C0,C1]",
                           f"hydra.run.dir={root / 'a'}", "analysis.n_boot=400", "progress=false"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    a, b = root / "a", root / "b"
    shutil.copytree(a, b)
    prompts = pq.read_table(a / "prompts.parquet").sort_by("prompt_id").to_pylist()
    culture = prompts[0]["groups"][0]
    scores = pq.read_table(b / "scores.parquet").sort_by("prompt_id")
    lp = [list(r) for r in scores.column("letter_logprobs").to_pylist()]
    for p, row in zip(prompts, lp):
        if p["condition"] == "C0" and culture in p["groups"]:
            row[p["groups"].index(culture)] += BOOST
    scores = scores.set_column(scores.column_names.index("letter_logprobs"), "letter_logprobs",
                               pa.array(lp, type=scores.schema.field("letter_logprobs").type))
    pq.write_table(scores, b / "scores.parquet")
    analyze_run(b)  # B's metrics.json from its own scores
    return a, b, culture


def _c0_share(run: Path, culture: str) -> float:
    """DiSCo's C0 selection share of a culture, by its definition: per culture, the mean
    renormalised probability of the letter that shows it, then normalised over cultures."""
    prompts = pq.read_table(run / "prompts.parquet").sort_by("prompt_id").to_pylist()
    scores = pq.read_table(run / "scores.parquet").sort_by("prompt_id").column("letter_logprobs").to_pylist()
    sel: dict[str, float] = {}
    app: dict[str, float] = {}
    for p, lp in zip(prompts, scores):
        if p["condition"] != "C0":
            continue
        probs = np.exp(np.asarray(lp, dtype=np.float64))
        probs /= probs.sum()
        for g, q in zip(p["groups"], probs):
            sel[g] = sel.get(g, 0.0) + q
            app[g] = app.get(g, 0.0) + 1.0
    rate = {g: sel[g] / app[g] for g in sel}
    return rate[culture] / sum(rate.values())


def test_a_run_against_itself_is_exactly_zero(runs) -> None:
    a, _, culture = runs
    for metric in ("C0.KL", "C1.CR", f"C0.CSD.{culture}"):
        d = paired_difference(a, a, metric)
        assert (d.delta, d.ci95, d.p_value) == (0.0, (0.0, 0.0), 1.0)


def test_known_shift_in_one_culture(runs) -> None:
    a, b, culture = runs
    d = paired_difference(a, b, f"C0.CSD.{culture}")
    expected = _c0_share(a, culture) - _c0_share(b, culture)
    assert d.delta == pytest.approx(expected, abs=1e-6) and expected < -0.05
    assert d.ci95[0] <= d.delta <= d.ci95[1] < 0 and d.p_value < 0.01
    # C1 prompts were not touched: their metric does not move, in any resample
    c1 = paired_difference(a, b, "C1.CR")
    assert (c1.delta, c1.ci95) == (0.0, (0.0, 0.0))


def test_paired_interval_is_never_wider_than_unpaired(runs) -> None:
    a, b, culture = runs
    run_a, run_b = StoredRun.open(a), StoredRun.open(b)
    opts = run_a.options()
    paths = ["C0.KL", "C0.Gini", f"C0.CSD.{culture}", "C0.letter_probs.A"]
    paired = compare(run_a, run_b, paths, opts)
    unpaired = compare(run_a, run_b, paths, opts, paired=False)
    for p, u in zip(paired.differences, unpaired.differences):
        assert p.delta == u.delta
        assert p.ci95[1] - p.ci95[0] <= u.ci95[1] - u.ci95[0], p.metric
    assert paired.paired and not unpaired.paired and paired.n_units == 24 and paired.unit == "item_id"


def test_runs_that_do_not_share_items_or_design_are_refused(runs, tmp_path: Path) -> None:
    a, _, _ = runs
    c = tmp_path / "c"
    shutil.copytree(a, c)
    prompts = pq.read_table(c / "prompts.parquet")
    ids = [("other-item" if i == "demo-01" else i) for i in prompts.column("item_id").to_pylist()]
    pq.write_table(prompts.set_column(prompts.column_names.index("item_id"), "item_id", pa.array(ids)),
                   c / "prompts.parquet")
    with pytest.raises(ProbeInputError, match=r"do not share their item_ids: 1 only in .*\(demo-01\), 1 only in "
                                              r".*\(other-item\)"):
        paired_difference(a, c, "C0.KL")
    d = tmp_path / "d"
    shutil.copytree(a, d)
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["bench"]["config"]["design"] = "latin_square"
    (d / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ProbeInputError, match="design"):
        paired_difference(a, d, "C0.KL")
    with pytest.raises(ProbeInputError, match="'C0.nope' is not a number"):
        paired_difference(a, a, "C0.nope")


def test_common_items_compares_a_run_with_its_subset(runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Run C keeps 18 of A's 24 items (its prompts and scores, as a `bench.limit` run would): refused
    without `--common-items`, which names the flag; with it, A is re-measured on C's 18 items, so
    A's numbers equal C's own and every Δ is exactly 0, and the output says what each run lost."""
    a, _, _ = runs
    c = tmp_path / "c"
    shutil.copytree(a, c)
    prompts = pq.read_table(c / "prompts.parquet")
    items = sorted(set(prompts.column("item_id").to_pylist()))
    keep = set(items[:18])
    kept = [i for i, item in enumerate(prompts.column("item_id").to_pylist()) if item in keep]
    pq.write_table(prompts.take(kept), c / "prompts.parquet")
    scores = pq.read_table(c / "scores.parquet")
    ids = set(prompts.take(kept).column("prompt_id").to_pylist())
    mask = [pid in ids for pid in scores.column("prompt_id").to_pylist()]
    pq.write_table(scores.filter(pa.array(mask)), c / "scores.parquet")
    for extra in ("scores.safetensors",):
        (c / extra).unlink(missing_ok=True)
    manifest = json.loads((c / "manifest.json").read_text())
    manifest["bench"]["n_prompts"], manifest["bench"]["n_items"] = len(kept), 18
    (c / "manifest.json").write_text(json.dumps(manifest))
    analyze_run(c)
    with pytest.raises(ProbeInputError, match="6 only in .*0 only in .*; compare the ones both have with "
                                              "--common-items"):
        compare_runs(a, c, n_boot=50)
    got = compare_runs(a, c, n_boot=50, common=True)
    assert got.n_units == 18 and got.dropped == (6, 0)
    own = StoredRun.open(c).metrics["expected"]
    for d in got.differences:
        assert d.delta == 0.0 and d.ci95 == (0.0, 0.0), d
        assert d.a == pytest.approx(own[d.metric.split(".")[0]][d.metric.split(".")[1]], abs=1e-12)
    assert main([str(a), str(c), "--common-items", "analysis.n_boot=50"]) == 0
    out = capsys.readouterr().out
    assert "Common items: compared on the 18 item_ids both runs have; 6 of A's and 0 of B's were left out" in out
    assert main([str(a), str(c), "analysis.n_boot=50"]) == 2
    assert "--common-items" in capsys.readouterr().err


def test_holm() -> None:
    assert holm([0.01, 0.04, 0.03, float("nan")])[:3] == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.9]) == [1.0, 1.0]


def test_command_line_table_and_json(runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b, _ = runs
    assert main([str(a), str(b), "--out", str(tmp_path), "analysis.n_boot=200", "analysis.seed=3"]) == 0
    out = capsys.readouterr().out
    # plain text on the terminal: aligned columns, no markdown table, emphasis or code marks
    assert re.search(r"^C0\.KL +-?\d\.\d{4} +-?\d\.\d{4} +[+-]\d\.\d{4} +\[", out, re.MULTILINE), out
    assert not any(mark in out for mark in ("|", "**", "`")), out
    assert "paired bootstrap over 24 item_ids, 200 resamples, seed 3" in out
    assert "; block expected;" in out and max(map(len, out.splitlines()[2:])) <= 100  # fits a terminal
    # the markdown table goes to the file, the same numbers
    md = (tmp_path / "compare.md").read_text()
    assert "| C0.KL |" in md and "|---|" in md
    saved = json.loads((tmp_path / "compare.json").read_text())
    assert saved["n_boot"] == 200 and saved["seed"] == 3 and saved["paired"]
    got = {d["metric"]: d for d in saved["differences"]}
    direct = compare_runs(a, b, n_boot=200, seed=3)
    assert [d.metric for d in direct.differences] == list(got)
    assert all(got[d.metric]["ci95"] == list(d.ci95) for d in direct.differences)
    assert main([str(a)]) == 2 and "expected two run directories" in capsys.readouterr().err


def test_small_samples_and_p_values_below_the_resolution_are_said() -> None:
    """Two items: the table warns that two units cannot carry an interval and prints no p-value
    (`compare.json` keeps them); with 300 items a p below the resolution reads `< 1/B`, not 0.0000."""
    from probe.commands.compare import comparison_markdown
    from probe.metrics.paired import Comparison, Difference

    d = Difference("C0.KL", "expected", 0.2, 0.1, 0.1, (0.05, 0.15), 0.0, 0.0)
    small = Comparison("a", "b", "item_id", 2, 200, 0, 1.0, True, (d,))
    md = comparison_markdown(small)
    assert "| C0.KL | 0.2000 | 0.1000 | +0.1000 | [+0.0500, +0.1500] | – | – |" in md and "0.005" not in md
    assert "**Warning:** only 2 item_ids (fewer than 20)" in md and "p-values are not printed" in md
    assert "< 0.005" in comparison_markdown(replace(small, n_units=SMALL_N))
    big = comparison_markdown(Comparison("a", "b", "item_id", 300, 200, 0, 1.0, True,
                                         (Difference("C0.KL", "expected", 0.2, 0.1, 0.1, (0.05, 0.15), 0.25, 0.5),)))
    assert "Warning" not in big and "| 0.2500 | 0.5000 |" in big


def _relabel(src: Path, dst: Path, **model: object) -> None:
    shutil.copytree(src, dst)
    manifest = json.loads((dst / "manifest.json").read_text())
    manifest["model"].update(model)
    (dst / "manifest.json").write_text(json.dumps(manifest))


def test_sweep_pair_and_checkpoint_tables_show_paired_intervals(runs, tmp_path: Path) -> None:
    a, b, _ = runs
    _relabel(b, tmp_path / "it", name="m", kind="instruct", pair="m-base")
    _relabel(a, tmp_path / "pt", name="m-base", kind="base", pair="m")
    _relabel(a, tmp_path / "s1", name="olmo", revision="stage1-step100")
    _relabel(b, tmp_path / "s2", name="olmo", revision="stage1-step200")
    md = sweep_markdown(load_entries([tmp_path]))
    pair_rows = [line for line in md.splitlines() if line.startswith("| m vs m-base | KL |")]
    assert len(pair_rows) == 1 and " [" in pair_rows[0].split("|")[5]
    kl = paired_difference(tmp_path / "it", tmp_path / "pt", "C0.KL")
    assert f"{kl.delta:+.3f} [{kl.ci95[0]:+.3f}, {kl.ci95[1]:+.3f}]" in pair_rows[0]
    assert "### DiSCo: checkpoint to checkpoint" in md
    step_rows = [line for line in md.splitlines() if line.startswith("| olmo | stage1-step100 → stage1-step200 |")]
    assert len(step_rows) == 1 and step_rows[0].count("[") >= 3
    html = write_sweep_report([tmp_path], tmp_path / "report")
    assert (tmp_path / "report" / "checkpoints_disco_olmo_demo.png").is_file() and html.is_file()
    # the long-format table: every numeric metric of every run, with its interval
    summary = pq.read_table(tmp_path / "report" / "summary.parquet").to_pylist()
    metrics = json.loads((tmp_path / "it" / "metrics.json").read_text())
    row = next(r for r in summary if r["model"] == "m" and r["metric"] == "C0.KL" and r["flavour"] == "expected")
    assert row["value"] == metrics["expected"]["C0"]["KL"] and [row["lo"], row["hi"]] == metrics["ci95"]["expected"]["C0"]["KL"]
    assert {r["flavour"] for r in summary} == {"expected", "greedy", "debiased"} and len({r["run"] for r in summary}) == 4
    assert (tmp_path / "report" / "summary.csv").read_text().startswith('"run","model","revision","bench","metric"')


def test_a_sweep_names_and_skips_unreadable_runs(runs, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A truncated, `[]` or `{}` metrics.json, or unreadable tables, among good runs: each is named
    in the report with its reason, and the report is built from the others."""
    from probe.commands.report import main as report_main

    a, b, _ = runs
    _relabel(a, tmp_path / "good_a", name="good-a")
    _relabel(b, tmp_path / "good_b", name="good-b")
    bad = {"truncated": '{"expected": {"C0": {"KL"', "list": "[]", "empty": "{}"}
    for name, text in bad.items():
        _relabel(a, tmp_path / name, name=name)
        (tmp_path / name / "metrics.json").write_text(text)
    _relabel(a, tmp_path / "tables", name="tables")
    (tmp_path / "tables" / "prompts.parquet").write_bytes(b"PAR1 not parquet")
    assert report_main([str(tmp_path), "--out", str(tmp_path / "report")]) == 0
    md = (tmp_path / "report" / "report.md").read_text()
    assert "## Skipped: 4 finished run(s) that could not be read" in md
    assert f"- `{tmp_path / 'truncated'}`: metrics.json: invalid or truncated JSON (Expecting ':' delimiter" in md
    assert f"- `{tmp_path / 'list'}`: metrics.json: expected a JSON object, got list" in md
    assert f"- `{tmp_path / 'empty'}`: metrics.json has no DiSCo headline metrics" in md
    assert f"- `{tmp_path / 'tables'}`: prompts.parquet is damaged (not a readable parquet file" in md
    assert "# probe sweep report — 2 runs" in md and "\n| good-a " in md and "\n| good-b " in md
    summary = pq.read_table(tmp_path / "report" / "summary.parquet")
    assert set(summary.column("model").to_pylist()) == {"good-a", "good-b"}
    assert caplog.text.count("skipping") == 4  # each as it is read: its files are checked when it is opened
    for name in ("good_a", "good_b", "tables"):
        shutil.rmtree(tmp_path / name)
    with pytest.raises(ProbeInputError, match=r"none of the 3 finished run\(s\) could be read"):
        load_entries([tmp_path])


def _poison(run: Path, rows: dict[int, float]) -> None:
    """Put a non-finite value at letter 0 of the given prompt rows of `scores.parquet`."""
    scores = pq.read_table(run / "scores.parquet").sort_by("prompt_id")
    lp = [list(r) for r in scores.column("letter_logprobs").to_pylist()]
    for row, value in rows.items():
        lp[row][0] = value
    scores = scores.set_column(scores.column_names.index("letter_logprobs"), "letter_logprobs",
                               pa.array(lp, type=scores.schema.field("letter_logprobs").type))
    pq.write_table(scores, run / "scores.parquet")


def test_compare_refuses_unfinished_other_data_and_non_finite_runs(runs, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    a, _, _ = runs
    unfinished, other, nan, inf = (tmp_path / n for n in ("unfinished", "other", "nan", "inf"))
    for d in (unfinished, other, nan, inf):
        shutil.copytree(a, d)
    (unfinished / "DONE").unlink()
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["bench"]["sha256"] = "f" * 64  # another data file with the same item ids
    (other / "manifest.json").write_text(json.dumps(manifest))
    _poison(nan, {0: float("nan"), 1: float("nan"), 7: float("nan")})
    _poison(inf, {3: float("inf")})
    expected = {
        unfinished: f"{unfinished} is not a finished run (no DONE)",
        other: "read different bench data (bench sha256 ",
        # the stored table is refused where it is read, for compare as for every metric
        nan: f"{nan}/scores.parquet: 3 of 480 prompts have no valid letter log-probs (NaN or +inf, or −inf at every "
             "letter; first prompt ids [0, 1, 7])",
        inf: f"{inf}/scores.parquet: 1 of 480 prompts have no valid letter log-probs",
    }
    for run, message in expected.items():
        for x, y in ((a, run), (run, a)):  # either side
            assert main([str(x), str(y), "analysis.n_boot=50"]) == 2
            err = capsys.readouterr().err
            assert message in err and len(err.strip().splitlines()) == 1, err  # one line, no traceback
        with pytest.raises(ProbeInputError, match="no DONE|different bench data|no valid letter log-probs"):
            paired_difference(a, run, "C0.KL")


def test_sweep_tables_print_no_p_value_below_the_small_sample_bound(runs, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep's pair and checkpoint tables read `paired_or_reason`: below `SMALL_N` units its
    p-values are NaN (printed `–`), its intervals as they were."""
    import probe.report.paired_runs as paired_runs

    a, b, _ = runs
    plain, reason = paired_runs.paired_or_reason(StoredRun.open(a), StoredRun.open(b), ["C0.KL"])
    monkeypatch.setattr(paired_runs, "SMALL_N", 25)  # the runs hold 24 items
    small, _ = paired_runs.paired_or_reason(StoredRun.open(a), StoredRun.open(b), ["C0.KL"])
    assert reason is None and plain["C0.KL"].p_holm == plain["C0.KL"].p_holm  # a number with 24 ≥ 20 items
    assert small["C0.KL"].ci95 == plain["C0.KL"].ci95 and np.isnan(small["C0.KL"].p_holm)
    assert paired_runs.p_cell(small["C0.KL"]) == "–" and paired_runs.p_cell(plain["C0.KL"]) != "–"


def test_a_run_without_metrics_json_compares_as_run_a_too(runs, tmp_path: Path) -> None:
    """A finished run whose metrics.json is gone (analysis killed): compared from its tables on
    either side, with the same metrics and values as its analysed copy, and no NaN path chosen."""
    a, b, _ = runs
    bare = tmp_path / "bare"
    shutil.copytree(a, bare)
    (bare / "metrics.json").unlink()
    as_a, as_b, whole = compare_runs(bare, b, n_boot=50), compare_runs(b, bare, n_boot=50), compare_runs(a, b, n_boot=50)
    assert [d.metric for d in as_a.differences] == [d.metric for d in whole.differences] \
        == [d.metric for d in as_b.differences]
    assert [d.a for d in as_a.differences] == pytest.approx([d.a for d in whole.differences], abs=1e-12)
    assert all(np.isfinite(d.a) and np.isfinite(d.b) for d in as_a.differences)
