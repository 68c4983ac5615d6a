"""`run.label`: a free-text label checked where it enters, recorded in the manifest (not the run
key), shown in `probe runs`, the report header, sweep tables and the run directory's name; dry
runs listed with their bench, model and label."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import run_probe

from probe.commands import runs as runs_command
from probe.errors import ProbeInputError
from probe.report.entries import load_entries
from probe.report.sweep import sweep_headlines, sweep_markdown
from probe.results.labels import MAX_LABEL, check_label, label_slug
from probe.results.manifest import read_manifest

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
LABEL = "base *T* | 0.5"
"""Markdown characters and a table's `|`: the report and the sweep table must show them as typed."""


def _probe(root: Path, *args: str, cwd: Path = REPO_ROOT):  # type: ignore[no-untyped-def]
    env = {**os.environ, "PROBE_CACHE": str(root / "cache"), "HF_HUB_OFFLINE": "1"}
    return run_probe(["model=tiny", "bench=demo", "bench.limit=2", "bench.conditions=[C0]", "analysis.n_boot=50",
                      "progress=false", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Under one folder: a labelled run, the same run unlabelled, and a labelled dry run."""
    root = tmp_path_factory.mktemp("label")
    for name, extra in (("labelled", [f"run.label={LABEL}"]), ("plain", []),
                        ("dry", ["dry_run=true", "run.label=just looking"])):
        proc = _probe(root, *extra, f"hydra.run.dir={root / 'runs' / name}")
        assert proc.returncode == 0, proc.stderr[-3000:]
    return root / "runs"


def test_labels_are_checked_where_they_enter() -> None:
    assert check_label("  first try ") == "first try" and check_label(None) is None
    assert check_label("x" * MAX_LABEL) == "x" * MAX_LABEL
    for bad, said in (("", "non-empty"), ("   ", "non-empty"), ("a\tb", "printable"), ("a\nb", "printable"),
                      ("\x1b[2J", "printable"), ("x" * (MAX_LABEL + 1), f"at most {MAX_LABEL} characters")):
        with pytest.raises(ProbeInputError, match=said):
            check_label(bad)
    assert label_slug("base, T=0.5") == "_base-T-0.5" and label_slug(None) == "" and label_slug("***") == ""
    assert label_slug("../../etc") == "_etc" and label_slug("x" * 60) == "_" + "x" * 40


def test_a_bad_label_stops_with_one_line_and_writes_nothing(tmp_path: Path) -> None:
    proc = _probe(tmp_path, "run.label=a\tb", f"hydra.run.dir={tmp_path / 'never'}")
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "probe: error: run.label: expected printable text (no control character, newline or tab), got 'a\\tb'"]
    assert not (tmp_path / "never").exists()


def test_the_label_names_the_run_directory(tmp_path: Path) -> None:
    proc = _probe(tmp_path, "dry_run=true", "run.label=base, T=0.5", cwd=tmp_path)
    assert proc.returncode == 2 and "not an override" in proc.stderr  # Hydra reads `,` as a sweep: quote it
    proc = _probe(tmp_path, "dry_run=true", "run.label='base, T=0.5'", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (made,) = (tmp_path / "runs" / "demo" / "tiny").iterdir()
    assert made.name.endswith("_base-T-0.5") and (made / "prompts.parquet").is_file()


def test_the_manifest_records_the_label_and_the_run_key_does_not(runs: Path) -> None:
    labelled, plain = runs / "labelled", runs / "plain"
    assert read_manifest(labelled).label == LABEL and json.loads((labelled / "manifest.json").read_text())["label"] == LABEL
    assert read_manifest(plain).label is None and "label" not in json.loads((plain / "manifest.json").read_text())
    # presentation only: both runs have one key, so relabelling never forces a new run
    assert (labelled / "run_key.json").read_text() == (plain / "run_key.json").read_text()


def test_the_report_header_shows_the_label_as_typed(runs: Path) -> None:
    lines = (runs / "labelled" / "report.md").read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("Label: "))
    assert lines[at] == r"Label: base \*T\* \| 0.5" and lines[at + 2].startswith("Weights: ")
    page = (runs / "labelled" / "report.html").read_text()
    assert "<p>Label: base *T* | 0.5</p>" in page
    assert not any(line.startswith("Label:") for line in (runs / "plain" / "report.md").read_text().split("\n"))


def test_probe_runs_shows_labels_and_dry_runs(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert runs_command.main([str(runs)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["bench", "model", "label", "mode"]
    by_path = {line.split()[-1]: line for line in lines[1:]}
    assert by_path["dry"].split()[:5] == ["demo", "tiny", "just", "looking", "–"] and "dry run" in by_path["dry"]
    assert by_path["labelled"].startswith("demo   tiny   base *T* | 0.5  letters")
    assert by_path["plain"].split()[:4] == ["demo", "tiny", "–", "letters"]
    # without any label the column is not shown
    assert runs_command.main([str(runs / "plain")]) == 0
    assert capsys.readouterr().out.splitlines()[0].split()[:3] == ["bench", "model", "mode"]


def test_an_older_dry_run_without_its_launch_record_still_lists(runs: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old"
    shutil.copytree(runs / "dry", old)
    shutil.rmtree(old / ".hydra")
    assert runs_command.main([str(old)]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:3] == ["?", "?", "–"]


def test_sweep_tables_carry_a_label_column(runs: Path) -> None:
    entries = load_entries([runs / "labelled", runs / "plain"])
    md = sweep_markdown(entries)
    head = next(line for line in md.split("\n") if line.startswith("| run |"))
    assert head.startswith("| run | label | kind | bench |")
    rows = [line for line in md.split("\n") if line.startswith("| tiny [")]
    assert rows[0].startswith(r"| tiny [labelled] ⚠ | base \*T\* \| 0.5 | instruct | demo |")
    assert rows[1].startswith("| tiny [plain] ⚠ | – | instruct | demo |")
    assert "overrides" not in head  # the label is its own column, not a differing override
    printed = sweep_headlines(entries)
    assert "| label |" in printed and "base *T* \\| 0.5" in printed
    assert "| label |" not in sweep_markdown(load_entries([runs / "plain"]))


def test_the_key_is_described_and_suggested(tmp_path: Path) -> None:
    proc = _probe(tmp_path, "--help")
    assert proc.returncode == 0 and "  run.label=null" in proc.stdout and "Free-text label" in proc.stdout
    proc = _probe(tmp_path, "label=x", f"hydra.run.dir={tmp_path / 'never'}")
    assert proc.returncode == 2 and "did you mean `run.label`?" in proc.stderr
