"""Record types shared by every seam: bench loaders → designs → backends → results → metrics.

All records are frozen dataclasses so a prompt cannot change between the moment it is
rendered and the moment its scores are written next to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from probe.errors import ProbeInputError

LETTERS: tuple[str, ...] = tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
"""Option letters in display order; a K-option bench uses the first K (up to 26)."""

ModelKind = Literal["instruct", "base"]


@dataclass(frozen=True)
class Option:
    """One answer option of a forced-choice item."""

    key: str
    """The option's key in the source data (DiSCo: its original letter; CCD: its cluster)."""
    text: str
    """The text shown to the model."""
    group: str
    """The hidden label the metrics aggregate over (a culture, a GLOBE cluster)."""
    context: str | None = None
    """An optional fact about this option (DiSCo `Context_L*`), shown only in some conditions."""


@dataclass(frozen=True)
class Item:
    """One forced-choice question with its options in source order."""

    item_id: str
    question: str
    options: tuple[Option, ...]
    instructions: str | None = None
    """Per-item instruction line; None means the bench default."""
    user_instruction: str | None = None
    category: str | None = None
    extra: tuple[tuple[str, str], ...] = ()
    """Columns of the source row the loader does not interpret, kept verbatim."""


@dataclass(frozen=True)
class GroupNoun:
    """What a bench calls the groups its options stand for (`Option.group`), in the words generic
    reports and figures use: `GroupNoun("culture", "cultures")`, `GroupNoun("country", "countries")`."""

    one: str = "group"
    many: str = "groups"


DesignValue = str | int | None
"""The value of one design field of a prompt (None: the prompt has none)."""

ONE_CONDITION = "all"
"""The condition of every prompt of a bench whose design names no condition field."""


@dataclass(frozen=True)
class Prompt:
    """One presentation of an item, before chat-template rendering: what every bench has, and
    the bench's own design fields in `design`.

    `order[i]` is the index (into `Item.options`) of the option shown at letter i, so
    `groups[i]` is the group a choice of letter i counts for.
    """

    prompt_id: int
    item_id: str
    order: tuple[int, ...]
    groups: tuple[str, ...]
    message: str
    """The user-facing prompt body (what goes into the user turn)."""
    prefix_key: str
    """Prompts with the same key share everything before the options block."""
    category: str | None = None
    """The item's category (DiSCo `Category`, CCD-Bench `Domain`), for per-category metrics."""
    shots: tuple[tuple[str, str], ...] = ()
    """Example (user, assistant) turns shown before the message (few-shot prompting)."""
    base_text: str | None = None
    """The text a base model sees, when it is not simply the message (e.g. few-shot blocks)."""
    design: tuple[tuple[str, DesignValue], ...] = ()
    """The bench's own fields of this prompt, by name: its design factors (the condition, the
    group a cue names, the option rotation; LocQA's template, language and mode) and whatever
    else its tables and hooks read. The bench's prompts table declares which become columns;
    the bench's `Design` says which field plays which part in generic analyses."""

    def value(self, name: str | None) -> DesignValue:
        """The value of one design field (None when the prompt has no such field, or `name` is None)."""
        return None if name is None else dict(self.design).get(name)

    def describe(self) -> str:
        """`item 'x', condition=C1, rotation=2`: the prompt's item and set design values, for messages."""
        return ", ".join([f"item {self.item_id!r}", *(f"{k}={v}" for k, v in self.design if v is not None)])


@dataclass(frozen=True)
class Contrast:
    """Two conditions an intervention compares: `source` prompts (whose cue names a group)
    against `dest` prompts (the same items without it)."""

    source: str
    dest: str


@dataclass(frozen=True)
class Design:
    """The parts a bench's design fields (`Prompt.design`, its prompts-table columns) play in the
    analyses generic code runs; every part is optional (None: the bench has no such field).

    A *prompt group* is one item under one value of every design field except `ordering`: the
    prompts that differ only in the option order, which the letter-prior analysis compares."""

    condition: str | None = None
    """The field whose values split the prompts into conditions, analysed apart (letter prior,
    warnings, the letter–text audit, the lens, interventions); None: every prompt is in one
    condition, `ONE_CONDITION`."""
    target: str | None = None
    """The field naming the group a prompt's cue points at (steering vectors, patching pairs)."""
    ordering: str | None = None
    """The field numbering the option orders of a prompt group (a rotation)."""
    contrast: Contrast | None = None
    """The conditions interventions and steering vectors compare unless the config names others;
    None: the config must name them."""
    reference: str | None = None
    """The condition the logit lens reads in a run of several conditions (None, or a run without
    it: the first); a run of one condition reads all its prompts."""
    structured: tuple[str, ...] = ()
    """Text fields holding a JSON object (`{key: value}`): exports decode them into objects, the
    sample browser shows them as a table and filters by their keys."""

    def condition_of(self, prompt: Prompt) -> str:
        """The prompt's condition label."""
        return ONE_CONDITION if self.condition is None else str(prompt.value(self.condition))

    def target_of(self, prompt: Prompt) -> DesignValue:
        """The group the prompt's cue names (None: no cue, or no target field)."""
        return prompt.value(self.target)

    def contrast_of(self, source: str | None, dest: str | None) -> tuple[str, str]:
        """`(source, dest)` conditions of an intervention: the given ones, None replaced by the contrast's."""
        if source is not None and dest is not None:
            return source, dest
        if self.contrast is None:
            raise ProbeInputError("intervention.source and intervention.dest: this bench declares no default "
                                  "conditions to compare; name both")
        return (self.contrast.source if source is None else source, self.contrast.dest if dest is None else dest)


@dataclass(frozen=True)
class RenderedPrompt:
    """A prompt after rendering: the exact token ids every backend receives."""

    prompt: Prompt
    text: str
    """The rendered text including the answer cue."""
    token_ids: np.ndarray
    """`[n_tokens]` int32, read-only: a tuple of Python ints would cost ~9× the memory, and a
    full DiSCo run holds 15,808 of these."""

    def __post_init__(self) -> None:
        ids = np.array(self.token_ids, dtype=np.int32)
        ids.flags.writeable = False
        object.__setattr__(self, "token_ids", ids)


@dataclass(frozen=True)
class LetterScore:
    """Scores of one prompt: full-vocabulary log-probabilities of each option letter."""

    prompt_id: int
    letter_logprobs: tuple[float, ...]
    """log p(letter) under the full-vocabulary softmax, in letter order."""
    greedy_valid: bool
    """Whether the full-vocabulary argmax token is one of the option letters."""
    lens: np.ndarray | None = None
    """`[layer, letter]` letter log-probs through the logit lens (when requested)."""
    activations: np.ndarray | None = None
    """`[captured layer, d_model]` residual stream at the answer position (when requested)."""
    argmax_token_id: int | None = None
    """The full-vocabulary argmax token at the answer position: what the model wanted to say
    when it was not a letter (None: a backend that does not report it)."""
    argmax_logprob: float | None = None
    """Its full-vocabulary log-probability."""


@dataclass(frozen=True)
class LetterIds:
    """Token ids of the option letters, derived in context from a rendered prompt."""

    letters: tuple[str, ...]
    ids: tuple[int, ...]
    cue_token_ids: tuple[int, ...] = field(default=())
    """The last tokens of the rendered prompt that encode the answer cue."""
