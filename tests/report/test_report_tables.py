"""Sweep aggregation tables from stored metrics (no model): rows, CIs, pairs, checkpoint order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probe.benches.registry import get_task
from probe.errors import ProbeInputError
from probe.report.sweep import (
    bench_table,
    find_runs,
    load_entries,
    pair_table,
    sweep_markdown,
)

DISCO, CCD = get_task("disco"), get_task("ccd")


def _run(root: Path, name: str, model: str, kind: str, pair: str | None, kl: float, revision: str | None = None,
         bench_kind: str = "disco") -> Path:
    d = root / name
    d.mkdir(parents=True)
    manifest = {"model": {"name": model, "kind": kind, "pair": pair, "revision": revision},
                "bench": {"name": bench_kind, "kind": bench_kind}}
    if bench_kind == "disco":
        m = {"C0": {"KL": kl, "Gini": 0.3}, "C1": {"CR": 0.5}, "C2": {"CR": 0.6, "PSI": 0.4}}
        ci = {"C0": {"KL": [kl - 0.01, kl + 0.01]}}
    else:
        m = {"shares": {"nordic_europe": 0.3, "anglo": 0.2, "middle_east": 0.5}, "entropy_bits": kl,
             "gini": 0.2, "position_V": 0.05}
        ci = {}
    (d / "manifest.json").write_text(json.dumps(manifest))
    (d / "metrics.json").write_text(json.dumps({"expected": m, "greedy": m, "ci95": {"expected": ci}}))
    (d / "DONE").write_text("complete\n")
    return d


def test_tables_pairs_and_order(tmp_path: Path) -> None:
    _run(tmp_path, "0_disco_it", "gemma-it", "instruct", "gemma-pt", 0.150)
    _run(tmp_path, "1_disco_pt", "gemma-pt", "base", "gemma-it", 0.100)
    _run(tmp_path, "2", "olmo", "instruct", None, 0.2, revision="stage1-step2000")
    _run(tmp_path, "3", "olmo", "instruct", None, 0.3, revision="stage1-step500")
    _run(tmp_path, "4", "qwen", "instruct", None, 2.5, bench_kind="ccd")
    (tmp_path / "unfinished").mkdir()
    (tmp_path / "unfinished" / "manifest.json").write_text("{}")  # no DONE: not a finished run
    killed = _run(tmp_path, "killed", "llama", "instruct", None, 0.9)
    (killed / "DONE").unlink()  # metrics of a run killed after analysis, before DONE: not final
    entries = load_entries([tmp_path])
    assert find_runs([tmp_path])[1] == [killed, tmp_path / "unfinished"]
    assert [e.label for e in entries] == ["qwen", "gemma-it", "gemma-pt", "olmo@stage1-step500",
                                          "olmo@stage1-step2000"]  # bench, model, then training step
    table = bench_table(entries, DISCO).splitlines()
    assert table[0].startswith("| run | kind | bench | items | KL | Gini | CR(C1) | CR(C2) | PSI |")
    assert table[2].startswith("| gemma-it | instruct | disco | –¹ | 0.150 [0.140, 0.160] | 0.300 | 0.500 | 0.600 | 0.400 |")
    assert table[6] == ""  # four rows, then the second part of the split table
    pairs = pair_table(entries, DISCO)
    # metrics.json only (no tables): the plain Δ, and the reason there is no paired interval
    assert "| gemma-it vs gemma-pt | KL | 0.150 [0.140, 0.160] | 0.100 [0.090, 0.110] | +0.050 | –¹ |" in pairs
    assert "Without a paired interval:" in pairs and "no prompts.parquet" in pairs
    assert pair_table(entries, CCD) is None
    ccd = bench_table(entries, CCD).splitlines()
    assert "middle_east 0.50, nordic_europe 0.30, anglo 0.20" in ccd[2] and "| 2.500 |" in ccd[2]
    md = sweep_markdown(entries, find_runs([tmp_path])[1])
    assert "## DiSCo" in md and "### DiSCo: base vs instruct" in md and "## CCD-Bench" in md
    assert "## Skipped: 2 unfinished run(s) (no DONE)" in md
    assert f"- `{killed}`: stopped before DONE was written (after its analysis)" in md


def test_runs_that_would_read_alike_are_told_apart(tmp_path: Path) -> None:
    """The same model run twice on one bench: each row names its directory."""
    _run(tmp_path, "2026-12-01_10-00-00", "smollm2-135m", "instruct", None, 0.1)
    _run(tmp_path, "2026-12-02_09-30-00", "smollm2-135m", "instruct", None, 0.2)
    _run(tmp_path, "other", "olmo", "instruct", None, 0.3)
    labels = sorted(e.label for e in load_entries([tmp_path]))
    assert labels == ["olmo", "smollm2-135m [2026-12-01_10-00-00]", "smollm2-135m [2026-12-02_09-30-00]"]


def test_no_runs_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ProbeInputError, match="no finished probe runs"):
        load_entries([tmp_path])


def test_locqa_rows_and_pairs(tmp_path: Path) -> None:
    for name, model, kind, pair, b_us in (("it", "olmo", "instruct", "olmo-base", 0.30),
                                          ("pt", "olmo-base", "base", "olmo", 0.10)):
        d = tmp_path / name
        d.mkdir()
        (d / "manifest.json").write_text(json.dumps({"model": {"name": model, "kind": kind, "pair": pair},
                                                     "bench": {"name": "locqa", "kind": "locqa"}}))
        m = {"B_US_macro": b_us, "B_R_dev_macro": 0.5, "multiplicity": 1.2, "no_answer_rate": 0.1}
        (d / "metrics.json").write_text(json.dumps({"metrics": m, "ci95": {"B_US_macro": [b_us - 0.05, b_us + 0.05]}}))
        (d / "DONE").write_text("complete\n")
    entries = load_entries([tmp_path])
    table = bench_table(entries, get_task("locqa"))
    assert "| olmo | instruct | locqa | –¹ | 0.300 [0.250, 0.350] | 0.500 | 1.200 | 0.100 |" in table
    # the header's |B_R − 1| is escaped: header, rule and rows have the same number of columns
    head, rule, first = table.splitlines()[:3]
    assert "\\|B_R − 1\\|" in head
    assert len(head.replace("\\|", "")) - len(head.replace("\\|", "").replace("|", "")) == rule.count("|") == first.count("|")
    assert "| olmo vs olmo-base | B_US | 0.300 [0.250, 0.350] | 0.100 [0.050, 0.150] | +0.200 |" in \
        pair_table(entries, get_task("locqa"))


def test_summary_csv_neutralises_formulas_and_keeps_numbers(tmp_path: Path) -> None:
    """OWASP CSV injection: text cells starting with = + - @ tab or CR get a leading quote; the
    numeric columns stay numbers (a negative value too)."""
    import csv

    import pyarrow as pa
    import pyarrow.csv as pacsv

    from probe.report.entries import SUMMARY_SCHEMA, summary_rows
    from probe.results.io import write_csv

    hostile = ["=2+5<svg onload=alert(2)>", "+1", "-cmd", "@SUM(A1)", "\tx", "\rx", "plain-name"]
    for i, model in enumerate(hostile):
        _run(tmp_path / "runs", f"r{i}", model, "instruct", None, -0.25, revision="-rev" if i == 0 else None)
    table = pa.Table.from_pylist(summary_rows(load_entries([tmp_path / "runs"])), schema=SUMMARY_SCHEMA)
    write_csv(tmp_path / "summary.csv", table)
    with open(tmp_path / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    models = {r["model"] for r in rows}
    assert models == {"'=2+5<svg onload=alert(2)>", "'+1", "'-cmd", "'@SUM(A1)", "'\tx", "'\rx", "plain-name"}
    assert {r["revision"] for r in rows} == {"'-rev", ""}
    assert not any(cell[:1] in ("=", "+", "-", "@", "\t", "\r") for r in rows for k, cell in r.items()
                   if k not in ("value", "lo", "hi"))
    kl = [r for r in rows if r["metric"] == "C0.KL" and r["flavour"] == "expected"]
    assert {r["value"] for r in kl} == {"-0.25"} and {r["lo"] for r in kl} == {"-0.26"}  # unquoted numbers
    back = pacsv.read_csv(tmp_path / "summary.csv")
    assert back.schema.field("value").type == pa.float64() and back.column("value").to_pylist() == table.column("value").to_pylist()
    assert "=2+5<svg onload=alert(2)>" in table.column("model").to_pylist()  # the parquet keeps the raw name


def test_the_terminal_table_fits_100_columns_and_names_the_full_one(tmp_path: Path) -> None:
    """Every DiSCo headline with its interval is far wider than a terminal: the printed table keeps
    the leading columns within 100 characters and says where the rest are; the file keeps all."""
    d = _run(tmp_path, "wide", "gemma-3-12b-it", "instruct", None, 0.15)
    values = {"C0": {"KL": 0.15, "Gini": 0.3, "SPD": 0.01}, "C1": {"CR": 0.5, "SPD_compliance": 0.02},
              "C2": {"CR": 0.6, "PSI": 0.4, "SPD": 0.03, "SPD_compliance": 0.04}, "C3": {"JSD": 0.05, "PPR": 0.25},
              "SPD_reduction": 0.005}
    ci = json.loads(json.dumps(values))
    for tree in (ci, *(v for v in ci.values() if isinstance(v, dict))):
        for key, v in list(tree.items()):
            if isinstance(v, float):
                tree[key] = [v - 0.01, v + 0.01]
    (d / "metrics.json").write_text(json.dumps({"expected": values, "greedy": values, "ci95": {"expected": ci}}))
    from probe.report.sweep import sweep_headlines

    text = sweep_headlines(load_entries([tmp_path]), full=tmp_path / "report" / "report.md")
    lines = text.splitlines()
    assert lines[0] == "DiSCo:" and max(map(len, lines[:-1])) <= 100  # the last line names a path: the user's
    assert lines[1].startswith("| run | bench | KL | Gini | CR(C1) |")
    assert lines[3].startswith("| gemma-3-12b-it | disco | 0.150 [0.140, 0.160] | 0.300 [0.290, 0.310] |")
    assert lines[4] == f"(8 more columns in {tmp_path / 'report' / 'report.md'})"
    full = bench_table(load_entries([tmp_path]), DISCO)
    assert "| PPR |" in full and "0.250 [0.240, 0.260]" in full
