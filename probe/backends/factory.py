"""Choosing a backend by its spec (`backend=hf` / `backend=vllm`)."""

from __future__ import annotations

from typing import Any

from probe.backends.generate import HFGenerator
from probe.backends.hf import HFScorer
from probe.backends.interventions import InterventionPlan
from probe.backends.specs import BackendSpec, HFBackendSpec, VLLMSpec
from probe.backends.taps import MechSpec
from probe.backends.vllm import VLLMEngine


def make_backend(spec: BackendSpec, loaded: Any, model_spec: Any, mech: MechSpec | None = None,
                 intervention: InterventionPlan | None = None) -> Any:
    """The backend `spec` names, for a loaded model (`probe.models.LoadedModel`): a
    `LetterBackend`, or in `mode: generate` a `Generator`; interventions need HF letter scoring."""
    if isinstance(spec, HFBackendSpec):
        if spec.mode == "generate":
            return HFGenerator(loaded.model, loaded.tokenizer, spec, template_kwargs=model_spec.chat_template_kwargs)
        return HFScorer(loaded.model, spec, mech, intervention)
    assert isinstance(spec, VLLMSpec), f"unknown backend spec {spec!r}"
    return VLLMEngine(loaded.info["ref"], model_spec.revision, model_spec.trust_remote_code, spec,
                      loaded.tokenizer, model_spec.chat_template_kwargs)
