"""Many short runs on the tiny model, concurrent and sharing one cold cache, some rerun into their
finished directories: every one must succeed (no spurious head-check failure, no build race)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # model runs as new processes (signals, timings, scripts)

REPO_ROOT = Path(__file__).resolve().parents[2]


def _start(out: Path, cache: Path, model: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PROBE_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen([sys.executable, "-m", "probe", f"model={model}", "bench=demo", "bench.conditions=[C0]",
                             f"hydra.run.dir={out}", "analysis.n_boot=20", "progress=false"],
                            cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_concurrent_and_repeated_runs_all_succeed(tmp_path: Path) -> None:
    cache = tmp_path / "cache"  # cold: the first pair of runs builds the tiny models concurrently
    outs = [tmp_path / f"run{i}" for i in range(6)]
    models = ["tiny", "tiny", "tiny-gemma3", "tiny-gemma3", "tiny", "tiny-gemma3"]
    for round_ in range(2):  # the second round reruns into finished directories: nothing to do
        for i in range(0, len(outs), 2):
            procs = [_start(outs[j], cache, models[j]) for j in (i, i + 1)]
            for j, p in zip((i, i + 1), procs):
                _, err = p.communicate(timeout=600)
                assert p.returncode == 0, f"round {round_}, run {j}: {err[-2000:]}"
    for out in outs:
        check = json.loads((out / "manifest.json").read_text())["backend"]["head_check"]
        assert check["argmax_agrees"] and check["max_letter_gap"] < 1e-5, (out, check)
        assert (out / "DONE").is_file()
