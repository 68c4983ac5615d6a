"""Shared token prefixes of rendered prompts (pure numpy, no model).

Prompts of one item and condition share everything before the options block (chat header,
question, user lines). Backends run such a prefix once; the prompts table records its length.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from probe.types import RenderedPrompt


def common_prefix_len(seqs: Sequence[Sequence[int]]) -> int:
    """Length of the longest common prefix of token sequences."""
    first = np.asarray(seqs[0])
    n = min(len(s) for s in seqs)
    for s in seqs[1:]:
        differ = np.nonzero(np.asarray(s[:n]) != first[:n])[0]
        n = int(differ[0]) if len(differ) else n
    return n


def shared_prefix_lengths(rendered: Sequence[RenderedPrompt]) -> list[int]:
    """Per prompt, the number of leading tokens it shares with every prompt of its prefix group."""
    members: dict[str, list[np.ndarray]] = {}
    for r in rendered:
        members.setdefault(r.prompt.prefix_key, []).append(r.token_ids)
    common = {key: common_prefix_len(seqs) for key, seqs in members.items()}
    return [common[r.prompt.prefix_key] for r in rendered]
