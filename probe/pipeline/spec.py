"""A run's typed configuration: what the entry point builds from the Hydra config, validated
before anything is written, and what `probe.pipeline.execute` takes from plain Python.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from probe.backends.reading import Reading
from probe.backends.specs import BACKENDS, BackendSpec, HFBackendSpec
from probe.backends.taps import MechSpec
from probe.benches.orders import ORDER_KEYS
from probe.benches.registry import get_task
from probe.benches.task import Task
from probe.config import Ge, Gt, Le, Seed, ZeroOrGe, build
from probe.errors import ProbeInputError
from probe.judges import JudgeSpec
from probe.judges.credentials import check_url
from probe.judges.registry import judge_choices
from probe.metrics.core import MAX_BOOT, MIN_BOOT, AnalysisOptions
from probe.models import ModelSpec, check_source
from probe.pipeline.intervention import InterventionSpec, NoIntervention, intervention_spec
from probe.pipeline.plan import ReadingPlan, reading_plan
from probe.pipeline.run_info import RunInfo
from probe.pipeline.shard_plan import Shard
from probe.prompts.factors import (
    BUILTIN_FACTORS,
    DEFAULT_MAX_VARIANTS,
    FactorError,
    Variant,
    expand,
    load_levels,
)


C = TypeVar("C")


@dataclass(frozen=True)
class AnalysisSpec:
    """The `analysis:` block: how stored log-probs become metrics, and what the forward pass
    also records for mechanistic follow-ups."""

    temperature: Annotated[float, Gt(0)] = 1.0
    """Expected metrics at sampling temperature T; greedy (T → 0) is always reported too."""
    n_boot: Annotated[int, ZeroOrGe(MIN_BOOT), Le(MAX_BOOT)] = 5000
    """Bootstrap resamples (of items; LocQA: templates) behind every ci95 interval: 0 (none), or 10 to 1,000,000."""
    seed: Seed = 0
    """Bootstrap seed."""
    letter_prior_ratio: Annotated[float, Gt(1)] = 2.0
    """Warn that the letter drives the answers when its largest prior or pick share exceeds this × 1/K (capped at (1 + 1/K)/2)."""
    min_letter_mass: Annotated[float, Ge(0), Le(1)] = 0.5
    """Prompt factors: variants whose median letter mass is below this are left out of the split and verdicts (0: none)."""
    logit_lens: bool = False
    """Store [prompt, layer, letter] letter log-probs through the logit lens (lens.safetensors)."""
    capture_layers: tuple[int, ...] = ()
    """Residual stream at the answer position after these layers (activations.safetensors)."""
    capture_dtype: Literal["float32", "float16"] = "float32"
    """float32, or float16 (half the disk)."""

    @property
    def options(self) -> AnalysisOptions:
        """The metric options."""
        return AnalysisOptions(temperature=self.temperature, n_boot=self.n_boot, seed=self.seed,
                               letter_prior_ratio=self.letter_prior_ratio, min_letter_mass=self.min_letter_mass)

    @property
    def mech(self) -> MechSpec:
        """What the scoring forward pass records besides the scores."""
        return MechSpec(logit_lens=self.logit_lens, capture_layers=self.capture_layers,
                        capture_dtype=self.capture_dtype)


@dataclass(frozen=True)
class BenchRef:
    """A bench spec with the task it belongs to (and the module that registered it, if any)."""

    task: Task
    spec: Any
    module: str | None = None
    shard: Shard | None = None
    """`bench.shard=i/n`: this run scores one of n slices of whole items (`probe.pipeline.shard_plan`)."""

    def record(self, text_reading: bool = False) -> dict[str, Any]:
        """The bench config as recorded in the run key and manifest (complete, with defaults; the
        shard only when set, so an unsharded run's key is the merged shards' key; `text_form`
        only with a text reading, and the `orders*` keys only off the default `rotations`, so a letter
        run's key and manifest are what they always were)."""
        out = asdict(self.spec)
        if not text_reading:
            out.pop("text_form", None)
        if out.get("orders", "rotations") == "rotations":
            for key in ORDER_KEYS:
                out.pop(key, None)
        if self.module:
            out["module"] = self.module
        return {**out, "shard": str(self.shard)} if self.shard else out


def bench_ref(values: Mapping[str, Any]) -> BenchRef:
    """The task named by `values["kind"]` (importing `values["module"]` first when given; the task
    of `values["mode"]` when the kind's `Task.modes` names one), its typed spec built from the
    rest, and the shard `values["shard"]` names (`"i/n"`, or null)."""
    values = dict(values)
    module = values.pop("module", None)
    shard = values.pop("shard", None)
    if "kind" not in values:
        raise ProbeInputError(f"bench: missing key 'kind' (the registered bench kind); got keys {sorted(values)}")
    task = get_task(str(values["kind"]), module)
    if task.for_mode(values.get("mode")) is not task:  # the mode's own task; its kind is what runs record
        task = task.for_mode(values.get("mode"))
        values["kind"] = task.kind
    return BenchRef(task=task, spec=task.spec_from(values), module=module,
                    shard=None if shard is None else Shard.parse(shard))


def backend_spec(values: Mapping[str, Any]) -> BackendSpec:
    """The spec of the backend `values["name"]` names (hf when absent)."""
    name = values.get("name", "hf")
    if name not in BACKENDS:
        raise ProbeInputError(f"backend.name: unknown backend {name!r}; available: {sorted(BACKENDS)}")
    return build(BACKENDS[name], values, "backend")


def _typed(cls: type, where: str) -> Callable[[Mapping[str, Any]], Any]:
    """The builder of a block that is one dataclass."""
    return lambda values: build(cls, values, where)


def block(builder: Callable[[Mapping[str, Any]], Any]) -> dict[str, Any]:
    """Field metadata of a `RunConfig` field that is a config block, built from its mapping by `builder`."""
    return {"block": builder}


NOT_CONFIG = {"config": False}
"""Field metadata of a `RunConfig` field the entry point fills, not the config tree."""


PREDICTED_DEVICES = ("h200", "h100", "a100", "cpu")
"""The devices a dry run predicts the scoring time on (`predict_device`; its other value skips it)."""


@dataclass(frozen=True)
class RunConfig:
    """Everything one run needs, typed and validated."""

    model: ModelSpec = field(metadata=block(_typed(ModelSpec, "model")))
    bench: BenchRef = field(metadata=block(bench_ref))
    """The bench and its task (`bench_ref` builds one from a bench config mapping)."""
    out_dir: Path = field(metadata=NOT_CONFIG)
    backend: BackendSpec = field(default_factory=HFBackendSpec, metadata=block(backend_spec))
    analysis: AnalysisSpec = field(default_factory=AnalysisSpec, metadata=block(_typed(AnalysisSpec, "analysis")))
    judge: JudgeSpec = field(default_factory=JudgeSpec, metadata=block(_typed(JudgeSpec, "judge")))
    judge_model: ModelSpec | None = field(default=None, metadata=NOT_CONFIG)
    """The LLM judge's model; None = the run's own model."""
    intervention: InterventionSpec = field(default_factory=NoIntervention, metadata=block(intervention_spec))
    """Activation patching or steering inside the scoring pass (`probe.pipeline.intervention`)."""
    progress: bool = True
    """Progress bar with prompts/s and ETA."""
    shard_size: Annotated[int, Ge(1)] = 4096
    """Prompts per checkpointed score part; a killed run resumes from its last complete part."""
    part_seconds: Annotated[float, Gt(0)] = 60.0
    """Also cut a score part after the batch that ends this many seconds of scoring since the last one."""
    dry_run: bool = False
    """Check data and config, render every prompt, write prompts.parquet, print samples, token
    counts and a memory estimate; no weights load and nothing is scored."""
    predict_device: Literal["h200", "h100", "a100", "cpu", "none"] = "h200"
    """Dry run: predict the scoring time of the plan on this device (pass-level roofline; cpu is measured; none skips it)."""
    factors: tuple[str | dict[str, str], ...] = ()
    """Prompt factors: factor names (their full factorial, e.g. [labels,cue]) or variants ({factor: level} each); empty: the bench's own prompt only."""
    factor_levels: str | None = None
    """A YAML or JSON file of more factor levels: {factor: {level: text or [labels]}}."""
    max_variants: Annotated[int, Ge(1)] = DEFAULT_MAX_VARIANTS
    """The most prompt variants `factors` may expand to."""
    variants: tuple[Variant, ...] = field(default=(), init=False)
    """The variants `factors` expands to (checked as the config is built); empty without factors."""
    plan: ReadingPlan = field(init=False)
    """The passes the run executes, resolved from the bench's answers, `backend.mode`, the
    backend's capabilities and `dry_run` (`probe.pipeline.plan`)."""
    run: RunInfo = field(default_factory=RunInfo, metadata=block(_typed(RunInfo, "run")))
    """The `run:` block (its label): presentation only, not in the run key."""
    launch_record: Mapping[str, str] = field(default_factory=dict, metadata=NOT_CONFIG)
    """Files recording how the run was launched (path in the run directory → text, e.g. the
    composed Hydra config), written once the directory is claimed."""

    def __post_init__(self) -> None:
        # Every check across blocks runs here, so a bad combination stops before `prepare`
        # (which may download a dataset) and before any model loads.
        object.__setattr__(self, "plan", reading_plan(self.bench.task, self.backend, self.dry_run))
        for model in (self.model, self.judge_model):
            if model is not None:
                check_source(model)
        _judge_fits(self)
        _scoring_only(self)
        _shardable(self)
        _text_reading(self)
        object.__setattr__(self, "variants", _variants(self))

    @property
    def predicts(self) -> bool:
        """Whether a dry run predicts the scoring time (`predict_device` names a device)."""
        return self.predict_device in PREDICTED_DEVICES

    @property
    def generates(self) -> bool:
        """Whether answers are generated (open answers, or `backend.mode=generate`), not letters scored."""
        return self.plan.generation

    @property
    def text_reading(self) -> bool:
        """Whether option texts are scored as continuations (`backend.mode=text|letters+text`)."""
        return self.plan.text_pass

    @property
    def judged(self) -> bool:
        """Whether a judge reads this run's answers: its task asks one, and answers are generated."""
        return bool(self.bench.task.judging.judges) and self.generates


def _judge_fits(cfg: RunConfig) -> None:
    task, judge = cfg.bench.task, cfg.judge
    if judge.base_url:  # read by the URL libraries before anything is written (its credentials too)
        check_url(judge.base_url)
    if not cfg.judged:
        return
    if judge.name not in task.judging.judges:
        raise ProbeInputError(f"judge={judge.name} cannot judge {task.title}; its judges: "
                              f"{judge_choices(task.judging.judges)}")
    judge.kind.check(judge)  # e.g. an endpoint's URL: else found only once all is generated


def _scoring_only(cfg: RunConfig) -> None:
    """The forward-pass taps and interventions live in the HF scorer's letter scoring pass."""
    if cfg.analysis.mech.active and not cfg.plan.hooks:
        raise ProbeInputError("analysis.logit_lens / capture_layers need backend=hf and letter scoring")
    if cfg.intervention.active and not (cfg.plan.hooks and cfg.bench.shard is None):
        raise ProbeInputError(f"intervention={cfg.intervention.name} needs backend=hf and letter scoring, unsharded")


def _shardable(cfg: RunConfig) -> None:
    if cfg.bench.shard is not None and not getattr(cfg.backend, "prefix_reuse", True):
        raise ProbeInputError("bench.shard needs backend.prefix_reuse=true: plain batches sort prompts by length "
                              "across items, so no slice of whole items is a set of whole batches")


def _text_reading(cfg: RunConfig) -> None:
    """The text reading runs (on the HF scorer or a vLLM engine) for a bench that has one, on the unedited model."""
    mode, task = cfg.backend.reading, cfg.bench.task  # as asked: an open-answer bench refuses a text reading
    if not mode.reads_text:
        return
    if task.text is None:
        raise ProbeInputError(f"backend.mode={mode}: {task.title} has no answer-text reading (its answers are "
                              f"{task.answers}); expected backend.mode=letters or generate")
    if cfg.bench.shard is not None:
        raise ProbeInputError(f"backend.mode={mode} cannot be sharded yet (bench.shard); run it unsharded")
    if cfg.intervention.active or (not mode.reads_letters and cfg.analysis.mech.active):
        raise ProbeInputError(f"backend.mode={mode}: interventions and (in text mode) logit lens / captured layers "
                              "apply to letter scores only; expected intervention=none and, for them, "
                              "backend.mode=letters+text")


def _variants(cfg: RunConfig) -> tuple[Variant, ...]:
    """The prompt variants of `factors` (with the levels file's levels), checked against what the
    bench admits and the cap; empty without factors. Factors need letter scoring without an
    intervention; a factor run may be sharded (a shard holds every variant of its items)."""
    factors = BUILTIN_FACTORS if cfg.factor_levels is None else load_levels(cfg.factor_levels)
    if not cfg.factors:
        return ()
    if cfg.plan.reading is not Reading.LETTERS or cfg.intervention.active:
        raise FactorError("factors: prompt factors need letter scoring without an intervention "
                          f"(backend.mode=letters, intervention=none); got backend.mode={cfg.backend.mode}, "
                          f"intervention={cfg.intervention.name}, {cfg.bench.task.answers} answers")
    admitted = () if cfg.bench.task.factors is None else cfg.bench.task.factors.names
    return expand(list(cfg.factors), factors, admitted, cfg.max_variants)


def _judge_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The `judge:` block, its name the bench's default judge where it names none (`judge=auto`,
    the config tree's default: `judge.name: null`)."""
    judge = dict(values.get("judge") or {})
    bench = values.get("bench")
    if judge.get("name") is not None or not isinstance(bench, Mapping) or "kind" not in bench:
        return judge
    default = bench_ref(bench).task.judging.default
    return {**judge, "name": default} if default is not None else judge


def _no_judge_options_without_a_judge(cfg: RunConfig, overrides: Sequence[str]) -> None:
    """A `judge…` override on a run that judges nothing (letter scoring) would be silently ignored."""
    if cfg.judged:
        return
    given = [o for o in overrides if o.lstrip("+~").split("=")[0].split(".")[0] == "judge"]
    if given:
        raise ProbeInputError(f"{given}: this run judges nothing; judge options apply to open-answer benches "
                              "and to backend.mode=generate on benches whose generations a judge reads")


def top_level(cls: type = RunConfig) -> tuple[str, ...]:
    """The config tree's top-level keys: `RunConfig`'s fields, less those the entry point fills."""
    return tuple(f.name for f in fields(cls) if f.init and f.metadata.get("config", True))


def pass_through(cls: type = RunConfig) -> tuple[str, ...]:
    """The top-level keys that are plain values (`progress`, `dry_run`, …), not blocks."""
    return tuple(f.name for f in fields(cls) if f.name in top_level(cls) and "block" not in f.metadata)


TOP_LEVEL = top_level()
"""Every top-level config key, declared once: as a `RunConfig` field."""


def run_config(values: Mapping[str, Any], out_dir: Path, judge_model: ModelSpec | None = None,
               overrides: Sequence[str] = ()) -> RunConfig:
    """The typed run config of a composed config tree (every key checked; unknown keys stop, and
    so does any combination of values the run cannot honour).

    A run that names no judge (`judge=auto`, the default) judges with its bench's default
    (`Judging.default`). `overrides` are the command line's `key=value` overrides: a `judge…`
    option on a run that judges nothing is refused, which the composed tree cannot tell from
    its default, so the entry point passes them."""
    config = typed_config(RunConfig, values, {"out_dir": out_dir, "judge_model": judge_model})
    _no_judge_options_without_a_judge(config, overrides)
    return config


def typed_config(cls: type[C], values: Mapping[str, Any], filled: Mapping[str, Any]) -> C:
    """`cls` (`RunConfig`) from the composed tree: each block field built by its builder (an absent
    block is its defaults, `model` and `bench` required), each plain value passed through when
    given, and `filled` (what the entry point knows) added."""
    keys = top_level(cls)
    unknown = sorted(set(values) - set(keys))
    if unknown:
        raise ProbeInputError(f"config: unknown top-level key(s) {unknown}; valid keys: {sorted(keys)}")
    values = {**values, "judge": _judge_values(values)}
    built: dict[str, Any] = {}
    for f in fields(cls):
        if "block" in f.metadata:
            built[f.name] = f.metadata["block"](values[f.name] if f.default is MISSING and
                                                f.default_factory is MISSING else values.get(f.name) or {})
        elif f.name in keys and f.name in values:
            built[f.name] = values[f.name]
    return build(cls, {**built, **filled}, "")
