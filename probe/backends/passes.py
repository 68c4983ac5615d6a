"""One forward pass of trie rows, halved on out-of-memory: shared by the letter and text scorers."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import torch

from probe.backends.batching import BackendStats
from probe.backends.treekv import PassBuffers

T = TypeVar("T")


@dataclass
class PassRunner:
    """Runs a pass and times it into `stats`. After an out-of-memory error the pass is split in
    half and retried — its rows are independent, so the results are unchanged — and no later
    pass tries that many rows again (`row_cap`)."""

    stats: BackendStats
    device: torch.device
    row_cap: int | None = None
    buffers: PassBuffers = field(default_factory=PassBuffers)
    """Storage the passes' caches share for the scorer's life (`probe.backends.treekv`)."""

    def run(self, rows: Sequence[int], forward: Callable[[Sequence[int]], T]) -> list[T]:
        """`forward(rows)`'s output, or its halves' outputs in order after an out-of-memory."""
        if len(rows) > 1 and self.row_cap is not None and len(rows) > self.row_cap:
            return [out for half in halves(rows) for out in self.run(half, forward)]
        t0 = time.perf_counter()
        try:
            out = forward(rows)
        except torch.OutOfMemoryError:
            if len(rows) == 1:
                raise
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
            self.stats.oom_splits += 1
            self.row_cap = max(1, len(rows) // 2)
            return [o for half in halves(rows) for o in self.run(half, forward)]
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.stats.count_batch(len(rows), time.perf_counter() - t0)
        return [out]


def halves(rows: Sequence[int]) -> list[tuple[int, ...]]:
    """The two halves of a pass's rows."""
    mid = len(rows) // 2
    return [tuple(rows[:mid]), tuple(rows[mid:])]
