"""The one interface a benchmark implements: a `Task` holds everything benchmark-specific.

Generic code (the pipeline, analysis, reports, sweeps) never asks *which* benchmark it runs; it
asks the task's capabilities, each a small frozen record:

| capability | what it holds | optional |
|---|---|---|
| `data: Data` | the `bench:` block's type and the loader (`prepare`) | no |
| `answers: Answers` | letters (forced choice) or open answers a judge reads | no |
| `scoring: Scoring` | metrics, headline, report, figures, debiased reading, bootstrap unit | `debiased` None |
| `tables: Tables` | its `prompts.parquet` and `generations.parquet` | no |
| `presentation: Presentation` | sweep, pair, steering and curve columns; sweep figures; caveats | no |
| `judging: Judging` | what it asks a judge, its judges, `judgements.parquet` | default: nothing to judge |
| `design: Design` | the parts its design fields play in generic analyses | default: none |
| `text: TextForms` | its answer-text reading | None: no text reading |
| `factors: Factors` | the prompt factors it admits, its rewording, its factor response | None: no factors |
| `modes` | `bench.mode` → another task (readings that differ in kind) | empty |

A task is a frozen record of plain values — no base class to inherit from; an optional capability
a bench lacks is None and generic code asks `task.text is not None`. A forced-choice bench states
only its own parts to `probe.benches.forced.forced_choice_task`, an open-answer bench to
`probe.benches.open_answer.open_answer_task`: two ways of filling the same capabilities. Register
one with `probe.benches.registry.register`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from probe.config import build
from probe.errors import ProbeInputError
from probe.files import check_name
from probe.judges.base import JudgeRequest, JudgeResult
from probe.judges.registry import judge_task
from probe.metrics.core import AnalysisOptions
from probe.metrics.factorial_shares import ShareCube
from probe.metrics.tree import Headline, MetricsTree, MetricValue
from probe.metrics.variant_shares import share_cube
from probe.prompts.render import ANSWER_CUE
from probe.prompts.text_forms import TextMessage
from probe.prompts.variants import Reword
from probe.results.run import Run
from probe.results.scores import ScoreTable
from probe.results.schemas import judgements_schema
from probe.types import Design, GroupNoun, Prompt, RenderedPrompt
from probe.viz.figures import Figure

FactorCube = Callable[[ScoreTable, Design, Sequence[str], float], ShareCube]
"""`(table, design, variant names, temperature) → ShareCube` (`Factors.cube`)."""


@dataclass(frozen=True)
class PreparedBench:
    """A bench ready to run: validated items and the prompts of its design."""

    name: str
    kind: str
    letters: tuple[str, ...]
    """Option letters in display order; empty for open answers."""
    items: Sequence[Any]
    prompts: Sequence[Prompt]
    source: dict[str, Any]
    """Provenance for the manifest: file path, sha256, design facts."""
    cue: str | None = ANSWER_CUE
    """What the answer starts with, pre-filled so the next token is the letter; None for open
    answers (the model answers after the generation prompt)."""
    base_joiner: str = "\n"
    """What a base model's text puts between the prompt and the cue (`RenderSettings.base_joiner`)."""
    data_files: tuple[Path, ...] = ()
    """Every data file `prepare` read, in the order read: the run key holds a digest of their
    bytes (`probe.benches.sources.data_digest`), so a resumed run, a merge or a comparison notices
    edited data whether or not a checksum is pinned. Empty: the bench reads no file (its items
    are built in code)."""

    @property
    def data_label(self) -> str:
        """Where the data came from, for messages: its one file, or the directory or URL it
        records, else the bench's name."""
        if len(self.data_files) == 1:
            return str(self.data_files[0])
        return f"bench {self.name!r} data" + (f" ({self.source['path']})" if self.source.get("path") else "")


