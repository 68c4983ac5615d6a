"""Prompt variants in a run: the bench's prompts reworded per variant of a factor design
(`probe.prompts.factors`), rendered with each variant's settings into the one prompt list a
backend plans, and each prompt's letter log-probs read at its own labels' tokens.

Prompt ids: variant v's copy of the bench's prompt i is `v · N + i` (N prompts per variant), so
variant 0 — the protocol's — keeps the ids, messages and settings of a run without factors.
Each prompt's design gains `variant` (its index). A bench says how its user message is worded
with other labels, instruction line or option lines (`Reword`); the cue and the system message
are rendering settings every bench shares.

Letters: every variant's labels pass the in-context single-token preflight
(`probe.prompts.render.derive_letter_ids`) on its own prompts. The backend reads the union of
all variants' label tokens in one pass; each prompt keeps the columns of its own labels, in its
labels' order (`LabelColumns`), so position j of a stored row is the j-th label the prompt shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from probe.errors import ProbeInputError
from probe.prompts.factors import FactorError, Variant
from probe.prompts.render import RenderSettings, render_prompts
from probe.prompts.tokenizer import Tokenizer
from probe.types import LetterIds, LetterScore, Prompt, RenderedPrompt

VARIANT = "variant"
"""The design field (and `prompts.parquet` column) holding a prompt's variant index."""
SETTING_FACTORS = ("cue", "system")
"""Factors applied at rendering, the same way for every bench; the others reword the message."""


@dataclass(frozen=True)
class Wording:
    """What a variant changes in a bench's user message; None keeps the protocol's own."""

    labels: tuple[str, ...] | None = None
    """The labels shown at the options, in display order (as many as the prompt shows)."""
    instruction: str | None = None
    """The instruction line, its `{labels}` already filled (`A, B, C, D`)."""
    layout: str | None = None
    """One option line, a template with `{label}` and `{text}`."""

    @property
    def is_protocol(self) -> bool:
        """Whether the message stays the protocol's."""
        return self.labels is None and self.instruction is None and self.layout is None

    def option_line(self, label: str, text: str, protocol: str) -> str:
        """One option line: the layout's, or `protocol` (the bench's own line for it)."""
        return protocol if self.layout is None else self.layout.format(label=label, text=text)


Reword = Callable[[Any, Prompt, Wording], str]
"""A bench's `(item, prompt, wording) → user message` of a prompt under another wording."""


def no_reword(item: Any, prompt: Prompt, said: Wording) -> str:
    """The `Reword` of a bench whose message keeps its own wording: refused."""
    raise FactorError(f"factors: prompt {prompt.prompt_id} ({prompt.describe()}): this bench has no rewording of "
                      "its prompts (labels, instruction, layout)")


def wording(variant: Variant, k: int, protocol_labels: Sequence[str]) -> Wording:
    """The wording of `variant` for a prompt of `k` options (`protocol_labels`: the bench's letters)."""
    labels = variant.level("labels").labels_for(k)
    shown = tuple(protocol_labels[:k]) if labels is None else labels
    instruction = variant.level("instruction").text
    return Wording(labels=labels, layout=variant.level("layout").text,
                   instruction=None if instruction is None else instruction.format(labels=", ".join(shown)))


def variant_settings(variant: Variant, settings: RenderSettings) -> RenderSettings:
    """The rendering settings of `variant`: its cue in place of the bench's, its system message
    after the model config's own (if any)."""
    cue, system = variant.level("cue").text, variant.level("system").text
    if system is not None:
        own = settings.system_prompt
        settings = replace(settings, system_prompt=system if own is None else f"{own}\n\n{system}")
    return settings if cue is None else replace(settings, cue=cue)


def variant_prompts(prompts: Sequence[Prompt], items: Iterable[Any], variants: Sequence[Variant],
                    reword: Reword | None, letters: Sequence[str]) -> list[Prompt]:
    """Every prompt of every variant, variant-major (`v · N + i`), each design gaining `variant`.

    A variant that changes the message needs the bench's `reword`. A base-model text that holds the
    message verbatim gets the reworded message in its place; a prompt with example turns, or whose
    base-model text is worded apart from its message, is not reworded (it would still show the
    protocol's wording). A prompt shows as many options as its `order` has entries ≥ 0 (a bench
    pads a prompt with fewer options than the run's widest with negative entries)."""
    by_id = {str(getattr(item, "item_id", "")): item for item in items}
    n, out = len(prompts), []
    for v in variants:
        for p in prompts:
            said = wording(v, sum(o >= 0 for o in p.order), letters)
            message, base = p.message, p.base_text
            if not said.is_protocol:
                if (base is not None and p.message not in base) or p.shots:
                    raise FactorError(f"factors: variant {v.name!r}: prompt {p.prompt_id} ({p.describe()}) has "
                                      "example turns or a base-model text, which this bench does not reword")
                message = (reword or no_reword)(by_id[str(p.item_id)], p, said)  # None: the bench rewords nothing
                base = None if base is None else base.replace(p.message, message)
            out.append(replace(p, prompt_id=v.index * n + p.prompt_id, message=message, base_text=base,
                               prefix_key=p.prefix_key if v.index == 0 else f"{p.prefix_key}|v{v.index}",
                               design=(*p.design, (VARIANT, v.index))))
    return out


