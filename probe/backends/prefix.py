"""Shared-prefix planning: group prompts that differ only after a common token prefix.

Prompts of one item and condition share everything before the options block (chat header,
question, user info, context header). The backend runs that prefix once per group and only
the rotated suffixes per prompt. This module is pure planning (no torch): which prompts form
a group, how long their common prefix is, and how groups pack into bounded batches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from probe.prompts.prefix import common_prefix_len
from probe.types import RenderedPrompt


@dataclass(frozen=True)
class PrefixGroup:
    """Prompts sharing their first `prefix_len` tokens; each keeps ≥ 1 token of its own."""

    rows: tuple[RenderedPrompt, ...]
    prefix_len: int

    @property
    def max_suffix(self) -> int:
        return max(len(r.token_ids) for r in self.rows) - self.prefix_len

    @property
    def width(self) -> int:
        """Padded length of a row of this group in the suffix pass: prefix + longest suffix."""
        return self.prefix_len + self.max_suffix


def group_by_prefix(prompts: Sequence[RenderedPrompt]) -> list[PrefixGroup]:
    """Group by `Prompt.prefix_key` (first-seen order); the prefix stops one token short of the
    shortest prompt so every row's last position is computed in the suffix pass."""
    by_key: dict[str, list[RenderedPrompt]] = {}
    for r in prompts:
        by_key.setdefault(r.prompt.prefix_key, []).append(r)
    groups = []
    for rows in by_key.values():
        shortest = min(len(r.token_ids) for r in rows)
        plen = min(common_prefix_len([r.token_ids for r in rows]), shortest - 1)
        groups.append(PrefixGroup(rows=tuple(rows), prefix_len=max(plen, 0)))
    return groups


def plan_prefix_batches(
    groups: Sequence[PrefixGroup], batch_tokens: int, max_batch_size: int
) -> list[list[PrefixGroup]]:
    """Pack whole groups into batches whose suffix pass costs `rows × (max prefix + max suffix)`
    ≤ `batch_tokens` and holds ≤ `max_batch_size` rows; groups too large for one batch are
    split into row chunks (each chunk recomputes the shared prefix). Longest groups first."""
    pieces: list[PrefixGroup] = []
    for g in groups:
        per_batch = max(1, min(max_batch_size, batch_tokens // max(g.width, 1)))
        # a chunk of a group still shares the group's prefix (a lower bound of its own)
        pieces += [PrefixGroup(rows=g.rows[i:i + per_batch], prefix_len=g.prefix_len)
                   for i in range(0, len(g.rows), per_batch)]
    pieces.sort(key=lambda g: (-g.width, g.rows[0].prompt.prompt_id))
    batches: list[list[PrefixGroup]] = []
    current: list[PrefixGroup] = []
    n_rows = max_p = max_s = 0
    for g in pieces:
        rows = n_rows + len(g.rows)
        cost = rows * (max(max_p, g.prefix_len) + max(max_s, g.max_suffix))
        if current and (rows > max_batch_size or cost > batch_tokens):
            batches.append(current)
            current, n_rows, max_p, max_s = [], 0, 0, 0
        current.append(g)
        n_rows += len(g.rows)
        max_p, max_s = max(max_p, g.prefix_len), max(max_s, g.max_suffix)
    if current:
        batches.append(current)
    return batches
