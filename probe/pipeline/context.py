"""A run's resolved context: what depends on the loaded model, resolved once, before any pass.

`RunConfig` is what the user asked for, checked before anything loads. Some of a run's facts are
known only once the model has loaded — the model's kind read from its tokenizer's chat template,
the letters' token ids checked in context, each prompt variant's label tokens, the render
settings with the bench's answer cue — and open answers record the mode they were generated in.
`resolve` puts them, and the config they complete, into one frozen `RunContext`; every pass and
record of the run reads that, and nothing rewrites it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from probe.backends.specs import BackendSpec
from probe.benches.task import PreparedBench, Task
from probe.models import LoadedModel, ModelSpec, max_positions, resolve_kind
from probe.pipeline.factor_run import Variants, render_variants_of
from probe.pipeline.plan import ReadingPlan
from probe.pipeline.spec import RunConfig
from probe.prompts.control import check_data_text
from probe.prompts.render import RenderSettings, render_prompts
from probe.types import LetterIds, RenderedPrompt


@dataclass(frozen=True)
class RunContext:
    """A run as it executes: its config completed by what the loaded model told, the prompts
    rendered for that model, and their letter ids. Frozen: built once, read by every pass."""

    config: RunConfig
    """The run's config with its model's kind resolved (`resolve_kind`) and, for generated
    answers, the mode that ran recorded in `backend.mode`."""
    bench: PreparedBench
    """The validated bench (with every variant's prompts in a factor run)."""
    loaded: LoadedModel
    settings: RenderSettings
    """How prompts were rendered: the model config's settings with the bench's cue and joiner."""
    rendered: Sequence[RenderedPrompt]
    """Every prompt as token ids; each pass plans its batches over all of them."""
    letter_ids: LetterIds | None
    """The letters' token ids, checked in context (None: answers are generated)."""
    variants: Variants | None
    """A factor run's variants with their label sets (None without factors)."""

    @property
    def plan(self) -> ReadingPlan:
        """The passes the run executes."""
        return self.config.plan

    @property
    def task(self) -> Task:
        return self.config.bench.task

    @property
    def model(self) -> ModelSpec:
        """The model spec, its kind resolved."""
        return self.config.model

    @property
    def backend(self) -> BackendSpec:
        return self.config.backend

    @property
    def device(self) -> str:
        return self.config.backend.device

    @property
    def dtype(self) -> str:
        return self.config.model.dtype


def resolve(cfg: RunConfig, bench: PreparedBench, loaded: LoadedModel) -> RunContext:
    """The run's context once `loaded` is in: the model's kind from its tokenizer, the recorded mode
    of generated answers, the render settings, and the prompts (every variant's, in a factor run)
    rendered with their letter ids checked in context."""
    plan = cfg.plan
    backend = replace(cfg.backend, mode=plan.reading.value) if plan.generation else cfg.backend  # recorded so
    config = replace(cfg, model=resolve_kind(cfg.model, loaded.tokenizer), backend=backend)
    settings = replace(config.model.render_settings(), cue=bench.cue, base_joiner=bench.base_joiner)
    check_data_text(loaded.tokenizer, bench.prompts, bench.data_label, config.model.name)
    if config.variants:
        bench, rendered, letter_ids, variants = render_variants_of(config, bench, loaded, settings)
        return RunContext(config, bench, loaded, settings, rendered, letter_ids, variants)
    rendered, ids = render_prompts(loaded.tokenizer, bench.prompts, None if plan.generation else bench.letters,
                                   settings, config.model.name, max_positions=max_positions(loaded),
                                   condition=config.bench.task.design.condition)
    return RunContext(config, bench, loaded, settings, rendered, ids, None)
