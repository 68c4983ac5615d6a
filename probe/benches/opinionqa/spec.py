"""The `bench:` block of OpinionQA and of any survey table of the same shape."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from probe.benches.orders import DEFAULT_CAP, OrderName
from probe.benches.spec_header import BenchHeader
from probe.config import Ge

Persona = Literal["qa", "bio", "portray"]
PERSONAS: tuple[str, ...] = ("qa", "bio", "portray")
"""The paper's three steering formats, in its order."""


@dataclass(frozen=True)
class OpinionQASpec(BenchHeader):
    """The `bench:` block of OpinionQA: survey questions, each group's weighted answer counts."""

    name: str = "opinionqa"
    kind: str = "opinionqa"
    path: str | None = None
    """format=atp: one `human_resp/<wave>/` folder of the OpinionQA dataset (info.csv, metadata.csv, <ATTRIBUTE>_data.json, NONE_data.json); format=table: a survey table (.csv or .jsonl, docs/benchmarks/opinionqa.md). Never downloaded."""
    format: Literal["atp", "table"] = "atp"
    """atp: the OpinionQA folder schema | table: probe's survey table (question, options, positions, per-group counts or shares)."""
    attributes: tuple[str, ...] = ()
    """Attributes whose groups are compared (and steered with bench.personas), e.g. [POLPARTY, AGE]; empty: every attribute metadata.csv lists (table: every attribute of the file)."""
    personas: tuple[Persona, ...] = ()
    """Persona formats to steer with, one condition each, for every group of the attributes: qa (a prior question-and-answer turn) | bio (a self-description) | portray ("answer as if …"); empty: the default condition only."""
    persona_path: str | None = None
    """A JSON file of persona texts per attribute ({attribute: {qa, topic, bio, portray}}; bio and portray hold {group}); null: probe's built-in texts (docs/benchmarks/opinionqa.md)."""
    cue: str = "Answer:"
    """The answer cue the letter follows: the paper's `Answer:`. Llama 3 and Qwen tokenizers merge `:A` into one token, so their letter preflight refuses it: give them `Answer: (` (quoted on the command line: 'bench.cue="Answer: ("'), which passes the preflight of all seven reference tokenizers (docs/benchmarks/opinionqa.md)."""
    refusal: Literal["drop", "keep"] = "drop"
    """drop: refusal options are shown but left out of the distributions compared, both renormalised (the paper) | keep: compared as one more answer (W1 still on the ordinal options)."""
    w1_scale: Literal["options", "range"] = "options"
    """Normaliser of W1: options (N − 1, N = ordinal options; the paper's formula) | range (max − min of the positions; the paper's code)."""
    survey_noise: Literal["multinomial", "none"] = "multinomial"
    """Survey sampling error in the intervals and the human ceiling: multinomial (each group's shares redrawn from its weighted counts, their sum as effective n) | none (questions resampled only)."""
    survey_draws: Annotated[int, Ge(2)] = 100
    """Survey redraws per (question, group); bootstrap replicate b uses draw b mod this."""
    survey_seed: int = 0
    """Seed of the survey redraws and the human ceiling."""
    min_questions: Annotated[int, Ge(1)] = 5
    """Questions a group needs to take part in naming the closest and furthest groups."""
    limit: Annotated[int, Ge(1)] | None = None
    """Ask only the first N questions (file order); null = all."""
    text_form: Literal["hybrid", "cloze"] = "hybrid"
    """Answer-text reading (backend.mode=text|letters+text): hybrid (options listed, the answer's text asked) | cloze (the question alone)."""
    orders: OrderName = "rotations"
    """Option orderings per question (docs/concepts/orders.md): rotations (K) | permutations (K!) | williams (K or 2K) | reverse (2)."""
    orders_cap: Annotated[int, Ge(1)] = DEFAULT_CAP
    """Most orderings per question a design may present; more is refused unless `permutations` samples."""
    orders_sample: Annotated[int, Ge(1)] | None = None
    """Under `permutations` above the cap: draw this many orderings without replacement (null: refuse)."""
    orders_seed: int = 0
    """Seed of the `orders_sample` draw (recorded in the manifest)."""
