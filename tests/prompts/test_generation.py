"""Generation fallback: answer parsing, judges, pluralism, and greedy generation = letter argmax."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import torch
from conftest import prepare

from probe.backends.generate import HFGenerator
from probe.backends.hf import HFScorer
from probe.backends.specs import HFBackendSpec
from probe.benches.ccd.metrics import pluralism
from probe.judges import JudgeRequest, make_judge
from probe.benches.ccd.judging import GLOBE_DIMENSIONS
from probe.benches.ccd.task import TASK as CCD_TASK
from probe.judges.llm import extract_json
from probe.models import ModelSpec, load_model
from probe.models.tiny import TinySpec
from probe.prompts.parse import parse_answer
from probe.prompts.render import render_prompts
from probe.results.generations import read_judgements
from probe.results.scores import write_table

PARSE_CASES = [
    ('{"answer_choice":"C"}', "C", None),
    ('{"answer_choice":"B"} because', "B", None),
    ('{"answer_choice": "d"}', "D", None),
    ('{"answer_choice":"Apple', None, None),           # the letter runs on into a word
    ('{"answer_choice":"Z"}', None, None),             # not one of the item's letters
    ("SELECTED OPTION: C\nRATIONALE: It respects elders.", "C", "It respects elders."),
    ("SELECTED OPTION: **(B)**\nRATIONALE:", "B", None),
    ("  D. ", "D", None),
    ("The answer is probably A", None, None),          # prose is not a lone letter
    ("", None, None),
]


@pytest.mark.parametrize(("text", "letter", "rationale"), PARSE_CASES)
def test_parse_answer(text: str, letter: str | None, rationale: str | None) -> None:
    parsed = parse_answer(text, "ABCD")
    assert (parsed.letter, parsed.rationale) == (letter, rationale)


def test_keyword_judge() -> None:
    judge = make_judge({"name": "keyword"})
    [r] = judge.judge([JudgeRequest("globe_dimensions", {"rationale": "It keeps the family together and "
                                                                      "respects the authority of elders."})])
    assert r.error is None and r.judge == "keyword"
    assert r.output == {"dimensions": ["In-Group Collectivism", "Power Distance"]}
    [none] = judge.judge([JudgeRequest("globe_dimensions", {"rationale": "Because."})])
    assert none.output == {"dimensions": []}


class FakeChat:
    """Replies from a script, one list per round; records what it was asked."""

    def __init__(self, rounds: list[list[str]]) -> None:
        self.rounds, self.asked = rounds, []

    def chat(self, messages: list[str]) -> list[str]:
        self.asked.append(list(messages))
        return self.rounds[len(self.asked) - 1]


def test_llm_judge_validates_retries_and_records_errors() -> None:
    chat = FakeChat([
        ['Sure! {"dimensions": ["Future Orientation", "performance orientation"]}', "no json here",
         '{"dimensions": ["Happiness"]}'],
        ['```json\n{"dimensions": []}\n```', '{"dimensions": "x"}'],
        ['{"oops": 1}'],
    ])
    judge = make_judge({"name": "llm", "retries": 2}, chat=chat)
    requests = [JudgeRequest("globe_dimensions", {"rationale": f"r{i}"}) for i in range(3)]
    a, b, c = judge.judge(requests)
    assert a.output == {"dimensions": ["Performance Orientation", "Future Orientation"]}  # canonical order
    assert b.output == {"dimensions": []} and b.error is None  # valid on the second round
    assert c.output is None and c.error.startswith("invalid after 3 attempts") and "oops" in c.error
    assert [len(r) for r in chat.asked] == [3, 2, 1]
    assert "Your previous reply was invalid: unknown dimension(s) ['Happiness']" in chat.asked[1][1]


def test_extract_json() -> None:
    assert extract_json('text {"a": {"b": 1}} more {"c": 2}') == {"a": {"b": 1}}
    with pytest.raises(ValueError):
        extract_json("{not json")


def test_pluralism_from_stored_judgements(tmp_path: Path) -> None:
    po, fo, pd = "Performance Orientation", "Future Orientation", "Power Distance"
    rows = [{"prompt_id": 0, "task": "globe_dimensions", "dimensions": [po, fo], "judge": "k"},
            {"prompt_id": 1, "task": "globe_dimensions", "dimensions": [po, fo, pd], "judge": "k"},
            {"prompt_id": 2, "task": "globe_dimensions", "dimensions": [pd], "judge": "k"},
            {"prompt_id": 3, "task": "globe_dimensions", "dimensions": None, "judge_error": "bad", "judge": "k"}]
    write_table(tmp_path / "judgements.parquet", pa.Table.from_pylist(rows, schema=CCD_TASK.judging.schema))
    p = pluralism(read_judgements(tmp_path))
    assert p["rate"] == pytest.approx(2 / 3) and p["n_rationales"] == 3 and p["n_judge_errors"] == 1
    assert p["top_pairs"][0] == [po, fo, 2] and sorted(map(tuple, p["top_pairs"][1:])) == [(fo, pd, 1), (po, pd, 1)]
    assert set(GLOBE_DIMENSIONS) >= {po, fo, pd}


@torch.inference_mode()
def test_greedy_generation_equals_letter_argmax(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the cue pre-filled, the first greedy token is the letter-mode argmax token."""
    monkeypatch.setenv("PROBE_CACHE", str(tmp_path))
    spec = ModelSpec(name="tiny", kind="instruct", source="tiny", tiny=TinySpec())
    loaded = load_model(spec, device="cpu")
    bench = prepare({"kind": "disco", "packaged": "demo_disco.csv"}, False)
    rendered, letters = render_prompts(loaded.tokenizer, bench.prompts[:104], bench.letters,
                                       spec.render_settings(), spec.name)
    # A random tiny model rarely puts its argmax on a letter; scale the letter rows of the head
    # so it often does, and on different letters for different prompts.
    loaded.model.lm_head.weight[list(letters.ids)] *= 12.0
    scores = {s.prompt_id: s for b in HFScorer(loaded.model, HFBackendSpec()).score(rendered, letters) for s in b}
    gen = HFGenerator(loaded.model, loaded.tokenizer, HFBackendSpec(max_new_tokens=1, max_batch_size=16))
    texts = {g.prompt_id: g.text for b in gen.generate(rendered) for g in b}
    compared = 0
    for pid, s in scores.items():
        if s.greedy_valid:
            letter = "ABCD"[int(np.argmax(s.letter_logprobs))]
            assert parse_answer(bench.cue + texts[pid], "ABCD").letter == letter, pid
            compared += 1
    assert compared >= 50 and len({"ABCD"[int(np.argmax(s.letter_logprobs))] for s in scores.values()}) >= 2


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_trie_prefill_generates_what_plain_batches_generate(arch: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Prefilling each batch through its prompt trie (the default) hands `generate` a cache equal
    to its own prefill: greedy continuations are token-identical, for half the prefill work."""
    monkeypatch.setenv("PROBE_CACHE", str(tmp_path))
    spec = ModelSpec(name="t", kind="instruct", source="tiny", tiny=TinySpec(arch=arch, num_layers=2))
    loaded = load_model(spec, device="cpu")
    bench = prepare({"kind": "disco", "packaged": "demo_disco.csv"})
    rendered, _ = render_prompts(loaded.tokenizer, bench.prompts[:60], bench.letters, spec.render_settings(), "t")

    def run(prefix_reuse: bool) -> tuple[dict[int, str], HFGenerator]:
        gen = HFGenerator(loaded.model, loaded.tokenizer, HFBackendSpec(max_new_tokens=6, max_batch_size=16,
                                                                        prefix_reuse=prefix_reuse))
        return {g.prompt_id: g.text for b in gen.generate(rendered) for g in b}, gen

    shared, gen = run(True)
    plain, _ = run(False)
    assert shared == plain and len(set(plain.values())) > 3  # continuations differ between prompts
    assert gen.stats.tokens_computed < 0.6 * gen.stats.prompt_tokens
    assert gen.stats.unique_tokens <= gen.stats.tokens_computed
