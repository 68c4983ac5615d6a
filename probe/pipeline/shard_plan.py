"""`bench.shard=i/n`: one of n runs that together score a bench, merged by `python -m probe merge`.

A shard owns whole units of the backend's plan over *all* prompts (`probe.backends.units`),
joined so that every item's prompts stay in one shard, and skips the rest exactly as a resumed
run skips what it has. Each unit it owns is therefore computed as in an unsharded run, and the
merged scores equal the unsharded run's bit for bit (same hardware and software; vLLM within its
own tolerance, since its engine batches as it likes).

A shard records the sha256 of each of its output files in its manifest (`shard.sha256`) just
before `DONE`; the merge reads a shard only when its files are exactly those, unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from probe.errors import ProbeInputError
from probe.files import sha256_file
from probe.results.layout import SHARD_FILES
from probe.results.manifest import Manifest
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


def output_checksums(run_dir: Path) -> dict[str, str]:
    """sha256 of each of the shard's output files (`SHARD_FILES` present in `run_dir`)."""
    return {name: sha256_file(run_dir / name) for name in SHARD_FILES if (run_dir / name).is_file()}


def check_outputs(run_dir: Path, manifest: Manifest) -> None:
    """Raise `ProbeInputError` naming the shard and the file unless the shard's output files are
    exactly those its manifest recorded at `DONE`, byte for byte."""
    shard = manifest.shard
    assert shard is not None, "only a shard's manifest records its outputs"
    name = f"{run_dir}: shard {shard.index}/{shard.count}"
    again = "score the shard again (remove its directory and rerun its command)"
    recorded = shard.sha256
    if not isinstance(recorded, dict):
        raise ProbeInputError(f"{name} records no checksums of its outputs (finished by an older probe); {again}")
    for file in SHARD_FILES:
        there, want = (run_dir / file).is_file(), recorded.get(file)
        if want is None and there:
            raise ProbeInputError(f"{name}: {file} was not there when the shard finished; remove it, or {again}")
        if want is not None and not there:
            raise ProbeInputError(f"{name}: {file} is missing (the shard finished with it); {again}")
        if want is not None and sha256_file(run_dir / file) != want:
            raise ProbeInputError(f"{name}: {file} changed since the shard finished (sha256 {want[:12]}… recorded); "
                                  f"{again}")
