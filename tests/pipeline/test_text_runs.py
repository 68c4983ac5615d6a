"""The answer-text reading as a run (`backend.mode=text|letters+text`, `bench.text_form`): stored
text scores equal one `model(input_ids)` per option recomputed from the stored ids, the letter
columns of a letters+text run are the letters-only run's bit for bit, cloze cells share their
text prompt, text mode reads the text scores, CCD runs, unsupported combinations are refused
before anything loads, and a run interrupted mid text scoring resumes into the same files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from conftest import ccd_items, write_json_file
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from probe.config import build, package_conf_dir
from probe.errors import ProbeInputError
from probe.models import ModelSpec, load_model
from probe.pipeline.execute import run
from probe.pipeline.spec import run_config
from probe.results.run import load_run
from probe.types import LETTERS

# Everyday tier: left out (its runs or simulated worlds take several seconds); the full tier runs it.
pytestmark = pytest.mark.slow

TOL = 1e-4  # nats, fp32 (docs/concepts/answer-text.md)
LETTER_COLUMNS = ["prompt_id", "letter_logprobs", "letter_mass", "greedy_letter", "greedy_valid", "argmax_token_id",
                  "argmax_token", "argmax_logprob"]


def _config(*overrides: str, bench: str = "demo") -> dict[str, Any]:
    with initialize_config_dir(config_dir=str(package_conf_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["model=tiny", f"bench={bench}", "analysis.n_boot=50",
                                                        "progress=false", *overrides])
    values = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(values, dict)
    return values


def _run(out: Path, *overrides: str, bench: str = "demo") -> Path:
    return run(run_config(_config(*overrides, bench=bench), out))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import os

    tmp = tmp_path_factory.mktemp("text_runs")
    os.environ["PROBE_CACHE"] = str(tmp / "cache")
    limit = "bench.limit=2"
    return {"letters": _run(tmp / "letters", limit),
            "hybrid": _run(tmp / "hybrid", limit, "backend.mode=letters+text"),
            "cloze": _run(tmp / "cloze", limit, "backend.mode=letters+text", "bench.text_form=cloze"),
            "text": _run(tmp / "text", limit, "backend.mode=text")}


@pytest.fixture(scope="module")
def tiny_model(runs: dict[str, Path]) -> Any:
    cfg = _config()["model"]
    return load_model(build(ModelSpec, cfg, "model"), device="cpu")


@torch.inference_mode()
def _recomputed(model: Any, prompt_ids: list[int], continuation: list[int]) -> float:
    """Σ log p(continuation token | everything before it) from one plain forward."""
    ids = torch.tensor([prompt_ids + continuation])
    lp = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
    n = len(prompt_ids)
    return float(lp[torch.arange(n - 1, n - 1 + len(continuation)), torch.tensor(continuation)].double().sum())


@pytest.mark.parametrize("form", ["hybrid", "cloze"])
def test_stored_text_scores_equal_one_forward_per_option(runs: dict[str, Path], tiny_model: Any, form: str) -> None:
    """From `prompts.parquet`'s text prompt ids and `scores.parquet`'s continuation ids alone,
    one `model(input_ids)` per option gives each stored `text_logprobs` within 1e-4 nats; the
    continuation at letter i is the text of the option the letter prompt shows at i."""
    out = runs[form]
    prompts = pq.read_table(out / "prompts.parquet").to_pylist()
    scores = {r["prompt_id"]: r for r in pq.read_table(out / "scores.parquet").to_pylist()}
    tokenizer = tiny_model.tokenizer
    checked: set[int] = set()
    gaps = []
    for p in prompts:
        s = scores[p["prompt_id"]]
        assert len(s["text_logprobs"]) == len(s["text_token_ids"]) == 4
        for i, ids in enumerate(s["text_token_ids"]):
            option = next(line[3:] for line in p["text"].split("\n") if line.startswith(f"{LETTERS[i]}. "))
            expected = f'{option}"' if form == "hybrid" else option
            assert tokenizer.decode(p["text_prompt_token_ids"] + ids).endswith(expected)
            assert s["text_n_tokens"][i] == len(ids) and s["text_n_bytes"][i] == len(expected.encode())
        if p["text_prompt_id"] in checked:
            continue
        checked.add(p["text_prompt_id"])
        assert p["text_prompt"].endswith('{"answer":"' if form == "hybrid" else "<|im_start|>assistant\n")
        got = [_recomputed(tiny_model.model, p["text_prompt_token_ids"], ids) for ids in s["text_token_ids"]]
        gaps.append(np.abs(np.array(got) - np.array(s["text_logprobs"])).max())
    assert max(gaps) <= TOL
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["backend"]["mode"] == "letters+text" and manifest["bench"]["config"]["text_form"] == form
    work = manifest["backend"]
    assert work["text_unique_tokens"] <= work["text_tokens_computed"] < work["text_leaf_tokens"]
    assert 0 < work["text_scoring_s"] <= work["text_scoring_wall_s"] and work["text_head_check"]["max_token_gap"] <= TOL


def test_cloze_cells_share_a_text_prompt_and_its_scores(runs: dict[str, Path]) -> None:
    """Cloze: no options in the text prompt, so the rotations of a C0 item read one prompt, and
    each row holds its scores in the row's own letter order."""
    prompts = pq.read_table(runs["cloze"] / "prompts.parquet").to_pylist()
    scores = {r["prompt_id"]: r["text_logprobs"] for r in pq.read_table(runs["cloze"] / "scores.parquet").to_pylist()}
    c0 = [p for p in prompts if p["condition"] == "C0"]
    assert len(c0) == 8 and len({p["text_prompt_id"] for p in c0}) == 2
    assert len({p["text_prompt_id"] for p in prompts}) < len(prompts) / 3
    for item in {p["item_id"] for p in c0}:
        rows = [p for p in c0 if p["item_id"] == item]
        by_source = {}
        for p in rows:
            assert "Options:" not in p["text_prompt"]
            for i, o in enumerate(p["order"]):
                by_source.setdefault(o, set()).add(scores[p["prompt_id"]][i])
        assert all(len(v) == 1 for v in by_source.values()) and len(by_source) == 4


