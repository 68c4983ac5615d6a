"""Activation-patching analysis: the restored share by hand, its bootstrap, and the run-directory
reader and report section on a tiny-model run with synthetic patching files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import probe_env, run_probe
from safetensors.numpy import save_file

from probe.errors import ProbeInputError
from probe.metrics.core import bootstrap_weights
from probe.metrics.patch_effects import patching_table, restored_share
from probe.results.patch_tables import PAIR_COLUMNS, load_patching
from probe.probs import choice_probs
from probe.results.run import load_run

REPO_ROOT = Path(__file__).resolve().parents[2]

# 2 cultures, 3 items, 2 layers. Pair k: item, target, p_dest, p_source, p_patched at (layer 0, layer 1).
#   0  i1  X  0.2  0.6  (0.2, 0.5)
#   1  i2  X  0.4  0.8  (0.3, 0.8)
#   2  i3  Y  0.1  0.5  (0.1, 0.3)
#   3  i3  Y  0.3  0.9  (0.5, 0.7)
HAND = {"p_dest": np.array([0.2, 0.4, 0.1, 0.3]), "p_source": np.array([0.6, 0.8, 0.5, 0.9]),
        "p_patched": np.array([[0.2, 0.5], [0.3, 0.8], [0.1, 0.3], [0.5, 0.7]]),
        "target": np.array(["X", "X", "Y", "Y"], dtype=object), "item_id": np.array(["i1", "i2", "i3", "i3"])}


def test_restored_share_by_hand() -> None:
    out = restored_share(**HAND, n_boot=0, seed=0)
    assert out["cultures"] == ["X", "Y"] and out["ci95"] is None
    assert out["n_pairs"] == {"X": 2, "Y": 2, "all": 4}
    # X: CR_dest = (0.2 + 0.4)/2 = 0.3, CR_source = (0.6 + 0.8)/2 = 0.7, effect 0.4;
    #    CR_patched = (0.25, 0.65) → restored = (−0.05/0.4, 0.35/0.4) = (−0.125, 0.875)
    assert out["CR_dest"]["X"] == pytest.approx(0.3) and out["CR_source"]["X"] == pytest.approx(0.7)
    assert out["CR_patched"]["X"] == pytest.approx([0.25, 0.65])
    assert out["restored"]["X"] == pytest.approx([-0.125, 0.875])
    # Y: CR_dest = 0.2, CR_source = 0.7, effect 0.5; CR_patched = (0.3, 0.5) → (0.1/0.5, 0.3/0.5) = (0.2, 0.6)
    assert out["CR_dest"]["Y"] == pytest.approx(0.2) and out["CR_source"]["Y"] == pytest.approx(0.7)
    assert out["restored"]["Y"] == pytest.approx([0.2, 0.6])
    # all (means over the 4 pairs, not over cultures): CR_dest = 1.0/4 = 0.25, CR_source = 2.8/4 = 0.7,
    # effect 0.45; CR_patched = (1.1/4, 2.3/4) = (0.275, 0.575) → (0.025/0.45, 0.325/0.45) = (1/18, 13/18)
    assert out["CR_dest"]["all"] == pytest.approx(0.25) and out["CR_source"]["all"] == pytest.approx(0.7)
    assert out["CR_patched"]["all"] == pytest.approx([0.275, 0.575])
    assert out["restored"]["all"] == pytest.approx([1 / 18, 13 / 18])
    assert out["restored"]["all"][0] != pytest.approx((-0.125 + 0.2) / 2)  # the macro mean would be 0.0375
    json.dumps(out, allow_nan=False)  # JSON-ready as returned


def test_no_cue_effect_is_null_and_untargeted_pairs_are_left_out() -> None:
    args = {k: v.copy() for k, v in HAND.items()}
    args["p_source"][2:] = args["p_dest"][2:]  # Y: source = dest, so no effect to restore
    args["target"] = np.array(["X", "X", "Y", "Y", None], dtype=object)
    args["item_id"] = np.array(["i1", "i2", "i3", "i3", "i4"])
    for name, extra in (("p_dest", 0.9), ("p_source", 0.1)):
        args[name] = np.append(args[name], extra)
    args["p_patched"] = np.vstack([args["p_patched"], [[0.9, 0.9]]])
    out = restored_share(**args, n_boot=20, seed=1)
    assert out["restored"]["Y"] == [None, None] and out["CR_source"]["Y"] == pytest.approx(0.2)
    assert out["ci95"]["Y"] == [[None, None], [None, None]]  # i3 alone: every replicate has no effect
    assert out["restored"]["X"] == pytest.approx([-0.125, 0.875])  # X unchanged
    assert out["n_pairs"] == {"X": 2, "Y": 2, "all": 4}  # the untargeted pair counts nowhere
    json.dumps(out, allow_nan=False)
    empty = restored_share(np.array([0.5]), np.array([0.7]), np.array([[0.6]]), np.array([None], dtype=object),
                           np.array(["i1"]), n_boot=5, seed=0)
    assert empty["cultures"] == [] and empty["restored"] == {"all": [None]} and empty["n_pairs"] == {"all": 0}
    with pytest.raises(ValueError, match="p_patched"):
        restored_share(HAND["p_dest"], HAND["p_source"], HAND["p_patched"][:3], HAND["target"], HAND["item_id"], 0, 0)
    with pytest.raises(ProbeInputError, match="'all'"):
        restored_share(**{**HAND, "target": np.array(["X", "X", "all", "all"], dtype=object)}, n_boot=0, seed=0)


def _random_pairs(n_items: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n = 3 * n_items
    p_dest = rng.uniform(0.05, 0.4, n)
    p_source = p_dest + rng.uniform(0.2, 0.5, n)
    mix = np.array([0.0, 0.3, 0.8, 1.0])
    p_patched = p_dest[:, None] + mix * (p_source - p_dest)[:, None] + rng.normal(0, 0.05, (n, 4))
    return {"p_dest": p_dest, "p_source": p_source, "p_patched": p_patched,
            "target": np.array(["X", "Y", "Z"] * n_items, dtype=object),
            "item_id": np.repeat([f"item-{i:02d}" for i in range(n_items)], 3)}


def test_bootstrap_intervals_contain_the_estimate_and_match_a_resample() -> None:
    data = _random_pairs(30, np.random.default_rng(0))
    out = restored_share(**data, n_boot=200, seed=3)
    for key in ("X", "Y", "Z", "all"):
        for value, (lo, hi) in zip(out["restored"][key], out["ci95"][key]):
            assert lo <= value <= hi
    # one replicate is restored_share on the resampled items (items in sorted order, as weighted)
    w = bootstrap_weights(30, 1, seed=7)[0].astype(int)
    rows = np.concatenate([np.repeat(np.arange(3 * i, 3 * i + 3)[None], w[i], axis=0).ravel() for i in range(30)])
    again = restored_share(**{k: v[rows] for k, v in data.items()}, n_boot=0, seed=0)
    one = restored_share(**data, n_boot=1, seed=7)
    for key in ("X", "Y", "Z", "all"):
        assert [lo for lo, _ in one["ci95"][key]] == pytest.approx(again["restored"][key], rel=1e-12)


def test_identical_items_give_degenerate_intervals() -> None:
    one = {k: v[:3] for k, v in _random_pairs(1, np.random.default_rng(1)).items()}
    data = {k: np.concatenate([v] * 8) for k, v in one.items()}
    data["item_id"] = np.repeat([f"i{i}" for i in range(8)], 3)
    out = restored_share(**data, n_boot=50, seed=0)
    for key in ("X", "Y", "Z", "all"):
        for value, (lo, hi) in zip(out["restored"][key], out["ci95"][key]):
            assert lo == pytest.approx(value, rel=1e-12) and hi == pytest.approx(value, rel=1e-12)


# --- a run directory: the tiny model on the demo bench (C0, C1), with synthetic patching files ---

LAYERS = [0, 1, 3]


def _write_patching(run_dir: Path, logprobs: np.ndarray, rows: list[dict], layers: list[int] = LAYERS,
                    pair: np.ndarray | None = None) -> None:
    pair = np.arange(len(logprobs)) if pair is None else pair
    save_file({"logprobs": np.ascontiguousarray(logprobs, np.float32), "layers": np.array(layers, np.int64),
               "pair": np.asarray(pair, np.int64)}, str(run_dir / "patching.safetensors"))
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema(list(PAIR_COLUMNS.items()))),
                   run_dir / "patching.parquet")


def _pairs(run_dir: Path) -> tuple[list[dict], np.ndarray]:
    """Every C1 prompt as source, patched into the C0 prompt of its item and rotation; two extra pairs
    whose target is null or not shown. Patched log-probs: the destination's scores at layer 0, their
    mean with the source's at layer 1, the source's scores at layer 3."""
    table = load_run(run_dir).table()
    condition, rotation, target = (table.column(name) for name in ("condition", "rotation", "target"))
    c0 = {(i, r): p for p, i, r, c in zip(table.prompt_id, table.item_id, rotation, condition) if c == "C0"}
    rows = []
    for p in np.flatnonzero(condition == "C1"):
        d = c0[(table.item_id[p], rotation[p])]
        assert (table.groups[p] == table.groups[d]).all()
        rows.append({"item_id": table.item_id[p], "rotation": int(rotation[p]), "target": target[p],
                     "source_id": int(p), "dest_id": int(d)})
    rows += [{**rows[0], "target": None}, {**rows[1], "target": "Atlantis"}]
    rows = [{"pair": k, **r} for k, r in enumerate(rows)]
    src = table.logprobs[[r["source_id"] for r in rows]]
    dst = table.logprobs[[r["dest_id"] for r in rows]]
    return rows, np.stack([dst, (dst + src) / 2, src], axis=1)


@pytest.fixture(scope="module")
def patched_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("patching")
    out = tmp / "run"
    proc = run_probe(["model=tiny", "bench=demo", "bench.conditions=[C0,C1]",
                           "bench.limit=6", "analysis.n_boot=50", "progress=false", f"hydra.run.dir={out}"],
                          cwd=REPO_ROOT, env=probe_env(tmp / "cache"), capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["intervention"] = {"name": "patch", "source": "C1", "dest": "C0", "layers": LAYERS}
    (out / "manifest.json").write_text(json.dumps(manifest))
    rows, logprobs = _pairs(out)
    _write_patching(out, logprobs, rows)
    from probe.pipeline.analysis import analyze_run

    analyze_run(out)
    return out


def test_patching_table_and_report_section(patched_run: Path) -> None:
    table = json.loads((patched_run / "patching.json").read_text())
    assert table["layers"] == LAYERS and (table["source"], table["dest"]) == ("C1", "C0")
    assert table["n_left_out"] == 2 and table["temperature"] == 1.0 and table["bootstrap"]["n_boot"] == 50
    n = table["n_pairs"]["all"]
    assert n == 6 * 16 and sum(table["n_pairs"][c] for c in table["cultures"]) == n
    for key in [*table["cultures"], "all"]:
        assert table["restored"][key][0] == pytest.approx(0.0, abs=1e-12)  # patched = destination
        assert table["restored"][key][-1] == pytest.approx(1.0, rel=1e-12)  # patched = source
    lo, hi = table["ci95"]["all"][0]
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(0.0, abs=1e-12)
    # the pooled CR_dest, recomputed from the stored scores
    run = load_run(patched_run)
    rows = pq.read_table(patched_run / "patching.parquet").to_pylist()[:n]
    probs = choice_probs(run.table().logprobs, 1.0)
    groups = run.table().groups
    expected = np.mean([probs[r["dest_id"], list(groups[r["dest_id"]]).index(r["target"])] for r in rows])
    assert table["CR_dest"]["all"] == pytest.approx(expected, rel=1e-12)
    report = (patched_run / "report.md").read_text()
    assert "## Activation patching (C1 → C0; figure: figures/patching.png)" in report
    assert "| 3 | 1.000 |" in report and "2 left out" in report
    assert (patched_run / "figures" / "patching.png").stat().st_size > 1000
    assert 'alt="patching.png"' in (patched_run / "report.html").read_text()


def test_the_report_assembles_what_the_analysis_stored(patched_run: Path, tmp_path: Path) -> None:
    """The run report computes, draws and writes no analysis of its own: it shows the sections and
    figures it is handed (here the patching unit's section of a table altered on purpose, and no
    figures), and the unit's section reads the table it is given, not the stored one."""
    from dataclasses import replace

    from probe.analyses.patching import Patching
    from probe.analyses.view import StoredRun
    from probe.report.run_report import RunAnalyses, write_run_report

    copy = tmp_path / "run"
    shutil.copytree(patched_run, copy)
    stored = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file() and p.suffix in (".json", ".png")}
    run = replace(StoredRun.open(copy), metrics=json.loads((copy / "metrics.json").read_text()))
    table = {**json.loads((copy / "patching.json").read_text()), "n_left_out": 99}
    write_run_report(run, "# bench\n" + Patching().section(run, table), RunAnalyses(figures=()))
    assert "99 left out" in (copy / "report.md").read_text()
    assert "<img" not in (copy / "report.html").read_text()
    after = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file() and p.suffix in (".json", ".png")}
    assert after == stored

