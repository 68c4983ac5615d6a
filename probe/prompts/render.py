"""Prompt rendering: user message → exact token ids ending in the answer cue.

The model must be asked for the letter as the very next token, so every prompt ends with the
cue `{"answer_choice":"` — what the prompt's own format line asks for. Instruct models get it
as a pre-filled assistant turn; base models get plain text ending in it.

Letter ids are derived *in context*: " A", "A", "▁A" and `"A` can all be different tokens, and
which one follows `"` depends on the tokenizer, so we encode the prompt with each letter
appended and read the id off the result instead of trusting `encode("A")`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from probe.errors import ProbeInputError
from probe.prompts.control import check_special_counts
from probe.prompts.tokenizer import Tokenizer
from probe.types import DesignValue, LetterIds, ModelKind, Prompt, RenderedPrompt

ANSWER_CUE = '{"answer_choice":"'


@dataclass(frozen=True)
class RenderSettings:
    """How a model sees a prompt; comes from the model config."""

    kind: ModelKind
    cue: str | None = ANSWER_CUE
    """What the answer starts with, pre-filled; None for open answers (nothing pre-filled)."""
    system_prompt: str | None = None
    base_joiner: str = "\n"
    """What a base model's text puts between the prompt and the pre-filled cue (a bench's protocol
    may say otherwise: GlobalOpinionQA's paper has a space)."""
    template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Extra chat-template variables: a fixed `date_string` for Llama 3.x (whose template
    otherwise stamps today's date), `enable_thinking=False` for Qwen3."""


def render_text(tokenizer: Tokenizer, prompt: Prompt, settings: RenderSettings) -> str:
    """The full prompt text: ending exactly in the answer cue, or, when `settings.cue` is None
    (open answers), where the model's answer starts.

    Instruct models get optional system turn, the prompt's example turns, the user message, then
    either the pre-filled cue (`continue_final_message`) or the generation prompt. Base models get
    `prompt.base_text` (or the message), then `settings.base_joiner` (a newline) and the cue.
    """
    if settings.kind == "base":
        body = prompt.base_text if prompt.base_text is not None else prompt.message
        return body if settings.cue is None else f"{body}{settings.base_joiner}{settings.cue}"
    if not getattr(tokenizer, "chat_template", None):
        raise ProbeInputError(
            f"model is configured as `instruct` but tokenizer {tokenizer.name_or_path!r} has no chat "
            "template; set `model.kind=base` or give the model config a chat template"
        )
    messages = []
    if settings.system_prompt is not None:
        messages.append({"role": "system", "content": settings.system_prompt})
    for question, answer in prompt.shots:
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    messages.append({"role": "user", "content": prompt.message})
    kwargs = dict(settings.template_kwargs)
    if not settings.cue:  # open answers, or an empty cue: the template's bare generation prompt
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kwargs)
    messages.append({"role": "assistant", "content": settings.cue})
    text = tokenizer.apply_chat_template(messages, tokenize=False, continue_final_message=True, **kwargs)
    assert text.endswith(settings.cue), "continue_final_message must leave the cue last"
    return text


def encode(tokenizer: Tokenizer, text: str, settings: RenderSettings) -> list[int]:
    """Token ids of a rendered prompt.

    Chat templates write their own BOS into the text, so encoding must not add another;
    base-model text has no template, so the tokenizer's usual special tokens (BOS) are added.
    """
    return list(tokenizer(text, add_special_tokens=settings.kind == "base")["input_ids"])


