"""Activation patching reaches the HF scorer through its typed interface: `patch_pass` with a
`ResidualSink` (`probe.backends.patch_hooks.PatchScorer`), no private state set from outside.

A patch pass over the scoring plan's chunks leaves each prompt's residual after every patch
layer in the sink — the residual the scoring pass captures at those layers — and records no
lens or activations (its rows are no prompts of the run); scoring afterwards records them again.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import prepare

from probe.backends.hf import HFScorer
from probe.backends.interventions import InterventionPlan
from probe.backends.patch_hooks import ResidualSink
from probe.backends.specs import HFBackendSpec
from probe.backends.taps import MechSpec
from probe.backends.units import score_chunks
from probe.models import ModelSpec, load_model
from probe.models.tiny import TinySpec
from probe.prompts.render import render_prompts

PACKAGE = Path(__file__).resolve().parents[2] / "probe"
NAMED_TUPLE_API = {"_replace", "_asdict", "_fields", "_make"}
"""Underscored by the standard library to keep clear of field names; public all the same."""


@pytest.mark.parametrize("reuse", [True, False], ids=["prefix", "plain"])
def test_a_patch_pass_leaves_the_captured_residuals_in_its_sink(reuse: bool, tmp_path: Path) -> None:
    os.environ["PROBE_CACHE"] = str(tmp_path / "cache")
    spec = ModelSpec(name="llama", kind="instruct", source="tiny", tiny=TinySpec(arch="llama", num_layers=4))
    loaded = load_model(spec, device="cpu")
    bench = prepare({"kind": "disco", "packaged": "demo_disco.csv"}, False)
    rendered, letters = render_prompts(loaded.tokenizer, bench.prompts[:24], bench.letters,
                                       spec.render_settings(), spec.name)
    scorer = HFScorer(loaded.model, HFBackendSpec(device="cpu", max_batch_size=8, prefix_reuse=reuse),
                      MechSpec(logit_lens=True, capture_layers=(1, 3)), InterventionPlan(patch_layers=(-3, -1)))
    assert scorer.patch_layers == (1, 3)
    scored = {s.prompt_id: s for b in scorer.score(rendered, letters) for s in b}

    sink = ResidualSink()
    letter_ids = torch.tensor(letters.ids)
    patched = {s.prompt_id: s for c in score_chunks(rendered, scorer.spec)
               for b in scorer.patch_pass(c, letter_ids, sink=sink) for s in b}

    assert sorted(sink.residuals) == sorted(scored) == sorted(patched)
    for pid, s in scored.items():
        residual = sink.residuals[pid]
        assert residual.dtype == torch.float32 and tuple(residual.shape) == (2, 64)
        assert s.activations is not None
        np.testing.assert_allclose(residual.numpy(), s.activations, atol=1e-5)
        assert patched[pid].lens is None and patched[pid].activations is None
        np.testing.assert_allclose(patched[pid].letter_logprobs, s.letter_logprobs, atol=1e-5)
    again = next(iter(scorer.score(rendered[:1], letters)))[0]
    assert again.lens is not None and again.activations is not None  # the pass left nothing set behind


def test_no_module_reaches_into_another_objects_private_attributes() -> None:
    """`obj._name` only on `self` or `cls`: a class's private state is set by its own methods."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and node.attr not in NAMED_TUPLE_API
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {ast.unparse(node)}")
    assert found == []