def test_patching_table_at_another_temperature(patched_run: Path) -> None:
    table = patching_table(load_run(patched_run), temperature=0.5, n_boot=0, seed=0)
    assert table["ci95"] is None and table["temperature"] == 0.5
    assert table["restored"]["all"][0] == pytest.approx(0.0, abs=1e-12)
    assert table["restored"]["all"][-1] == pytest.approx(1.0, rel=1e-12)
    logprobs, layers, pairs = load_patching(patched_run)
    assert logprobs.shape == (pairs.num_rows, 3, 4) and layers.tolist() == LAYERS


@pytest.mark.parametrize("damage, message", [
    ("pair_ids", "field 'pair': expected pair ids 0..97"),
    ("rows", "column 'pair': expected ids 0..97"),
    ("dest_range", "column 'dest_id': expected a prompt id in 0..119, got 999"),
    ("layers", "field 'layers': expected 3 increasing"),
    ("letters", "expected 4 letters"),
    ("item", "column 'source_id': expected a prompt of item"),
    ("missing", "no patching.parquet"),
])
def test_bad_patching_files_name_file_and_field(patched_run: Path, tmp_path: Path, damage: str, message: str) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(patched_run, run_dir)
    rows, logprobs = _pairs(run_dir)
    n = len(rows)
    if damage == "pair_ids":
        _write_patching(run_dir, logprobs, rows, pair=np.arange(1, n + 1))
    elif damage == "rows":
        _write_patching(run_dir, logprobs, rows[:-1])
    elif damage == "dest_range":
        _write_patching(run_dir, logprobs, [{**r, "dest_id": 999} if r["pair"] == 5 else r for r in rows])
    elif damage == "layers":
        _write_patching(run_dir, logprobs, rows, layers=[0, 3, 1])
    elif damage == "letters":
        _write_patching(run_dir, logprobs[:, :, :3], rows)
    elif damage == "item":
        other = next(r["source_id"] for r in rows if r["item_id"] != rows[0]["item_id"])
        _write_patching(run_dir, logprobs, [{**rows[0], "source_id": other}, *rows[1:]])
    elif damage == "missing":
        (run_dir / "patching.parquet").unlink()
    with pytest.raises(ProbeInputError, match=message.replace("(", r"\(")):
        patching_table(load_run(run_dir), 1.0, 0, 0)
