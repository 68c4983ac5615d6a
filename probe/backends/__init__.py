"""Scoring backends: rendered token ids in, full-vocabulary letter log-probs out.

Every backend implements `LetterBackend`; the runner streams its batches to disk. Backends
are chosen by name (`backend=hf`); heavy optional ones import their library only when chosen.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence, Set
from typing import Any, Protocol

from probe.config import build
from probe.errors import ProbeInputError
from probe.types import LetterIds, LetterScore, RenderedPrompt


class LetterBackend(Protocol):
    stats: Any
    """Has `forward_s` (seconds in model forward passes), `n_batches`, `batch_sizes` (rows →
    count), `oom_splits` and `tokens_computed`."""

    def score(
        self, prompts: Sequence[RenderedPrompt], letters: LetterIds, done: Set[int] = frozenset()
    ) -> Iterator[list[LetterScore]]:
        """Yield scores batch by batch, in any order; every prompt not in `done` at least once
        (batches are planned over all prompts, so a resumed run repeats the original plan)."""
        ...


def make_backend(cfg: Mapping[str, Any], loaded: Any, model_spec: Any, mech: Any = None) -> Any:
    """Build the backend named by `cfg["name"]` for a loaded model (`probe.models.LoadedModel`):
    a `LetterBackend`, or in `mode: generate` a generator with `.generate(prompts)`."""
    cfg = dict(cfg)
    name = cfg.get("name", "hf")
    if name == "hf":
        from probe.backends.hf import HFBackendSpec, HFScorer

        cfg.pop("name", None)
        spec = build(HFBackendSpec, cfg, "backend")
        if spec.mode == "generate":
            from probe.backends.generate import HFGenerator

            return HFGenerator(loaded.model, loaded.tokenizer, spec)
        return HFScorer(loaded.model, spec, mech)
    if name == "vllm":
        from probe.backends.vllm import VLLMEngine, VLLMSpec

        spec = build(VLLMSpec, cfg, "backend")
        return VLLMEngine(loaded.info["ref"], model_spec.revision, model_spec.trust_remote_code, spec,
                          loaded.tokenizer, model_spec.chat_template_kwargs)
    raise ProbeInputError(f"backend.name: unknown backend {name!r}; available: ['hf', 'vllm']")
