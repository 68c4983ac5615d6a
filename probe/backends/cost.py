"""A pass-level cost model of trie scoring: FLOPs, bytes and a roofline time per forward pass.

The plan (`probe.backends.units.score_chunks`) knows every pass before any weight loads: its
rows, each row's cached path length (`start`) and new tokens. A pass of R rows runs
`[pad… path | node …pad]` (`probe.backends.treekv.run_pass`), so with P the longest path and W
the longest node it computes, in every layer:

- the linear layers on R × W padded token slots (2 FLOPs per weight per slot);
- attention of those R × W queries over P + W keys each (QKᵀ and PV: 4 × heads × head_dim
  FLOPs per query–key pair; the mask hides padding but the kernels still compute it, and a
  sliding window is a mask too, so it saves nothing here);
- the float32 LM head only at rows where a prompt ends (one position each).

Bytes: the weights once per pass (in the run's dtype; the head's float32 copy when the head
runs), the KV of the R × (P + W) key slots read by attention, the KV copies around the pass
(the ancestors' paths gathered right-aligned into the pass buffer, the pass's own keys and
values written after them, the paths kept for children), and the activations the layers read
and write.

Time of a pass: a roofline per kind of work, `max(flops / peak, bytes / bandwidth)` for the
linear layers, attention and the head, plus the copies and elementwise traffic at bandwidth,
plus the host's dispatch of the pass's operators. A CPU runs those serially, so they add up;
a GPU runs them while the host dispatches the next ones, so a pass takes the larger of the two.

Left out: tokenisation and the plan itself, the head check, the log-softmax and letter gather,
the score writer, out-of-memory splits, kernel efficiency below the peak (the peaks are data
sheet figures or a measured GEMM rate), cache effects, and multi-GPU placement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from probe.backends.trie import TrieChunk


@dataclass(frozen=True)
class Arch:
    """What the cost of a decoder depends on, from its Hugging Face config."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int

    @classmethod
    def from_config(cls, config: Any) -> Arch:
        """The text decoder's shape (a multimodal config's text part)."""
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        heads = text.num_attention_heads
        return cls(layers=text.num_hidden_layers, hidden=text.hidden_size, intermediate=text.intermediate_size,
                   heads=heads, kv_heads=getattr(text, "num_key_value_heads", None) or heads,
                   head_dim=getattr(text, "head_dim", None) or text.hidden_size // heads, vocab=text.vocab_size)

    @property
    def layer_params(self) -> int:
        """Weights of one layer's linear maps: q, k, v, o and the gated MLP's three."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return self.hidden * (q + 2 * kv) + q * self.hidden + 3 * self.hidden * self.intermediate

    @property
    def kv_width(self) -> int:
        """K and V elements of one token in one layer."""
        return 2 * self.kv_heads * self.head_dim

    @property
    def act_elems(self) -> int:
        """Activation elements one token reads and writes in one layer: two norms and two
        residual adds (3 × hidden each), q/k/v out and RoPE on q and k, the attention output
        into o, the MLP's gate and up out, the gated product (3 × intermediate) and down in."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return 12 * self.hidden + 4 * q + 3 * kv + 6 * self.intermediate


@dataclass(frozen=True)
class PassShape:
    """One forward pass of the plan, as the cost model sees it."""

    starts: tuple[int, ...]
    """Each row's cached path length (its node's first position)."""
    lengths: tuple[int, ...]
    """Each row's new tokens."""
    head_rows: int
    """Rows where a prompt ends: the LM head runs at their last position."""
    kept: int = 0
    """Path tokens (ancestors plus node) kept after the pass for the rows' children."""

    @property
    def width(self) -> int:
        """Padded token slots per row."""
        return max(self.lengths)

    @property
    def keys(self) -> int:
        """Key slots each query attends over (longest path + width)."""
        return max(self.starts) + self.width


def plan_passes(chunks: Sequence[TrieChunk]) -> list[PassShape]:
    """The passes of planned trie chunks, in order."""
    out = []
    for chunk in chunks:
        for step in chunk.steps:
            nodes = [chunk.nodes[i] for i in step]
            out.append(PassShape(starts=tuple(n.start for n in nodes), lengths=tuple(len(n.tokens) for n in nodes),
                                 head_rows=sum(1 for n in nodes if n.ends),
                                 kept=sum(n.stop for n in nodes if n.n_children)))
    return out


@dataclass(frozen=True)
class PassCost:
    """FLOPs and bytes of one pass, by kind of work."""

    linear_flops: float
    attention_flops: float
    head_flops: float
    weight_bytes: float
    """Layer weights once, and the float32 head when it runs."""
    kv_read_bytes: float
    """K and V of every key slot attention reads."""
    copy_bytes: float
    """KV gathered before the pass, written by it and kept after it (read + write)."""
    act_bytes: float
    """Activations the layers read and write, padding included."""

    @property
    def flops(self) -> float:
        return self.linear_flops + self.attention_flops + self.head_flops

    @property
    def bytes(self) -> float:
        return self.weight_bytes + self.kv_read_bytes + self.copy_bytes + self.act_bytes


def pass_cost(arch: Arch, shape: PassShape, dtype_bytes: int) -> PassCost:
    """What one pass computes and moves (see the module docstring for what is counted).

    Formulas, with R rows, W = longest node, K = longest path + W, L layers, b bytes per value:
    linear 2·R·W·L·layer_params; attention 4·R·W·K·L·heads·head_dim; head 2·rows_ending·hidden·vocab
    (float32); KV read R·K·L·kv_width·b; copies (Σ paths + R·P gathered, R·W written in place by
    the pass, and 2·kept)·L·kv_width·b."""
    rows, width, keys, path = len(shape.lengths), shape.width, shape.keys, max(shape.starts)
    slots = rows * width
    kv_token = arch.layers * arch.kv_width * dtype_bytes
    head_weights = arch.vocab * arch.hidden * 4 if shape.head_rows else 0
    gathered = sum(shape.starts) + rows * path  # each row's own path read, R × P padded slots written
    copied = gathered + slots + 2 * shape.kept  # kept paths: read and written
    return PassCost(
        linear_flops=2.0 * slots * arch.layers * arch.layer_params,
        attention_flops=4.0 * slots * keys * arch.layers * arch.heads * arch.head_dim,
        head_flops=2.0 * shape.head_rows * arch.hidden * arch.vocab,
        weight_bytes=float(arch.layers * arch.layer_params * dtype_bytes + head_weights),
        kv_read_bytes=float(rows * keys * kv_token),
        copy_bytes=float(copied * kv_token),
        act_bytes=float(slots * arch.layers * arch.act_elems * dtype_bytes),
    )


def useful_flops(arch: Arch, shape: PassShape) -> float:
    """FLOPs of the pass's real tokens only (no padding; each token attends over its own real
    context, itself included): the numerator of MFU."""
    tokens = sum(shape.lengths)
    context = sum(n * s + n * (n + 1) / 2 for s, n in zip(shape.starts, shape.lengths))
    return (2.0 * tokens * arch.layers * arch.layer_params
            + 4.0 * context * arch.layers * arch.heads * arch.head_dim
            + 2.0 * shape.head_rows * arch.hidden * arch.vocab)
