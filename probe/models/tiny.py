"""Tiny deterministic models for tests and smoke runs: built offline, saved like a hub checkpoint.

The tokenizer is a byte-level BPE trained on the fly on a fixed corpus, so any text encodes
and the letters after `"` stay single tokens (byte-level pre-tokenisation splits `":"A"` into
`":"`, `A`, `"`). Weights come from a fixed seed. The model is saved to a directory and then
loaded through the same `from_pretrained` path as real models, so every backend (HF, vLLM)
sees the same files.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated

from probe.config import Ge, Gt, Seed

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] }}"
    "{% if not (loop.last and message['role'] == 'assistant') %}{{ '<|im_end|>\n' }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
BUILD_VERSION = 2
"""Bump when the builder changes, so cached tiny models are rebuilt."""
_SPECIALS = ["<|endoftext|>", "<|bos|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
_CORPUS = """Question: What do people usually eat for breakfast with the family on a holiday?
Options: A. rice B. bread C. porridge D. noodles E. eggs F. soup G. tea H. coffee I. fruit J. milk
Return ONLY valid JSON in exactly this format: {"answer_choice":"X"} (where X is one of A, B, C, D).
Context: people in the UK, the US, China, Spain, Greece, Algeria, Ethiopia, Assam, Indonesia,
South Korea, West Java and Northern Nigeria enjoy music, dance, sport, games and festivals.
User info: The user is located in a city. User instruction: The User wants a locally appropriate,
familiar realistic choice. Instructions: Without any explanation, choose only one option.
"""


@dataclass(frozen=True)
class TinySpec:
    """Architecture of a tiny model. head_dim 32 keeps it runnable by vLLM's CPU attention."""

    arch: str = "llama"
    """`llama`, or `gemma3` (sliding-window layers, embedding scaling, logit softcapping)."""
    hidden_size: Annotated[int, Ge(1)] = 64
    num_layers: Annotated[int, Ge(1)] = 2
    num_heads: Annotated[int, Ge(1)] = 2
    num_kv_heads: Annotated[int, Ge(1)] = 1
    head_dim: Annotated[int, Ge(1)] = 32
    vocab_size: Annotated[int, Ge(1)] = 512
    sliding_window: Annotated[int, Ge(1)] = 16
    """Gemma3 only; shorter than real prompts so the sliding path is exercised."""
    init_std: Annotated[float, Gt(0)] = 0.2
    """Larger than usual so letter distributions are far from uniform."""
    seed: Seed = 0


def build_tokenizer(spec: TinySpec):
    """Train the byte-level BPE tokenizer (deterministic for a fixed corpus and vocab size)."""
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size, special_tokens=_SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator([_CORPUS] * 4, trainer=trainer)
    # Like Llama/Gemma tokenizers, plain encoding adds BOS (base-model prompts rely on it).
    bos = tok.token_to_id("<|bos|>")
    tok.post_processor = processors.TemplateProcessing(single="<|bos|> $A", special_tokens=[("<|bos|>", bos)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|im_end|>", pad_token="<|pad|>",
        unk_token="<|endoftext|>", chat_template=CHAT_TEMPLATE,
    )


def build_model(spec: TinySpec, vocab_size: int):
    """A randomly initialised causal LM with fixed-seed weights, in float32."""
    import torch

    common = dict(
        vocab_size=vocab_size, hidden_size=spec.hidden_size, intermediate_size=2 * spec.hidden_size,
        num_hidden_layers=spec.num_layers, num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads, head_dim=spec.head_dim, max_position_embeddings=4096,
        initializer_range=spec.init_std, tie_word_embeddings=False, bos_token_id=1, eos_token_id=3,
        pad_token_id=4,
    )
    torch.manual_seed(spec.seed)
    if spec.arch == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM

        return LlamaForCausalLM(LlamaConfig(**common)).eval()
    if spec.arch == "gemma3":
        from transformers import Gemma3ForCausalLM, Gemma3TextConfig

        layer_types = ["sliding_attention", "full_attention"] * (spec.num_layers // 2) + \
            ["sliding_attention"] * (spec.num_layers % 2)
        config = Gemma3TextConfig(
            **common, sliding_window=spec.sliding_window, layer_types=layer_types,
            query_pre_attn_scalar=spec.head_dim, final_logit_softcapping=30.0,
        )
        return Gemma3ForCausalLM(config).eval()
    raise ValueError(f"unknown tiny arch {spec.arch!r}; expected 'llama' or 'gemma3'")


def tiny_model_dir(spec: TinySpec, cache_root: Path) -> Path:
    """Build (once) and return a directory holding the tiny model and tokenizer.

    The directory name hashes the spec, so a changed spec never reuses stale files; the build
    goes to a temporary directory renamed into place, so a killed build is never read.
    """
    key = hashlib.sha256(json.dumps({**asdict(spec), "v": BUILD_VERSION}, sort_keys=True).encode()).hexdigest()[:12]
    out = cache_root / f"tiny-{spec.arch}-{key}"
    if (out / "config.json").exists():
        return out
    cache_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=cache_root, prefix=".build-"))
    try:
        tok = build_tokenizer(spec)
        model = build_model(spec, vocab_size=len(tok))
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        os.replace(tmp, out)
    except OSError:
        if not (out / "config.json").exists():  # another process may have won the rename
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
