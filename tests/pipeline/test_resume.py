"""A run killed with SIGKILL at some point resumes into results identical to an uninterrupted run."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import probe_env, run_probe

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
ARGS = ["model=tiny", "bench=demo", "shard_size=16", "analysis.n_boot=100", "progress=false"]


def _cmd(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "probe", *ARGS, f"hydra.run.dir={out}", *extra]


def _run(out: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_probe([*ARGS, f"hydra.run.dir={out}", *extra], cwd=REPO_ROOT, env=probe_env(cache))


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


@pytest.mark.slow
def test_sigkill_then_rerun_is_identical(reference: tuple[Path, Path], tmp_path: Path) -> None:
    ref, cache = reference
    out = tmp_path / "killed"
    _kill_after_parts(out, cache, n_parts=5)
    kept = len(list((out / "scores.parts").glob("part-*.parquet")))
    assert kept >= 5
    proc = _run(out, cache)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _same_results(ref, out)


@pytest.mark.slow
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


def test_a_part_is_cut_once_part_seconds_of_work_have_passed(tmp_path: Path) -> None:
    """By elapsed work as well as by count: with `chunk` far away, the batch that ends
    `part_seconds` since the last part is written as one."""
    from probe.results.scores import ScoreWriter
    from probe.types import LetterScore

    now = [0.0]
    writer = ScoreWriter(tmp_path, ("A", "B"), chunk=10_000, part_seconds=60.0, clock=lambda: now[0])

    def batch(*ids: int) -> list[LetterScore]:
        return [LetterScore(prompt_id=i, letter_logprobs=(-0.5, -1.0), greedy_valid=True) for i in ids]

    def parts() -> list[str]:
        return sorted(p.name for p in (tmp_path / "scores.parts").glob("part-*.parquet"))

    writer.add(batch(0, 1))
    now[0] = 59.0
    writer.add(batch(2, 3))
    assert parts() == []  # 59 s of work: still buffered
    now[0] = 61.0
    writer.add(batch(4))
    assert parts() == ["part-00000.parquet"]
    assert sorted(pq.read_table(tmp_path / "scores.parts" / parts()[0]).column("prompt_id").to_pylist()) == [0, 1, 2,
                                                                                                              3, 4]
    now[0] = 100.0
    writer.add(batch(5))
    assert parts() == ["part-00000.parquet"]  # the clock restarts at each part
    now[0] = 121.0
    writer.add(batch(6))
    assert parts() == ["part-00000.parquet", "part-00001.parquet"]


def test_part_seconds_must_be_positive() -> None:
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from probe.config import package_conf_dir
    from probe.errors import ProbeInputError
    from probe.pipeline.spec import run_config

    with initialize_config_dir(config_dir=str(package_conf_dir()), version_base="1.3"):
        values = OmegaConf.to_container(compose("config", overrides=["model=tiny", "part_seconds=0"]))
    assert isinstance(values, dict)
    with pytest.raises(ProbeInputError, match=r"part_seconds: 0 is out of range; expected a value > 0"):
        run_config(values, Path("unused"))


@pytest.mark.slow
def test_sigint_prints_the_resume_command_and_it_resumes_identically(reference: tuple[Path, Path],
                                                                     tmp_path: Path) -> None:
    """Ctrl-C during scoring: exit 130 and one line with the command that resumes (the run's
    overrides and its directory); that command finishes with the uninterrupted run's results.
    Parts are cut by time only here (`shard_size` above the prompt count), so the kept work is
    what the elapsed-time cut saved."""
    ref, cache = reference
    out = tmp_path / "interrupted"
    args = [a for a in ARGS if not a.startswith("shard_size=")] + ["shard_size=100000", "part_seconds=0.000001"]
    # A shell that starts a job in the background makes it ignore SIGINT; a terminal's user does not.
    proc = subprocess.Popen([sys.executable, "-m", "probe", *args, f"hydra.run.dir={out}"], cwd=REPO_ROOT,
                            env=probe_env(cache), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if len(list((out / "scores.parts").glob("part-*.parquet"))) >= 3:
            proc.send_signal(signal.SIGINT)
            break
        time.sleep(0.01)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    lines = [line for line in stderr.splitlines() if line.startswith("probe: interrupted by SIGINT; resume with: ")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-2000:]
    command = shlex.split(lines[0].split("resume with: ", 1)[1])
    assert command[:3] == [sys.executable, "-m", "probe"]
    assert command[3:] == [*args, f"hydra.run.dir={out}"]
    assert len(list((out / "scores.parts").glob("part-*.parquet"))) >= 3 and not (out / "DONE").exists()
    resumed = subprocess.run(command, cwd=REPO_ROOT, env=probe_env(cache), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads((out / "manifest.json").read_text())["backend"]["resumed_prompts"] > 0
    _same_results(ref, out)


def test_the_resume_command_keeps_the_run_and_drops_the_sweep() -> None:
    from probe.commands.interrupt import resume_command

    task = ["model=tiny", "bench.conditions=[C0,C3]"]
    hydra = ["hydra.mode=MULTIRUN", "hydra.sweep.dir=multirun/x", "hydra.launcher.timeout_min=5",
             "hydra.searchpath=[file://plugins]", "hydra.run.dir=elsewhere"]
    assert resume_command(["python", "-m", "probe"], task, hydra, Path("/runs/a b/it's")) == (
        "python -m probe model=tiny 'bench.conditions=[C0,C3]' 'hydra.searchpath=[file://plugins]' "
        "'hydra.run.dir='\"'\"'/runs/a b/it\\'\"'\"'s'\"'\"''")
    assert resume_command(["probe"], task, [], Path("/runs/demo/2026-12-01_10-00-00")) == (
        "probe model=tiny 'bench.conditions=[C0,C3]' hydra.run.dir=/runs/demo/2026-12-01_10-00-00")
