"""End to end through the Hydra entry point: the run directory is the public contract (docs/results/contract.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from conftest import disco_rows, run_probe, write_csv

from probe.pipeline.analysis import analyze_run

REPO_ROOT = Path(__file__).resolve().parents[2]
N_ITEMS = 3


def run_cli(args: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PROBE_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    return run_probe([*args], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("cli")
    csv_path = write_csv(tmp / "DiSCo Bench.csv", disco_rows(N_ITEMS))
    out = tmp / "run"
    proc = run_cli(["model=tiny", "bench=disco", f"bench.path={csv_path}", f"hydra.run.dir={out}",
                    "analysis.n_boot=200", "progress=false"], tmp / "cache")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_run_directory_files(run_dir: Path) -> None:
    for name in ("prompts.parquet", "scores.parquet", "scores.safetensors", "manifest.json",
                 "metrics.json", "report.md", ".hydra/config.yaml"):
        assert (run_dir / name).is_file(), name


def test_prompts_table_contract(run_dir: Path) -> None:
    t = pq.read_table(run_dir / "prompts.parquet")
    schema = t.schema
    assert schema.field("prompt_id").type == pa.int64()
    assert schema.field("groups").type == pa.list_(pa.string())
    for name, typ in (("item_id", pa.string()), ("condition", pa.string()), ("target", pa.string()),
                      ("rotation", pa.int64()), ("ctx_rotation", pa.int64()), ("n_tokens", pa.int64()),
                      ("text", pa.string())):
        assert schema.field(name).type == typ, name
    rows = t.to_pylist()
    assert len(rows) == 52 * N_ITEMS
    assert [r["prompt_id"] for r in rows] == list(range(52 * N_ITEMS))
    per_item = {}
    for r in rows:
        per_item.setdefault(r["item_id"], []).append(r["condition"])
    assert all(sorted(c.count(x) for x in ("C0", "C1", "C2", "C3")) == [4, 16, 16, 16] for c in per_item.values())
    c3 = [r for r in rows if r["condition"] == "C3"]
    assert {r["ctx_rotation"] for r in c3} == {0, 1, 2, 3} and all(r["target"] is None for r in c3)
    assert all(r["ctx_rotation"] is None for r in rows if r["condition"] != "C3")
    assert all(r["text"].endswith('{"answer_choice":"') for r in rows)
    first = rows[0]  # item-0 rotation 0 shows its cultures in source order
    assert first["groups"] == ["Algeria", "Assam", "China", "Ethiopia"]
    assert 0 < first["prefix_len"] < first["n_tokens"]
    assert schema.field("token_ids").type == pa.list_(pa.int32())
    assert all(len(r["token_ids"]) == r["n_tokens"] for r in rows)


@torch.inference_mode()
def test_stored_token_ids_reproduce_the_stored_scores(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A follow-up study feeding `prompts.parquet`'s token ids to the model gets the stored
    letter log-probs: they are the exact ids scoring used."""
    from probe.models import ModelSpec, load_model
    from probe.models.tiny import TinySpec

    monkeypatch.setenv("PROBE_CACHE", str(run_dir.parent / "cache"))
    loaded = load_model(ModelSpec(name="tiny", kind="instruct", source="tiny", tiny=TinySpec()), device="cpu")
    prompts = pq.read_table(run_dir / "prompts.parquet").sort_by("prompt_id").to_pylist()
    scores = pq.read_table(run_dir / "scores.parquet").sort_by("prompt_id").to_pylist()
    letters = json.loads((run_dir / "manifest.json").read_text())["letter_token_ids"]
    for p, s in list(zip(prompts, scores))[::37]:
        logits = loaded.model(input_ids=torch.tensor([p["token_ids"]])).logits[0, -1].float()
        ref = torch.log_softmax(logits, -1)[letters].numpy()
        assert np.abs(ref - np.array(s["letter_logprobs"])).max() <= 1e-4


