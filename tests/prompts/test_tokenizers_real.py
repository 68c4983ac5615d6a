"""Letter-id derivation and prompt rendering against the real tokenizers of seven families.

The tokenizers (and the expected ids, in `verification.json`) live in `$PROBE_SHARED_DIR/tokenizers`;
without that folder these tests skip. The negative test at the end needs no shared folder.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import shared_dir

from probe.benches.disco.data import FORMAT_LINE, build_prompts
from probe.errors import ProbeInputError
from probe.prompts.render import (
    ANSWER_CUE,
    RenderSettings,
    derive_letter_ids,
    encode,
    render_prompts,
    render_text,
)
from probe.types import LETTERS, Item, ModelKind, Option, Prompt

pytestmark = pytest.mark.real


@dataclass(frozen=True)
class Case:
    family: str
    """Folder under `tokenizers/` (and key in verification.json)."""
    bos: tuple[int, int]
    """How many BOS tokens the encoded prompt holds: (instruct, base)."""
    sentencepiece_prefix: bool = False
    """Mistral/Phi-3: a bare "A" encodes as `▁A`, but after `"` the letter is the prefix-less `A`."""
    template: str | None = None
    """A chat-template file in the family's folder that replaces the shipped one."""
    template_kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.template.removesuffix(".jinja") if self.template else self.family


CASES = [
    Case("gemma3", bos=(1, 1)),
    Case("llama3", bos=(1, 1)),
    Case("llama3", bos=(1, 1), template="chat_template_llama3_1.jinja",
         template_kwargs={"date_string": "26 Jul 2024"}),
    Case("mistral", bos=(1, 1), sentencepiece_prefix=True),
    # The template writes `<|endoftext|>` as BOS; a plain encode adds none.
    Case("olmo2", bos=(1, 0)),
    # `add_bos_token: false` and the current template writes no `<s>`.
    Case("phi3", bos=(0, 0), sentencepiece_prefix=True),
    Case("qwen2.5", bos=(0, 0)),
    Case("qwen3", bos=(0, 0), template_kwargs={"enable_thinking": False}),
]
KINDS: list[ModelKind] = ["instruct", "base"]
PARAMS = [pytest.param(c, k, id=f"{c.id}-{k}") for c in CASES for k in KINDS]


def _tokenizers_dir() -> Path:
    root = shared_dir()
    if root is None or not (root / "tokenizers").is_dir():
        pytest.skip("real tokenizers need $PROBE_SHARED_DIR/tokenizers")
    return root / "tokenizers"


@functools.lru_cache(maxsize=None)
def _tokenizer(folder: str, template: str | None) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    if template is not None:
        tok.chat_template = (Path(folder) / template).read_text(encoding="utf-8")
    return tok


@functools.lru_cache(maxsize=None)
def _verification(path: str) -> dict[str, Any]:
    families: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))["families"]
    return families


def _setup(case: Case, kind: ModelKind) -> tuple[Any, RenderSettings, dict[str, Any]]:
    root = _tokenizers_dir()
    tok = _tokenizer(str(root / case.family), case.template)
    settings = RenderSettings(kind=kind, template_kwargs=case.template_kwargs if kind == "instruct" else {})
    return tok, settings, _verification(str(root / "verification.json"))[case.family]


def _item(n: int = 0) -> Item:
    """A DiSCo-style item with non-ASCII option text, as real bench rows have."""
    foods = [("Congee (粥) with pickled vegetables", "China"), ("Injera with shiro wat", "Ethiopia"),
             ("Nasi uduk with tempe orek", "West_Java"), ("A full English breakfast", "UK")]
    return Item(
        item_id=f"item-{n}",
        question=f"A guest is staying over (visit #{n}). Which breakfast would you serve?",
        options=tuple(Option(key=L, text=t, group=g, context=f"In {g}, people often eat {t.lower()}.")
                      for L, (t, g) in zip("ABCD", foods)),
        user_instruction="The user wants a familiar, locally appropriate choice.",
    )


def _prompt() -> Prompt:
    prompt = build_prompts([_item()])[0]
    message = prompt.message
    assert "\nA. " in message and "\nD. " in message and message.endswith(FORMAT_LINE)
    return prompt


def _expected_ids(tok: Any, case: Case, verified: dict[str, Any], letters: str) -> list[int]:
    """The letter ids after `"`, from verification.json where it documents them."""
    after_quote_a = verified["answer_choice"]["ids"][-1]  # the last token of `{"answer_choice": "A`
    if case.sentencepiece_prefix:
        # verification.json's "letters" are the `▁A` ids; only A is documented after a quote.
        ids = [tok.convert_tokens_to_ids(L) for L in letters]
        assert ids[0] == after_quote_a
        assert not set(ids) & {verified["letters"][L][0] for L in letters}
        return ids
    ids = [verified["letters"][L][0] for L in letters]
    assert ids[0] == after_quote_a
    return ids


@pytest.mark.parametrize(("case", "kind"), PARAMS)
def test_letter_ids_in_context(case: Case, kind: ModelKind) -> None:
    tok, settings, verified = _setup(case, kind)
    text = render_text(tok, _prompt(), settings)
    assert text.endswith(ANSWER_CUE)
    if case.family == "qwen3" and kind == "instruct":
        assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n" + ANSWER_CUE)
    if case.template is not None and kind == "instruct":
        assert "Today Date: 26 Jul 2024" in text

    ids = encode(tok, text, settings)
    n_bos = ids.count(tok.bos_token_id) if tok.bos_token_id is not None else 0
    assert n_bos == case.bos[0 if kind == "instruct" else 1]
    if n_bos:
        assert ids[0] == tok.bos_token_id

    for letters in ("ABCD", LETTERS[:10]):  # verification.json documents A–J
        got = derive_letter_ids(tok, text, list(letters), settings, case.id)
        assert got.letters == tuple(letters)
        assert [tok.decode([i]) for i in got.ids] == list(letters)
        assert list(got.ids) == _expected_ids(tok, case, verified, "".join(letters))
        assert list(got.cue_token_ids) == ids[-len(got.cue_token_ids):]
        assert tok.decode(list(got.cue_token_ids)).strip() == ANSWER_CUE


