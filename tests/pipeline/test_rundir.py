"""Run-directory discipline: config checked before anything is written, one writer at a time, a
refused or no-op rerun changes nothing, other analysis options re-analyse, a kill during
analysis rescores nothing."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import probe_env, run_probe

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
ARGS = ["model=tiny", "bench=demo", "bench.conditions=[C0]", "analysis.n_boot=50", "progress=false"]


def _cmd(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "probe", *ARGS, f"hydra.run.dir={out}", *extra]


def _run(out: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_probe([*ARGS, f"hydra.run.dir={out}", *extra], cwd=REPO_ROOT, env=probe_env(cache))


def _snapshot(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*"))
            if p.is_file()}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("rundir")
    proc = _run(tmp / "run", tmp / "cache")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return tmp / "run", tmp / "cache"


@pytest.mark.parametrize("override, message", [
    ("backend.batch_tokens=abc", "backend.batch_tokens: expected an integer ≥ 1, got 'abc'"),
    ("backend.max_batch_size=0", "backend.max_batch_size: 0 is out of range; expected a value ≥ 1"),
    ("analysis.n_boot=-5", "analysis.n_boot: -5 is out of range; expected a value 0 or ≥ 10"),
    ("analysis.temperature=0", "analysis.temperature: 0 is out of range; expected a value > 0"),
    ("bench.conditions=[C0,C4]", "bench.conditions[1]: 'C4' is not one of ['C0', 'C1', 'C2', 'C3']"),
    ("+foo=1", "config: unknown top-level key(s) ['foo']"),
    ("+backend.batch_tokns=8", "backend: unknown key(s) ['batch_tokns']"),
    ("+judge.model=qwen3-8b", "['+judge.model=qwen3-8b']: this run judges nothing"),
    ("judge=llm", "['judge=llm']: this run judges nothing"),
])
def test_bad_config_stops_before_any_file_is_written(override: str, message: str, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _run(out, tmp_path / "cache", override)
    assert proc.returncode == 2 and f"probe: error: {message}" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert not out.exists() or not any(out.iterdir()), sorted(out.iterdir())


def test_limit_must_be_positive(tmp_path: Path) -> None:
    proc = run_probe(["model=tiny", "bench=ccd", "bench.limit=-1",
                           f"hydra.run.dir={tmp_path / 'run'}"], cwd=REPO_ROOT, env=probe_env(tmp_path / "cache"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "bench.limit: -1 is not an integer ≥ 1 or null" in proc.stderr, proc.stderr


def test_refused_and_no_op_reruns_change_nothing(finished: tuple[Path, Path]) -> None:
    out, cache = finished
    before = _snapshot(out)
    refused = _run(out, cache, "backend.max_batch_size=8")
    assert refused.returncode == 2 and "different configuration (differs in ['backend'])" in refused.stderr
    noop = _run(out, cache)
    assert noop.returncode == 0, noop.stderr[-2000:]
    assert _snapshot(out) == before  # the recorded config included


def test_other_analysis_options_reanalyse_a_finished_run(finished: tuple[Path, Path], tmp_path: Path) -> None:
    out, cache = finished
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(out), str(copy)], check=True)
    scores = (copy / "scores.parquet").read_bytes()
    t0 = time.time()
    proc = _run(copy, cache, "analysis.n_boot=80", "analysis.temperature=0.5")
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = json.loads((copy / "metrics.json").read_text())
    assert m["bootstrap"]["n_boot"] == 80 and m["temperature"] == 0.5
    assert (copy / "scores.parquet").read_bytes() == scores  # nothing rescored
    assert json.loads((copy / "manifest.json").read_text())["analysis"]["n_boot"] == 80
    assert time.time() - t0 < 120


def test_a_second_writer_is_refused(tmp_path: Path, finished: tuple[Path, Path]) -> None:
    """While one process holds a run directory, another gets a one-line refusal and writes nothing."""
    from probe.pipeline.claim import claim

    _, cache = finished
    out = tmp_path / "busy"
    held = claim(out, {"a": "run in progress"})
    before = _snapshot(out)
    second = _run(out, cache)
    assert second.returncode == 2, second.stderr[-2000:]
    assert f"probe: error: {out} is being written by probe pid {os.getpid()}" in second.stderr
    assert _snapshot(out) == before
    held.release()
    third = _run(out, cache)  # free again; the directory holds another key, so refused for that reason
    assert third.returncode == 2 and "different configuration" in third.stderr


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], ["analysis.capture_layers=[0]"]], ids=["scores", "with-activations"])
def test_a_kill_during_analysis_rescores_nothing(extra: list[str], tmp_path: Path, finished: tuple[Path, Path]) -> None:
    ref, cache = finished
    out = tmp_path / "killed"
    proc = subprocess.Popen(_cmd(out, *extra), cwd=REPO_ROOT, env=probe_env(cache), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if (out / "manifest.json").exists():  # written after scoring, before analysis
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL and not (out / "DONE").exists()
    rerun = _run(out, cache, *extra)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["backend"]["resumed_prompts"] == manifest["bench"]["n_prompts"]  # every score was kept
    if manifest["backend"]["path"] == json.loads((ref / "manifest.json").read_text())["backend"]["path"]:
        assert (out / "scores.parquet").read_bytes() == (ref / "scores.parquet").read_bytes()
    else:  # taps keep the eager path (backend.path): the reference's scores to float32 rounding, not bit for bit
        got, want = (pq.read_table(d / "scores.parquet").to_pydict() for d in (out, ref))
        assert got["prompt_id"] == want["prompt_id"] and got["greedy_letter"] == want["greedy_letter"]
        assert np.abs(np.array(got["letter_logprobs"]) - np.array(want["letter_logprobs"])).max() <= 1e-5
    assert not (out / "scores.parts").exists()


@pytest.mark.parametrize("extra", [[], ["dry_run=true"]], ids=["run", "dry-run"])
def test_a_directory_that_is_not_probes_is_refused_and_left_as_is(extra: list[str], tmp_path: Path,
                                                                  finished: tuple[Path, Path]) -> None:
    """A user's report.md and .hydra/config.yaml in `hydra.run.dir`: refused with one line, nothing written."""
    _, cache = finished
    out = tmp_path / "theirs"
    (out / ".hydra").mkdir(parents=True)
    (out / "report.md").write_text("my notes\n")
    (out / ".hydra" / "config.yaml").write_text("mine: true\n")
    before = _snapshot(out)
    proc = _run(out, cache, *extra)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert f"probe: error: {out} holds files that are not a probe run's (.hydra, report.md)" in proc.stderr
    assert _snapshot(out) == before and sorted(p.name for p in out.iterdir()) == [".hydra", "report.md"]


