"""The fast path of a trie pass (`backend.fast_path`, `auto` by default): the same decoder, less work per token.

While a pass runs, the attention and MLP modules of the decoder's layers run these forwards
instead of their own (the decoder's skeleton — embedding, rotary tables, masks, norms, the
cache — stays the model's):

- **fused projections**: Q, K and V come from one matrix product, and so do the MLP's gate and
  up projections. The fused weight is one tensor and the modules' own weights become views of
  its rows, so no weight is stored twice and the model's own forward reads the same numbers.
- **the last layer only where it is read**: a pass's output is read at few positions (each
  prompt's last token, the text scorer's sites), while every position's keys and values are
  kept. So the last layer computes attention everywhere (its keys and values go to the cache)
  but its output projection and MLP only at the positions read; the other positions of the
  returned hidden states are not the model's and must not be read.
- **grouped-query attention without copies** on CPU (SDPA's `enable_gqa`), where the eager path
  repeats each key/value head for its query heads; on CUDA a masked `enable_gqa` falls back to
  the slowest kernel, so there the heads are repeated as before.
- **packed products** on CPU (float32): every projection goes through oneDNN's matrix product
  with its weight packed once, at fusing, into the layout oneDNN's kernels read, instead of the
  default BLAS on the plain weight. That costs one more copy of the decoder's projection
  weights in memory; where torch has no oneDNN, the plain products run.

The results differ from the eager path's in the last bits only (a fused or oneDNN product sums
in another order): within 1e-5 nats on letters and texts, tested, and as close to a float64
forward as the eager path (`probe.backends.reference`; the default rule, docs/performance.md),
which is why `auto` runs it where the packed products apply. The head check compares
this path with the model's own forward, so a wrong fast path stops a run. Architectures not
listed in `SUPPORTED` keep the eager path.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

log = logging.getLogger(__name__)

SUPPORTED: frozenset[str] = frozenset({"LlamaAttention", "MistralAttention", "Qwen2Attention", "Gemma3Attention"})
"""Attention classes whose forward the fast one replicates (Q/K/V/O projections, optional
q/k norms, RoPE, a cache `update`, no logit softcapping)."""

Reads = tuple[torch.Tensor, torch.Tensor]
"""`(rows, columns)` of the positions whose last hidden state the caller reads."""


@dataclass(frozen=True)
class FastSteps:
    """The steps the fast path takes on top of the fused projections (all of them in a run;
    `scripts/bench_scoring.py --fast-steps` measures them one at a time)."""

    shared_kv_heads: bool = True
    """Grouped-query attention without repeating K/V (on CPU; CUDA repeats them anyway)."""
    last_layer_reads: bool = True
    """The last layer's output projection and MLP only at the positions read."""
    packed_products: bool = True
    """On CPU in float32, the products through oneDNN with weights packed once."""


@dataclass(frozen=True)
class _Packed:
    """One layer's projection weights, fused as in `_Layer`, in oneDNN's layout (`pack`)."""

    qkv: torch.Tensor
    o: torch.Tensor
    gate_up: torch.Tensor
    down: torch.Tensor


@dataclass(frozen=True)
class _Layer:
    attn: Any
    mlp: Any
    qkv: torch.Tensor
    qkv_bias: torch.Tensor | None
    gate_up: torch.Tensor
    packed: _Packed | None = None


class FastLayers:
    """The fused weights of a decoder's layers and the forwards that use them."""

    def __init__(self, layers: list[_Layer], gqa_copies: bool, steps: FastSteps) -> None:
        self._layers = layers
        self._gqa_copies = gqa_copies
        self.steps = steps

    @classmethod
    def of(cls, decoder: Any, steps: FastSteps = FastSteps()) -> FastLayers | None:
        """Fuse `decoder`'s projections in place (weights become views of the fused tensors);
        None, with the reason logged, where the architecture is not supported."""
        reason = _unsupported(decoder)
        if reason:
            log.info("backend.fast_path: %s; the eager path runs", reason)
            return None
        weight = decoder.get_input_embeddings().weight
        packed = steps.packed_products and packed_products_available(weight)
        layers = [_fuse(layer, packed) for layer in decoder.layers]
        return cls(layers, gqa_copies=weight.device.type != "cpu" or not steps.shared_kv_heads, steps=steps)

    @property
    def packed(self) -> bool:
        """Whether the products run on packed weights (`FastSteps.packed_products`, where it applies)."""
        return self._layers[0].packed is not None

    @contextmanager
    def active(self, reads: Reads | None) -> Iterator[None]:
        """The fused forwards on every layer while the block runs; with `reads`, the last layer's
        output projection and MLP run only at those positions."""
        last = len(self._layers) - 1
        try:
            for k, layer in enumerate(self._layers):
                at = reads if k == last and self.steps.last_layer_reads else None
                layer.attn.forward = types.MethodType(_attention(layer, self._gqa_copies, at), layer.attn)
                layer.mlp.forward = types.MethodType(_mlp(layer, at), layer.mlp)
            yield
        finally:
            for layer in self._layers:
                layer.attn.__dict__.pop("forward", None)
                layer.mlp.__dict__.pop("forward", None)


