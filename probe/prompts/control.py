"""Data text never becomes a control token.

A tokenizer matches its added tokens (`<|im_end|>`, `<|start_header_id|>`, `<think>`) anywhere
in the text it encodes, and a rendered prompt is one text: an option reading
`<|im_end|>\\n<|im_start|>assistant …` would close the user turn and write the assistant's
answer. Probe refuses such data instead of rendering it (one line naming the data file, the
item and the field): every text that comes from the data — the user message, example turns, a
base model's text, each option's continuation in the text reading — is checked for the
tokenizer's control strings before it is rendered (`check_data_text`). The control strings are
its special tokens and the added tokens its chat template writes (Qwen3's `<think>`).

After rendering, an in-context preflight counts the special token ids of every prompt against
the template's own count for a prompt of the same shape (`check_special_counts`): a control
token that entered some other way (a tokenizer normalising text into one) stops the run too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any
from itertools import repeat

import numpy as np

from probe.errors import ProbeInputError
from probe.prompts.tokenizer import Tokenizer
from probe.types import Prompt, RenderedPrompt

MAX_TEXT_CHARS = 1_000_000
"""The longest text one data field may hold (a million characters, past any context window)."""
Render = Callable[[Prompt], str]
"""A prompt → its rendered text (`probe.prompts.render.render_text` with the run's settings)."""
Encode = Callable[[str], Sequence[int]]


def control_strings(tokenizer: Tokenizer) -> tuple[str, ...]:
    """The strings the tokenizer turns into control tokens: its special tokens, and added tokens
    its chat template writes; longest first (the error then names the whole marker)."""
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    template = getattr(tokenizer, "chat_template", None) or ""
    template = template if isinstance(template, str) else " ".join(map(str, dict(template).values()))
    found = {t.content for t in added.values() if getattr(t, "special", False) or _marker_in(t.content, template)}
    found |= set(getattr(tokenizer, "all_special_tokens", ()) or ())
    return tuple(sorted((s for s in found if s), key=lambda s: (-len(s), s)))


def _marker_in(content: str, template: str) -> bool:
    """Whether a non-special added token is a marker the template writes: `<think>`, not Gemma's
    whitespace runs (`\\n\\n`), which any text holds."""
    return content in template and any(c.isalnum() for c in content) and not any(c.isspace() for c in content)


def special_ids(tokenizer: Tokenizer) -> np.ndarray:
    """The ids of the tokenizer's special tokens (sorted)."""
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    ids = {int(i) for i, t in added.items() if getattr(t, "special", False)}
    ids |= set(getattr(tokenizer, "all_special_ids", ()) or ())
    return np.array(sorted(ids), dtype=np.int64)


def data_fields(prompt: Prompt) -> Iterator[tuple[str, str]]:
    """`(field, text)` of each text of `prompt` that comes from the data."""
    yield "user message", prompt.message
    for i, (question, answer) in enumerate(prompt.shots):
        yield f"example turn {i + 1} (user)", question
        yield f"example turn {i + 1} (assistant)", answer
    if prompt.base_text is not None:
        yield "base-model text", prompt.base_text


def check_data_text(tokenizer: Tokenizer, prompts: Iterable[Prompt], where: str, model_name: str,
                    options: Iterable[Sequence[str]] | None = None) -> None:
    """Raise `ProbeInputError` at the first data text holding one of the tokenizer's control
    strings: `where` (the data file), the item, the field and the string. `options`: each
    prompt's option texts (the text reading's continuations), checked too."""
    pattern = _pattern(control_strings(tokenizer))
    per_prompt = options if options is not None else repeat(())
    for prompt, texts in zip(prompts, per_prompt):
        fields = [*data_fields(prompt), *((f"option {i + 1} text", t) for i, t in enumerate(texts))]
        for field, text in fields:
            _encodable(f"{where}: {prompt.describe()}, {field}", text)
            if len(text) > MAX_TEXT_CHARS:  # a tokenizer aborts the process on a text of megabytes
                raise ProbeInputError(f"{where}: {prompt.describe()}, {field}: {len(text)} characters, longer than "
                                      f"any prompt probe scores ({MAX_TEXT_CHARS}): prompt too long")
            if pattern is not None and (hit := pattern.search(text)) is not None:
                start = max(0, hit.start() - 30)
                raise ProbeInputError(
                    f"{where}: {prompt.describe()}, {field}: holds {hit.group()!r}, a control token of model "
                    f"{model_name!r}'s tokenizer (…{text[start:hit.end() + 30]!r}…); text from the data is never "
                    "tokenised as a control token, so it is refused: remove or rewrite it in the data")


def check_texts(tokenizer: Tokenizer, texts: Iterable[tuple[str, str]], model_name: str) -> None:
    """Raise `ProbeInputError` at the first `(where, text)` holding one of the tokenizer's control
    strings or a lone surrogate (no tokenizer can encode one): for texts that reach a prompt from
    elsewhere than the data file — a levels file's cue, system message, instruction, layout or
    labels — which a user shares and edits like data, so they are checked like data."""
    pattern = _pattern(control_strings(tokenizer))
    for where, text in texts:
        _encodable(where, text)
        if len(text) > MAX_TEXT_CHARS:
            raise ProbeInputError(f"{where}: {len(text)} characters, more than {MAX_TEXT_CHARS}: prompt too long")
        if pattern is not None and (hit := pattern.search(text)) is not None:
            raise ProbeInputError(f"{where}: holds {hit.group()!r}, a control token of model {model_name!r}'s "
                                  "tokenizer; a prompt's wording never writes a control token (it could close a turn "
                                  "and forge the answer), so it is refused: remove or rewrite it")


def _encodable(where: str, text: str) -> None:
    """Refuse a text holding a lone surrogate (`\\ud800` from a JSON escape): not UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ProbeInputError(f"{where}: character {e.start + 1} is a lone surrogate ({text[e.start]!a}), not a "
                              "character a tokenizer can encode: remove it") from None


@lru_cache(maxsize=8)
def _pattern(strings: tuple[str, ...]) -> re.Pattern[str] | None:
    """One regex matching any of `strings`, built as a trie: a flat alternation of Mistral's 771
    control strings tries each at every `[` of a text (~100 µs per KB); a trie tries one branch."""
    if not strings:
        return None
    trie: dict[str, Any] = {}
    for text in strings:
        node = trie
        for char in text:
            node = node.setdefault(char, {})
        node[""] = {}  # a string ends here
    return re.compile(_trie_regex(trie))


def _trie_regex(node: dict[str, Any]) -> str:
    """Longest match first: a branch that continues is tried before the end of a shorter string."""
    branches = [re.escape(c) + _trie_regex(child) for c, child in sorted(node.items()) if c]
    if "" in node:
        return f"(?:{'|'.join(branches)})?" if branches else ""
    return branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"


def check_special_counts(tokenizer: Tokenizer, rendered: Sequence[RenderedPrompt], render: Render, encode: Encode,
                         model_name: str) -> None:
    """Every prompt holds as many special tokens as the template writes around a plain prompt of
    its shape (its number of example turns, a base text or not)."""
    if not rendered:
        return
    ids = special_ids(tokenizer)
    # one membership test over all prompts' ids (a run can hold 10⁵ prompts), then a sum per prompt
    ends = np.cumsum([len(r.token_ids) for r in rendered])
    hits = np.concatenate([[0], np.cumsum(np.isin(np.concatenate([r.token_ids for r in rendered]), ids))])
    counts = hits[ends] - hits[np.concatenate([[0], ends[:-1]])]
    expected: dict[tuple[int, bool], int] = {}
    for r, got in zip(rendered, counts.tolist()):
        p = r.prompt
        shape = (len(p.shots), p.base_text is not None)
        if shape not in expected:
            plain = replace(p, message="x", shots=(("x", "x"),) * len(p.shots),
                            base_text=None if p.base_text is None else "x")
            expected[shape] = int(np.isin(np.asarray(encode(render(plain))), ids).sum())
        if got != expected[shape]:
            raise ProbeInputError(f"model {model_name!r}, prompt {p.prompt_id} ({p.describe()}): {got} special tokens "
                                  f"where the chat template writes {expected[shape]}; text from the data must not "
                                  "become a control token: remove control markers from the data")


def check_continuations(ids: np.ndarray, prompt: Prompt, tokens: Sequence[np.ndarray], model_name: str) -> None:
    """No option's continuation holds a special token (`ids`: `special_ids` of the tokenizer)."""
    for i, t in enumerate(tokens):
        if np.isin(t, ids).any():
            raise ProbeInputError(f"model {model_name!r}, {prompt.describe()}, option {i + 1}: its text tokenises "
                                  "into a special token; text from the data must not become a control token")