@dataclass(frozen=True)
class Column:
    """One metric in a table or a curve: a label and its path in the headline metric tree."""

    label: str
    path: str
    """Dotted path in the tree `Scoring.headline` returns, e.g. `C0.KL`."""
    cell: Callable[[Mapping[str, Any]], str] | None = None
    """Custom cell text from the whole `metrics.json` (instead of the value at `path`)."""
    undefined: str | None = None
    """Why the value can be undefined (NaN, or a custom cell's `–`), for the table's footnote;
    None: a generic reason."""
    optional: bool = False
    """Shown in a sweep's table only when some run of it has a value: a reading that only some
    runs make (the answer-text agreement) leaves the tables of sweeps without it as they were."""
    constant_in: tuple[str, ...] = ()
    """Metric blocks in which the value is constant by construction (DiSCo's PPR is 1/K in
    `debiased`): `probe compare` leaves it out of those blocks' tables, whose Δ would be 0 [0, 0]."""
    is_value: bool | None = None
    """Whether the column stands for the number at `path` (so `probe compare` pairs it, checkpoint
    curves and factor runs read it); None: only when `cell` is None (a custom cell's text may read
    another block or value). True for a custom cell that shows the value at `path` with more
    beside it (DiSCo's KL with its test of no preference)."""

    @property
    def numeric(self) -> bool:
        """The column stands for the number at `path` (see `is_value`)."""
        return self.cell is None if self.is_value is None else self.is_value


@dataclass(frozen=True)
class JudgeJob:
    """One question for the judge and the `judgements.parquet` columns that identify it."""

    request: JudgeRequest
    row: Mapping[str, Any]
    """Identifying columns of the verdict's row: `prompt_id`, `task`, and any others it fills."""
    cacheable: bool = False
    """True when the verdict cannot depend on the evaluated model (it reads only the data), so
    it is cached across runs, keyed by the judge's config and the request."""


class Answers(str, Enum):
    """How a bench's answers are read; the values are the names a task may also be given as."""

    LETTERS = "letters"
    """Forced choice: letter log-probs (or text scores, or a generated letter, per `backend.mode`)."""
    OPEN = "open"
    """Open answers: generated, then read by a judge."""

    def __str__(self) -> str:
        return self.value


def no_caveats(metrics: Mapping[str, Any]) -> list[str]:
    """No caveats of the bench's own (the generic ones still apply)."""
    return []


def no_figures(*args: Any) -> list[Figure]:
    """No figures (a bench that draws none, of a run or of a sweep)."""
    return []


def no_judging(bench: PreparedBench, generations: Sequence[Mapping[str, Any]]) -> list[JudgeJob]:
    """Nothing for a judge to read."""
    return []


def judge_errors(metrics: Mapping[str, Any]) -> int:
    """The failed judge verdicts a run's `metrics.json` counts in `n_judge_errors`."""
    return int(metrics.get("n_judge_errors") or 0)


@dataclass(frozen=True)
class Presentation:
    """How the reports show a bench beyond its own `report.md`: the columns of the sweep, paired,
    steering tables and the temperature curve, and the figures comparing runs."""

    sweep_columns: tuple[Column, ...]
    """Headline columns of the sweep table (one row per run)."""
    sweep_note: str
    """One sentence under the sweep table saying what its numbers are."""
    pair_columns: tuple[Column, ...] = ()
    """Metrics of the base-vs-instruct table (both runs and their difference); empty: no table."""
    curve_metrics: tuple[Column, ...] = ()
    """Metrics the temperature curve recomputes at each T (empty: no curve)."""
    sweep_figures: Callable[[Sequence[Run], Sequence[str], Path], list[Figure]] = no_figures
    """Figures comparing runs (one label per run)."""
    steer_columns: tuple[Column, ...] = ()
    """Metrics of the sweep's steering dose–response (`intervention=steer` runs over
    `intervention.alpha`); `{group}` in a path stands for the steered group."""
    groups: GroupNoun = GroupNoun()
    """What the reports call the bench's groups (the lens and patching sections, the steering
    table, figure axes)."""
    caveats: Callable[[Mapping[str, Any]], list[str]] = no_caveats
    """The bench's own caveats of a run's metrics, one short sentence each, that its report opens
    with: the end-of-run summary and `probe runs` carry them after the letter warnings."""


@dataclass(frozen=True)
class Tables:
    """How a run's prompts and generations are stored (forced choice: `probe.benches.forced.LETTER_TABLES`)."""

    prompts_schema: pa.Schema
    prompt_rows: Callable[[Sequence[RenderedPrompt], Sequence[int]], list[dict[str, Any]]]
    """`(rendered prompts, shared-prefix lengths) → prompts.parquet rows` in `prompts_schema`."""
    generations_schema: pa.Schema
    parse_generation: Callable[[RenderedPrompt, str, PreparedBench], dict[str, Any]]
    """`(prompt, generated text, bench) → generations.parquet columns` besides `prompt_id` and
    `text` (a parsed letter, an answer with thinking removed, …)."""


