"""Models: hub checkpoints, the offline SmolLM2 GGUF stand-in and the tiny test fixtures, loaded
through one `from_pretrained` path; `ModelSpec` is one `conf/model/*.yaml`."""

from probe.models.load import (
                               GGUFFallback,
                               LoadedModel,
                               ModelSpec,
                               cache_root,
                               check_source,
                               hub_reachable,
                               load_model,
                               load_tokenizer,
                               max_positions,
                               resolve_kind,
)

__all__ = ["GGUFFallback", "LoadedModel", "ModelSpec", "cache_root", "check_source", "hub_reachable", "load_model", "load_tokenizer",
           "max_positions", "resolve_kind"]
