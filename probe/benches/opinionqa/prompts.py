"""OpinionQA's prompts: the paper's multiple-choice format, under every option ordering and persona.

The paper's prompt (Santurkar et al. 2023, as HELM's `opinions_qa` scenario renders it):

    <optional persona context>
    Question: <question>
    A. <option>
    B. <option>
    …
    Answer:

with every option the survey offered, `Refused` included. probe asks the same text and reads the
next token after `Answer:` (pre-filled as the assistant's turn for instruct models; a base model
gets the text with `Answer:` on its own line). Deviation: the paper read the letter as the best of
` A` and `A`; probe reads the one letter token that follows `Answer:` in context (see the bench
page). Each question is asked under all K cyclic rotations by default (`bench.orders`), so the
letter prior separates from the content; rotation 0 is the survey's order.

Conditions: `default` (no persona) and, for each format of `bench.personas`, one prompt set per
group of the chosen attributes (design field `target` = `ATTRIBUTE=group`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from probe.benches.opinionqa.personas import Texts, context, texts_for
from probe.benches.opinionqa.survey import OVERALL, Question, to_json
from probe.prompts.text_forms import TEXT_FORMAT_LINE
from probe.prompts.variants import Wording
from probe.types import LETTERS, Item, Option, Prompt

CUE = "Answer:"
"""The answer cue: the paper's prompt ends in it and the next token is the letter."""
CONDITION, TARGET, ROTATION, HUMAN = "condition", "target", "rotation", "human"
"""The design fields of a prompt: its condition, the persona's group, the option ordering, the survey side."""
DEFAULT = "default"
NOT_SHOWN = -1
"""`order` at a letter beyond the prompt's own K."""


def target_label(attribute: str, group: str) -> str:
    """The `target` value of a persona naming `group` of `attribute`."""
    return f"{attribute}={group}"


def split_target(target: str) -> tuple[str, str]:
    """`target_label`'s inverse (attribute names hold no `=`, checked when read)."""
    attribute, group = target.split("=", 1)
    return attribute, group


def item_of(q: Question) -> Item:
    """The question as a forced-choice item; each option's group is its own text."""
    return Item(item_id=q.key, question=q.text,
                options=tuple(Option(key=str(i), text=o, group=o) for i, o in enumerate(q.options)))


def render_message(question: str, options: Sequence[str], persona: str = "", wording: Wording = Wording()) -> str:
    """The user turn: persona context, `Question: …`, the lettered options (a factor's wording may
    change the labels, the option lines, or add an instruction line after the options)."""
    labels = wording.labels or LETTERS
    lines = [wording.option_line(labels[i], o, f"{labels[i]}. {o}") for i, o in enumerate(options)]
    extra = [] if wording.instruction is None else [wording.instruction]
    return "\n".join([f"{persona}Question: {question}", *lines, *extra])


def reword(item: Item, prompt: Prompt, wording: Wording) -> str:
    """A prompt's message under another wording, its persona kept (the context before `Question:`)."""
    persona = prompt.message.split("Question: " + item.question, 1)[0] if prompt.value(CONDITION) != DEFAULT else ""
    shown = [item.options[o].text for o in prompt.order if o != NOT_SHOWN]
    return render_message(item.question, shown, persona, wording)


def text_message(item: Item, prompt: Prompt, form: str) -> str:
    """The answer-text reading's user turn: cloze, the persona and question alone; hybrid, the
    options shown under the prompt's order and the text format line."""
    persona = prompt.message.split("Question: " + item.question, 1)[0] if prompt.value(CONDITION) != DEFAULT else ""
    if form == "cloze":
        return f"{persona}Question: {item.question}"
    shown = [item.options[o].text for o in prompt.order if o != NOT_SHOWN]
    return render_message(item.question, shown, persona) + "\n" + TEXT_FORMAT_LINE


def persona_cells(questions: Sequence[Question], personas: Sequence[str], texts: Mapping[str, Texts]
                  ) -> list[tuple[str, str | None, str]]:
    """(condition, target, context) of every condition: default, then each format × group of
    every attribute the questions carry (groups in the order first met)."""
    groups: dict[str, list[str]] = {}
    for q in questions:
        for attribute, group, _ in q.counts:
            if attribute != OVERALL and group not in groups.setdefault(attribute, []):
                groups[attribute].append(group)
    cells: list[tuple[str, str | None, str]] = [(DEFAULT, None, "")]
    for persona in personas:
        for attribute, names in groups.items():
            for group in names:
                cells.append((persona, target_label(attribute, group),
                              context(persona, texts_for(attribute, texts), names, group)))
    return cells


def build_prompts(questions: Sequence[Question], cells: Sequence[tuple[str, str | None, str]], width: int,
                  orders: Mapping[int, Sequence[tuple[int, ...]]] | None = None) -> list[Prompt]:
    """One prompt per (question, condition cell, ordering), letters padded to `width`. The
    survey side rides on the prompts of each question's first cell (`HUMAN`)."""
    prompts: list[Prompt] = []
    for q in questions:
        k = len(q.options)
        design = [tuple((i + r) % k for i in range(k)) for r in range(k)] if orders is None else orders[k]
        human: str | None = to_json(q)
        for condition, target, persona in cells:
            for rotation, order in enumerate(design):
                message = render_message(q.text, [q.options[o] for o in order], persona)
                prompts.append(Prompt(
                    prompt_id=len(prompts), item_id=q.key, order=order + (NOT_SHOWN,) * (width - k),
                    groups=tuple(q.options[o] for o in order) + ("",) * (width - k), message=message,
                    prefix_key=f"{q.key}|{target or ''}|{condition}",
                    design=((CONDITION, condition), (TARGET, target), (ROTATION, rotation), (HUMAN, human))))
            human = None
    return prompts
