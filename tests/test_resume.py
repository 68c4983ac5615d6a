"""A run killed with SIGKILL at some point resumes into results identical to an uninterrupted run."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import probe_env

REPO_ROOT = Path(__file__).resolve().parent.parent
ARGS = ["model=tiny", "bench=demo", "shard_size=16", "analysis.n_boot=100", "progress=false"]


def _cmd(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "probe", *ARGS, f"hydra.run.dir={out}", *extra]


def _run(out: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_cmd(out, *extra), cwd=REPO_ROOT, env=probe_env(cache), capture_output=True, text=True,
                          timeout=600)


def _kill_after_parts(out: Path, cache: Path, n_parts: int) -> None:
    """Start a run and SIGKILL it once `n_parts` score shards exist."""
    proc = subprocess.Popen(_cmd(out), cwd=REPO_ROOT, env=probe_env(cache), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if len(list((out / "scores.parts").glob("part-*.parquet"))) >= n_parts:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (out / "DONE").exists() and not (out / "metrics.json").exists()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("resume")
    cache = tmp / "cache"
    proc = _run(tmp / "reference", cache)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return tmp / "reference", cache


def _same_results(a: Path, b: Path) -> None:
    assert pq.read_table(a / "scores.parquet").equals(pq.read_table(b / "scores.parquet"))
    assert (a / "scores.safetensors").read_bytes() == (b / "scores.safetensors").read_bytes()
    assert (a / "metrics.json").read_text() == (b / "metrics.json").read_text()
    assert (b / "DONE").is_file() and not (b / "scores.parts").exists()


def test_sigkill_then_rerun_is_identical(reference: tuple[Path, Path], tmp_path: Path) -> None:
    ref, cache = reference
    out = tmp_path / "killed"
    _kill_after_parts(out, cache, n_parts=5)
    kept = len(list((out / "scores.parts").glob("part-*.parquet")))
    assert kept >= 5
    proc = _run(out, cache)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _same_results(ref, out)


def test_damaged_and_partial_shards_are_recomputed(reference: tuple[Path, Path], tmp_path: Path) -> None:
    ref, cache = reference
    out = tmp_path / "damaged"
    _kill_after_parts(out, cache, n_parts=4)
    parts = sorted((out / "scores.parts").glob("part-*.parquet"))
    parts[1].write_bytes(parts[1].read_bytes()[:50])  # truncated: unreadable
    flipped = bytearray(parts[2].read_bytes())
    flipped[len(flipped) // 2] ^= 0x01  # one bit inside a complete part: may still read as parquet
    parts[2].write_bytes(bytes(flipped))
    (out / "scores.parts" / ".part-99999.parquet.tmp").write_bytes(b"half a write")
    proc = _run(out, cache)
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = proc.stdout + proc.stderr
    assert "part-00001.parquet is damaged (sha256 mismatch)" in log
    assert "part-00002.parquet is damaged (sha256 mismatch)" in log
    _same_results(ref, out)


def test_finished_run_is_not_redone_and_other_configs_are_refused(reference: tuple[Path, Path]) -> None:
    ref, cache = reference
    stamp = (ref / "scores.parquet").stat().st_mtime_ns
    proc = _run(ref, cache)
    assert proc.returncode == 0 and (ref / "scores.parquet").stat().st_mtime_ns == stamp
    proc = _run(ref, cache, "backend.max_batch_size=8")
    assert proc.returncode == 2 and "different configuration (differs in ['backend'])" in proc.stderr
