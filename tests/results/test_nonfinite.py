"""Non-finite scores are an error, never a number: a NaN or +inf letter log-prob (or −inf at
every letter) stops scoring at its batch with exit status 2 and no `DONE`, keeping the batches
before it for a rerun; stored tables with such rows are refused by every metric; NaN generation
logits stop decoding. (Before: 156/156 NaN prompts gave "KL 0.000", rc 0, `DONE`.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from probe.errors import ProbeInputError
from probe.probs import unscorable

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow


def _run(out: Path, monkeypatch: pytest.MonkeyPatch, disco_csv: Path, *overrides: str,
         model: Callable[[Any], None] | None = None, scores: Callable[[Any], Any] | None = None) -> Path:
    """A tiny-model DiSCo run in-process; `model(loaded)` edits the loaded model, `scores(batch)`
    edits each batch of scores the backend yields."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import probe.pipeline.execute as pipeline
    from probe.config import package_conf_dir
    from probe.pipeline.spec import run_config

    monkeypatch.setenv("PROBE_CACHE", str(out.parent / "cache"))
    load, make = pipeline.load_model, pipeline.make_backend

    def loaded_model(*args: Any, **kwargs: Any) -> Any:
        loaded = load(*args, **kwargs)
        if model is not None and loaded.model is not None:
            with torch.no_grad():
                model(loaded)
        return loaded

    def backend(*args: Any, **kwargs: Any) -> Any:
        b = make(*args, **kwargs)
        if scores is not None:
            score = b.score
            b.score = lambda *a, **k: (scores(batch) for batch in score(*a, **k))
        return b

    monkeypatch.setattr(pipeline, "load_model", loaded_model)
    monkeypatch.setattr(pipeline, "make_backend", backend)
    with initialize_config_dir(config_dir=str(package_conf_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["model=tiny", "bench=disco", f"bench.path={disco_csv}",
                                                       "analysis.n_boot=20", "progress=false", *overrides])
    return pipeline.run(run_config(OmegaConf.to_container(cfg, resolve=True), out))


def test_which_rows_are_unscorable() -> None:
    ninf, nan, inf = -np.inf, np.nan, np.inf
    lp = np.array([[-1.0, -2.0, -3.0, -4.0],
                   [-1.0, ninf, ninf, -4.0],    # a letter of probability 0 (float32 underflow): kept
                   [nan, -2.0, -3.0, -4.0],
                   [-1.0, inf, -3.0, -4.0],
                   [ninf, ninf, ninf, ninf]])   # letter mass 0: no choice distribution
    assert unscorable(lp).tolist() == [False, False, True, True, True]


def test_an_inf_weight_stops_the_run_at_the_head_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        disco_csv: Path) -> None:
    def inf_weight(loaded: Any) -> None:
        loaded.model.model.layers[0].mlp.down_proj.weight[0, 0] = float("inf")

    out = tmp_path / "run"
    with pytest.raises(ProbeInputError, match=r"letter log-probs of the head check's prompts \[0, 2, 48\] are not "
                                              r"finite \(NaN or \+inf\)"):
        _run(out, monkeypatch, disco_csv, model=inf_weight)
    assert not (out / "DONE").exists() and not (out / "metrics.json").exists()


def test_nonfinite_scores_stop_the_run_and_a_fixed_rerun_resumes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 disco_csv: Path) -> None:
    """Item 2's prompts (ids 104–155) score NaN, as with an inf in one token's embedding: the run
    stops at the first batch holding one, names how many and which; the batches before are kept
    and a rerun (the cause fixed) scores only the rest."""
    from probe.types import LetterScore

    def nan_for_item_2(batch: list[LetterScore]) -> list[LetterScore]:
        return [LetterScore(s.prompt_id, tuple(float("nan") for _ in s.letter_logprobs), s.greedy_valid)
                if s.prompt_id >= 104 else s for s in batch]

    out = tmp_path / "run"
    with pytest.raises(ProbeInputError) as e:
        _run(out, monkeypatch, disco_csv, "shard_size=16", scores=nan_for_item_2)
    message = str(e.value)
    assert "scoring stopped: " in message and "\n" not in message
    n_bad = int(message.split("scoring stopped: ")[1].split(" of ")[0])
    first = json.loads(message.split("first prompt ids ")[1].split("]")[0] + "]")
    kept = int(message.split("directory: the ")[1].split(" prompts")[0])
    assert n_bad >= 1 and len(first) == min(n_bad, 5) and min(first) >= 104
    assert kept == 104  # items 0 and 1 come first in the plan and were stored
    assert not (out / "DONE").exists() and not (out / "scores.parquet").exists()

    monkeypatch.undo()
    _run(out, monkeypatch, disco_csv, "shard_size=16")  # the cause fixed, same directory, same process
    manifest = json.loads((out / "manifest.json").read_text())
    assert (out / "DONE").is_file() and manifest["backend"]["resumed_prompts"] == kept
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_prompts"] == 156 and 0 < metrics["letter_mass"]["mean"] <= 1


