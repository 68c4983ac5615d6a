"""One forward pass of a prompt trie on a Hugging Face decoder (see `probe.backends.trie`).

A pass runs a set of trie nodes as rows. Each row reads `[pad… ancestors | node …pad]`: the
KV of the node's whole ancestor path sits right-aligned in the cache, and the node's tokens
follow it at explicit position ids. Distances between real tokens are those of the unpadded
prompt, so sliding-window layers (Gemma 3) stay exact, and the position ids keep RoPE exact.
After the pass, each node that has children keeps the KV of its own whole path (ancestors
plus itself) until its last child has run; a path, not just the node, because a grandparent
may be freed while its grandchildren still wait. For generation the paths where prompts end
are kept too: they become each prompt's cache for `generate`.

A pass's cache lives in one buffer per device (`PassBuffers`), reused by every pass of a run:
the ancestors are copied in once and each layer writes its new keys and values in place after
them (`PassLayer`). Building the cache by concatenation instead copies the ancestors' KV three
times per pass and, on CPU, touches freshly mapped pages each time; the buffer's views have the
shape and strides the concatenation had, so attention reads the same numbers the same way.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from probe.backends.fastpass import FastLayers, Reads
from probe.backends.trie import TrieChunk

PathKV = list[torch.Tensor]
"""The KV of a node's path, one tensor `[layers, 2 (K, V), kv_heads, path_len, head_dim]` per
run of consecutive layers on one device (one run unless accelerate spread the model over GPUs)."""


@dataclass
class PassBuffers:
    """Storage for passes' caches, one flat buffer per device run of layers, grown on demand and
    reused: a pass's cache is a view of its start."""

    flat: dict[int, torch.Tensor] = field(default_factory=dict)

    def take(self, group: int, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A contiguous tensor of `shape` over group `group`'s buffer (contents undefined)."""
        n = math.prod(shape)
        buf = self.flat.get(group)
        if buf is None or buf.numel() < n or buf.dtype != dtype or buf.device != device:
            self.flat.pop(group, None)  # free the old buffer before allocating its successor
            buf = self.flat[group] = torch.empty(n, dtype=dtype, device=device)
        return buf[:n].view(shape)


class PassLayer(DynamicLayer):
    """One layer's cache in a pass: `keys`/`values` `[rows, kv_heads, width, head_dim]` views
    whose first `past` slots hold the ancestors; `update` writes the pass's own keys and values
    in place after them and returns the views up to there (what `DynamicLayer` would return by
    concatenation, without the copy)."""

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, past: int) -> None:
        super().__init__()
        self._slots, self._past = (keys, values), past
        self.keys, self.values = keys[:, :, :past], values[:, :, :past]
        self.device, self.dtype, self.is_initialized = keys.device, keys.dtype, True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        stop = self._past + key_states.shape[-2]
        keys, values = self._slots
        keys[:, :, self._past:stop].copy_(key_states)
        values[:, :, self._past:stop].copy_(value_states)
        self.keys, self.values = keys[:, :, :stop], values[:, :, :stop]
        return self.keys, self.values


