"""The HF backend's once-per-run head check: measured on the exact scoring path, deterministic
across fresh and resumed runs, and still catching a broken head path."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import prepare

from probe.backends.hf import HEAD_CHECK_TOL, HFScorer, _letter_gap
from probe.backends.specs import HFBackendSpec
from probe.errors import ProbeInputError
from probe.models import ModelSpec, load_model
from probe.models.tiny import TinySpec
from probe.prompts.render import render_prompts


def _scorer_and_prompts(arch: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **spec: object):
    monkeypatch.setenv("PROBE_CACHE", str(tmp_path))
    model = ModelSpec(name="t", kind="instruct", source="tiny", tiny=TinySpec(arch=arch, num_layers=2))
    loaded = load_model(model, device="cpu")
    bench = prepare({"kind": "disco", "packaged": "demo_disco.csv"})
    rendered, letters = render_prompts(loaded.tokenizer, bench.prompts[:104], bench.letters, model.render_settings(),
                                       "t")
    return HFScorer(loaded.model, HFBackendSpec(**spec)), rendered, letters


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_head_check_measures_the_scoring_path(arch: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scorer, rendered, letters = _scorer_and_prompts(arch, tmp_path, monkeypatch, batch_tokens=4096)
    next(scorer.score(rendered, letters))
    check = scorer.stats.head_check
    assert check is not None and check["argmax_agrees"] and check["tolerance"] == HEAD_CHECK_TOL[True]
    assert check["max_letter_gap"] < 1e-5  # float32: the prefix-shared path equals the full forward
    # A resumed run (most prompts done) checks the same prompts as the fresh run did.
    resumed, _, _ = _scorer_and_prompts(arch, tmp_path, monkeypatch, batch_tokens=4096)
    done = {r.prompt.prompt_id for r in rendered[:100]}
    list(resumed.score(rendered, letters, done))
    assert resumed.stats.head_check["prompt_ids"] == check["prompt_ids"]


def test_head_check_catches_missing_softcapping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scorer, rendered, letters = _scorer_and_prompts("gemma3", tmp_path, monkeypatch)
    assert scorer.softcap == 30.0
    scorer.softcap = None  # a head path that forgets Gemma's final-logit softcapping
    with pytest.raises(ProbeInputError, match="scoring path disagrees with the model's forward"):
        next(scorer.score(rendered, letters))


def test_head_check_catches_a_wrong_head(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scorer, rendered, letters = _scorer_and_prompts("llama", tmp_path, monkeypatch)
    scorer.head_weight = scorer.head_weight * (1 + 1e-3 * torch.randn_like(scorer.head_weight))
    with pytest.raises(ProbeInputError, match="letter log-probs differ by up to"):
        next(scorer.score(rendered, letters))


def test_a_transient_gap_is_measured_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One spurious disagreement (as seen once on a loaded CPU) does not stop the run; both
    measurements are recorded. A real one disagrees every time and does (tests above)."""
    scorer, rendered, letters = _scorer_and_prompts("llama", tmp_path, monkeypatch)
    real = HFScorer._head_gap
    calls = []

    def flaky(self, group, letter_ids, tol):  # type: ignore[no-untyped-def]
        calls.append(1)
        return (4.5e-4, True, True) if len(calls) == 1 else real(self, group, letter_ids, tol)

    monkeypatch.setattr(HFScorer, "_head_gap", flaky)
    next(scorer.score(rendered, letters))
    check = scorer.stats.head_check
    assert [a["max_letter_gap"] for a in check["attempts"]][0] == 4.5e-4 and len(check["attempts"]) == 2
    assert check["max_letter_gap"] < 1e-5 and check["argmax_agrees"]


def test_head_check_fails_on_nonfinite_log_probs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A NaN compares false with any tolerance: before, an inf weight (every score NaN) passed
    with gap 0.0. Now the check stops at once, without measuring again."""
    scorer, rendered, letters = _scorer_and_prompts("llama", tmp_path, monkeypatch)
    with torch.no_grad():
        scorer.model.model.layers[0].mlp.down_proj.weight[0, 0] = float("inf")
    with pytest.raises(ProbeInputError, match=r"letter log-probs of the head check's prompts \[\d+, \d+, \d+\] are "
                                              r"not finite \(NaN or \+inf\)"):
        next(scorer.score(rendered, letters))


def test_letter_gap_compares_finite_values_only() -> None:
    inf, nan = float("inf"), float("nan")
    t = torch.tensor
    assert _letter_gap(t([-1.0, -2.0]), t([-1.5, -2.0])) == 0.5
    assert _letter_gap(t([-1.0, -inf]), t([-1.25, -inf])) == 0.25  # a letter of probability 0 on both paths
    assert _letter_gap(t([-1.0, -inf]), t([-1.0, -30.0])) == inf  # … on one path only: disagree
    assert _letter_gap(t([-inf, -inf]), t([-inf, -inf])) == 0.0
    assert _letter_gap(t([nan, -1.0]), t([-1.0, -1.0])) is None
    assert _letter_gap(t([-1.0, -1.0]), t([-1.0, inf])) is None
