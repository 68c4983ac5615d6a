"""Causal interventions inside the scoring forward pass: residual-stream edits after a decoder layer.

An `Edit` adds a vector to (steering) or overwrites (activation patching) the residual stream
after one layer, from a first position to the end of the prompt (the answer position alone
when that is the last). Edits ride on the trie passes: the planner keeps edited positions out
of nodes shared with prompts edited otherwise (`probe.backends.trie.cap_shared`), and a forward
hook applies each row's edit to the columns of its node that lie at or after the edit start,
so later layers' keys and values — which descendants attend to — carry the edit exactly as in a
one-prompt forward with the same hook.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from probe.backends.trie import TrieChunk


@dataclass(frozen=True, eq=False)
class Edit:
    """One prompt's intervention."""

    layer: int
    """Decoder layer (0-based) whose output is edited."""
    start: int
    """First edited position (absolute, 0-based); every later position of the prompt is edited too."""
    vector: torch.Tensor
    """`[d_model]`: added (`add`) or written (`set`) at each edited position."""
    mode: Literal["add", "set"]
    key: Hashable
    """Prompts whose edits have equal keys and starts may share edited positions."""

    @property
    def sharing(self) -> tuple[Hashable, ...]:
        """What two prompts' edits must agree in to share edited positions: the same start, key,
        layer, mode and vector object."""
        return self.start, self.key, self.layer, self.mode, id(self.vector)


@dataclass(frozen=True)
class InterventionPlan:
    """What the HF scorer does besides scoring: steering edits applied while scoring, and the
    layers activation patching writes (`HFScorer.patch`)."""

    steer: Mapping[int, Edit] = field(default_factory=dict)
    """Prompt id → its steering edit."""
    patch_layers: tuple[int, ...] = ()
    """Decoder layers (negative: from the end) whose output `HFScorer.patch` overwrites, one at a time."""


def node_edits(chunk: TrieChunk, edits: Mapping[int, Edit]) -> dict[int, Edit]:
    """The edit that applies to each node of `chunk` with edited positions: the edit of the
    prompts below it that reach into it (equal for all of them, by the planner's cap)."""
    out: dict[int, Edit] = {}
    for i, n in enumerate(chunk.nodes):
        for r in n.ends:
            edit = edits.get(r.prompt.prompt_id)
            k = i
            while edit is not None and k >= 0 and chunk.nodes[k].stop > edit.start:
                held = out.setdefault(k, edit)
                assert held.sharing == edit.sharing, "a node is shared only by prompts edited alike"
                k = chunk.nodes[k].parent
    return out


class EditHook:
    """Forward hooks applying the armed rows' edits after their layers."""

    def __init__(self, layers_module: Any, layers: Sequence[int]) -> None:
        self._armed: dict[int, list[tuple[int, int, int, Edit]]] = {}
        self._handles = [layers_module[i].register_forward_hook(self._hook(i)) for i in sorted(set(layers))]

    def _hook(self, index: int):
        def edit(module: Any, args: Any, output: Any) -> Any:
            rows = self._armed.get(index)
            if not rows:
                return None
            hidden = output[0] if isinstance(output, tuple) else output
            hidden = hidden.clone()
            for row, lo, hi, e in rows:
                v = e.vector.to(device=hidden.device, dtype=hidden.dtype)
                if e.mode == "add":
                    hidden[row, lo:hi] += v
                else:
                    hidden[row, lo:hi] = v
            return (hidden, *output[1:]) if isinstance(output, tuple) else hidden
        return edit

    def arm(self, chunk: TrieChunk, rows: Sequence[int], edits: Mapping[int, Edit]) -> None:
        """Edit the next forward pass of nodes `rows` of `chunk` (row j = node rows[j]); each
        row's edited columns run from its edit start to the end of its node, not into the
        right padding after it."""
        self._armed = {}
        for j, i in enumerate(rows):
            e = edits.get(i)
            if e is None:
                continue
            n = chunk.nodes[i]
            col = max(0, e.start - n.start)
            if e.mode == "set":  # a patch writes the answer position only: the node's last token
                assert e.start == n.stop - 1, "a patched position is the last of its node"
            self._armed.setdefault(e.layer, []).append((j, col, len(n.tokens), e))

    def disarm(self) -> None:
        self._armed = {}

    def close(self) -> None:
        for h in self._handles:
            h.remove()
