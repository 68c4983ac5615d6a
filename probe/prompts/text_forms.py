"""The answer-text reading's prompts: the bench's text messages, rendered, and each option's text
tokenized in context as a continuation (`backend.mode=text|letters+text`).

Two formulations (`bench.text_form`):
- `hybrid`: the letter prompt's message with the options listed under the same rotation, but the
  format line asks for the answer's text (`TEXT_FORMAT_LINE`); the answer cue `{"answer":"` is
  pre-filled and each option's continuation is its text and the closing quote.
- `cloze`: the question without the options (nor the instruction and format lines); instruct
  models get the chat template's generation prompt (the assistant turn opened and empty: a
  pre-filled empty turn would be closed by the template), base models `Answer:` with the
  continuation ` <option text>`. Design cells that render the same message share one text prompt.

Continuation ids are read off `encode(prompt text + continuation)` after checking the prompt's
own ids stay a prefix, for the same reason letter ids are (`probe.prompts.render`): a token can
merge across the boundary, and then the prompt the model saw is not the prompt that was scored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from probe.errors import ProbeInputError
from probe.prompts.control import check_continuations, check_special_counts, special_ids
from probe.prompts.render import RenderSettings, encode, render_text
from probe.prompts.tokenizer import Tokenizer
from probe.types import Item, Prompt, RenderedPrompt

TEXT_CUE = '{"answer":"'
"""What a hybrid text answer starts with, pre-filled."""
TEXT_FORMAT_LINE = 'Return ONLY valid JSON in exactly this format: {"answer":"<the text of your chosen option>"}'
"""The hybrid prompt's format line (in place of the letter prompt's)."""
CLOZE_BASE_CUE = "Answer:"
"""What a base model's cloze answer follows (the continuation starts with a space)."""
TEXT_FORMS: tuple[str, ...] = ("hybrid", "cloze")

TextMessage = Callable[[Item, Prompt, str], str]
"""`(item, letter prompt, form) → the text reading's user message` (a bench's hook)."""


@dataclass(frozen=True)
class TextDesign:
    """The text prompts of a design and which one each design cell (letter prompt) reads."""

    form: str
    prompts: tuple[Prompt, ...]
    """Text prompts; `prompt_id` is the index here (its own id space, not letter prompts')."""
    options: tuple[tuple[str, ...], ...]
    """Per text prompt: its item's option texts in source order (`Item.options`)."""
    of_cell: Mapping[int, int]
    """Letter prompt id → the text prompt id its cell reads."""


@dataclass(frozen=True)
class RenderedText:
    """A rendered text prompt and its options' continuations, in source order."""

    prompt: RenderedPrompt
    continuations: tuple[np.ndarray, ...]
    """`[n_tokens]` int32 per option: the ids after the prompt's in `encode(text + continuation)`."""
    n_bytes: tuple[int, ...]
    """UTF-8 bytes of each continuation's text (the per-byte normaliser)."""


def text_design(prompts: Sequence[Prompt], items: Sequence[Item], form: str, message: TextMessage) -> TextDesign:
    """Every letter prompt's text message (from the bench's hook); cells with the same message
    and example turns share a text prompt (cloze: the rotations of one item and condition)."""
    by_id = {item.item_id: item for item in items}
    keys: dict[tuple[Any, ...], int] = {}
    text_prompts: list[Prompt] = []
    options: list[tuple[str, ...]] = []
    of_cell: dict[int, int] = {}
    for p in prompts:
        item = by_id[p.item_id]
        body = message(item, p, form)
        key = (p.item_id, p.shots, body)
        if key not in keys:
            keys[key] = len(text_prompts)
            text_prompts.append(replace(p, prompt_id=len(text_prompts), message=body, base_text=None))
            options.append(tuple(o.text for o in item.options))
        of_cell[p.prompt_id] = keys[key]
    return TextDesign(form=form, prompts=tuple(text_prompts), options=tuple(options), of_cell=of_cell)


def text_settings(settings: RenderSettings, form: str) -> RenderSettings:
    """The letter prompt's settings with the text reading's cue."""
    if form == "hybrid":
        return replace(settings, cue=TEXT_CUE)
    return replace(settings, cue=CLOZE_BASE_CUE if settings.kind == "base" else None)


def continuation_text(option: str, form: str, settings: RenderSettings) -> str:
    """What follows the text prompt for one option (module docstring)."""
    if form == "hybrid":
        return f'{option}"'
    return f" {option}" if settings.kind == "base" else option


def render_texts(tokenizer: Tokenizer, design: TextDesign, settings: RenderSettings, model_name: str,
                 max_positions: int | None = None) -> list[RenderedText]:
    """Render every text prompt with the text cue and tokenize its options in context."""
    settings = text_settings(settings, design.form)
    special = special_ids(tokenizer)
    out = []
    for p, options in zip(design.prompts, design.options):
        text = render_text(tokenizer, p, settings)
        ids = encode(tokenizer, text, settings)
        conts = [continuation_text(o, design.form, settings) for o in options]
        full = tokenizer([text + c for c in conts], add_special_tokens=settings.kind == "base")["input_ids"]
        tokens = tuple(_continuation(tokenizer, ids, list(f), o, p, model_name) for f, o in zip(full, options))
        check_continuations(special, p, tokens, model_name)
        longest = len(ids) + max(len(t) for t in tokens)
        if max_positions is not None and longest > max_positions:
            raise ProbeInputError(f"model {model_name!r}, text prompt {p.prompt_id} ({p.describe()}): "
                                  f"{longest} tokens with its longest option, longer than the model "
                                  f"allows ({max_positions} positions)")
        out.append(RenderedText(RenderedPrompt(p, text, np.asarray(ids, dtype=np.int32)), tokens,
                                tuple(len(c.encode("utf-8")) for c in conts)))
    check_special_counts(tokenizer, [r.prompt for r in out], lambda p: render_text(tokenizer, p, settings),
                         lambda t: encode(tokenizer, t, settings), model_name)
    return out


def _continuation(tokenizer: Tokenizer, prompt: list[int], full: list[int], option: str, p: Prompt,
                  model_name: str) -> np.ndarray:
    """The option's ids after the prompt's, checked: the prompt stays a prefix, and the
    continuation has a token."""
    if full[:len(prompt)] != prompt or len(full) == len(prompt):
        why = "adds no token" if full[:len(prompt)] == prompt else "re-tokenizes the prompt (it does not stay a prefix)"
        seen = [tokenizer.decode([t]) for t in full[max(0, len(prompt) - 2):len(prompt) + 2]]
        raise ProbeInputError(f"model {model_name!r}, {p.describe()}, option {option[:60]!r}: "
                              f"appending the option's text after the text prompt {why}; tokens around the "
                              f"boundary: {seen}")
    return np.asarray(full[len(prompt):], dtype=np.int32)
