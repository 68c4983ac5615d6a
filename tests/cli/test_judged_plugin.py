"""A *judged* benchmark added from outside probe — one module (its task, its own judge task with
its own verdict columns, its own deterministic judge) and one YAML in the test tree — runs
through `python -m probe`, `probe analyze`, `probe report` and a shard merge."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import run_probe

TESTS = Path(__file__).resolve().parents[1]
PLUGINS = TESTS / "plugins"
ARGS = ("model=tiny", "bench=judgedtoy", "judge.name=toyshape", f"hydra.searchpath=[file://{PLUGINS / 'conf'}]",
        "analysis.n_boot=100", "progress=false", "backend.max_new_tokens=8")


def _env(cache: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(PLUGINS), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PROBE_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "PYTHONPATH": path}


def _module(tmp: Path, module: str, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=tmp, env=_env(tmp / "cache"),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _in_process(tmp: Path, *args: str) -> None:
    """`python -m probe *args` in this process (the plugin imported from $PYTHONPATH, then forgotten)."""
    proc = run_probe([*args], cwd=tmp, env=_env(tmp / "cache"))
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("judgedtoy")
    _in_process(tmp, *ARGS, f"hydra.run.dir={tmp / 'sweep' / 'full'}")
    for i in range(2):
        _in_process(tmp, *ARGS, f"bench.shard={i}/2", f"hydra.run.dir={tmp / 'shards' / f's{i}'}")
    return tmp


def test_its_judge_fills_its_own_verdict_columns(runs: Path) -> None:
    run = runs / "sweep" / "full"
    table = pq.read_table(run / "judgements.parquet")
    assert table.schema.names == ["prompt_id", "task", "item_id", "n_chars", "has_digit", "judge_error", "judge",
                                  "dropped"]
    answers = {g["prompt_id"]: g["answer"] for g in pq.read_table(run / "generations.parquet").to_pylist()}
    rows = table.to_pylist()
    assert [r["prompt_id"] for r in rows] == [0, 1, 2, 3] and {r["task"] for r in rows} == {"toy_shape"}
    for r in rows:
        assert r["item_id"] == f"q{r['prompt_id']}" and r["judge"] == "toyshape" and r["judge_error"] is None
        assert r["n_chars"] == len(answers[r["prompt_id"]])
        assert r["has_digit"] == any(c.isdigit() for c in answers[r["prompt_id"]])
    m = json.loads((run / "metrics.json").read_text())
    assert m["metrics"]["mean_chars"] == pytest.approx(sum(len(a) for a in answers.values()) / 4)
    assert m["n_judge_errors"] == 0 and (run / "report.md").read_text().startswith("# Judged toy bench — tiny")


def test_another_bench_judge_is_refused(tmp_path: Path) -> None:
    proc = run_probe([*ARGS, "judge.name=rules",
                           f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path, env=_env(tmp_path / "cache"),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2 and "judge=rules cannot judge Judged toy bench" in proc.stderr, proc.stderr[-2000:]


@pytest.mark.slow
def test_reanalysis_report_and_shard_merge(runs: Path) -> None:
    full = runs / "sweep" / "full"
    _module(runs, "probe", "analyze", str(full), "analysis.n_boot=50")
    assert json.loads((full / "metrics.json").read_text())["metrics"]["mean_chars"] >= 0
    _module(runs, "probe", "report", str(runs / "sweep"), f"out={runs / 'report'}")
    md = (runs / "report" / "report.md").read_text()
    assert "## Judged toy bench" in md and "| digit rate | mean length |" in md
    _module(runs, "probe", "merge", "--out", str(runs / "merged"), str(runs / "shards" / "s1"), str(runs / "shards" / "s0"))
    for name in ("prompts.parquet", "generations.parquet", "judgements.parquet"):
        assert pq.read_table(full / name).equals(pq.read_table(runs / "merged" / name)), name
    assert json.loads((runs / "merged" / "metrics.json").read_text())["metrics"] == \
        json.loads((full / "metrics.json").read_text())["metrics"]
