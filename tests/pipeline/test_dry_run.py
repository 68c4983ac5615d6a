"""`dry_run=true`: every prompt rendered and stored, samples and a memory estimate printed,
no weights loaded and nothing scored."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import probe_env, run_probe

from probe.models.memory import memory_estimate
from probe.benches.disco.perf import gemma3_12b_text_config

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_dry_run_writes_prompts_and_loads_no_weights(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = run_probe(["model=tiny", "bench=demo", "dry_run=true",
                           f"hydra.run.dir={out}"], cwd=REPO_ROOT, env=probe_env(tmp_path / "cache"),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # no manifest, no scores, no lock: the prompts and the launch record (`probe runs` reads its bench and model)
    assert sorted(p.name for p in out.iterdir()) == [".hydra", "prompts.parquet"]
    prompts = pq.read_table(out / "prompts.parquet")
    assert prompts.num_rows == 24 * 52
    total = sum(len(t) for t in prompts.column("token_ids").to_pylist())
    assert f"dry run: 1248 prompts, {total} tokens" in proc.stdout
    assert "letters ['A', 'B', 'C', 'D'] → token ids" in proc.stdout and "memory estimate (GiB" in proc.stdout
    assert "--- prompt 0 (" in proc.stdout and "Loading weights" not in proc.stderr + proc.stdout
    assert proc.stdout.rstrip().endswith(f"probe: dry run: prompts written to {out}")
    # the summary lines fit a 100-column terminal (where no word, e.g. the run's path, is longer);
    # the two sample prompts print as the model sees them, unwrapped
    samples = {line for text in prompts.column("text").to_pylist() for line in text.splitlines()}
    wide = [line for line in proc.stdout.splitlines() if len(line) > 100 and line not in samples
            and str(out) not in line]
    assert not wide, wide


def test_memory_estimate_of_gemma3_12b() -> None:
    est = memory_estimate(gemma3_12b_text_config(), "bfloat16", 8192)
    assert 20.5 < est["weights"] < 23.0  # ~11.8B text parameters in bf16
    # KV: 2 × 8192 tokens × (K, V) × 48 layers × 8 kv heads × 256 dims × 2 bytes = 6 GiB exactly
    assert est["kv_cache"] == pytest.approx(6.0)
    assert est["total"] == pytest.approx(sum(v for k, v in est.items() if k != "total"))
