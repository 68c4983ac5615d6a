"""Every long pass resumes: runs killed during lens/activation capture or generation end, after
the same command, with files identical to an uninterrupted run; judging asks again only what
was not answered."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import probe_env, run_probe

from probe.benches.task import JudgeJob
from probe.judges import JudgeRequest, JudgeResult
from probe.benches.ccd.judging import GLOBE_DIMENSIONS
from probe.pipeline.judging import VerdictCache, run_jobs

pytestmark = pytest.mark.slow  # model runs as new processes (signals, timings, scripts)

REPO_ROOT = Path(__file__).resolve().parents[2]
MECH = ["model=tiny", "bench=demo", "bench.conditions=[C0,C3]", "shard_size=16", "analysis.n_boot=20",
        "progress=false", "analysis.logit_lens=true", "analysis.capture_layers=[0,-1]"]
GEN = ["model=tiny", "bench=demo", "bench.conditions=[C0]", "backend.mode=generate", "backend.max_new_tokens=6",
       "backend.max_batch_size=8", "analysis.n_boot=20", "progress=false"]


def _cmd(args: list[str], out: Path) -> list[str]:
    return [sys.executable, "-m", "probe", *args, f"hydra.run.dir={out}"]


def _run(args: list[str], out: Path, cache: Path) -> None:
    proc = run_probe([*args, f"hydra.run.dir={out}"], cwd=REPO_ROOT, env=probe_env(cache))
    assert proc.returncode == 0, proc.stderr[-3000:]


def _kill_after(args: list[str], out: Path, cache: Path, parts: str, n: int) -> None:
    proc = subprocess.Popen(_cmd(args, out), cwd=REPO_ROOT, env=probe_env(cache), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if len(list((out / parts).glob("part-*.parquet"))) >= n:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (out / "DONE").exists()


@pytest.mark.parametrize("args, parts, files", [
    (MECH, "scores.parts", ["scores.parquet", "scores.safetensors", "lens.safetensors", "activations.safetensors",
                            "metrics.json"]),
    (GEN, "generations.parts", ["generations.parquet", "metrics.json"]),
], ids=["lens-and-activations", "generation"])
def test_killed_run_resumes_into_identical_files(args: list[str], parts: str, files: list[str],
                                                 tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _run(args, tmp_path / "reference", cache)
    out = tmp_path / "killed"
    _kill_after(args, out, cache, parts, n=3)
    _run(args, out, cache)
    for name in files:
        assert (out / name).read_bytes() == (tmp_path / "reference" / name).read_bytes(), name
    assert not (out / parts).exists()


class Judge:
    """Answers `globe_dimensions` with the dimension the rationale `r<i>` numbers; dies (like a killed run) after `fail_after`."""

    name = "echo"

    def __init__(self, fail_after: int | None = None) -> None:
        self.asked: list[str] = []
        self.fail_after = fail_after

    def judge(self, requests: list[JudgeRequest]) -> list[JudgeResult]:
        out = []
        for r in requests:
            if self.fail_after is not None and len(self.asked) >= self.fail_after:
                raise KeyboardInterrupt("killed")
            self.asked.append(r.payload["rationale"])  # a valid verdict (a cached one is re-validated)
            dimension = GLOBE_DIMENSIONS[int(r.payload["rationale"][1:]) % len(GLOBE_DIMENSIONS)]
            out.append(JudgeResult({"dimensions": [dimension]}, None, self.name))
        return out


def test_judging_resumes_by_request(tmp_path: Path) -> None:
    jobs = [JudgeJob(JudgeRequest("globe_dimensions", {"rationale": f"r{i}"}), {"prompt_id": i, "task": "t"})
            for i in range(10)]

    def caches(root: Path) -> tuple[VerdictCache, VerdictCache]:
        return VerdictCache(root / "shared", {"name": "echo"}), VerdictCache(root / "run", {"name": "echo"})

    reference = run_jobs(Judge(), jobs, *caches(tmp_path / "ref"), chunk=3)
    with pytest.raises(KeyboardInterrupt):
        run_jobs(Judge(fail_after=7), jobs, *caches(tmp_path / "run"), chunk=3)
    again = Judge()
    rows = run_jobs(again, jobs, *caches(tmp_path / "run"), chunk=3)
    assert rows == reference and again.asked == ["r6", "r7", "r8", "r9"]  # two chunks of 3 had been kept
