"""The pass-level cost model (`probe.backends.cost`, `probe.backends.roofline`): FLOPs against a
hand count, the passes it reads against what the scorer runs, the roofline's arithmetic, and
the dry run's predicted-time line."""

from __future__ import annotations

import importlib.util
import math
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest
from conftest import disco_rows, prepare, probe_env, run_probe, shared_dir, write_csv

from probe.backends.cost import Arch, PassShape, pass_cost, plan_passes, useful_flops
from probe.backends.hf import HFScorer
from probe.backends.roofline import DEVICES, Device, pass_seconds, predict
from probe.backends.specs import HFBackendSpec
from probe.backends.units import score_chunks
from probe.models import ModelSpec, load_model
from probe.models.tiny import TinySpec, build_model
from probe.benches.disco.perf import gemma3_12b_text_config
from probe.prompts.render import render_prompts

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY = TinySpec()  # llama: hidden 64, 2 layers, 2 heads of 32, 1 kv head, MLP 128, vocab 512
# a pass of three rows: paths of 10, 10 and 4 tokens, nodes of 3, 5 and 2; prompts end in two
SHAPE = PassShape(starts=(10, 10, 4), lengths=(3, 5, 2), head_rows=2, kept=13)


def _tiny_arch() -> Arch:
    return Arch.from_config(build_model(TINY, 512).config)


def test_flops_of_one_pass_on_the_tiny_llama_match_a_hand_count() -> None:
    arch = _tiny_arch()
    # one layer's linear weights: q 64·64 + k 64·32 + v 64·32 + o 64·64 + MLP 3·64·128
    per_layer = 4096 + 2048 + 2048 + 4096 + 24576
    assert arch.layer_params == per_layer == 36864
    model = build_model(TINY, 512)
    assert sum(p.numel() for n, p in model.model.layers[0].named_parameters() if "proj" in n) == per_layer
    cost = pass_cost(arch, SHAPE, 4)
    # 3 rows × width 5 = 15 token slots; each attends over 10 + 5 = 15 key slots
    assert cost.linear_flops == 2 * 15 * 2 * 36864 == 2_211_840
    assert cost.attention_flops == 4 * 15 * 15 * 2 * 2 * 32 == 115_200  # QKᵀ and PV, 2 layers × 2 heads × 32
    assert cost.head_flops == 2 * 2 * 64 * 512 == 131_072  # two rows through the 64 × 512 head
    assert cost.flops == 2_458_112
    # real tokens only: 10 tokens; contexts 11+12+13, 11+…+15, 5+6
    assert useful_flops(arch, SHAPE) == 2 * 10 * 2 * 36864 + 4 * (36 + 65 + 11) * 2 * 2 * 32 + 131_072


def test_bytes_of_one_pass_on_the_tiny_llama_match_a_hand_count() -> None:
    cost = pass_cost(_tiny_arch(), SHAPE, 4)
    kv_token = 2 * 2 * 32 * 4  # 2 layers × (K, V) × 1 kv head × 32 dims × 4 bytes = 512
    assert cost.weight_bytes == 2 * 36864 * 4 + 512 * 64 * 4
    assert cost.kv_read_bytes == 3 * 15 * kv_token
    # gather: read 24, write 3·10; the pass writes its 3·5 slots in place; keep 13 twice
    assert cost.copy_bytes == (24 + 30 + 15 + 26) * kv_token
    assert cost.act_bytes == 15 * 2 * (12 * 64 + 4 * 64 + 3 * 32 + 6 * 128) * 4


def test_roofline_takes_the_slower_side_and_overlaps_the_host_only_on_a_gpu() -> None:
    arch, cost = _tiny_arch(), pass_cost(_tiny_arch(), SHAPE, 4)
    compute = Device("c", matmul_flops=1e6, fp32_flops=1e6, attention_flops=1e6, bandwidth=1e15, overlaps_host=False,
                     host_s_per_layer=0.5, host_s_per_pass=1.0)
    assert pass_seconds(arch, SHAPE, compute, 4) == pytest.approx(cost.flops / 1e6 + 2.0, rel=1e-6)
    memory = replace(compute, matmul_flops=1e18, fp32_flops=1e18, attention_flops=1e18, bandwidth=1e3)
    assert pass_seconds(arch, SHAPE, memory, 4) == pytest.approx(cost.bytes / 1e3 + 2.0, rel=1e-6)
    gpu = replace(compute, overlaps_host=True)
    assert pass_seconds(arch, SHAPE, gpu, 4) == pytest.approx(max(cost.flops / 1e6, 2.0), rel=1e-6)
    prediction = predict(arch, [SHAPE, SHAPE], gpu, 4)
    assert prediction.seconds == pytest.approx(2 * pass_seconds(arch, SHAPE, gpu, 4))
    assert prediction.mfu == pytest.approx(2 * useful_flops(arch, SHAPE) / prediction.seconds / 1e6)