PLANTED = [".lock", "report.md", "figures/csd.png", ".hydra/config.yaml"]


@pytest.mark.parametrize("name", PLANTED)
def test_a_planted_link_is_refused_not_written_through(name: str, tmp_path: Path,
                                                       finished: tuple[Path, Path]) -> None:
    """A link planted in a run directory being resumed (every one of these files is written on the
    way to DONE) is refused before anything is written; its target stays as it was."""
    ref, cache = finished
    out, victim = tmp_path / "run", tmp_path / "victim.txt"
    subprocess.run(["cp", "-a", str(ref), str(out)], check=True)
    (out / "DONE").unlink()
    (out / name).unlink(missing_ok=True)
    victim.write_text("precious\n")
    (out / name).symlink_to(victim)
    before = _snapshot(out)
    proc = _run(out, cache)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert f"probe: error: {out / name} is a symbolic link (to {victim}); probe writes its own files" in proc.stderr
    assert victim.read_text() == "precious\n" and _snapshot(out) == before


def test_probe_analyze_refuses_a_linked_figures_directory(tmp_path: Path, finished: tuple[Path, Path]) -> None:
    ref, _ = finished
    out, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    subprocess.run(["cp", "-a", str(ref), str(out)], check=True)
    subprocess.run(["rm", "-r", str(out / "figures")], check=True)
    elsewhere.mkdir()
    (out / "figures").symlink_to(elsewhere, target_is_directory=True)
    metrics = (out / "metrics.json").read_bytes()
    proc = run_probe(["analyze", str(out)], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2 and f"{out / 'figures'} is a symbolic link (to {elsewhere})" in proc.stderr
    assert not any(elsewhere.iterdir()) and (out / "metrics.json").read_bytes() == metrics


@pytest.mark.parametrize(("override", "message"), [
    ("hydra.output_subdir=.hydra", "hydra.output_subdir=.hydra: Hydra writes its config into the run directory"),
    ("hydra/job_logging=default", "hydra/job_logging writes {out}/run.log into the run directory"),
])
def test_hydra_writing_into_the_run_directory_is_refused(override: str, message: str, tmp_path: Path,
                                                         finished: tuple[Path, Path]) -> None:
    """Hydra's own `.hydra/` or log file would land before probe's claim; probe records its config itself."""
    _, cache = finished
    out = tmp_path / "run"
    proc = _run(out, cache, override)
    assert proc.returncode == 2 and f"probe: error: {message.format(out=out)}" in proc.stderr, proc.stderr[-2000:]
    assert not (out / "run_key.json").exists()


def test_writers_create_files_without_following_links(tmp_path: Path) -> None:
    """Every run-directory file goes through `probe.files.open_new`: a link at the name is refused,
    a link planted at the temporary name is replaced, never followed."""
    import numpy as np
    import pyarrow as pa

    from probe.errors import ProbeInputError
    from probe.files import write_json, write_text
    from probe.results.io import write_table
    from probe.results.mech import ActivationWriter

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    writers = {"a.json": lambda p: write_json(p, {"x": 1}), "b.md": lambda p: write_text(p, "x"),
               "c.parquet": lambda p: write_table(p, pa.table({"x": [1]}))}
    for name, write in writers.items():
        (tmp_path / name).symlink_to(victim)
        with pytest.raises(ProbeInputError, match=f"{name} is a symbolic link"):
            write(tmp_path / name)
        (tmp_path / f".{name}.tmp").symlink_to(victim)  # the temporary name: unlinked, then created afresh
        (tmp_path / name).unlink()
        write(tmp_path / name)
        assert not (tmp_path / name).is_symlink() and not (tmp_path / f".{name}.tmp").exists()
    (tmp_path / ".activations.safetensors.tmp").symlink_to(victim)
    writer = ActivationWriter(tmp_path, [0], [0], 2, "float32")
    writer.add(0, np.ones((1, 2), np.float32))
    writer.close()
    assert victim.read_text() == "precious\n" and not (tmp_path / "activations.safetensors").is_symlink()