@dataclass(frozen=True)
class Judging:
    """What a bench asks a judge (the default: nothing)."""

    jobs: Callable[[PreparedBench, Sequence[Mapping[str, Any]]], list[JudgeJob]] = no_judging
    """`(bench, generations rows) → what to ask the judge` (empty: nothing to judge); each
    verdict becomes a `judgements.parquet` row (`verdict_row`)."""
    judges: tuple[str, ...] = ()
    """The judges (`judge.name`) that can answer its judge jobs, its default first (a run given no
    judge option judges with it); empty: it never asks one. A run that will judge with another is
    refused before the model loads."""
    schema: pa.Schema = judgements_schema()
    """`judgements.parquet` (`probe.results.schemas.judgements_schema` over the columns that
    identify its verdicts and its judge tasks' verdict columns); only a bench that judges needs one."""
    errors: Callable[[Mapping[str, Any]], int] = judge_errors
    """`metrics.json → how many judge verdicts failed` (left out of its metrics; the run's summary
    warns of them), wherever its metrics count them."""

    @property
    def default(self) -> str | None:
        """The judge a run of this bench uses when the command line names none (the first of `judges`)."""
        return self.judges[0] if self.judges else None


@dataclass(frozen=True)
class Data:
    """Where a bench's prompts come from: its config block's type and the loader that validates the
    data and expands it into prompts."""

    spec_type: type
    """Frozen dataclass of the `bench:` config block (must have `name` and `kind` fields)."""
    prepare: Callable[[Any, bool, Path], PreparedBench]
    """`(bench spec, generation mode?, data cache dir) → PreparedBench`; validates the data
    where it enters."""

    def spec_from(self, values: Mapping[str, Any]) -> Any:
        """The typed bench spec of a config block (strict: unknown keys and bad values stop)."""
        return bench_spec(self.spec_type, values)


@dataclass(frozen=True)
class BenchHead:
    """What both task builders (`ForcedChoice`, `OpenAnswer`) take first: the bench's registry name,
    display name, config block's type and loader."""

    kind: str
    """Registry name; a bench config selects it with `kind:`."""
    title: str
    """Display name in reports."""
    spec_type: type
    """Frozen dataclass of the `bench:` config block (with `name` and `kind` fields)."""
    prepare: Callable[[Any, bool, Path], PreparedBench]
    """`(bench spec, generation mode?, data cache dir) → PreparedBench`: the validated data and the
    prompts of its design (a forced-choice bench's with its letters; an open-answer bench's with
    `letters=()`, `cue=None`)."""

    @property
    def data(self) -> Data:
        """Its `Task.data`."""
        return Data(spec_type=self.spec_type, prepare=self.prepare)


Debias = Callable[[Run, float], "np.ndarray | None"]
"""`(run, temperature) → [prompt, letter]` choice distribution with the letter prior removed (None:
the design cannot estimate it)."""


@dataclass(frozen=True)
class Scoring:
    """What a run's stored tables become: its metrics, their headline, its report and figures."""

    metrics: Callable[[Run, np.ndarray | None, AnalysisOptions], MetricsTree]
    """`(run, prompt mask or None, options) → metrics.json` entries beyond `bench` and `model`,
    computed from the stored tables only."""
    headline: Callable[[Mapping[str, MetricValue]], Headline]
    """`metrics.json → (point-estimate tree, its ci95 tree)` that `Column.path`s index."""
    report: Callable[[Mapping[str, Any], Run], str]
    """`(metrics.json, run) → report.md` (markdown; the run's tables for listings such as
    invalid generations)."""
    figures: Callable[[Run, Path], list[Figure]] = no_figures
    """A run's figures, written into the given directory."""
    debiased: Debias | None = None
    """The choice distribution with the letter prior removed (forced choice), behind
    `Run.group_distribution(reading="debiased")`; None: no debiased reading (open answers have no
    letters)."""
    unit: str = "item_id"
    """The `prompts.parquet` column whose values the bootstrap resamples (items; LocQA's
    templates). Paired comparisons need two runs with the same set of them."""


@dataclass(frozen=True)
class TextForms:
    """A bench's answer-text reading (`backend.mode=text|letters+text`, `probe.prompts.text_forms`);
    a bench with one has a `text_form` field in its spec."""

    forms: tuple[str, ...]
    """The formulations it supports (`bench.text_form`)."""
    message: TextMessage
    """`(item, letter prompt, form) → the text reading's user message`."""