@dataclass
class KVStore:
    """Path KV of the chunk's nodes that still have children to run."""

    paths: dict[int, PathKV] = field(default_factory=dict)
    waiting: dict[int, int] = field(default_factory=dict)
    """Node → children not yet run."""
    groups: list[list[int]] | None = None
    """Layer indices by device run, learnt from the first pass."""
    buffers: PassBuffers = field(default_factory=PassBuffers)

    @classmethod
    def for_chunk(cls, chunk: TrieChunk, keep_ends: bool = False, buffers: PassBuffers | None = None) -> KVStore:
        """A store for `chunk`; with `keep_ends`, the paths of nodes where prompts end are kept
        to the end (generation hands them to `generate` as the prompts' cache). Pass the
        run's `buffers` to reuse its pass storage across chunks."""
        return cls(waiting={i: n.n_children + (keep_ends and bool(n.ends)) for i, n in enumerate(chunk.nodes)
                            if n.n_children or (keep_ends and n.ends)}, buffers=buffers or PassBuffers())

    def ran(self, chunk: TrieChunk, rows: Sequence[int]) -> None:
        """Release a parent's path once all its children have run."""
        for i in rows:
            parent = chunk.nodes[i].parent
            if parent >= 0:
                self.waiting[parent] -= 1
                if self.waiting[parent] == 0:
                    del self.paths[parent]

    def keep(self, cache: Any, row: int, lo: int, hi: int) -> PathKV:
        """Slots `lo:hi` of `row` of a pass's cache, per device run of layers."""
        layers = cache.layers
        if self.groups is None:
            self.groups = _device_runs([layer.keys.device for layer in layers])
        out = []
        for group in self.groups:  # one stack, one copy (a stack of per-layer stacks copied twice)
            kv = torch.stack([t for k in group for t in (layers[k].keys[row, :, lo:hi],
                                                          layers[k].values[row, :, lo:hi])])
            out.append(kv.view(len(group), 2, *kv.shape[1:]))
        return out

    def right_aligned(self, paths: Sequence[PathKV | None], width: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer `(K, V)` of `[rows, kv_heads, width, head_dim]` with row r's path at the
        right end (None: an empty row). Padding slots stay zero: the mask hides them, and finite
        zeros (unlike the NaNs a fully masked query can produce) cannot leak into a softmax."""
        fresh = lambda g, shape, dtype, device: torch.empty(shape, dtype=dtype, device=device)  # noqa: E731
        return [(kv[k, 0], kv[k, 1]) for kv in self._aligned(paths, width, 0, fresh) for k in range(kv.shape[0])]

    def pass_cache(self, paths: Sequence[PathKV | None], past: int, width: int) -> DynamicCache:
        """A cache of `past + width` slots per row over `buffers`, laid out as `right_aligned`
        lays out its first `past`; the pass writes its own `width` slots after them."""
        layers = [PassLayer(kv[k, 0], kv[k, 1], past) for kv in self._aligned(paths, past, width, self.buffers.take)
                  for k in range(kv.shape[0])]
        cache = DynamicCache()
        cache.layers = layers  # all layers given: the cache appends none of its own
        return cache

    def _aligned(self, paths: Sequence[PathKV | None], past: int, width: int,
                 alloc: Callable[[int, tuple[int, ...], torch.dtype, torch.device], torch.Tensor]) -> list[torch.Tensor]:
        """Per device run of layers, `[layers, 2, rows, kv_heads, past + width, head_dim]` from
        `alloc(run, shape, dtype, device)` with row r's path ending at slot `past` and zeros
        before it (the last `width` slots are left as they are)."""
        assert self.groups is not None
        sample = next(p for p in paths if p is not None)
        out = []
        for g, group in enumerate(self.groups):
            _, _, heads, _, dim = sample[g].shape
            kv = alloc(g, (len(group), 2, len(paths), heads, past + width, dim), sample[g].dtype, sample[g].device)
            kv[..., :past, :].zero_()
            for row, path in enumerate(paths):
                if path is not None:
                    kv[:, :, row, :, past - path[g].shape[3]:past] = path[g]
            out.append(kv)
        return out


def _device_runs(devices: Sequence[torch.device]) -> list[list[int]]:
    """Indices of consecutive equal devices, grouped."""
    runs: list[list[int]] = []
    for k, dev in enumerate(devices):
        if runs and devices[runs[-1][-1]] == dev:
            runs[-1].append(k)
        else:
            runs.append([k])
    return runs


def right_pad(seqs: Sequence[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`(ids [n, width], mask [n, width], lengths [n])`, zeros after each sequence."""
    lengths = torch.tensor([len(s) for s in seqs])
    ids = torch.zeros((len(seqs), int(lengths.max())), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.from_numpy(np.asarray(s, dtype=np.int64))
    mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).long()
    return ids, mask, lengths


def decoder_and_cache_kw(model: Any) -> tuple[Any, str]:
    """The model's decoder stack and the name its forward gives the KV cache argument
    (transformers renamed `past_key_values` to `cache` in 5.2x; use whichever it takes)."""
    decoder = model.get_decoder()
    params = inspect.signature(decoder.forward).parameters
    return decoder, "cache" if "cache" in params else "past_key_values"


def run_pass(decoder: Any, cache_kw: str, chunk: TrieChunk, rows: Sequence[int],
             store: KVStore, fast: FastLayers | None = None, reads: Reads | None = None,
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Run nodes `rows` of `chunk` (their ancestors' paths must be in `store`); return the
    last hidden states `[rows, width, d]` and each row's last real position. With `fast`
    (`probe.backends.fastpass`) the pass runs the fused layers, and with `reads` only those
    positions of the returned hidden states are the model's."""
    dev = decoder.get_input_embeddings().weight.device
    nodes = [chunk.nodes[i] for i in rows]
    p_max = max(n.start for n in nodes)  # from Python ints: no device sync
    starts = torch.tensor([n.start for n in nodes], device=dev)
    ids, node_mask, lengths = right_pad([n.tokens for n in nodes])
    if p_max:
        parents = [store.paths[n.parent] if n.parent >= 0 else None for n in nodes]
        cache = store.pass_cache(parents, p_max, ids.shape[1])
    else:
        cache = DynamicCache()
    ancestor_mask = (torch.arange(p_max, device=dev)[None, :] >= (p_max - starts)[:, None]).long()
    positions = starts[:, None] + torch.arange(ids.shape[1], device=dev)[None, :]
    with fast.active(reads) if fast is not None else contextlib.nullcontext():
        out = decoder(input_ids=ids.to(dev), attention_mask=torch.cat([ancestor_mask, node_mask.to(dev)], dim=1),
                      position_ids=positions, **{cache_kw: cache}, use_cache=True)
    new_cache = out.cache if hasattr(out, "cache") else out.past_key_values
    for j, i in enumerate(rows):
        if i in store.waiting:
            store.paths[i] = store.keep(new_cache, j, p_max - nodes[j].start, p_max + len(nodes[j].tokens))
    return out.last_hidden_state, lengths - 1
