"""A benchmark added from outside probe — one module and one YAML in the test tree, registered
through the public registry API — runs end to end through the command lines on the tiny model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_probe

TESTS = Path(__file__).resolve().parents[1]
PLUGINS = TESTS / "plugins"


def _env(cache: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(PLUGINS), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PROBE_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "PYTHONPATH": path}


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("toy")
    out = tmp / "sweep" / "toy-tiny"
    proc = run_probe(["model=tiny", "bench=toy",
                           f"hydra.searchpath=[file://{PLUGINS / 'conf'}]", f"hydra.run.dir={out}",
                           "analysis.n_boot=100", "progress=false"],
                          cwd=tmp, env=_env(tmp / "cache"), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_toy_run_directory(toy_run: Path) -> None:
    m = json.loads((toy_run / "metrics.json").read_text())
    assert m["bench"] == "toy" and (m["n_items"], m["n_prompts"]) == (4, 12)
    shares = m["expected"]["shares"]
    assert set(shares) == {"east", "north", "south"} and sum(shares.values()) == pytest.approx(1.0)
    assert m["expected"]["KL"] >= 0 and len(m["ci95"]["expected"]["KL"]) == 2
    manifest = json.loads((toy_run / "manifest.json").read_text())
    assert manifest["bench"]["config"]["module"] == "toybench" and manifest["letters"] == ["A", "B", "C"]
    assert (toy_run / "report.md").read_text().startswith("# Toy bench — tiny")
    html = (toy_run / "report.html").read_text()
    assert html.count("<img ") >= 2  # the bench's own figure and the temperature curve
    assert (toy_run / "figures" / "toy_shares.png").is_file() and (toy_run / "DONE").is_file()


def test_toy_run_has_the_letter_prior_blocks(toy_run: Path) -> None:
    """A plugin's own metric code gives the debiased tree too: the decomposition lives in the
    forced-choice hooks, not in any bench."""
    m = json.loads((toy_run / "metrics.json").read_text())
    assert set(m["debiased"]["shares"]) == {"east", "north", "south"} and len(m["ci95"]["debiased"]["KL"]) == 2
    assert m["letter_prior_estimator"]["toy"]["estimator"] == "rotations"
    assert sum(m["letter_prior"]["toy"].values()) == pytest.approx(1.0)
    assert sum(m["letter_split"]["toy"].values()) == pytest.approx(1.0)


def test_toy_run_in_sweep_report(toy_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    proc = run_probe(["report", str(toy_run.parent), f"out={out}"],
                          env=_env(tmp_path / "cache"), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = (out / "report.md").read_text()
    assert "## Toy bench" in md and "| run | kind | bench | items | KL | north |" in md
    mark = " ⚠" if json.loads((toy_run / "metrics.json").read_text())["letter_warnings"] else ""
    assert f"| tiny{mark} | instruct | toy | " in md


def test_toy_reanalysis(toy_run: Path) -> None:
    proc = run_probe(["analyze", str(toy_run), "analysis.temperature=2"],
                          env=_env(toy_run.parent / "cache"), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    hot = json.loads((toy_run / "metrics-temperature=2.json").read_text())
    base = json.loads((toy_run / "metrics.json").read_text())
    assert hot["temperature"] == 2.0 and hot["greedy"] == base["greedy"]  # greedy does not depend on T
    assert hot["expected"]["KL"] != base["expected"]["KL"]