def _unsupported(decoder: Any) -> str | None:
    """Why the fast path cannot run `decoder` (None: it can)."""
    config = decoder.config
    if getattr(config, "_attn_implementation", None) != "sdpa":
        return f"attention implementation {getattr(config, '_attn_implementation', None)!r} (expected sdpa)"
    for layer in decoder.layers:
        attn, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
        name = type(attn).__name__
        if name not in SUPPORTED:
            return f"attention {name} is not one of {sorted(SUPPORTED)}"
        if getattr(attn, "attn_logit_softcapping", None) is not None:
            return "attention logit softcapping"
        if not all(hasattr(mlp, p) for p in ("gate_proj", "up_proj", "down_proj", "act_fn")):
            return f"MLP {type(mlp).__name__} has no gate/up/down projections"
        if mlp.gate_proj.bias is not None or mlp.up_proj.bias is not None:
            return "MLP projections with bias"
        if len({p.device for p in (attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight)}) > 1:
            return "a layer's projections on several devices"
    return None


def wanted(setting: bool | str, weight: torch.Tensor) -> bool:
    """Whether `backend.fast_path` = `setting` asks for the fast path on a model whose weights are
    like `weight`: true always, `auto` where the packed products apply (`packed_products_available`:
    there it meets the float64 rule, docs/performance.md), false never."""
    return setting is True or (setting == "auto" and packed_products_available(weight))


def path_name(fast: FastLayers | None) -> str:
    """The computation a scorer runs, as the manifest names it (`backend.path`): `eager` (no
    fast layers: off, or not applicable), `fast` (fused forwards, plain products) or
    `fast+packed` (and oneDNN's products on packed weights)."""
    if fast is None:
        return "eager"
    return "fast+packed" if fast.packed else "fast"


PACK_OP, PRODUCT_OP = (getattr(torch.ops.mkldnn, name, None)
                       for name in ("_reorder_linear_weight", "_linear_pointwise"))
"""oneDNN's packed-weight matrix product: torch ops with no public API (torch's compiler,
inductor, emits them for CPU linear layers), looked up by name so that a torch built without
them runs the plain products."""


def packed_products_available(weight: torch.Tensor) -> bool:
    """Whether the packed (oneDNN) products apply to a model whose weights are like `weight`: on
    CPU, in float32 (what CPU runs use; other dtypes are not measured), with a torch built with
    oneDNN. On the CPUs measured (docs/performance.md) oneDNN's kernels on a packed weight beat
    the default BLAS at a small model's shapes, most on passes of few rows."""
    return (weight.device.type == "cpu" and weight.dtype == torch.float32
            and torch.backends.mkldnn.is_available() and PACK_OP is not None and PRODUCT_OP is not None)


def pack(weight: torch.Tensor) -> torch.Tensor:
    """`weight` (`[out, in]`, as `F.linear` takes it) in oneDNN's layout, for `product`."""
    return PACK_OP(weight, None)


def product(x: torch.Tensor, weight: torch.Tensor, packed: torch.Tensor | None,
            bias: torch.Tensor | None = None) -> torch.Tensor:
    """`F.linear(x, weight, bias)`, through oneDNN on `packed` (`pack(weight)`) when given."""
    if packed is None:
        return F.linear(x, weight, bias)
    out = PRODUCT_OP(x.reshape(-1, x.shape[-1]), packed, bias, "none", [], "")
    return out.view(*x.shape[:-1], out.shape[-1])


