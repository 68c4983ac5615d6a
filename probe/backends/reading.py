"""The answer readings a run can make and what a backend can do, as typed values.

A reading (`backend.mode`) and a backend's capabilities are named once, here and in each
backend's spec (`probe.backends.specs`); the pipeline and the readers of stored runs branch on
these values, never on the config's strings. Adding a reading: a member of `Reading`, its
properties, and the pass that executes it (`probe.pipeline.plan`). Adding a backend: its spec
class with its `capabilities`, one entry in `BACKENDS`, its factory branch.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from probe.errors import ProbeInputError, bounded_repr


class Reading(str, Enum):
    """How a run reads the model's answer (`backend.mode`); each value is the config's string,
    so stored manifests and config files hold what they always held."""

    LETTERS = "letters"
    """Exact letter log-probs at the answer position (forced choice)."""
    TEXT = "text"
    """Each option's text scored as a continuation; no letter is read."""
    LETTERS_TEXT = "letters+text"
    """Both readings of one run, paired prompt by prompt."""
    GENERATE = "generate"
    """Decode an answer and parse it (the fallback; open answers always)."""

    def __str__(self) -> str:
        return self.value

    @property
    def reads_letters(self) -> bool:
        """Whether the letter log-probs are read (a letter scoring pass runs)."""
        return self in (Reading.LETTERS, Reading.LETTERS_TEXT)

    @property
    def reads_text(self) -> bool:
        """Whether the options' texts are scored as continuations (a text scoring pass runs)."""
        return self in (Reading.TEXT, Reading.LETTERS_TEXT)

    @property
    def generates(self) -> bool:
        """Whether answers are decoded instead of scored."""
        return self is Reading.GENERATE

    @classmethod
    def parse(cls, value: object, where: str) -> Reading:
        """The reading `value` names (a config's or a stored manifest's string); `where` names the
        field in the one-line error for any other value."""
        try:
            return cls(value)
        except ValueError:
            raise ProbeInputError(f"{where}: expected one of {[r.value for r in cls]}, got {bounded_repr(value)}"
                                  ) from None


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do, declared by its spec class (`HFBackendSpec.capabilities`, …)."""

    on_weights: bool
    """It runs probe's own forward passes on the weights loaded into this process (so the device
    is checked and the weights load before it starts, and the manifest records which computation
    ran, `backend.path`); False: it loads and runs its own (the vLLM engine)."""
    prefix_reuse: bool
    """Prompts that share a prefix share its computation (a KV trie or a prefix cache)."""
    text_scoring: bool
    """It scores option texts as continuations (`Reading.TEXT`, `Reading.LETTERS_TEXT`)."""
    hooks: bool
    """Its letter pass takes forward-pass hooks: logit lens, captured layers, patching, steering."""
    generation: bool
    """It decodes answers (`Reading.GENERATE`, open answers)."""
