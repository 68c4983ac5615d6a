"""The `backend:` config block, one frozen spec per backend (no torch import here)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Annotated, ClassVar, Literal

from probe.backends.reading import Capabilities, Reading
from probe.config import Ge, Gt, Le, Seed
from probe.errors import ProbeInputError, bounded_repr

Mode = Literal["letters", "generate", "text", "letters+text"]
"""`backend.mode` as the config spells it: the values of `Reading` (a spec's `reading`)."""


@dataclass(frozen=True)
class HFBackendSpec:
    """Hugging Face transformers: batched forward passes, letter log-probs at the last position."""

    capabilities: ClassVar[Capabilities] = Capabilities(
        on_weights=True, prefix_reuse=True, text_scoring=True, hooks=True, generation=True)
    """What it can do (a class constant, not a config key)."""

    name: Literal["hf"] = "hf"
    """The backend: hf (transformers) or vllm."""
    batch_tokens: Annotated[int, Ge(1)] = 8192
    """Padded tokens per forward pass (rows × (longest cached path + longest new run)), and the
    unique tokens of one trie chunk; lower it on out-of-memory, raise it on a large GPU."""
    max_batch_size: Annotated[int, Ge(1)] = 32
    """Prompts per batch at most."""
    device: str = "auto"
    """auto: all visible GPUs via accelerate's device_map, else CPU; or cpu / cuda:0."""
    prefix_reuse: bool = True
    """Run every unique token of the prompts' token trie once, on its ancestors' KV cache."""
    fast_path: bool | Literal["auto"] = "auto"
    """Fused Q/K/V and gate/up products, the last layer only where read, grouped-query attention without copies, oneDNN products on packed weights (Llama, Mistral, Qwen2, Gemma 3; other models, taps and edits run eager): auto: where its packed products apply (CPU, float32), there as close to a float64 forward as the eager path, else eager; true: wherever the model allows (GPU: not measured); false: the eager path. The manifest's backend.path says which ran; see docs/performance.md."""
    mode: Mode = "letters"
    """letters (exact letter log-probs) | generate (decode and parse; the fallback) | text (option texts' log-probs as continuations) | letters+text (both readings, paired)."""
    max_new_tokens: Annotated[int, Ge(1)] = 64
    """Generate mode: the longest continuation, in tokens."""
    do_sample: bool = False
    """Generate mode: greedy by default; sampled at `sample_temperature` with `seed` when true."""
    sample_temperature: Annotated[float, Gt(0)] = 1.0
    """Generate mode with do_sample: the decoding temperature (not the analysis temperature)."""
    seed: Seed = 0
    """Generate mode with do_sample: the sampling seed."""

    def __post_init__(self) -> None:
        if not _DEVICE.fullmatch(self.device):
            raise ProbeInputError(f"backend.device: expected auto, cpu, cuda, cuda:N or mps, got "
                                  f"{bounded_repr(self.device)}")

    @property
    def reading(self) -> Reading:
        """`mode` as a typed reading."""
        return Reading(self.mode)


_DEVICE = re.compile(r"auto|cpu|mps|cuda(:[0-9]+)?")


def check_device(device: str) -> None:
    """Refuse, in one line, a device this machine does not have (`cuda` without CUDA, `cuda:3`
    with two GPUs, `mps` off Apple silicon): called before a run claims its directory, so the
    user sees the cause instead of a model-loading traceback."""
    import torch  # only where a model is about to load anyway

    if device.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(device.partition(":")[2] or 0)
        if index >= count:
            found = f"{count} CUDA device(s)" if count else "no CUDA device (or a torch built without CUDA)"
            raise ProbeInputError(f"backend.device={device}: this machine has {found}; use backend.device=auto "
                                  "(the GPUs if any, else the CPU) or cpu")
    elif device == "mps" and not torch.backends.mps.is_available():
        raise ProbeInputError("backend.device=mps: MPS is not available here; use backend.device=auto or cpu")


@dataclass(frozen=True)
class VLLMSpec:
    """vLLM: the same letter log-probs and generations from a vLLM engine (install: see README)."""

    capabilities: ClassVar[Capabilities] = Capabilities(
        on_weights=False, prefix_reuse=True, text_scoring=True, hooks=False, generation=True)
    """What it can do (a class constant, not a config key)."""

    name: Literal["vllm"] = "vllm"
    """The backend: hf (transformers) or vllm."""
    mode: Mode = "letters"
    """letters (exact log-probs via logprob_token_ids) | generate | text | letters+text (option texts via prompt_logprobs, no prefix sharing)."""
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = "auto"
    """auto (the checkpoint's), bfloat16, float16, float32 (CPU parity runs)."""
    max_model_len: Annotated[int, Ge(1)] | None = None
    """Context length to reserve KV cache for; null = the model's."""
    gpu_memory_utilization: Annotated[float, Gt(0), Le(1)] = 0.9
    """Share of GPU memory vLLM may take."""
    tensor_parallel_size: Annotated[int, Ge(1)] = 1
    """GPUs to shard one model over."""
    enforce_eager: bool = False
    """True skips CUDA graph capture (faster start, slower steady state)."""
    enable_prefix_caching: bool = True
    """Prompts share the KV blocks of their common prefixes (requests go in trie order)."""
    quantization: str | None = None
    """vLLM's `quantization` (awq, gptq, fp8, bitsandbytes, …); null = the checkpoint's own."""
    block_size: Annotated[int, Ge(1)] | None = None
    """KV cache block size in tokens; null = the engine's (16 on GPU, 128 on CPU). The cache
    serves whole shared blocks only, so smaller blocks reuse more of each shared prefix."""
    fp32_head: bool = True
    """LM head in float32 (hf_overrides head_dtype): bf16 logits are too coarse for letter margins."""
    chunk: Annotated[int, Ge(1)] = 2048
    """Requests per generate call; results stream to disk between calls."""
    max_new_tokens: Annotated[int, Ge(1)] = 64
    """Generate mode: the longest continuation, in tokens."""
    do_sample: bool = False
    """Generate mode: greedy by default; sampled at `sample_temperature` with `seed` when true."""
    sample_temperature: Annotated[float, Gt(0)] = 1.0
    """Generate mode with do_sample: the decoding temperature (not the analysis temperature)."""
    seed: Seed = 0
    """Sampling seed (generate mode with do_sample)."""
    device: str = "auto"
    """Recorded only; vLLM picks its own device."""

    @property
    def reading(self) -> Reading:
        """`mode` as a typed reading."""
        return Reading(self.mode)


BackendSpec = HFBackendSpec | VLLMSpec
BACKEND_OPT_IN: tuple[str, ...] = ("fast_path",)
"""Options added after runs were stored: recorded unless false, so the results key and the
manifest of a run without them stay what they were. `fast_path` defaults to `auto` since: a
default run records `fast_path: auto`, and `fast_path=false` (the eager path every run stored
before it computed by default) keeps the key those runs have, so they still resume with it."""


def backend_record(spec: BackendSpec) -> dict[str, object]:
    """The backend block as a run records it (key and manifest): opt-in options unless false."""
    return {k: v for k, v in asdict(spec).items() if not (k in BACKEND_OPT_IN and v is False)}


BACKENDS: dict[str, type[BackendSpec]] = {spec.name: spec for spec in (HFBackendSpec, VLLMSpec)}
"""Choosing a backend by its spec (`backend=hf` / `backend=vllm`); the config group
`conf/backend/` is generated from it (`probe.commands.confgen`)."""


def capabilities_of(name: str | None) -> Capabilities | None:
    """The capabilities of the backend `name` names (a stored run's record); None for a name no
    registered backend has."""
    spec = BACKENDS.get(str(name))
    return None if spec is None else spec.capabilities