@torch.inference_mode()
def test_stored_argmax_is_the_full_vocabulary_argmax(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`argmax_token_id` / `argmax_logprob` are the model's own full-vocabulary argmax at the answer
    position and its log-prob, `argmax_token` its decoded text, and `greedy_valid` says whether it
    is a letter."""
    from probe.models import ModelSpec, load_model
    from probe.models.tiny import TinySpec

    monkeypatch.setenv("PROBE_CACHE", str(run_dir.parent / "cache"))
    loaded = load_model(ModelSpec(name="tiny", kind="instruct", source="tiny", tiny=TinySpec()), device="cpu")
    prompts = pq.read_table(run_dir / "prompts.parquet").sort_by("prompt_id").to_pylist()
    scores = pq.read_table(run_dir / "scores.parquet").sort_by("prompt_id")
    assert scores.schema.field("argmax_token_id").type == pa.int64()
    assert scores.schema.field("argmax_logprob").type == pa.float32()
    letters = json.loads((run_dir / "manifest.json").read_text())["letter_token_ids"]
    rows = scores.to_pylist()
    for p, s in list(zip(prompts, rows))[::29]:
        ref = torch.log_softmax(loaded.model(input_ids=torch.tensor([p["token_ids"]])).logits[0, -1].float(), -1)
        assert s["argmax_token_id"] == int(ref.argmax())
        assert abs(s["argmax_logprob"] - float(ref.max())) <= 1e-4
        assert s["argmax_token"] == loaded.tokenizer.decode([s["argmax_token_id"]])
    assert [s["greedy_valid"] for s in rows] == [s["argmax_token_id"] in letters for s in rows]
    # the argmax is at least as likely as any letter
    lp = np.array(scores.column("letter_logprobs").to_pylist())
    assert (scores.column("argmax_logprob").to_numpy() >= lp.max(axis=1) - 1e-6).all()


def test_scores_table_and_tensor_agree(run_dir: Path) -> None:
    from safetensors.numpy import load_file

    s = pq.read_table(run_dir / "scores.parquet")
    assert s.schema.field("letter_logprobs").type == pa.list_(pa.float32())
    lp = np.array(s.column("letter_logprobs").to_pylist(), dtype=np.float32)
    tensors = load_file(str(run_dir / "scores.safetensors"))
    assert tensors["letter_logprobs"].shape == (52 * N_ITEMS, 4)
    assert np.array_equal(tensors["letter_logprobs"], lp)
    assert np.array_equal(tensors["prompt_id"], s.column("prompt_id").to_numpy())
    mass = s.column("letter_mass").to_numpy()
    assert np.allclose(mass, np.exp(lp.astype(np.float64)).sum(axis=1))
    assert (lp < 0).all() and (mass <= 1.0 + 1e-6).all()
    assert s.column("greedy_letter").to_pylist() == ["ABCD"[i] for i in lp.argmax(axis=1)]


def test_manifest(run_dir: Path) -> None:
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["model"]["name"] == "tiny" and m["model"]["source"] == "tiny"
    assert m["letters"] == ["A", "B", "C", "D"] and len(m["letter_token_ids"]) == 4
    assert len(m["template_sha256"]) == 64 and len(m["tokenizer"]["sha256"]) == 64
    assert len(m["bench"]["sha256"]) == 64 and m["bench"]["n_prompts"] == 52 * N_ITEMS
    assert {"load_s", "scoring_s", "analysis_s"} <= set(m["timings"])
    assert m["packages"]["torch"] and m["packages"]["transformers"]
    assert sum(m["backend"]["batch_sizes"].values()) == m["backend"]["n_batches"]


def test_metrics_contract(run_dir: Path) -> None:
    m = json.loads((run_dir / "metrics.json").read_text())
    assert {"bench", "model", "n_items", "n_prompts", "letter_mass", "expected", "greedy", "ci95"} <= set(m)
    assert m["bench"] == "disco" and m["model"] == "tiny"
    assert (m["n_items"], m["n_prompts"]) == (N_ITEMS, 52 * N_ITEMS)
    assert set(m["letter_mass"]) == {"mean", "share_below_half"}
    keys = {"C0": {"CSD", "KL", "Gini", "KL_corrected", "Gini_corrected", "SPD", "letter_probs"},
            "C1": {"CR", "CR_by_culture", "SL", "SL_rate", "SPD_compliance"},
            "C2": {"CR", "CR_by_culture", "PSI", "PSI_by_culture", "gain_by_culture", "CSD", "SPD",
                   "SPD_compliance"},
            "C3": {"CSD", "CSD_aligned", "JSD", "JSD_aligned", "PPR", "PPR_by_ctx_rotation", "sample_agreement",
                   "entropy_by_ctx_rotation", "letter_probs"}}
    for flavour in ("expected", "greedy"):
        block = m[flavour]
        if flavour == "greedy":  # on argmax choices the agreement is the paper's CSC, named so
            keys["C3"] = keys["C3"] - {"sample_agreement"} | {"CSC"}
        assert set(block) == set(keys) | {"SPD_reduction", "SPD_compliance_reduction"}
        for cond, names in keys.items():
            assert set(block[cond]) == names, (flavour, cond)
    assert sum(m["expected"]["C0"]["CSD"].values()) == pytest.approx(1.0)

    def same_shape(a: object, b: object) -> None:  # ci95 mirrors M with [lo, hi] leaves
        if isinstance(a, dict):
            assert isinstance(b, dict) and set(a) == set(b)
            for k in a:
                same_shape(a[k], b[k])
        else:
            assert isinstance(b, list) and len(b) == 2 and b[0] <= b[1]

    same_shape(m["expected"], m["ci95"]["expected"])


def test_analyze_recomputes_identical_metrics(run_dir: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    (copy / "metrics.json").unlink()
    analyze_run(copy)
    assert json.loads((copy / "metrics.json").read_text()) == json.loads((run_dir / "metrics.json").read_text())
    assert (copy / "report.md").read_text() == (run_dir / "report.md").read_text()
    # a temperature re-analysis goes beside the original, from the same stored log-probs
    proc = run_probe(["analyze", str(copy), "analysis.temperature=0.5"],
                          capture_output=True, text=True, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    hot = json.loads((copy / "metrics-temperature=0.5.json").read_text())
    assert hot["temperature"] == 0.5 and hot["greedy"] == json.loads((copy / "metrics.json").read_text())["greedy"]


def test_analyze_at_another_temperature_prints_its_headline_and_writes_html(run_dir: Path, tmp_path: Path) -> None:
    import shutil

    from probe.benches.registry import task_of
    from probe.report.summary import run_summary
    from probe.results.manifest import read_manifest

    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    own_html = (copy / "report.html").read_bytes()
    proc = run_probe(["analyze", str(copy), "analysis.temperature=0.7"],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    task = task_of(read_manifest(copy))
    hot = run_summary(task, json.loads((copy / "metrics-temperature=0.7.json").read_text()))
    assert hot in proc.stdout and hot != run_summary(task, json.loads((copy / "metrics.json").read_text()))
    assert f"probe analyze: {52 * N_ITEMS} prompts of {copy}, analysis.temperature=0.7" in proc.stdout
    html = (copy / "report-temperature=0.7.html").read_text()
    assert "(temperature=0.7)</title>" in html and "(temperature 0.7)" in html  # its own markdown
    assert html.count('<img src="data:image/png;base64,') == len(list((copy / "figures" / "temperature=0.7").glob("*.png"))) > 0
    assert (copy / "report.html").read_bytes() == own_html  # the run's own report is not replaced


def test_refuses_to_overwrite_a_finished_run(run_dir: Path, tmp_path: Path) -> None:
    proc = run_cli(["model=tiny", "bench=demo", f"hydra.run.dir={run_dir}"], tmp_path)
    assert proc.returncode == 2 and "holds a run with a different configuration" in proc.stderr


def test_unknown_config_key_is_an_error(tmp_path: Path) -> None:
    proc = run_cli(["model=tiny", "bench=demo", "+model.dtyp=float32", f"hydra.run.dir={tmp_path / 'r'}"], tmp_path)
    assert proc.returncode == 2 and "unknown key(s) ['dtyp']" in proc.stderr
