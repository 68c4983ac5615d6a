"""The manifest's nested records, typed: the analysis options a run was analysed with, its
intervention, its judge and its tokenizer (`probe.results.manifest` reads and writes the file).

Each record keeps the JSON object it was read from: `to_dict` gives it back key for key, in its
order, so a manifest read and written again is the same file, and keys this code does not type
(those of a newer probe) survive. A key the record lacks reads as None.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, TypeVar

from probe.errors import ProbeInputError

_R = TypeVar("_R")


def pick(cls: type[_R], raw: Any, where: str, file: str = "manifest.json",
         stored: Mapping[str, str] = MappingProxyType({})) -> _R:
    """A record of the typed fields of `cls` found in the JSON object `raw` (absent: None), with
    `raw` kept where `cls` has such a field; `stored` maps a field to the key it is stored under
    where the two differ."""
    if not isinstance(raw, dict):
        raise ProbeInputError(f"{file}: `{where}` must be a JSON object, got {type(raw).__name__}")
    values = {f.name: raw.get(stored.get(f.name, f.name))  # type: ignore[arg-type]
              for f in fields(cls) if f.name != "raw"}  # type: ignore[arg-type]
    if any(f.name == "raw" for f in fields(cls)):  # type: ignore[arg-type]
        values["raw"] = copy.deepcopy(raw)
    return cls(**values)


def as_json(value: Any) -> Any:
    """`value` as JSON stores it (tuples as lists)."""
    return json.loads(json.dumps(value))


@dataclass(frozen=True)
class AnalysisRecord:
    """The `analysis` block: the options the metrics were computed with and what the forward
    pass recorded (`probe.pipeline.spec.AnalysisSpec`, as stored)."""

    temperature: float | None
    n_boot: int | None
    seed: int | None
    letter_prior_ratio: float | None
    logit_lens: bool | None
    capture_layers: list[int] | None
    capture_dtype: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, raw: Any) -> AnalysisRecord:
        return pick(cls, raw, "analysis")

    def to_dict(self) -> dict[str, Any]:
        """The JSON object to store: the keys as read, in their order."""
        return copy.deepcopy(self.raw)

    def recorded(self, names: Collection[str]) -> dict[str, Any]:
        """The recorded values of the options `names` (those the run recorded, in its order)."""
        return {k: copy.deepcopy(v) for k, v in self.raw.items() if k in names}

    def same_as(self, options: Mapping[str, Any]) -> bool:
        """Whether `options` are exactly the recorded ones (compared as JSON stores them)."""
        return self.raw == as_json(dict(options))


FORWARD_PASS_OPTIONS = frozenset({"logit_lens", "capture_layers", "capture_dtype"})
"""Analysis options that change what the forward pass records: a stored run cannot be
re-analysed with others."""


INTERVENTION_STORED_AS: Mapping[str, str] = MappingProxyType({"group": "culture"})
"""The `intervention` record's fields stored under another key: the results contract keeps the
key a field was first stored under, so manifests and run keys of every version read alike."""


def stored_intervention(values: Mapping[str, Any]) -> dict[str, Any]:
    """An intervention spec's fields (`dataclasses.asdict`) as the record stores them, in order."""
    return {INTERVENTION_STORED_AS.get(k, k): v for k, v in values.items()}


@dataclass(frozen=True)
class InterventionRecord:
    """The `intervention` block (and the run key's): activation patching (`patch`) or a steering
    vector (`steer`), the config as given plus what the run resolved. Fields of the other kind
    are None."""

    name: str | None
    """`patch` or `steer`."""
    source: str | None
    """The source condition (patching: whose residual is written in; steering: v_c's cued prompts)."""
    dest: str | None
    """The destination condition (patching: the prompts patched; steering: v_c's uncued prompts)."""
    layers: list[int] | None
    """Patching: the layers asked for (empty: every layer)."""
    layers_resolved: list[int] | None
    """Patching: the 0-based layers patched, one at a time."""
    n_pairs: int | None
    """Patching: the source–destination pairs."""
    vectors: str | None
    """Steering: the run directory whose activations gave the vectors."""
    layer: int | None
    """Steering: the layer asked for (negative: from the end)."""
    layer_resolved: int | None
    """Steering: the 0-based layer after which the vector is added."""
    group: str | None
    """Steering: the group steered toward (stored as `culture`, `INTERVENTION_STORED_AS`)."""
    alpha: float | None
    positions: str | None
    """Steering: `last` (the answer position) or `all`."""
    vector_norm: float | None
    vector_sha256: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, raw: Any) -> InterventionRecord:
        return pick(cls, raw, "intervention", stored=INTERVENTION_STORED_AS)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object to store: the keys as read or built, in their order."""
        return copy.deepcopy(self.raw)

    @property
    def is_patching(self) -> bool:
        return self.name == "patch"

    @property
    def is_steering(self) -> bool:
        return self.name == "steer"


@dataclass(frozen=True)
class JudgeRecord:
    """The `judge` block: the judge's config (without the API key's variable name) and, for an
    LLM judge, the model it ran on."""

    name: str | None
    model: Any
    """HTTP judge: the API's model name; LLM judge: the model config it ran on."""
    base_url: str | None
    retries: int | None
    max_new_tokens: int | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, raw: Any) -> JudgeRecord:
        return pick(cls, raw, "judge")

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.raw)


@dataclass(frozen=True)
class TokenizerRecord:
    """The `tokenizer` block: its class, where it was loaded from and the sha256 of its vocabulary."""

    name_or_path: str | None
    sha256: str | None
    class_name: str | None
    raw: dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, raw: Any) -> TokenizerRecord:
        return replace(pick(cls, raw, "tokenizer"), class_name=raw.get("class"))  # stored as `class`, a keyword

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self.raw)


def record_or_none(cls: type[_R], raw: Any) -> _R | None:
    """`cls.from_dict(raw)`, or None where the manifest has no such block (null or absent)."""
    return None if raw is None else cls.from_dict(raw)  # type: ignore[attr-defined, no-any-return]