def derive_letter_ids(
    tokenizer: Tokenizer, text: str, letters: Sequence[str], settings: RenderSettings, model_name: str
) -> LetterIds:
    """Find each letter's token id as it appears right after the cue, with a preflight.

    For each letter L, `text + L + '"'` must tokenize as the prompt's tokens, then exactly one
    token that decodes to L, then the rest. The closing quote guards against tokenizers that
    would merge the letter with what follows it in a real answer.
    """
    base = encode(tokenizer, text, settings)
    ids: list[int] = []
    for letter in letters:
        full = encode(tokenizer, text + letter + '"', settings)
        seen = [tokenizer.decode([t]) for t in full[len(base) - 2:len(base) + 2]]
        if full[:len(base)] != base:
            raise ProbeInputError(
                f"model {model_name!r}: appending letter {letter!r} after the answer cue re-tokenizes the "
                f"prompt (it does not stay a prefix); tokens around the cue: {seen}"
            )
        letter_id = full[len(base)]
        if tokenizer.decode([letter_id]) != letter:
            raise ProbeInputError(
                f"model {model_name!r}: letter {letter!r} is not one stable token after the answer cue; "
                f"tokens seen after the prompt: {seen}"
            )
        ids.append(letter_id)
    if len(set(ids)) != len(ids):
        raise ProbeInputError(f"model {model_name!r}: letters {list(letters)} share token ids {ids}")
    assert settings.cue is not None, "letters are read right after an answer cue"
    cue_len = len(encode(tokenizer, settings.cue, RenderSettings(kind="instruct")))
    # an empty cue (the bare generation prompt) has no tokens of its own to check
    return LetterIds(letters=tuple(letters), ids=tuple(ids), cue_token_ids=tuple(base[-cue_len:]) if cue_len else ())


def render_prompts(
    tokenizer: Tokenizer,
    prompts: Sequence[Prompt],
    letters: Sequence[str] | None,
    settings: RenderSettings,
    model_name: str,
    max_positions: int | None = None,
    condition: str | None = None,
) -> tuple[list[RenderedPrompt], LetterIds | None]:
    """Render and tokenize every prompt; derive letter ids and check every prompt against them.

    Letter ids are derived on the first prompt of each value of the design field `condition` (the
    bench's conditions; None: on the first prompt); all must agree, and every prompt must end in
    the same cue tokens, so one set of ids is valid for the whole run.
    With `letters=None` (generation mode) no letter ids are derived or checked. Prompts with
    different inputs must render different texts (`check_distinct`).
    """
    if letters is None:
        rendered = [_checked(p, t, ids, None, model_name, max_positions)
                    for p, t, ids in _encoded(tokenizer, prompts, settings)]
        check_distinct(rendered, settings, tokenizer, model_name)
        _check_control(tokenizer, rendered, settings, model_name)
        return rendered, None
    letter_ids: LetterIds | None = None
    checked: set[DesignValue] = set()
    for p in prompts:
        if p.value(condition) in checked:
            continue
        checked.add(p.value(condition))
        ids = derive_letter_ids(tokenizer, render_text(tokenizer, p, settings), letters, settings, model_name)
        if letter_ids is not None and ids.ids != letter_ids.ids:
            raise ProbeInputError(
                f"model {model_name!r}: letter ids differ between conditions ({letter_ids.ids} vs {ids.ids})"
            )
        letter_ids = ids
    assert letter_ids is not None, "render_prompts needs at least one prompt"
    cue = np.array(letter_ids.cue_token_ids)
    rendered = [_checked(p, t, ids, cue, model_name, max_positions)
                for p, t, ids in _encoded(tokenizer, prompts, settings)]
    check_distinct(rendered, settings, tokenizer, model_name)
    _check_control(tokenizer, rendered, settings, model_name)
    return rendered, letter_ids


def _check_control(tokenizer: Tokenizer, rendered: Sequence[RenderedPrompt], settings: RenderSettings,
                   model_name: str) -> None:
    """The in-context preflight of `probe.prompts.control`: each prompt holds the template's
    count of special tokens."""
    check_special_counts(tokenizer, rendered, lambda p: render_text(tokenizer, p, settings),
                         lambda t: encode(tokenizer, t, settings), model_name)


