"""`bench.shard=i/n`: one of n runs that together score a bench, merged by `python -m probe.merge`.

A shard owns whole units of the backend's plan over *all* prompts (`probe.backends.units`),
joined so that every item's prompts stay in one shard, and skips the rest exactly as a resumed
run skips what it has. Each unit it owns is therefore computed as in an unsharded run, and the
merged scores equal the unsharded run's bit for bit (same hardware and software; vLLM within its
own tolerance, since its engine batches as it likes).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from probe.errors import ProbeInputError
from probe.types import RenderedPrompt

_FORM = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (0-based)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ProbeInputError(f"bench.shard: {self}: expected i/n with 0 ≤ i < n (e.g. 0/8 … 7/8)")

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, value: object) -> Shard:
        """`"i/n"` (as written on the command line) → the shard."""
        m = _FORM.fullmatch(str(value))
        if m is None:
            raise ProbeInputError(f"bench.shard: expected i/n (e.g. 3/8), got {value!r}")
        return cls(int(m.group(1)), int(m.group(2)))


def shard_prompts(units: Sequence[Sequence[RenderedPrompt]], shard: Shard) -> list[RenderedPrompt]:
    """The prompts shard `shard` owns, given the backend's units of work in run order.

    Units that share an item are joined into one block (a shard holds whole items, so its own
    metrics-free directory still describes complete questions); blocks are dealt out in run
    order, contiguous and balanced by prompt tokens: block j goes to shard
    ⌊n · (tokens before j + half of j's) / all tokens⌋. A shard can be empty when n exceeds
    the number of blocks."""
    parent = list(range(len(units)))

    def root(u: int) -> int:
        while parent[u] != u:
            parent[u] = parent[parent[u]]
            u = parent[u]
        return u

    first_unit: dict[str, int] = {}
    for u, unit in enumerate(units):
        for r in unit:
            other = first_unit.setdefault(r.prompt.item_id, u)
            a, b = root(other), root(u)
            if a != b:
                parent[max(a, b)] = min(a, b)
    blocks: dict[int, list[int]] = {}
    for u in range(len(units)):
        blocks.setdefault(root(u), []).append(u)  # keyed by the block's first unit: run order
    cost = np.array([sum(len(r.token_ids) for u in members for r in units[u]) for members in blocks.values()],
                    dtype=np.float64)
    total = cost.sum()
    if total == 0:
        return []
    middle = np.cumsum(cost) - cost / 2
    owner = np.minimum((shard.count * middle / total).astype(np.int64), shard.count - 1)
    return [r for members, o in zip(blocks.values(), owner) if o == shard.index for u in members for r in units[u]]