def test_stored_nonfinite_scores_are_refused_by_the_analysis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             disco_csv: Path) -> None:
    from probe.pipeline.analysis import analyze_run
    from probe.results.scores import read_table, write_scores_arrays

    out = _run(tmp_path / "run", monkeypatch, disco_csv, "bench.conditions=[C0]")
    table = read_table(out)
    lp = table.logprobs.copy()
    lp[[3, 7]] = np.nan  # e.g. an old run, or a table edited by hand
    write_scores_arrays(out, table.prompt_id, lp, table.greedy_valid, list("ABCD"))
    with pytest.raises(ProbeInputError, match=r"scores.parquet: 2 of 12 prompts have no valid letter log-probs \(NaN "
                                              r"or \+inf, or −inf at every letter; first prompt ids \[3, 7\]\)"):
        analyze_run(out)


def test_nonfinite_generation_logits_stop_decoding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   disco_csv: Path) -> None:
    def inf_weight(loaded: Any) -> None:
        loaded.model.model.layers[0].mlp.down_proj.weight[0, 0] = float("inf")

    out = tmp_path / "run"
    with pytest.raises(ProbeInputError, match=r"generation stopped: the next-token logits of 12 of the 12 prompts "
                                              r"of a batch are not finite"):
        _run(out, monkeypatch, disco_csv, "backend.mode=generate", "bench.conditions=[C0]",
             "backend.max_new_tokens=4", model=inf_weight)
    assert not (out / "DONE").exists() and not (out / "generations.parquet").exists()


def test_finite_logits_flags_the_rows() -> None:
    from probe.backends.generate import FiniteLogits

    check = FiniteLogits(3, torch.device("cpu"))
    scores = torch.zeros(3, 5)
    scores[1, 2] = float("-inf")  # a suppressed token: fine
    check(torch.zeros(3, 1), scores)
    check.check(["a", "b", "c"])
    scores[2] = float("-inf")  # no token possible at all
    check(torch.zeros(3, 1), scores)
    with pytest.raises(ProbeInputError, match=r"1 of the 3 prompts of a batch .* first: c\)"):
        check.check(["a", "b", "c"])


def test_text_mode_nan_weights_checkpoint_nothing_and_the_fixed_rerun_succeeds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, disco_csv: Path) -> None:
    """`backend.mode=text` stops at its check with the letter pass's message (not finite … check
    the checkpoint), before any part, `scores.parquet` or manifest; the same command, the weights
    fixed, then succeeds. (Before: the message blamed the architecture.)"""
    def nan_weight(loaded: Any) -> None:
        loaded.model.model.layers[0].mlp.down_proj.weight[0, 0] = float("nan")

    out = tmp_path / "run"
    with pytest.raises(ProbeInputError, match=r"answer-text log-probs .* are not finite \(NaN or \+inf\), so a weight "
                                              r"or an activation is; check the checkpoint") as e:
        _run(out, monkeypatch, disco_csv, "backend.mode=text", "bench.conditions=[C0]", model=nan_weight)
    assert "needs support" not in str(e.value)
    assert not list(out.glob("text.parts/part-*")) and not (out / "scores.parquet").exists()
    assert not (out / "manifest.json").exists() and not (out / "DONE").exists()
    monkeypatch.undo()
    _run(out, monkeypatch, disco_csv, "backend.mode=text", "bench.conditions=[C0]")
    assert (out / "DONE").is_file()


def test_text_mode_nonfinite_scores_stop_the_pass_before_they_are_stored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, disco_csv: Path) -> None:
    """A NaN text score mid-pass (the check's prompts were finite) stops the run at its batch:
    the batches before are kept, this one is not, no `scores.parquet` or manifest is written, and
    the rerun resumes. (Before: the NaN was checkpointed and the run failed only at analysis.)"""
    import probe.pipeline.execute as pipeline
    from probe.backends.continuations import TextScore

    make = pipeline.make_backend

    def backend(*args: Any, **kwargs: Any) -> Any:
        b = make(*args, **kwargs)
        texts = b.texts

        def scorer() -> Any:
            s = texts()
            score = s.score
            s.score = lambda *a, **k: ([TextScore(t.prompt_id, (float("nan"),) * len(t.logprobs), t.n_tokens,
                                                  t.token_ids) if t.prompt_id >= 4 else t for t in batch]
                                       for batch in score(*a, **k))
            return s
        b.texts = scorer
        return b

    monkeypatch.setattr(pipeline, "make_backend", backend)
    out = tmp_path / "run"
    with pytest.raises(ProbeInputError, match=r"text scoring stopped: \d+ of the \d+ text prompts of a batch have "
                                              r"answer-text log-probs that are not finite .*check the checkpoint"):
        _run(out, monkeypatch, disco_csv, "backend.mode=text", "bench.conditions=[C0]", "shard_size=2")
    assert not (out / "scores.parquet").exists() and not (out / "manifest.json").exists()
    monkeypatch.undo()
    _run(out, monkeypatch, disco_csv, "backend.mode=text", "bench.conditions=[C0]", "shard_size=2")
    assert (out / "DONE").is_file()
