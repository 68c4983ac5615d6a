"""A rough GPU memory estimate from a model config alone (for dry runs: no weights loaded)."""

from __future__ import annotations

from typing import Any

BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


def memory_estimate(config: Any, dtype: str, batch_tokens: int) -> dict[str, float]:
    """GiB for the weights, the KV cache of scoring and one pass's activations.

    Scoring keeps at most `batch_tokens` tokens of ancestor KV per trie chunk and expands at most
    `batch_tokens` per pass, so the KV term is twice that many tokens; activations count the
    hidden and MLP widths of one pass (a generous factor of 4 for temporaries). The fp32 LM
    head copy is included. An estimate to size `batch_tokens`, not a guarantee."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    h, layers, heads = text.hidden_size, text.num_hidden_layers, text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or h // heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    q, kv = heads * head_dim, kv_heads * head_dim
    per_layer = h * (q + 2 * kv) + q * h + 3 * h * text.intermediate_size
    embed = text.vocab_size * h * (1 if getattr(config, "tie_word_embeddings", False) else 2)
    b = BYTES.get(dtype, 4)
    gib = 1 << 30
    weights = (layers * per_layer + embed) * b
    kv_cache = 2 * batch_tokens * 2 * layers * kv * b
    activations = 4 * batch_tokens * (h + text.intermediate_size) * b
    head = text.vocab_size * h * 4
    out = {"weights": weights / gib, "kv_cache": kv_cache / gib, "activations": activations / gib,
           "fp32_head": head / gib}
    out["total"] = sum(out.values())
    return out
