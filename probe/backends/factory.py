"""Choosing a backend by its spec (`backend=hf` / `backend=vllm`)."""

from __future__ import annotations

from probe.backends.base import Backend
from probe.backends.generate import HFGenerator
from probe.backends.hf import HFScorer
from probe.backends.interventions import InterventionPlan
from probe.backends.specs import BackendSpec, HFBackendSpec, VLLMSpec
from probe.backends.taps import MechSpec
from probe.backends.vllm import VLLMEngine
from probe.models import LoadedModel, ModelSpec


def make_backend(spec: BackendSpec, loaded: LoadedModel, model_spec: ModelSpec, mech: MechSpec | None = None,
                 intervention: InterventionPlan | None = None) -> Backend:
    """The backend `spec` names, for a loaded model: a `Scorer`, or in `mode: generate` a
    `Generator`; interventions need HF letter scoring. The HF backends run the weights `loaded`
    holds; the vLLM engine loads its own from `loaded.info["ref"]`."""
    if isinstance(spec, HFBackendSpec):
        assert loaded.model is not None, "the HF backend runs loaded weights (load_model(..., weights=True))"
        if spec.reading.generates:
            return HFGenerator(loaded.model, loaded.tokenizer, spec, template_kwargs=model_spec.chat_template_kwargs)
        return HFScorer(loaded.model, spec, mech, intervention)
    assert isinstance(spec, VLLMSpec), f"unknown backend spec {spec!r}"
    return VLLMEngine(loaded.info["ref"], model_spec.revision, model_spec.trust_remote_code, spec,
                      loaded.tokenizer, model_spec.chat_template_kwargs)
