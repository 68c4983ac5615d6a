"""The rendering step of a factor run (`factors=…`): every variant's prompts in the run's one
prompt list, rendered with its settings and labels (`probe.prompts.variants`), and what the
scoring pass and the manifest take from them."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from probe.benches.task import PreparedBench
from probe.models import LoadedModel, max_positions
from probe.pipeline.spec import RunConfig
from probe.prompts.control import check_texts
from probe.prompts.render import RenderSettings
from probe.prompts.variants import (
    LabelColumns,
    level_texts,
    render_variants,
    variant_prompts,
    variant_settings,
    variants_record,
)
from probe.types import LetterIds, RenderedPrompt

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Variants:
    """A factor run's rendered variants: what the backend reads and what the manifest records."""

    union: LetterIds
    """Every variant's label tokens, read in one pass."""
    columns: LabelColumns
    record: list[dict[str, Any]]


def render_variants_of(cfg: RunConfig, bench: PreparedBench, loaded: LoadedModel, settings: RenderSettings
                       ) -> tuple[PreparedBench, list[RenderedPrompt], LetterIds, Variants]:
    """Every variant's prompts in one list (`probe.prompts.variants`), rendered with its settings and
    labels; the protocol's letter ids stay the run's `letter_token_ids`."""
    task = cfg.bench.task
    check_texts(loaded.tokenizer, level_texts(cfg.variants), cfg.model.name)
    bench = replace(bench, prompts=variant_prompts(bench.prompts, bench.items, cfg.variants,
                                                   None if task.factors is None else task.factors.reword,
                                                   bench.letters))
    done = render_variants(loaded.tokenizer, bench.prompts, cfg.variants, bench.letters, settings, cfg.model.name,
                           max_positions(loaded), task.design.condition)
    record = variants_record(cfg.variants, done.letter_ids,
                             {v.index: variant_settings(v, settings) for v in cfg.variants})
    log.info("factors: %d variants × %d prompts; labels read at %d tokens in all", len(cfg.variants),
             len(done.rendered) // len(cfg.variants), len(done.union.ids))
    return bench, done.rendered, done.letter_ids[0], Variants(done.union, LabelColumns.of(done), record)
