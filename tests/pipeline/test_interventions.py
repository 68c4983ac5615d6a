"""Causal interventions inside the scoring pass: the identities that pin steering and patching.

On tiny Llama and Gemma 3 (sliding windows) models, with prefix sharing on and off:
- steering with a zero vector gives the plain scores; a real vector gives what one prompt's own
  forward with the same hook gives;
- patching at the last layer gives the source prompt's scores, patching a prompt with itself
  changes nothing, and any layer matches one prompt's forward with the same overwrite.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from conftest import prepare, run_probe

from probe.backends.hf import HFScorer
from probe.backends.interventions import Edit, InterventionPlan
from probe.backends.specs import HFBackendSpec
from probe.backends.trie import plan_trie, replicate_leaves
from probe.models import ModelSpec, load_model
from probe.models.tiny import TinySpec
from probe.prompts.prefix import shared_prefix_lengths
from probe.prompts.render import render_prompts
from probe.types import RenderedPrompt

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

N_LAYERS = 4


@pytest.fixture(scope="module", params=["llama", "gemma3"])
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    os.environ["PROBE_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    arch = request.param
    spec = ModelSpec(name=arch, kind="instruct", source="tiny", tiny=TinySpec(arch=arch, num_layers=N_LAYERS))
    loaded = load_model(spec, device="cpu")
    bench = prepare({"kind": "disco", "packaged": "demo_disco.csv"}, False)
    rendered, letters = render_prompts(loaded.tokenizer, bench.prompts[:104], bench.letters,
                                       spec.render_settings(), spec.name)
    plain = _scores(loaded, rendered, letters, True)
    return loaded, rendered, letters, plain


def _scores(loaded, rendered, letters, reuse: bool, plan: InterventionPlan | None = None) -> dict[int, np.ndarray]:
    # edits run the eager path, so the plain scores they are held to bit for bit are the eager path's too
    scorer = HFScorer(loaded.model, HFBackendSpec(device="cpu", max_batch_size=16, prefix_reuse=reuse, fast_path=False),
                      intervention=plan)
    return {s.prompt_id: np.array(s.letter_logprobs) for b in scorer.score(rendered, letters) for s in b}


def _gap(a: dict[int, np.ndarray], b: dict[int, np.ndarray]) -> float:
    assert a.keys() == b.keys()
    return max(float(np.abs(a[k] - b[k]).max()) for k in a)


@torch.inference_mode()
def _hooked_forward(loaded, r: RenderedPrompt, letters, layer: int, edit) -> np.ndarray:
    """One prompt through `model(input_ids)` with `edit(hidden)` applied after `layer`."""
    def hook(module, args, output):
        hidden = (output[0] if isinstance(output, tuple) else output).clone()
        edit(hidden)
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    handle = loaded.model.get_decoder().layers[layer].register_forward_hook(hook)
    try:
        logits = loaded.model(input_ids=torch.tensor([r.token_ids.tolist()])).logits[0, -1].float()
    finally:
        handle.remove()
    return torch.log_softmax(logits, -1)[list(letters.ids)].numpy()


def _steering(rendered: Sequence[RenderedPrompt], vector: torch.Tensor, positions: str) -> dict[int, Edit]:
    plens = shared_prefix_lengths(rendered)
    return {r.prompt.prompt_id: Edit(layer=1, start=len(r.token_ids) - 1 if positions == "last" else min(p, len(r.token_ids) - 1),
                                     vector=vector, mode="add", key="steer") for r, p in zip(rendered, plens)}


@pytest.mark.parametrize("positions", ["last", "all"])
def test_steering_zero_is_plain_and_a_vector_matches_a_hooked_forward(tiny, positions: str) -> None:
    loaded, rendered, letters, plain = tiny
    d = loaded.model.config.hidden_size
    zero = InterventionPlan(steer=_steering(rendered, torch.zeros(d), positions))
    assert _gap(_scores(loaded, rendered, letters, True, zero), plain) <= 1e-6
    v = torch.randn(d, generator=torch.Generator().manual_seed(0)) * 3.0
    plan = InterventionPlan(steer=_steering(rendered, v, positions))
    on, off = _scores(loaded, rendered, letters, True, plan), _scores(loaded, rendered, letters, False, plan)
    assert _gap(on, off) <= 1e-5  # prefix sharing on and off: the same numbers
    assert _gap(on, plain) > 0.1  # and the vector does move the letters
    for r in rendered[::17]:
        start = plan.steer[r.prompt.prompt_id].start

        def add(hidden: torch.Tensor, start: int = start) -> None:
            hidden[0, start:] += v

        assert np.abs(on[r.prompt.prompt_id] - _hooked_forward(loaded, r, letters, 1, add)).max() <= 1e-4


def _patch(loaded, rendered, letters, pairs, reuse: bool) -> np.ndarray:
    scorer = HFScorer(loaded.model, HFBackendSpec(device="cpu", max_batch_size=16, prefix_reuse=reuse),
                      intervention=InterventionPlan(patch_layers=tuple(range(N_LAYERS))))
    out = np.full((len(pairs), N_LAYERS, len(letters.ids)), np.nan, dtype=np.float32)
    for idx, lp in scorer.patch(rendered, letters, pairs):
        out[idx] = lp
    assert not np.isnan(out).any()
    return out


@torch.inference_mode()
def test_patching_identities(tiny) -> None:
    loaded, rendered, letters, plain = tiny
    prompts = [r.prompt for r in rendered]
    c0 = {(p.item_id, p.order): p.prompt_id for p in prompts if p.value("condition") == "C0"}
    pairs = [(p.prompt_id, c0[(p.item_id, p.order)]) for p in prompts if p.value("condition") == "C1"]
    pairs += [(d, d) for d in list(c0.values())[:3]]  # a prompt patched with itself
    on, off = _patch(loaded, rendered, letters, pairs, True), _patch(loaded, rendered, letters, pairs, False)
    assert np.abs(on - off).max() <= 1e-5
    for k, (s, d) in enumerate(pairs):
        assert np.abs(on[k, -1] - plain[s]).max() <= 1e-4  # last layer: the source's letters
        if s == d:
            assert np.abs(on[k] - plain[d][None]).max() <= 1e-5  # itself: nothing changes
    # an intermediate layer against one prompt's forward with the same overwrite
    by_id = {r.prompt.prompt_id: r for r in rendered}
    k = 5
    s, d = pairs[k]
    source_hidden = {}

    def grab(hidden: torch.Tensor) -> None:
        source_hidden["h"] = hidden[0, -1].clone()

    _hooked_forward(loaded, by_id[s], letters, 1, grab)

    def overwrite(hidden: torch.Tensor) -> None:
        hidden[0, -1] = source_hidden["h"]

    assert np.abs(on[k, 1] - _hooked_forward(loaded, by_id[d], letters, 1, overwrite)).max() <= 1e-4
    assert np.abs(plain[s] - plain[d]).max() > 1e-3  # the pair differs: the identities are not vacuous


def test_replicated_leaves_keep_the_trie_whole(tiny) -> None:
    _, rendered, _, _ = tiny
    dests = rendered[:8]
    own = {r.prompt.prompt_id: (len(r.token_ids) - 1, r.prompt.prompt_id) for r in dests}
    copies = {r.prompt.prompt_id: [RenderedPrompt(r.prompt, "", r.token_ids) for _ in range(3)] for r in dests}
    for chunk in plan_trie(dests, 1 << 20, 16, own):
        big = replicate_leaves(chunk, copies, 1 << 20, 16)
        assert len(big.prompts) == 3 * len(chunk.prompts)
        for i, n in enumerate(big.nodes):
            if n.ends:  # every copy is the answer token alone, on its destination's path
                assert len(n.tokens) == 1 and n.n_children == 0
                path = np.concatenate([big.nodes[a].tokens for a in big.path(i)] + [n.tokens])
                assert np.array_equal(path, n.ends[0].token_ids)
        seen = [i for step in big.steps for i in step]
        assert sorted(seen) == list(range(len(big.nodes)))
        assert all(big.nodes[i].parent < 0 or big.nodes[i].parent in {j for s in big.steps[:k] for j in s}
                   for k, step in enumerate(big.steps) for i in step)


@pytest.mark.slow
def test_run_directories_of_both_modes(tmp_path: Path) -> None:
    """`intervention=patch` and `intervention=steer` (vectors from a capture run) as commands."""
    import json
    import subprocess
    import sys

    from conftest import probe_env

    root = Path(__file__).resolve().parents[2]
    # C0 and C1 are what the dose-response row reads (C1−C0)
    base = ["model=tiny", "bench=demo", "bench.limit=2", "bench.conditions=[C0,C1]", "analysis.n_boot=50",
            "progress=false"]

    def cli(out: str, *args: str) -> Path:
        proc = run_probe([*base, *args, f"hydra.run.dir={tmp_path / out}"],
                              cwd=root, env=probe_env(tmp_path / "cache"), capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return tmp_path / out

    vec = cli("vectors", "analysis.capture_layers=[1]")
    steer = ["intervention=steer", f"intervention.vectors={vec}", "intervention.layer=1", "intervention.group=China"]
    zero = cli("steer0", *steer, "intervention.alpha=0")
    assert (zero / "scores.safetensors").read_bytes() == (vec / "scores.safetensors").read_bytes()
    moved = cli("steer4", *steer, "intervention.alpha=4")
    manifest = json.loads((moved / "manifest.json").read_text())
    assert manifest["intervention"]["culture"] == "China" and manifest["intervention"]["vector_norm"] > 0
    assert json.loads((moved / "run_key.json").read_text())["intervention"]["alpha"] == 4.0
    patch = cli("patch", "intervention=patch")
    assert (patch / "patching.safetensors").is_file() and (patch / "patching.parquet").is_file()
    table = json.loads((patch / "patching.json").read_text())
    assert table["restored"]["all"][-1] == pytest.approx(1.0, abs=1e-3)  # the last layer restores it all
    script = subprocess.run([sys.executable, str(root / "scripts" / "example_interventions.py"), "--patched",
                             str(patch), "--vectors", str(vec), "--layer", "1"], capture_output=True, text=True,
                            timeout=300)
    assert script.returncode == 0, script.stderr[-2000:]
    assert "layer   1: restored +1.000" in script.stdout and "steering vectors at layer 1: " in script.stdout


def test_sweep_report_shows_the_steering_dose_response(tmp_path: Path) -> None:
    """`-m intervention.alpha=2,4 intervention.group=China,Spain` beside the plain capture run:
    one dose–response row per (group, α) with α = 0 from the plain run, and its figure."""
    import json
    import subprocess
    import sys

    from conftest import probe_env

    root = Path(__file__).resolve().parents[2]
    env = probe_env(tmp_path / "cache")
    # C0 and C1 are what the dose-response row reads (C1−C0)
    base = ["model=tiny", "bench=demo", "bench.limit=2", "bench.conditions=[C0,C1]", "analysis.n_boot=50",
            "progress=false"]

    def probe_cli(*args: str) -> None:
        proc = run_probe([*args], cwd=root, env=env, capture_output=True,
                              text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]

    plain = tmp_path / "plain"
    probe_cli(*base, "analysis.capture_layers=[1]", f"hydra.run.dir={plain}")
    sweep = tmp_path / "sweep"
    probe_cli("-m", *base, "intervention=steer", f"intervention.vectors={plain}", "intervention.layer=1",
              "intervention.group=China,Spain", "intervention.alpha=2,4", f"hydra.sweep.dir={sweep}")
    proc = run_probe(["report", str(sweep), str(plain), f"out={tmp_path / 'rep'}"],
                          cwd=root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = (tmp_path / "rep" / "report.md").read_text()
    rows = [line for line in md.splitlines() if line.startswith("| tiny | 1 | last | C1−C0 of ")]
    assert [line.split(" | ")[4:6] for line in rows] == [["China", "0"], ["China", "2"], ["China", "4"],
                                                         ["Spain", "0"], ["Spain", "2"], ["Spain", "4"]]
    plain_csd = json.loads((plain / "metrics.json").read_text())["expected"]["C0"]["CSD"]["China"]
    assert rows[0].split(" | ")[6].startswith(f"{plain_csd:.3f} [")  # α = 0 is the plain run
    assert "| tiny steer China α=2 L1 last v:" in md  # the sweep table tells runs apart
    assert (tmp_path / "rep" / "steering_disco_tiny_demo_L1_last_0.png").is_file()
    summary = pq.read_table(tmp_path / "rep" / "summary.parquet")
    assert sum(1 for v in summary.column("intervention").to_pylist() if v and v.startswith("steer Spain α=4")) > 10


def test_a_resumed_patch_pass_skips_finished_groups_and_agrees(tiny) -> None:
    loaded, rendered, letters, _ = tiny
    prompts = [r.prompt for r in rendered]
    c0 = {(p.item_id, p.order): p.prompt_id for p in prompts if p.value("condition") == "C0"}
    pairs = [(p.prompt_id, c0[(p.item_id, p.order)]) for p in prompts if p.value("condition") == "C1"]
    scorer = HFScorer(loaded.model, HFBackendSpec(device="cpu", max_batch_size=16, batch_tokens=1500),
                      intervention=InterventionPlan(patch_layers=(1, 3)))
    groups = list(scorer.patch(rendered, letters, pairs))
    assert len(groups) >= 2 and sorted(k for g, _ in groups for k in g) == list(range(len(pairs)))
    first = set(groups[0][0])
    again = list(scorer.patch(rendered, letters, pairs, done=first))
    assert [g for g, _ in again] == [g for g, _ in groups[1:]]
    for (_, a), (_, b) in zip(again, groups[1:]):
        assert np.array_equal(a, b)  # the same plan: the same numbers, bit for bit


def test_patch_pairs_match_item_order_and_target() -> None:
    from probe.errors import ProbeInputError
    from probe.benches.disco.task import DESIGN
    from probe.pipeline.intervention import PatchSpec, patch_pairs, with_contrast

    def pairs(spec: PatchSpec) -> list[dict]:
        return patch_pairs(rendered, with_contrast(spec, DESIGN), DESIGN)  # type: ignore[arg-type]

    bench = prepare({"kind": "disco", "packaged": "demo_disco.csv"}, False)
    rendered = [RenderedPrompt(p, "", np.arange(3)) for p in bench.prompts[:104]]
    by_id = {r.prompt.prompt_id: r.prompt for r in rendered}
    rows = pairs(PatchSpec())
    assert len(rows) == 32 and [r["pair"] for r in rows] == list(range(32))
    for r in rows:
        s, d = by_id[r["source_id"]], by_id[r["dest_id"]]
        assert (s.value("condition"), d.value("condition"), s.item_id, s.order) == ("C1", "C0", d.item_id, d.order)
        assert r["target"] == s.value("target") and d.value("target") is None
    c2_c1 = pairs(PatchSpec(source="C2", dest="C1"))  # C1 has targets: paired by target too
    assert c2_c1 and all(by_id[r["dest_id"]].value("target") == by_id[r["source_id"]].value("target") for r in c2_c1)
    with pytest.raises(ProbeInputError, match="intervention.source=C3: its prompts name no target"):
        pairs(PatchSpec(source="C3"))
    with pytest.raises(ProbeInputError, match=r"intervention.dest=C9: no prompts of that condition"):
        pairs(PatchSpec(dest="C9"))


def _pipeline_run(out: Path, *overrides: str) -> Path:
    """A tiny-model run of two demo items in-process (C0 and C1, what steering needs)."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from probe.config import package_conf_dir
    from probe.pipeline.execute import run
    from probe.pipeline.spec import run_config

    with initialize_config_dir(config_dir=str(package_conf_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["model=tiny", "bench=demo", "bench.limit=2", "progress=false",
                                                       "bench.conditions=[C0,C1]", "analysis.n_boot=0", *overrides])
    return run(run_config(OmegaConf.to_container(cfg, resolve=True), out))


def _nan(acts: np.ndarray) -> np.ndarray:
    return np.full_like(acts, np.nan)


def _wide(acts: np.ndarray) -> np.ndarray:
    return np.concatenate([acts, acts[..., :1]], axis=-1)


@pytest.mark.parametrize("tamper, alpha, message", [
    (_nan, 1.0, r"64 of the 64 entries of alpha · v_China are not finite \(the vector holds NaN or inf\)"),
    (None, 1e38, r"of the 64 entries of alpha · v_China are not finite \(alpha=1e\+38 overflows float32\)"),
    (_wide, 1.0, r"the steering vector of 'China' at layer 1 has shape \[65\], this model's residual stream is "
                 r"64 wide"),
    ("truncate", 1.0, r"activations.safetensors: unreadable safetensors file \(Error while deserializing header"),
], ids=["nan", "overflow", "wrong-width", "truncated"])
def test_a_bad_steering_vector_is_refused_before_scoring(tamper: Callable[[np.ndarray], np.ndarray] | str | None,
                                                         alpha: float, message: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: a NaN vector scored every prompt NaN (rc 0, "KL 0.000"); a wrong width failed
    inside the scoring pass with a traceback; a truncated file ended in a SafetensorError."""
    from safetensors.numpy import load_file, save_file

    from probe.errors import ProbeInputError

    monkeypatch.setenv("PROBE_CACHE", str(tmp_path / "cache"))
    vectors = _pipeline_run(tmp_path / "vectors", "analysis.capture_layers=[1]")
    path = vectors / "activations.safetensors"
    if tamper == "truncate":
        path.write_bytes(path.read_bytes()[:1000])
    elif tamper is not None:
        tensors = load_file(str(path))
        tensors["activations"] = np.ascontiguousarray(tamper(tensors["activations"]))
        save_file(tensors, str(path))
    out = tmp_path / "steer"
    with pytest.raises(ProbeInputError, match=message) as e:
        _pipeline_run(out, "intervention=steer", f"intervention.vectors={vectors}", "intervention.layer=1",
                      "intervention.group=China", f"intervention.alpha={alpha}")
    assert "\n" not in str(e.value)
    assert not (out / "run_key.json").exists()  # refused before the directory was claimed
