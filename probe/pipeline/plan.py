"""A run's reading plan: which answer passes it executes, whether weights load, which answer
tables it writes — resolved once from the validated config (`RunConfig.plan`), so the pipeline
branches on typed values, never on `backend.mode` or `backend.name` strings.

The passes, in the order a run executes them: generation (decode and parse; open answers, or
`backend.mode=generate`), the letter pass (exact letter log-probs), the text pass (option
texts scored as continuations, after the letter pass so every letter number is the
letters-only run's). A new reading is a `probe.backends.reading.Reading` member whose
properties say which passes it runs; a new pass is a property here and its step in
`probe.pipeline.execute`.
"""

from __future__ import annotations

from dataclasses import dataclass

from probe.backends.reading import Capabilities, Reading
from probe.backends.specs import BackendSpec
from probe.benches.task import Answers, Task
from probe.results import layout


@dataclass(frozen=True)
class ReadingPlan:
    """What one run executes, from its reading and its backend's capabilities."""

    reading: Reading
    """The answer reading: the backend's `mode`, or `generate` for a bench whose answers are open."""
    capabilities: Capabilities
    """The backend's (`HFBackendSpec.capabilities`, …)."""
    dry_run: bool = False
    """A dry run renders and checks; no weights load, nothing is scored."""

    @property
    def generation(self) -> bool:
        """Answers are decoded and parsed (and judged where the bench asks it)."""
        return self.reading.generates

    @property
    def letters_pass(self) -> bool:
        """A letter scoring pass runs (letter log-probs, the lens and captures, `scores.safetensors`)."""
        return self.reading.reads_letters

    @property
    def text_pass(self) -> bool:
        """A text scoring pass runs (option texts as continuations, `text.parts/`)."""
        return self.reading.reads_text

    @property
    def loads_weights(self) -> bool:
        """Probe loads the model's weights into this process (checking the device first): a
        backend that runs them, outside a dry run; the vLLM engine loads its own."""
        return self.capabilities.on_weights and not self.dry_run

    @property
    def hooks(self) -> bool:
        """Forward-pass hooks (logit lens, captured layers, interventions) can run: answers are
        scored, not generated, on a backend whose letter pass takes them."""
        return not self.generation and self.capabilities.hooks

    def answer_files(self) -> tuple[str, ...]:
        """The answer tables a finished run holds: `generations.parquet`, or `scores.parquet`
        with, where letters were read, `scores.safetensors`."""
        if self.generation:
            return (layout.GENERATIONS,)
        return (layout.SCORES, *((layout.SCORE_TENSORS,) if self.letters_pass else ()))


def reading_plan(task: Task, backend: BackendSpec, dry_run: bool = False) -> ReadingPlan:
    """The plan of a run of `task` on `backend` (open answers are always generated)."""
    reading = Reading.GENERATE if task.answers is Answers.OPEN else backend.reading
    return ReadingPlan(reading=reading, capabilities=backend.capabilities, dry_run=dry_run)