def test_the_passes_are_the_ones_the_scorer_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROBE_CACHE", str(tmp_path))
    spec = ModelSpec(name="tiny", kind="instruct", source="tiny", tiny=TINY)
    loaded = load_model(spec, device="cpu")
    bench = prepare({"name": "demo", "kind": "disco", "packaged": "demo_disco.csv", "limit": 2})
    rendered, letters = render_prompts(loaded.tokenizer, bench.prompts, bench.letters, spec.render_settings(), "tiny")
    backend = HFBackendSpec(device="cpu", batch_tokens=2048, max_batch_size=16)
    scorer = HFScorer(loaded.model, backend)
    list(scorer.score(rendered, letters))
    shapes = plan_passes(score_chunks(rendered, backend))
    assert len(shapes) == scorer.stats.n_batches > 10
    assert sum(sum(s.lengths) for s in shapes) == scorer.stats.tokens_computed
    assert sum(len(s.lengths) * s.width for s in shapes) == scorer.stats.padded_tokens
    assert sum(s.head_rows for s in shapes) == len(rendered)


def test_gemma3_12b_on_an_h200_spends_most_flops_in_the_linear_layers() -> None:
    arch = Arch.from_config(gemma3_12b_text_config())
    assert arch.layers * arch.layer_params == pytest.approx(10.6e9, rel=0.02)  # 12B less 1B of embeddings
    shape = PassShape(starts=(200,) * 64, lengths=(40,) * 64, head_rows=64)
    cost = pass_cost(arch, shape, 2)
    assert cost.linear_flops > 0.8 * cost.flops
    # 2560 tokens × 21 GFLOP on 989 TFLOP/s: ~56 ms of compute, and the eager layers' activation
    # traffic (15 MB per token in bf16) and KV copies on top at 4.8 TB/s
    seconds = pass_seconds(arch, shape, DEVICES["h200"], 2)
    assert cost.flops / 989e12 < seconds < cost.flops / 989e12 + cost.bytes / 4.8e12


def _dry_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    out = tmp_path / "run"
    return run_probe(["dry_run=true", f"hydra.run.dir={out}", *args],
                          cwd=REPO_ROOT, env=probe_env(tmp_path / "cache"), capture_output=True, text=True,
                          timeout=600)


def test_a_dry_run_prints_the_predicted_time(tmp_path: Path) -> None:
    proc = _dry_run(tmp_path, "model=tiny", "bench=demo", "bench.limit=2", "predict_device=a100")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "predicted time on A100 80GB SXM: " in proc.stdout and "passes" in proc.stdout and "MFU" in proc.stdout
    proc = _dry_run(tmp_path / "none", "model=tiny", "bench=demo", "bench.limit=2", "predict_device=none")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "predicted time" not in proc.stdout