@pytest.mark.parametrize(("case", "kind"), PARAMS)
def test_render_prompts(case: Case, kind: ModelKind) -> None:
    tok, settings, verified = _setup(case, kind)
    # Two items' prompts: every condition, rotations 0 and 3, several targets and context rotations.
    prompts: list[Prompt] = [p for p in build_prompts([_item(0), _item(1)]) if p.value("rotation") in (0, 3)][::3]
    assert {p.value("condition") for p in prompts} == {"C0", "C1", "C2", "C3"}

    rendered, letter_ids = render_prompts(tok, prompts, list("ABCD"), settings, case.id, max_positions=4096)
    assert [r.prompt for r in rendered] == prompts
    assert list(letter_ids.ids) == _expected_ids(tok, case, verified, "ABCD")
    cue = list(letter_ids.cue_token_ids)
    for r in rendered:
        assert r.text == render_text(tok, r.prompt, settings)
        assert r.text.endswith(ANSWER_CUE)
        assert list(r.token_ids) == encode(tok, r.text, settings)
        assert list(r.token_ids[-len(cue):]) == cue
        # The letter is one token right after the prompt, for every prompt, not only the first.
        with_letter = encode(tok, r.text + "C\"", settings)
        assert with_letter[:len(r.token_ids) + 1] == [*r.token_ids.tolist(), letter_ids.ids[2]]


RAW_DIFFERS = {  # seen under transformers 5.24; both match the file under 4.57 (docs/concepts/exact-distributions.md)
    ("olmo2", "instruct"): "transformers 5 rebuilds GPT2Tokenizer with GPT-2's pre-tokenizer, not the file's",
    ("olmo2", "base"): "transformers 5 rebuilds GPT2Tokenizer with GPT-2's pre-tokenizer, not the file's",
    ("phi3", "instruct"): "transformers 5's LlamaTokenizer drops the `▁` the file puts after rstripped specials",
}


@pytest.mark.parametrize("family", ["gemma3", "llama3", "mistral", "olmo2", "phi3"])
@pytest.mark.parametrize("kind", KINDS)
def test_matches_raw_tokenizer_json(family: str, kind: ModelKind, request: pytest.FixtureRequest) -> None:
    """AutoTokenizer must tokenize a rendered prompt like the shipped tokenizer.json does."""
    from tokenizers import Tokenizer

    if (family, kind) in RAW_DIFFERS:
        request.applymarker(pytest.mark.xfail(reason=RAW_DIFFERS[family, kind], strict=False))
    tok, settings, _ = _setup(Case(family, bos=(0, 0)), kind)
    raw = Tokenizer.from_file(str(_tokenizers_dir() / family / "tokenizer.json"))
    text = render_text(tok, _prompt(), settings)
    assert encode(tok, text, settings) == raw.encode(text, add_special_tokens=kind == "base").ids


@pytest.mark.parametrize("family", ["olmo2", "phi3"])
@pytest.mark.parametrize("kind", KINDS)
def test_tokenizer_json_loader_matches_the_file(family: str, kind: ModelKind) -> None:
    """`tokenizer_loader: tokenizer_json` (the OLMo 2 configs) restores the shipped tokenization."""
    from tokenizers import Tokenizer

    from probe.models import ModelSpec, load_tokenizer

    folder = _tokenizers_dir() / family
    tok = load_tokenizer(ModelSpec(name=family, kind=kind, tokenizer_loader="tokenizer_json"), str(folder))
    settings = RenderSettings(kind=kind)
    raw = Tokenizer.from_file(str(folder / "tokenizer.json"))
    text = render_text(tok, _prompt(), settings)
    assert encode(tok, text, settings) == raw.encode(text, add_special_tokens=kind == "base").ids
    assert derive_letter_ids(tok, text, list("ABCD"), settings, family).ids == tuple(
        raw.token_to_id(L) for L in "ABCD")


# --- negative: a tokenizer that merges the letter with a quote (no shared folder needed) ---


def _merging_tokenizer(merged: str) -> Any:
    """A character-level BPE tokenizer whose one merge rule joins a letter and a quote."""
    from tokenizers import Tokenizer
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    chars = sorted(set(_prompt().message + ANSWER_CUE + "".join(LETTERS) + '"'))
    vocab = {c: i for i, c in enumerate(chars)}
    vocab[merged] = len(vocab)
    backend = Tokenizer(BPE(vocab=vocab, merges=[(merged[0], merged[1])]))
    return PreTrainedTokenizerFast(tokenizer_object=backend, name_or_path="toy")


@pytest.mark.parametrize("merged", ['A"', '"A'])
def test_letter_merging_with_quote_is_refused(merged: str) -> None:
    tok = _merging_tokenizer(merged)
    settings = RenderSettings(kind="base")
    text = render_text(tok, _prompt(), settings)
    assert derive_letter_ids(tok, text, ["B", "C"], settings, "toy-merger").ids  # other letters are fine
    with pytest.raises(ProbeInputError, match=r"model 'toy-merger'.*letter 'A'"):
        derive_letter_ids(tok, text, list("ABCD"), settings, "toy-merger")
    prompts = build_prompts([_item()])[:2]
    with pytest.raises(ProbeInputError, match=r"model 'toy-merger'.*letter 'A'"):
        render_prompts(tok, prompts, list("ABCD"), settings, "toy-merger")
