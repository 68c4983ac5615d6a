"""Record types shared by every seam: bench loaders → designs → backends → results → metrics.

All records are frozen dataclasses so a prompt cannot change between the moment it is
rendered and the moment its scores are written next to it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

LETTERS: tuple[str, ...] = tuple("ABCDEFGHIJ")
"""Option letters in display order; a K-option bench uses the first K."""

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
class Prompt:
    """One (item, condition, ordering) presentation, before chat-template rendering.

    `order[i]` is the index (into `Item.options`) of the option shown at letter i, so
    `groups[i]` is the group a choice of letter i counts for.
    """

    prompt_id: int
    item_id: str
    condition: str
    target: str | None
    rotation: int
    ctx_rotation: int | None
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
    extra: tuple[tuple[str, str | None], ...] = ()
    """Bench-specific fields its prompts table records (e.g. LocQA's template and language)."""

    def extra_value(self, name: str) -> str | None:
        """The value of one `extra` field (None when absent)."""
        return dict(self.extra).get(name)


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