def test_a_dry_run_of_gemma3_12b_on_disco_predicts_its_h200_time(tmp_path: Path) -> None:
    """No weights: the published architecture's config and the real Gemma 3 tokenizer."""
    root = shared_dir()
    if root is None:
        pytest.skip("needs $PROBE_SHARED_DIR (real tokenizers)")
    model_dir = tmp_path / "gemma-3-12b"
    shutil.copytree(root / "tokenizers" / "gemma3", model_dir)
    gemma3_12b_text_config().save_pretrained(model_dir)
    csv = write_csv(tmp_path / "disco.csv", disco_rows(3))
    proc = _dry_run(tmp_path, "model=gemma-3-12b", f"model.hub_id={model_dir}", "model.source=path", "bench=disco",
                    f"bench.path={csv}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("predicted time on H200 SXM: "))
    assert float(line.split(": ")[1].split(" s ")[0]) > 0


def _script() -> ModuleType:
    path = REPO_ROOT / "scripts" / "bench_costmodel.py"
    spec = importlib.util.spec_from_file_location("bench_costmodel", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_validation_mixes_differ_in_length_and_keep_the_protocol() -> None:
    mixes = _script().mixes(2)
    assert [len(p) for p in mixes.values()] == [104, 104, 104]
    chars = {name: sum(len(p.message) for p in prompts) / len(prompts) for name, prompts in mixes.items()}
    assert chars["short"] < 0.8 * chars["demo"] and chars["long"] > 1.5 * chars["demo"]
    assert [p.order for p in mixes["long"]] == [p.order for p in mixes["demo"]]


def test_the_script_predicts_disco_on_gemma3_for_each_gpu_and_pass_size(capsys: pytest.CaptureFixture[str]) -> None:
    """`--gemma3 DIR`: one row per data-sheet GPU and pass size; bigger passes are fewer and
    no slower; no weights are needed."""
    root = shared_dir()
    if root is None:
        pytest.skip("needs $PROBE_SHARED_DIR (real tokenizers)")
    _script().predict_gemma3(str(root / "tokenizers" / "gemma3"), n_items=2)
    out = capsys.readouterr().out
    assert "104 prompts" in out
    rows = re.findall(r"^\| (H200 SXM|H100 SXM|A100 80GB SXM) \| (\d+) \| (\d+) \| (\d+) \| ([\d.]+) \| [\d.]+ \| (\d+)% \|$",
                      out, re.M)
    assert len(rows) == 6
    by = {(r[0], int(r[1])): (int(r[3]), float(r[4]), int(r[5])) for r in rows}
    for gpu in ("H200 SXM", "H100 SXM", "A100 80GB SXM"):
        (n_small, s_small, _), (n_big, s_big, mfu) = by[gpu, 8192], by[gpu, 65536]
        assert n_big < n_small and 0 < s_big <= s_small and 0 < mfu <= 100


@pytest.mark.slow
def test_the_script_measures_host_dispatch() -> None:
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "bench_costmodel.py"), "--overhead"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    per_layer = float(proc.stdout.split("host dispatch: ")[1].split(" ms per layer")[0])
    assert 0 < per_layer < 50


def test_an_empty_plan_predicts_no_time_and_no_utilisation() -> None:
    p = predict(_tiny_arch(), [], DEVICES["h200"], 2)
    assert p.seconds == 0 and p.n_passes == 0 and math.isnan(p.mfu)


def test_pass_shares_count_one_row_passes_by_tokens_and_time() -> None:
    """Three passes: one of one row (10 tokens, 2 s), two of four rows (30 tokens, 6 s)."""
    from probe.backends.batching import BackendStats
    from probe.benches.disco.perf import PassShares

    stats = BackendStats()
    stats.count_pass([10], 10)
    stats.count_batch(1, 2.0)
    for lengths in ([5, 5, 5, 5], [3, 3, 2, 2]):
        stats.count_pass(lengths, max(lengths))
        stats.count_batch(4, 3.0)
    assert stats.tokens_computed == 40 and stats.padded_tokens == 10 + 20 + 12
    assert PassShares.of(stats) == PassShares(n_passes=3, one_row=1, one_row_token_share=0.25, one_row_time_share=0.25)
    empty = PassShares.of(BackendStats())  # no pass ran: no share, not 0%
    assert empty.n_passes == empty.one_row == 0
    assert math.isnan(empty.one_row_token_share) and math.isnan(empty.one_row_time_share)


def test_uncounted_work_leaves_every_counter_as_it_was() -> None:
    """A check's passes are not scoring work: counters come back, also when the check raises."""
    from probe.backends.batching import BackendStats

    stats = BackendStats()
    stats.count_pass([4, 2], 4)
    stats.count_batch(2, 1.0)
    before = BackendStats(**{k: v.copy() if isinstance(v, dict) else v for k, v in vars(stats).items()})
    with stats.uncounted():
        stats.count_pass([7], 7)
        stats.count_batch(1, 5.0)
    assert stats == before
    with pytest.raises(RuntimeError), stats.uncounted():
        stats.count_pass([3], 3)
        raise RuntimeError("check failed")
    assert stats == before and stats.tokens_by_rows == {2: 6}
