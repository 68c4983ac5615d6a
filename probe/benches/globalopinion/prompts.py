"""GlobalOpinionQA's prompts, as the paper's public prompt reads. The one module that builds
this bench's `Prompt` records.

User turn: the question, a blank line, `Here are the options:`, one `(A) {option}` line per
option. The assistant turn is pre-filled with `If had to select one of the options, my answer
would be (` (the paper's wording, "If had" sic), so the next token is the letter. Base models
get the same text as `Human: {user turn}\\n\\nAssistant:`, then a space and the pre-fill, as in
the paper (`PreparedBench.base_joiner`; probe's other benches put a newline there).
`cross_national` puts `How would someone from {country} answer the following question:` on a
line before the question, the country by its display name
(`countries.display_name`: `S. Korea` → South Korea, sampling notes removed); the design field
`target` keeps the survey label.

Every question is asked under all K cyclic rotations (option (i + k) mod K at letter i) by default,
or under the orderings of `bench.orders` (`reverse`: the scale's order and its reverse), so each
option visits each letter once under rotations: the distribution over options is exact and the letter prior
separates from the content. A run mixes questions with 2 to 18 options; the letters table is as
wide as the largest K, and a prompt's letters beyond its own K show nothing: `order` −1 and
group "" there (its metrics read the first K letters only).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from probe.benches.globalopinion.countries import display_name
from probe.benches.globalopinion.data import Question
from probe.prompts.text_forms import TEXT_FORMAT_LINE
from probe.prompts.variants import Wording
from probe.types import LETTERS, Item, Prompt

PREFILL = "If had to select one of the options, my answer would be ("
"""The assistant turn's pre-filled start (verbatim from the paper's prompt, "If had" included)."""
CROSS_NATIONAL = "How would someone from {country} answer the following question:"
_NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)?")
"""An option text that is a number (a point of a 0–10 scale)."""
NOT_SHOWN = -1
"""`order` at a letter beyond the prompt's own K (no option shown there)."""
HUMAN = "human"
"""The `prompts.parquet` column holding a question's answer shares (JSON, on the prompts of each
question's first prompt group; null elsewhere)."""
CONDITION, TARGET, ROTATION = "condition", "target", "rotation"
"""The design fields of a prompt: its condition, the country its cue names, its option rotation."""


def render_message(question: str, options: Sequence[str], country: str | None = None,
                   wording: Wording = Wording()) -> str:
    """The user turn: optional country cue, the question, a blank line, the lettered options.
    `wording` (a prompt factor's variant) changes the labels or the option lines, or adds its
    instruction line after the options (the protocol has none: its pre-filled answer asks). Under
    digit labels a numeric option text is quoted (`(2) "1"`), so label and text stay apart."""
    head = cued(question, country)
    labels = wording.labels or LETTERS
    if any(label.isdigit() for label in labels[:len(options)]):  # `(2) 1` would read as two numbers
        options = [f'"{o}"' if _NUMBER.fullmatch(o) else o for o in options]
    lines = [wording.option_line(labels[i], o, f"({labels[i]}) {o}") for i, o in enumerate(options)]
    instruction = [] if wording.instruction is None else [wording.instruction]
    return "\n".join([head, "", "Here are the options:", *lines, *instruction])


def cued(question: str, country: str | None) -> str:
    """The question, under a cue naming `country` (a survey label, said by its display name) when given."""
    return question if country is None else f"{CROSS_NATIONAL.format(country=display_name(country))}\n{question}"


def reword(item: Item, prompt: Prompt, wording: Wording) -> str:
    """A letter prompt's message under another wording (`probe.prompts.variants.Reword`): the
    options it shows (its `order` up to the padding), its country cue."""
    country = prompt.value(TARGET)
    shown = [item.options[o].text for o in prompt.order if o != NOT_SHOWN]
    return render_message(item.question, shown, None if country is None else str(country), wording)


def base_text(message: str) -> str:
    """A base model's text before the pre-fill (no chat template: the paper's Human/Assistant frame)."""
    return f"Human: {message}\n\nAssistant:"


def human_json(q: Question) -> str:
    """The question's answer shares as stored in the prompts table: `{country: [share per source option]}`."""
    return json.dumps({c: list(s) for c, s in q.shares}, separators=(",", ":"))


def build_prompts(questions: Sequence[Question], conditions: Sequence[str], width: int,
                  orders: Mapping[int, Sequence[tuple[int, ...]]] | None = None) -> list[Prompt]:
    """One prompt per (question, condition, country for `cross_national`, ordering), letters
    padded to `width` (the largest K of the run). `orders[K]`: the orderings of a K-option
    question (`probe.benches.orders`); None: the K cyclic rotations. The `rotation` column holds
    the ordering's index in its design."""
    prompts: list[Prompt] = []
    for q in questions:
        k = len(q.item.options)
        design = [tuple((i + r) % k for i in range(k)) for r in range(k)] if orders is None else orders[k]
        cells = [(c, None) for c in conditions if c == "default"]
        cells += [(c, country) for c in conditions if c == "cross_national" for country, _ in q.shares]
        human: str | None = human_json(q)
        for condition, country in cells:
            # the shares ride on every rotation of one prompt group: a design value constant within
            # each group, so the letter-prior analysis groups the rotations as it would without it
            for rotation, order in enumerate(design):
                message = render_message(q.item.question, [q.item.options[o].text for o in order], country)
                prompts.append(Prompt(
                    prompt_id=len(prompts), item_id=q.item.item_id, order=order + (NOT_SHOWN,) * (width - k),
                    groups=tuple(q.item.options[o].group for o in order) + ("",) * (width - k),
                    message=message, prefix_key=f"{q.item.item_id}|{country or ''}", category=q.source,
                    base_text=base_text(message),
                    design=((CONDITION, condition), (TARGET, country), (ROTATION, rotation), (HUMAN, human))))
            human = None
    return prompts


def text_message(item: Item, prompt: Prompt, form: str) -> str:
    """The answer-text reading's user turn: cloze, the (cued) question alone (the rotations of one
    question and cue share it); hybrid, the options shown under the prompt's order and the text
    format line. A letter the prompt does not show (`order` −1) gets no continuation."""
    country = prompt.value(TARGET)
    head = cued(item.question, None if country is None else str(country))
    if form == "cloze":
        return head
    shown = [item.options[o].text for o in prompt.order if o != NOT_SHOWN]
    return "\n".join([head, "", "Here are the options:", *(f"({LETTERS[i]}) {o}" for i, o in enumerate(shown)),
                      TEXT_FORMAT_LINE])
