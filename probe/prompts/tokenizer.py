"""What probe asks of a tokenizer: the calls rendering, letter-id derivation, text scoring,
generation and provenance make. A transformers tokenizer (`AutoTokenizer`,
`PreTrainedTokenizerFast`) satisfies it; so does a test's stand-in with these members.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, overload

if TYPE_CHECKING:
    import torch

ChatMessage = Mapping[str, str]
"""One chat turn: `{"role": "system" | "user" | "assistant", "content": text}`."""


class Tokenizer(Protocol):
    """Text ↔ token ids, and the model's chat template."""

    name_or_path: str
    """The checkpoint or directory it was loaded from (error messages and the manifest)."""
    chat_template: str | None
    """The Jinja chat template; None for a base model without one."""
    pad_token_id: int | None
    eos_token_id: int | None

    @overload
    def __call__(self, text: str, *, add_special_tokens: bool = True) -> Mapping[str, list[int]]: ...

    @overload
    def __call__(self, text: list[str], *, add_special_tokens: bool = True) -> Mapping[str, list[list[int]]]: ...

    def __call__(self, text: str | list[str], *, add_special_tokens: bool = True
                 ) -> Mapping[str, list[int]] | Mapping[str, list[list[int]]]:
        """Token ids of a text (`["input_ids"]`: `[token]`) or of each text of a list
        (`[text][token]`); `add_special_tokens` adds the model's BOS where it has one."""
        ...

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """The text of a token id sequence."""
        ...

    def batch_decode(self, sequences: torch.Tensor | Sequence[Sequence[int]],
                     skip_special_tokens: bool = False) -> list[str]:
        """The text of each `[row][token]` sequence."""
        ...

    def apply_chat_template(self, conversation: Sequence[ChatMessage], *, tokenize: bool = True,
                            add_generation_prompt: bool = False, continue_final_message: bool = False,
                            **template_kwargs: object) -> str:
        """The conversation rendered by the chat template (probe always passes `tokenize=False`:
        the text, tokenised separately so every backend sees the same ids)."""
        ...

    def get_vocab(self) -> dict[str, int]:
        """Token text → id over the whole vocabulary."""
        ...
