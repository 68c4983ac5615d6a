"""docs/adding-a-benchmark.md holds working examples: every file it shows (a code block titled with
its path) is written into an empty directory, and the commands it shows run there as the page says
— the bench through `probe run` on the tiny model, the analysis through its script."""

from __future__ import annotations

import contextlib
import io
import json
import re
import runpy
import shlex
import sys
from pathlib import Path

import pytest
from conftest import probe_env, run_probe

PAGE = Path(__file__).resolve().parents[2] / "docs" / "adding-a-benchmark.md"
BLOCK = re.compile(r'```(\w+)(?: title="([^"]+)")?\n(.*?)```', re.S)


def _blocks() -> list[tuple[str, str | None, str]]:
    return [(m.group(1), m.group(2), m.group(3)) for m in BLOCK.finditer(PAGE.read_text())]


def _files_and_commands(folder: Path) -> list[str]:
    """Write every titled block of the page under `folder`; return the shell commands, in page order."""
    commands = []
    for lang, title, text in _blocks():
        if title is not None:
            (folder / title).parent.mkdir(parents=True, exist_ok=True)
            (folder / title).write_text(text, encoding="utf-8")
        elif lang == "bash":
            commands += [line for line in text.splitlines() if line.startswith("PYTHONPATH=.")]
    return commands


@pytest.fixture(scope="module")
def page_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page's files in an empty directory, its `probe run` command run there."""
    folder = tmp_path_factory.mktemp("page")
    commands = _files_and_commands(folder)
    run = [c for c in commands if " probe run " in f" {c} "]
    assert len(run) == 1, commands
    args = shlex.split(run[0])
    assert args[:2] == ["PYTHONPATH=.", "probe"]
    env = {**probe_env(folder / "cache"), "PYTHONPATH": str(folder)}
    proc = run_probe([*args[2:], "analysis.n_boot=50", "progress=false"], cwd=folder, env=env)
    sys.modules.pop("mybench", None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return folder


def test_the_page_names_what_a_contributor_needs() -> None:
    text = PAGE.read_text()
    for name in ("data_files", "sources.fetch", "results/contract.md", "ScoreTable", "choice_probs",
                 "normalized_entropy", "is_generation_run", "is_text_only_run", "expected_greedy_ci",
                 "ROTATION_DESIGN", "ctx_rotation", "[tool.setuptools] packages", "forbidden_modules",
                 "the package name is the\nbench's `kind`"):
        assert name in text, name


def test_the_documented_bench_runs_from_an_empty_directory(page_dir: Path) -> None:
    out = page_dir / "runs" / "mybench"
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["bench"], metrics["n_items"], metrics["n_prompts"]) == ("mybench", 3, 9)
    shares = metrics["expected"]["shares"]
    assert set(shares) == {"east", "north", "south"} and sum(shares.values()) == pytest.approx(1.0)
    assert metrics["expected"]["KL"] >= 0 and len(metrics["ci95"]["expected"]["KL"]) == 2
    assert metrics["letter_prior_estimator"]["C0"]["estimator"] == "rotations"  # the rotation design's fields
    assert set(metrics["debiased"]["shares"]) == set(shares)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["bench"]["config"]["module"] == "mybench" and manifest["letters"] == ["A", "B", "C"]
    key = json.loads((out / "run_key.json").read_text())
    assert key["bench"]["data_sha256"]  # `data_files` puts the data's digest in the run key
    assert (out / "report.md").read_text().startswith("# My bench — tiny")


def test_the_documented_data_check_names_file_row_and_field(page_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"id": "q", "question": "?", "options": {"east": "a", "west": "b", "south": "c"}}]))
    env = {**probe_env(tmp_path / "cache"), "PYTHONPATH": str(page_dir)}
    proc = run_probe(["model=tiny", "bench=mybench", f"bench.path={bad}", "hydra.searchpath=[file://conf]",
                      f"hydra.run.dir={tmp_path / 'run'}"], cwd=page_dir, env=env)
    sys.modules.pop("mybench", None)
    assert proc.returncode != 0 and f"{bad}, row 0, field 'options': expected the keys" in proc.stderr
    assert not (tmp_path / "run" / "manifest.json").exists()


def test_the_documented_analysis_runs_on_that_run(page_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from probe.analyses import registry

    commands = [c for c in _files_and_commands(page_dir) if c.startswith("PYTHONPATH=. python ")]
    assert commands == ["PYTHONPATH=. python reanalyse.py"]
    monkeypatch.chdir(page_dir)
    monkeypatch.syspath_prepend(str(page_dir))
    monkeypatch.setenv("PROBE_CACHE", str(page_dir / "cache"))
    before = registry.analyses()
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            runpy.run_path(str(page_dir / "reanalyse.py"), run_name="__main__")
    finally:  # the registry is process-global: forget the example's analysis, as its process would
        registry._ANALYSES[:] = list(before)
        sys.modules.pop("myanalysis", None)
    metrics = json.loads((page_dir / "runs" / "mybench" / "metrics.json").read_text())
    spread = metrics["choice_spread"]
    assert 0 < spread["mean"] <= 1 and spread["n_prompts"] == 9 and str(spread) in printed.getvalue()
    report = (page_dir / "runs" / "mybench" / "report.md").read_text()
    assert f"Mean normalised entropy of the choice distributions: {spread['mean']:.3f} over 9 prompts" in report