@dataclass(frozen=True)
class Factors:
    """The prompt factors a bench's protocol admits (`probe.prompts.factors`; the run's `factors`
    key may vary only these)."""

    names: tuple[str, ...]
    """The factors it admits (`probe.prompts.variants.SETTING_FACTORS`: the cue and the system
    message, which every forced-choice prompt takes; `labels`, `instruction` and `layout` need
    `reword`)."""
    reword: Reword | None = None
    """`(item, prompt, wording) → user message` under another label set, instruction line or
    option layout (`probe.prompts.variants`); None: it admits none of those factors."""
    cube: FactorCube = share_cube
    """A factor run's `[item, variant, group]` response for the format-robustness analysis: by
    default the options' group shares (`probe.metrics.variant_shares.share_cube`); a bench whose
    groups are not its options' supplies its own (GlobalOpinionQA: countries)."""


@dataclass(frozen=True)
class Task:
    """Everything one benchmark declares, as capabilities generic code asks for; an optional one
    a bench lacks is None (`task.text is not None`), never a stand-in that fails when called."""

    kind: str
    """Registry name; a bench config selects it with `kind:`."""
    title: str
    """Display name in reports (`DiSCo`)."""
    answers: Answers
    """`letters`: forced choice, read from letter log-probs (or, with `backend.mode=generate`,
    parsed from generated text); `open`: answers are generated and read by a judge (a plain
    string names the same value)."""
    data: Data
    """Its config block's type and its loader."""
    scoring: Scoring
    """Its metrics, headline, report and figures, from the stored tables."""
    presentation: Presentation
    """Its columns and figures in the sweep reports and the temperature curve."""
    tables: Tables
    """Its `prompts.parquet` and `generations.parquet`."""
    judging: Judging = Judging()
    """What it asks a judge, which judges can answer, and its `judgements.parquet` (default: nothing)."""
    design: Design = Design()
    """The parts its prompts' design fields play in generic analyses: the field of the conditions
    analysed apart, of the group a cue names, of the option rotation; the conditions interventions
    compare by default and the one the logit lens reads (`probe.types.Design`; default: none)."""
    text: TextForms | None = None
    """Its answer-text reading; None: none, and `backend.mode=text|letters+text` is refused."""
    factors: Factors | None = None
    """The prompt factors it admits; None: none, and a run with factors is refused."""
    modes: tuple[tuple[str, Task], ...] = ()
    """`bench.mode` value → the task that runs it, when one bench offers readings that differ in
    kind (open answers and scored texts): the run's spec and its recorded `kind` become that
    task's, so a stored run finds it again (`probe.benches.registry.task_of`); registered with
    this one. Empty: one task for every mode."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "answers", Answers(self.answers))  # "letters" given as a string is typed here

    def for_mode(self, mode: Any) -> Task:
        """The task that runs `bench.mode=mode` (this one unless `modes` names another)."""
        return dict(self.modes).get(str(mode), self)

    def spec_from(self, values: Mapping[str, Any]) -> Any:
        """The typed bench spec of a config block (strict: unknown keys and bad values stop)."""
        return self.data.spec_from(values)


def bench_spec(spec_type: type, values: Mapping[str, Any]) -> Any:
    """A typed bench spec from a config block or a manifest's recorded one; `module` (which
    module registered the kind) is the registry's key, not the spec's."""
    spec = build(spec_type, {k: v for k, v in values.items() if k != "module"}, "bench")
    if hasattr(spec, "name"):
        check_name(spec.name, "bench.name")  # it names the run directory
    if getattr(spec, "sha256", None) == "":
        raise ProbeInputError("bench.sha256: expected a 64-hex-digit sha256 or null (no pinning), got '' — an "
                              "empty string would turn the check off silently")
    return spec


def verdict_row(job: JudgeJob, result: JudgeResult) -> dict[str, Any]:
    """The `judgements.parquet` row of one verdict: the job's identifying columns, the verdict's
    fields (null where the judge failed), the error and the judge; the columns of other tasks
    are left out (null in the table)."""
    out = result.output or {}
    columns = [f.name for f in judge_task(job.request.task).columns]
    row = {**job.row, **{c: out.get(c) for c in columns if c not in job.row}}
    return {**row, "judge_error": result.error, "judge": result.judge, "dropped": out.get("dropped") or None}