def _fuse(layer: Any, packed: bool) -> _Layer:
    """One layer's fused Q/K/V and gate/up weights (the modules' weights become their row
    views), and with `packed` all four projections' weights packed for oneDNN."""
    attn, mlp = layer.self_attn, layer.mlp
    qkv = _fused_rows([attn.q_proj, attn.k_proj, attn.v_proj])
    bias = None
    if attn.q_proj.bias is not None:
        bias = torch.cat([attn.q_proj.bias.data, attn.k_proj.bias.data, attn.v_proj.bias.data])
        _rebind(bias, [attn.q_proj, attn.k_proj, attn.v_proj], "bias")
    gate_up = _fused_rows([mlp.gate_proj, mlp.up_proj])
    weights = (qkv, attn.o_proj.weight.data, gate_up, mlp.down_proj.weight.data)
    return _Layer(attn, mlp, qkv, bias, gate_up, _Packed(*map(pack, weights)) if packed else None)


def _fused_rows(linears: list[Any]) -> torch.Tensor:
    fused = torch.cat([m.weight.data for m in linears])
    _rebind(fused, linears, "weight")
    return fused


def _rebind(fused: torch.Tensor, linears: list[Any], name: str) -> None:
    """Each module's `name` parameter becomes a view of its rows of `fused` (same values; the
    separate copies are freed)."""
    a = 0
    for m in linears:
        param = getattr(m, name)
        b = a + param.shape[0]
        param.data = fused[a:b]
        a = b


def _attention(layer: _Layer, gqa_copies: bool, reads: Reads | None) -> Any:
    """The fused attention forward of one layer (see the module docstring)."""
    attn = layer.attn
    n_q = attn.q_proj.weight.shape[0]
    n_kv = attn.k_proj.weight.shape[0]
    o = attn.o_proj
    packed_qkv, packed_o = (layer.packed.qkv, layer.packed.o) if layer.packed else (None, None)

    def forward(self: Any, hidden_states: torch.Tensor, position_embeddings: Any = None,
                attention_mask: torch.Tensor | None = None, cache: Any = None, past_key_values: Any = None,
                **kwargs: Any) -> tuple[torch.Tensor, None]:
        cache = cache if cache is not None else past_key_values
        shape = hidden_states.shape[:-1]
        qkv = product(hidden_states, layer.qkv, packed_qkv, layer.qkv_bias)
        q, k, v = (t.view(*shape, -1, self.head_dim).transpose(1, 2) for t in qkv.split([n_q, n_kv, n_kv], dim=-1))
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        cos, sin = position_embeddings
        q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx, kwargs=kwargs)
        out = _sdpa(q, k, v, attention_mask, self.scaling, self.num_key_value_groups, gqa_copies)
        out = out.transpose(1, 2).reshape(*shape, -1)
        if reads is None:
            return product(out, o.weight, packed_o, o.bias), None
        at = _on(reads, out.device)
        full = torch.zeros(*shape, o.weight.shape[0], dtype=out.dtype, device=out.device)
        full[at] = product(out[at], o.weight, packed_o, o.bias)
        return full, None

    return forward


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding as the models apply it (`x·cos + rotate_half(x)·sin`)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos.unsqueeze(1) + rotated * sin.unsqueeze(1)


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float,
          groups: int, gqa_copies: bool) -> torch.Tensor:
    """SDPA as the models' sdpa attention calls it, with grouped-query heads shared in place."""
    gqa = groups > 1 and not gqa_copies
    if groups > 1 and gqa_copies:
        k, v = (t.repeat_interleave(groups, dim=1) for t in (k, v))
    causal = mask is None and q.shape[2] > 1
    if causal and k.shape[2] > q.shape[2]:  # as transformers does: no mask means no cached prefix
        k, v = k[:, :, :q.shape[2]], v[:, :, :q.shape[2]]
    if mask is not None:
        mask = mask[:, :, :, :k.shape[2]]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale, enable_gqa=gqa)


def _mlp(layer: _Layer, reads: Reads | None) -> Any:
    """The fused gated MLP forward of one layer (only at `reads` when given)."""
    n = layer.mlp.gate_proj.weight.shape[0]
    down = layer.mlp.down_proj
    packed_gate_up, packed_down = (layer.packed.gate_up, layer.packed.down) if layer.packed else (None, None)

    def forward(self: Any, x: torch.Tensor) -> torch.Tensor:
        at = None if reads is None else _on(reads, x.device)
        gate, up = product(x if at is None else x[at], layer.gate_up, packed_gate_up).split([n, n], dim=-1)
        out = product(self.act_fn(gate) * up, down.weight, packed_down, down.bias)
        if at is None:
            return out
        full = torch.zeros_like(x)
        full[at] = out
        return full

    return forward


def _on(reads: Reads, device: torch.device) -> Reads:
    """`reads` on the device of the layer (accelerate may place the last layer elsewhere)."""
    return reads[0].to(device), reads[1].to(device)