@dataclass(frozen=True)
class RenderedVariants:
    """Every variant's prompts rendered, and each variant's label token ids."""

    rendered: list[RenderedPrompt]
    letter_ids: tuple[LetterIds, ...]
    """Per variant, in variant order."""

    @property
    def union(self) -> LetterIds:
        """Every variant's label tokens, each once, in first-seen order: what the backend reads."""
        ids: dict[int, str] = {}
        for lid in self.letter_ids:
            for letter, token in zip(lid.letters, lid.ids):
                ids.setdefault(token, letter)
        return LetterIds(letters=tuple(ids.values()), ids=tuple(ids), cue_token_ids=self.letter_ids[0].cue_token_ids)


def render_variants(tokenizer: Tokenizer, prompts: Sequence[Prompt], variants: Sequence[Variant],
                    letters: Sequence[str], settings: RenderSettings, model_name: str,
                    max_positions: int | None, condition: str | None) -> RenderedVariants:
    """Render each variant's prompts (`variant_prompts` order) with its settings and labels; a label
    that is not one token in context stops the run here, naming the variant, label and tokens."""
    n = len(prompts) // len(variants)
    rendered: list[RenderedPrompt] = []
    ids: list[LetterIds] = []
    for v in variants:
        own = prompts[v.index * n:(v.index + 1) * n]
        labels = v.level("labels").labels_for(len(letters)) or tuple(letters)
        try:
            part, lid = render_prompts(tokenizer, own, labels, variant_settings(v, settings), model_name,
                                       max_positions=max_positions, condition=condition)
        except ProbeInputError as e:
            raise ProbeInputError(f"factors: variant {v.index} ({v.name}): {e}") from e
        assert lid is not None
        rendered += part
        ids.append(lid)
    return RenderedVariants(rendered, tuple(ids))


@dataclass(frozen=True)
class LabelColumns:
    """Maps scores read at the union of label tokens to each prompt's own labels."""

    columns: tuple[tuple[int, ...], ...]
    """Per variant, the union columns of its labels, in its labels' order."""
    ids: tuple[frozenset[int], ...]
    """Per variant, its label token ids (greedy validity)."""
    per_variant: int
    """Prompts per variant (`prompt_id // per_variant` is the variant)."""

    @classmethod
    def of(cls, variants: RenderedVariants) -> LabelColumns:
        """The columns of `variants.union` each variant's labels take."""
        union = variants.union.ids
        return cls(columns=tuple(tuple(union.index(t) for t in lid.ids) for lid in variants.letter_ids),
                   ids=tuple(frozenset(lid.ids) for lid in variants.letter_ids),
                   per_variant=len(variants.rendered) // len(variants.letter_ids))

    def select(self, batch: Sequence[LetterScore]) -> list[LetterScore]:
        """Each score cut to its prompt's labels (log-probs, lens) and its greedy validity recomputed
        from its full-vocabulary argmax."""
        out = []
        for s in batch:
            v = s.prompt_id // self.per_variant
            cols = list(self.columns[v])
            valid = s.greedy_valid if s.argmax_token_id is None else s.argmax_token_id in self.ids[v]
            out.append(replace(s, letter_logprobs=tuple(s.letter_logprobs[c] for c in cols), greedy_valid=valid,
                               lens=None if s.lens is None else s.lens[:, cols]))
        return out

    def stream(self, batches: Iterable[list[LetterScore]]) -> Iterator[list[LetterScore]]:
        """`select` over a stream of score batches."""
        return (self.select(b) for b in batches)


def level_texts(variants: Sequence[Variant]) -> Iterator[tuple[str, str]]:
    """`(where, text)` of every text a variant's levels put into a prompt (cue, system message,
    instruction, layout, each label), for the control-string check."""
    seen: set[tuple[str, str]] = set()
    for variant in variants:
        for factor, level in variant.levels:
            if (factor, level.name) in seen:
                continue
            seen.add((factor, level.name))
            where = f"{level.source}: {factor} level {level.name!r}"
            if level.text is not None:
                yield where, level.text
            for i, label in enumerate(level.labels or ()):
                yield f"{where}, label {i + 1}", label


def variants_record(variants: Sequence[Variant], letter_ids: Sequence[LetterIds],
                    settings: Mapping[int, RenderSettings]) -> list[dict[str, Any]]:
    """The manifest's `variants`: every variant's index, name, levels, the wording of its levels
    (`texts`: `{factor: text}`, so the run key holds every word that shapes a prompt, not only
    the level names), labels and label tokens, cue."""
    return [{"index": v.index, "name": v.name, "levels": v.level_names(),
             "texts": {f: level.text for f, level in v.levels if level.text is not None}, "labels": list(lid.letters),
             "label_token_ids": list(lid.ids), "cue": settings[v.index].cue,
             "system_prompt": settings[v.index].system_prompt}
            for v, lid in zip(variants, letter_ids)]