def check_distinct(rendered: Sequence[RenderedPrompt], settings: RenderSettings, tokenizer: Tokenizer,
                   model_name: str) -> None:
    """Prompts whose inputs differ (message and example turns; a base model's text) must render
    different texts. A chat template that drops the user message renders every prompt alike,
    and the model would answer the same question for every item."""
    seen: dict[str, RenderedPrompt] = {}
    for r in rendered:
        first = seen.setdefault(r.text, r)
        if _template_input(first.prompt, settings) != _template_input(r.prompt, settings):
            n_texts = len({x.text for x in rendered})
            n_inputs = len({_template_input(x.prompt, settings) for x in rendered})
            raise ProbeInputError(
                f"model {model_name!r}: the chat template of {getattr(tokenizer, 'name_or_path', '?')!r} renders "
                f"{n_inputs} distinct prompts as only {n_texts} distinct text(s): prompts {first.prompt.prompt_id} "
                f"(item {first.prompt.item_id!r}) and {r.prompt.prompt_id} (item {r.prompt.item_id!r}) both render "
                f"as {r.text[:120]!r}; it drops the user message or part of it: fix the template, or set "
                "model.kind=base")


def _template_input(p: Prompt, settings: RenderSettings) -> tuple[Any, ...]:
    """What `render_text` gives the template (the system prompt and cue are the same for all)."""
    if settings.kind == "base":
        return (p.base_text if p.base_text is not None else p.message,)
    return (p.shots, p.message)


def _encoded(tokenizer: Tokenizer, prompts: Sequence[Prompt], settings: RenderSettings):
    """`(prompt, text, int32 ids)` per prompt, tokenised in chunks: the tokenizer returns Python
    int lists, ~9× the size of the arrays kept, so one call for all prompts would set the run's
    peak memory."""
    for start in range(0, len(prompts), 256):
        chunk = prompts[start:start + 256]
        texts = [render_text(tokenizer, p, settings) for p in chunk]
        encoded = tokenizer(texts, add_special_tokens=settings.kind == "base")["input_ids"]
        yield from ((p, t, np.asarray(ids, dtype=np.int32)) for p, t, ids in zip(chunk, texts, encoded))


def _checked(
    p: Prompt, text: str, ids: np.ndarray, cue: np.ndarray | None, model_name: str, max_positions: int | None
) -> RenderedPrompt:
    """The rendered prompt, after checking it ends in the cue tokens and fits the model."""
    if cue is not None and len(cue) and not np.array_equal(ids[-len(cue):], cue):
        raise ProbeInputError(
            f"model {model_name!r}, prompt {p.prompt_id} ({p.describe()}): the rendered prompt does not end in "
            f"the answer-cue tokens {cue.tolist()}"
        )
    if max_positions is not None and len(ids) + 1 > max_positions:
        raise ProbeInputError(
            f"model {model_name!r}, prompt {p.prompt_id} ({p.describe()}): {len(ids)} tokens, longer than the "
            f"model allows ({max_positions} positions)"
        )
    return RenderedPrompt(prompt=p, text=text, token_ids=ids)


def template_hash(tokenizer: Tokenizer, settings: RenderSettings) -> str:
    """Hash of everything that turns a message into tokens except the message itself."""
    blob = json.dumps({
        "chat_template": getattr(tokenizer, "chat_template", None) if settings.kind == "instruct" else None,
        "kind": settings.kind,
        "cue": settings.cue,
        "system_prompt": settings.system_prompt,
        "template_kwargs": dict(settings.template_kwargs),
        # only where a bench changes it, so every other run keeps its hash
        **({"base_joiner": settings.base_joiner} if settings.base_joiner != "\n" else {}),
    }, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def tokenizer_hash(tokenizer: Tokenizer) -> str:
    """Hash of the tokenizer's full serialisation (vocab, merges, normaliser, added tokens)."""
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    blob = backend.to_str() if backend is not None else json.dumps(tokenizer.get_vocab(), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()