@pytest.mark.parametrize("form", ["hybrid", "cloze"])
def test_letter_columns_are_the_letters_only_runs(runs: dict[str, Path], form: str) -> None:
    letters, both = runs["letters"], runs[form]
    assert (both / "scores.safetensors").read_bytes() == (letters / "scores.safetensors").read_bytes()
    letter_table = pq.read_table(letters / "scores.parquet")
    assert pq.read_table(both / "scores.parquet").select(LETTER_COLUMNS).equals(letter_table)
    only = pq.read_table(letters / "prompts.parquet")
    assert pq.read_table(both / "prompts.parquet").select(only.column_names).equals(only)
    assert "text_logprobs" not in pq.read_table(letters / "scores.parquet").column_names
    assert "text_prompt" not in only.column_names
    assert "text_form" not in json.loads((letters / "run_key.json").read_text())["bench"]["config"]
    table = load_run(both).table()
    stored = np.array(pq.read_table(both / "scores.parquet").column("text_logprobs").to_pylist())
    assert table.text_logprobs is not None and np.array_equal(table.text_logprobs, stored)
    assert table.text_n_tokens is not None and table.text_n_bytes is not None and (table.text_n_bytes > 0).all()
    assert load_run(letters).table().text_logprobs is None
    samples = load_run(both).samples(temperature=1.0)
    p = np.exp(stored - stored.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    assert np.allclose(samples[["text_p_A", "text_p_B", "text_p_C", "text_p_D"]].to_numpy(), p, atol=1e-12)
    assert list(samples["text_greedy_letter"]) == [LETTERS[i] for i in stored.argmax(axis=1)]
    assert not any(c.startswith("text_") for c in load_run(letters).samples().columns)


def test_text_mode_reads_the_text_scores(runs: dict[str, Path]) -> None:
    out = runs["text"]
    assert (out / "metrics.json").is_file() and (out / "DONE").is_file() and not (out / "scores.safetensors").exists()
    assert not (out / "text.parts").exists()
    scores = pq.read_table(out / "scores.parquet")
    assert scores.column("letter_logprobs").null_count == scores.num_rows
    metrics = json.loads((out / "metrics.json").read_text())
    # no letter was read: no letter mass (of text scores it would read ≈ 0 and warn falsely)
    assert metrics["mode"] == "text" and "letter_mass" not in metrics and "greedy_valid_rate" not in metrics
    assert "letter mass" not in (out / "report.md").read_text().lower()
    table = load_run(out).table()
    assert table.text_logprobs is not None and np.array_equal(table.logprobs, table.text_logprobs)
    assert table.greedy_valid.all()
    hybrid = load_run(runs["hybrid"]).table()  # the same text prompts and plan: the same values
    assert np.array_equal(table.text_logprobs, hybrid.text_logprobs)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_prompts"] == 104 and metrics["expected"]["C0"]["CSD"]
    assert json.loads((out / "manifest.json").read_text())["backend"]["mode"] == "text"


def test_base_model_cloze_continues_after_answer(runs: dict[str, Path], tiny_model: Any, tmp_path: Path) -> None:
    """A base model's cloze prompt is the question then `Answer:`; each option follows it after a space."""
    out = _run(tmp_path / "base", "bench.limit=1", "bench.conditions=[C0]", "model.kind=base",
               "backend.mode=letters+text", "bench.text_form=cloze")
    prompts = pq.read_table(out / "prompts.parquet").to_pylist()
    scores = pq.read_table(out / "scores.parquet").to_pylist()
    assert len({p["text_prompt_id"] for p in prompts}) == 1
    p, s = prompts[0], scores[0]
    assert p["text_prompt"].endswith("\nAnswer:") and "Options:" not in p["text_prompt"]
    for i, ids in enumerate(s["text_token_ids"]):
        option = next(line[3:] for line in p["text"].split("\n") if line.startswith(f"{LETTERS[i]}. "))
        assert tiny_model.tokenizer.decode(p["text_prompt_token_ids"] + ids).endswith("Answer: " + option)
        assert s["text_n_bytes"][i] == len(option.encode()) + 1
        assert abs(_recomputed(tiny_model.model, p["text_prompt_token_ids"], ids) - s["text_logprobs"][i]) <= TOL


def test_a_dry_run_renders_the_text_prompts(runs: dict[str, Path], tmp_path: Path) -> None:
    """No weights: the text prompts are rendered and their options tokenized (the prefix check
    runs), and `prompts.parquet` holds them as the scored run's does."""
    out = _run(tmp_path / "dry", "bench.limit=2", "backend.mode=letters+text", "dry_run=true")
    assert not (out / "scores.parquet").exists()
    assert pq.read_table(out / "prompts.parquet").equals(pq.read_table(runs["hybrid"] / "prompts.parquet"))


def test_ccd_letters_and_text(runs: dict[str, Path], tmp_path: Path) -> None:
    path = write_json_file(tmp_path / "ccd.json", ccd_items(2))
    out = _run(tmp_path / "ccd", f"bench.path={path}", "backend.mode=letters+text", bench="ccd")
    scores = pq.read_table(out / "scores.parquet")
    assert scores.num_rows == 20 and {len(v) for v in scores.column("text_logprobs").to_pylist()} == {10}
    assert np.isfinite(np.array(scores.column("text_logprobs").to_pylist())).all()
    prompts = pq.read_table(out / "prompts.parquet").to_pylist()
    assert prompts[0]["text_prompt"].endswith('{"answer":"') and "J. Approach" in prompts[0]["text_prompt"]
    assert (out / "metrics.json").is_file()


@pytest.mark.parametrize("overrides, bench, message", [
    (("backend.mode=text", "judge=rules"), "locqa", "LocQA has no answer-text reading"),
    (("backend.mode=letters+text", "bench.shard=0/2"), "demo", "cannot be sharded yet"),
    (("backend.mode=text", "analysis.logit_lens=true"), "demo", "apply to letter scores only"),
])
def test_unsupported_text_runs_are_refused_at_the_config(tmp_path: Path, overrides: tuple[str, ...], bench: str,
                                                         message: str) -> None:
    with pytest.raises(ProbeInputError, match=message):
        run_config(_config(*overrides, bench=bench), tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("mode", ["text", "letters+text"])
def test_vllm_text_runs_pass_the_config(tmp_path: Path, mode: str) -> None:
    """The vLLM engine has a text path (`probe.backends.vllm_text`; its parity tests are in the
    vLLM tier): the config takes both text modes on it, in both forms."""
    for form in ("hybrid", "cloze"):
        cfg = run_config(_config("backend=vllm", f"backend.mode={mode}", f"bench.text_form={form}"), tmp_path / "run")
        assert cfg.text_reading and cfg.backend.name == "vllm" and cfg.bench.spec.text_form == form


def test_a_run_interrupted_in_text_scoring_resumes_into_the_same_files(runs: dict[str, Path], tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped after three text batches (each its own part), rerun into the same directory: the
    stored text prompts are not scored again and every table equals the uninterrupted run's."""
    from probe.backends.text_scorer import TextScorer

    real = TextScorer.score

    def stops(self: TextScorer, requests: Any, done: Any = frozenset()) -> Any:
        for n, batch in enumerate(real(self, requests, done)):
            if n == 3:
                raise KeyboardInterrupt("killed")
            yield batch

    out = tmp_path / "resumed"
    limit = "bench.limit=2"
    monkeypatch.setattr(TextScorer, "score", stops)
    with pytest.raises(KeyboardInterrupt):
        _run(out, limit, "backend.mode=letters+text", "shard_size=1")
    stored = len(list((out / "text.parts").glob("part-*.parquet")))
    assert stored == 3 and not (out / "DONE").exists()
    monkeypatch.setattr(TextScorer, "score", real)
    _run(out, limit, "backend.mode=letters+text", "shard_size=1")
    ref = runs["hybrid"]
    for name in ("scores.parquet", "prompts.parquet"):
        assert pq.read_table(out / name).equals(pq.read_table(ref / name)), name
    assert (out / "scores.safetensors").read_bytes() == (ref / "scores.safetensors").read_bytes()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["backend"]["text_resumed_prompts"] > 0 and not (out / "text.parts").exists()


def test_disco_hybrid_message_asks_for_the_text_in_both_lines(tmp_path: Path) -> None:
    """The hybrid message never asks for a letter: its instruction and format lines both ask for
    the option's text (`{"answer":…}`), and it differs from the letter message in those two lines."""
    from conftest import disco_rows, write_csv

    from probe.benches.disco.data import load_items, render_message

    item = load_items(write_csv(tmp_path / "d.csv", disco_rows(1)))[0]
    letter = render_message(item, "C0", None, (0, 1, 2, 3), None).splitlines()
    hybrid = render_message(item, "C0", None, (0, 1, 2, 3), None, "hybrid").splitlines()
    assert len(letter) == len(hybrid)
    differ = [(a, b) for a, b in zip(letter, hybrid) if a != b]
    assert [b.split(":")[0] for _, b in differ] == ["Instructions", "Return ONLY valid JSON in exactly this format"]
    assert not any("answer_choice" in line or "alphabet" in line for line in hybrid)
    assert all('{"answer":' in b for _, b in differ)


@pytest.mark.parametrize("reading", ["hybrid", "text"])
def test_a_non_finite_text_score_stops_every_metric(runs: dict[str, Path], tmp_path: Path, reading: str) -> None:
    """A NaN text score (a broken forward pass) is refused where scores are read, naming the file
    and the prompt, in a letters+text run and in a text-only run — never averaged into a metric."""
    import shutil

    import pyarrow as pa

    copy = tmp_path / reading
    shutil.copytree(runs[reading], copy)
    scores = pq.read_table(copy / "scores.parquet")
    rows = scores.column("text_logprobs").to_pylist()
    rows[3] = [float("nan"), *rows[3][1:]]
    column = scores.schema.get_field_index("text_logprobs")
    scores = scores.set_column(column, scores.schema.field(column), pa.array(rows, scores.schema.field(column).type))
    pq.write_table(scores, copy / "scores.parquet")
    prompt_id = scores.column("prompt_id")[3].as_py()
    with pytest.raises(ProbeInputError, match=rf"scores.parquet: 1 of {scores.num_rows} prompts have no valid "
                                              rf"answer-text log-probs \(text_logprobs\) \(NaN or \+inf, or −inf at "
                                              rf"every option; first prompt ids \[{prompt_id}\]\)"):
        load_run(copy).table()
