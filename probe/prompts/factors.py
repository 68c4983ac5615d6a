"""Prompt factors: named ways a forced-choice prompt may be worded, each with levels, and their
expansion into the variants a run scores (the specification only; rendering comes later).

Level 0 of every factor is `protocol` — the bench's own wording (for `system`: `none`, no system
message beyond the model config's) — so variant 0 of any design is the protocol's prompt, and a
run without factors is one variant, today's run. Users add levels from a YAML or JSON file,
without code (`load_levels`); a bench says which factors its protocol admits (`admitted`).

Templates: an `instruction` level is a line with `{labels}` where the shown labels go (`A, B, C,
D`); a `layout` level is one option line with `{label}` and `{text}`. Literal braces in them are
written `{{` and `}}`. `cue` and `system` levels are plain text (no placeholders: a cue may well
hold a brace, as the protocol's JSON cue does).
"""

from __future__ import annotations

import difflib
import json
import math
import re
import stat
import string
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import product
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from probe.bounded import depth_limited_loader, loads_json, loads_yaml
from probe.errors import ProbeInputError, bounded_repr, os_errors

PROTOCOL = "protocol"
"""The name of level 0 of every factor but `system`, whose level 0 is `none`."""
DEFAULT_MAX_VARIANTS = 256
"""The most variants a design may expand to unless the caller allows more."""
_LEVEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")  # matched whole (`fullmatch`: no trailing newline)
MAX_LEVELS_BYTES = 1 << 20
"""The largest levels file read (1 MiB): a levels file is a few lines of wording."""


class FactorError(ProbeInputError, ValueError):
    """A factor design that cannot run: raised before anything is scored or written."""


@dataclass(frozen=True)
class Level:
    """One level of a factor. Level 0 (`text` and `labels` both None) keeps the protocol's own."""

    name: str
    text: str | None = None
    """An instruction line or option-line template, a cue or a system message (by factor)."""
    labels: tuple[str, ...] | None = None
    """A `labels` level's labels in display order; a K-option prompt uses the first K."""
    source: str = "built-in"
    """Where it was defined: `built-in` or the levels file."""

    @property
    def is_protocol(self) -> bool:
        """Whether this level leaves the protocol's prompt as it is."""
        return self.text is None and self.labels is None

    def labels_for(self, k: int) -> tuple[str, ...] | None:
        """The first `k` labels (None: the protocol's own); refused when the level has fewer."""
        if self.labels is None:
            return None
        if len(self.labels) < k:
            raise FactorError(f"labels level {self.name!r} ({self.source}) has {len(self.labels)} labels, the "
                              f"prompt shows {k} options")
        return self.labels[:k]


@dataclass(frozen=True)
class Factor:
    """A named way a prompt may be worded: its levels, level 0 the protocol's."""

    name: str
    levels: tuple[Level, ...]
    takes: Literal["text", "template", "labels"]
    """What a level holds: plain text, a template with `placeholders`, or a label set."""
    placeholders: tuple[str, ...] = ()
    """The fields a template level must hold, and the only ones it may."""
    description: str = ""

    def level(self, name: str) -> Level:
        """The level called `name`; refused naming the levels there are."""
        for level in self.levels:
            if level.name == name:
                return level
        raise FactorError(f"factor {self.name!r} has no level {bounded_repr(name)}{_close(name[:100], self.level_names)}"
                          f": expected one of {', '.join(self.level_names)} (more levels come from a levels file)")

    @property
    def level_names(self) -> tuple[str, ...]:
        """Its level names in order."""
        return tuple(level.name for level in self.levels)


@dataclass(frozen=True)
class Variant:
    """One wording of the prompt: a level of each factor of the design (variant 0: all level 0)."""

    index: int
    levels: tuple[tuple[str, Level], ...]
    """`(factor, level)` for every factor of the design, in design order."""

    def level(self, factor: str) -> Level:
        """Its level of `factor`; a factor the design does not vary keeps the protocol's wording
        (a stand-in `Level(PROTOCOL)`)."""
        return dict(self.levels).get(factor, Level(PROTOCOL))

    def level_names(self) -> dict[str, str]:
        """`{factor: level name}`: the variant's row of the factorial the analysis reads."""
        return {f: level.name for f, level in self.levels}

    @property
    def is_protocol(self) -> bool:
        """Whether every level is the protocol's."""
        return all(level.is_protocol for _, level in self.levels)

    @property
    def name(self) -> str:
        """`protocol`, or its non-protocol levels: `labels=digits,cue=bare`."""
        moved = [f"{f}={level.name}" for f, level in self.levels if not level.is_protocol]
        return ",".join(moved) or PROTOCOL


def _placeholders(text: str, where: str) -> list[tuple[str, str, str]]:
    """`(field, format spec, conversion)` of each `{field}` of a template; malformed braces are refused."""
    try:
        return [(field, spec or "", conv or "") for _, field, spec, conv in string.Formatter().parse(text)
                if field is not None]
    except ValueError as e:
        raise FactorError(f"{where}: {e} (write literal braces as {{{{ and }}}})") from e


def check_level(factor: Factor, level: Level, where: str) -> None:
    """Refuse a level its factor cannot use: a template without a placeholder it needs or with one
    it does not know, a label set that repeats or holds blanks, a name a variant cannot carry."""
    if not _LEVEL_NAME.fullmatch(level.name):
        raise FactorError(f"{where}: level name {bounded_repr(level.name)}: expected letters, digits, '_' or '-'")
    if factor.takes == "labels" and level.labels is not None:
        labels = level.labels
        bad = [x for x in labels if not x or x != x.strip() or any(c.isspace() for c in x)]
        if len(labels) < 2 or bad or len(set(labels)) != len(labels):
            raise FactorError(f"{where}: expected ≥ 2 distinct labels without spaces, got {list(labels)}")
    elif factor.takes == "template" and level.text is not None:
        parsed = _placeholders(level.text, where)
        fields = {field for field, _, _ in parsed}
        lacking = [p for p in factor.placeholders if p not in fields]
        if lacking:
            raise FactorError(f"{where}: the text lacks the placeholder {{{lacking[0]}}} that {factor.name} levels need "
                              f"(expected {', '.join('{' + p + '}' for p in factor.placeholders)}), got {bounded_repr(level.text)}")
        unknown = sorted(fields - set(factor.placeholders))
        if unknown:
            raise FactorError(f"{where}: unknown placeholder {{{unknown[0]}}}: {factor.name} levels may use only "
                              f"{', '.join('{' + p + '}' for p in factor.placeholders)} (literal braces: {{{{ }}}})")
        # a format spec or conversion reshapes the text: `{labels:>50000000}` pads a prompt to
        # megabytes, `{text:.0}` blanks every option
        shaped = [f"{{{field}{'!' + conv if conv else ''}{':' + spec if spec else ''}}}" for field, spec, conv in parsed
                  if spec or conv]
        if shaped:
            raise FactorError(f"{where}: {bounded_repr(shaped[0])} carries a format spec or conversion; expected a "
                              "bare placeholder")


def with_levels(factors: Mapping[str, Factor], extra: Mapping[str, object], source: str) -> dict[str, Factor]:
    """`factors` with the levels of `extra` (`{factor: {level name: text or [labels]}}`) appended,
    each checked (`check_level`); `source` names where they came from, for messages."""
    if not isinstance(extra, Mapping):
        raise FactorError(f"{source}: expected a mapping of factor → {{level: value}}, got {type(extra).__name__}")
    out = dict(factors)
    for name, levels in extra.items():
        if name not in out:
            raise FactorError(f"{source}: unknown factor {bounded_repr(name)}{_close(str(name)[:100], out)}: levels can be added to "
                              f"{', '.join(out)}")
        if not isinstance(levels, Mapping) or not levels:
            raise FactorError(f"{source}: factor {name!r}: expected a mapping of level name → value, "
                              f"got {bounded_repr(levels)}")
        factor = out[name]
        added = list(factor.levels)
        for level_name, value in levels.items():
            where = f"{source}: {name} level {bounded_repr(level_name)}"
            if str(level_name) in {x.name for x in added}:
                raise FactorError(f"{where}: factor {name!r} already has a level of that name")
            added.append(_level(factor, str(level_name), value, where, source))
            check_level(factor, added[-1], where)
        out[name] = replace(factor, levels=tuple(added))
    return out


def _level(factor: Factor, name: str, value: object, where: str, source: str) -> Level:
    """The `Level` a file's value makes: a list of strings for `labels`, a string otherwise."""
    if factor.takes == "labels":
        if not isinstance(value, Sequence) or isinstance(value, str) or not all(isinstance(x, str) for x in value):
            raise FactorError(f"{where}: expected a list of label strings, got {bounded_repr(value)}")
        return Level(name, labels=tuple(value), source=source)
    if not isinstance(value, str):
        raise FactorError(f"{where}: expected a string, got {type(value).__name__} {bounded_repr(value)}")
    return Level(name, text=value, source=source)


def load_levels(path: str | Path, factors: Mapping[str, Factor] | None = None) -> dict[str, Factor]:
    """The factors (default: the built-in ones) with the levels of a YAML (`.yaml`, `.yml`) or
    JSON (`.json`) file added: `{factor: {level name: value}}` — a string (an instruction with
    `{labels}`, an option line with `{label}` and `{text}`, a cue, a system message) or, for
    `labels`, a list of labels."""
    path = Path(path)
    if path.suffix not in (".yaml", ".yml", ".json"):
        raise FactorError(f"{path}: expected a .yaml, .yml or .json file of factor levels")
    with os_errors(f"cannot read the factor levels file {path}", "check the path"):
        text = _read_small(path)
    return with_levels(BUILTIN_FACTORS if factors is None else factors, _parse(path, text), str(path))


def _read_small(path: Path) -> str:
    """The text of a regular file of at most `MAX_LEVELS_BYTES`, checked before it is read: a FIFO
    would block for ever and `/dev/zero` fill memory."""
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise FactorError(f"{path}: not a regular file; factor_levels must name a YAML or JSON file")
    if info.st_size > MAX_LEVELS_BYTES:
        raise FactorError(f"{path}: {info.st_size} bytes, more than the {MAX_LEVELS_BYTES} a levels file may hold")
    with open(path, "rb") as f:
        data = f.read(MAX_LEVELS_BYTES + 1)
    if len(data) > MAX_LEVELS_BYTES:
        raise FactorError(f"{path}: more than the {MAX_LEVELS_BYTES} bytes a levels file may hold")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FactorError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from e


def _parse(path: Path, text: str) -> object:
    if path.suffix == ".json":
        try:
            return _bounded(lambda: loads_json(text, str(path), lambda pairs: _unique(path, pairs)))
        except json.JSONDecodeError as e:
            raise FactorError(f"{path}: not valid JSON: {e}") from e
    import yaml  # PyYAML, which Hydra installs; only a levels file needs it

    class _Loader(depth_limited_loader()):  # type: ignore[misc]
        """Safe YAML, at most `MAX_DEPTH` deep, that refuses a key given twice in one mapping
        (plain YAML keeps the last)."""

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[object, object]:
        loader.flatten_mapping(node)
        return _unique(path, [(loader.construct_object(k, deep=True), loader.construct_object(v, deep=True))
                              for k, v in node.value])

    _Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        return _bounded(lambda: loads_yaml(text, str(path), _Loader))
    except yaml.YAMLError as e:
        raise FactorError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from e


def _bounded(parse: Callable[[], object]) -> object:
    """`parse()`, its too-deep refusal as the levels file's own error type."""
    try:
        return parse()
    except ProbeInputError as e:
        raise FactorError(str(e)) from None


def _unique(path: Path, pairs: Sequence[tuple[object, object]]) -> dict[object, object]:
    """A mapping of `pairs`, refusing a key given twice (the later one would silently win)."""
    seen: dict[object, object] = {}
    for key, value in pairs:
        if key in seen:
            raise FactorError(f"{path}: {bounded_repr(key)} is given twice in one mapping; give each name once")
        seen[key] = value
    return seen


def expand(design: Sequence[str] | Sequence[Mapping[str, str]], factors: Mapping[str, Factor],
           admitted: Collection[str], max_variants: int = DEFAULT_MAX_VARIANTS) -> tuple[Variant, ...]:
    """The variants of a design, variant 0 the protocol's, checked before anything runs.

    `design` is either factor names — the full factorial of their levels, level 0 first, the last
    factor changing fastest (`["labels", "cue"]`: 3 × 3 = 9 variants) — or explicit variants,
    each `{factor: level}` (a factor left out keeps level 0); the protocol's variant is variant 0
    whether listed or not. Empty: the protocol alone. Refused: an unknown factor or level, a
    factor outside `admitted` (what the bench's protocol allows), a repeated factor or variant,
    more than `max_variants` variants (with the count)."""
    if isinstance(design, str):  # a string is a sequence of one-letter "factor names"
        raise FactorError(f"factors: expected a list of factor names, got the string {design!r} (write [{design}])")
    if all(isinstance(d, str) for d in design):
        return _factorial([str(d) for d in design], factors, admitted, max_variants)
    if all(isinstance(d, Mapping) for d in design):
        return _explicit([dict(d) for d in design if isinstance(d, Mapping)], factors, admitted, max_variants)
    raise FactorError(f"factors: expected factor names (a factorial) or variants ({{factor: level}} each), not a mix: "
                      f"{list(design)}")


def _factor(name: str, factors: Mapping[str, Factor], admitted: Collection[str], where: str) -> Factor:
    if name not in factors:
        raise FactorError(f"{where}: unknown factor {name!r}{_close(name, factors)}: expected one of {', '.join(factors)}")
    if name not in admitted:
        raise FactorError(f"{where}: factor {name!r} is not admitted by this bench's protocol: it admits "
                          f"{', '.join(a for a in factors if a in admitted) or 'no factor'}")
    return factors[name]


def _factorial(names: list[str], factors: Mapping[str, Factor], admitted: Collection[str],
               max_variants: int) -> tuple[Variant, ...]:
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise FactorError(f"factors: {repeated[0]!r} is named twice")
    chosen = [_factor(n, factors, admitted, "factors") for n in names]
    count = math.prod(len(f.levels) for f in chosen)
    if count > max_variants:
        sizes = " × ".join(f"{f.name} ({len(f.levels)})" for f in chosen)
        raise FactorError(f"factors: the factorial of {sizes} has {count} variants, more than the cap of "
                          f"{max_variants}: name fewer factors or raise the cap")
    return tuple(Variant(i, tuple(zip(names, cell))) for i, cell in enumerate(product(*(f.levels for f in chosen))))


def _explicit(listed: list[dict[str, str]], factors: Mapping[str, Factor], admitted: Collection[str],
              max_variants: int) -> tuple[Variant, ...]:
    used = [name for name in factors if any(name in entry for entry in listed)]
    for i, entry in enumerate(listed):
        for name in entry:
            _factor(str(name), factors, admitted, f"factors[{i}]")
    rows: list[tuple[str, ...]] = [tuple(factors[n].levels[0].name for n in used)]
    listed_at: dict[tuple[str, ...], int] = {}
    for i, entry in enumerate(listed):
        try:
            row = tuple(factors[n].level(str(entry.get(n, factors[n].levels[0].name))).name for n in used)
        except FactorError as e:
            raise FactorError(f"factors[{i}]: {e}") from e
        if row in listed_at:
            raise FactorError(f"factors[{i}]: the same levels as factors[{listed_at[row]}] ({entry})")
        listed_at[row] = i
        if row != rows[0]:  # the protocol's variant, listed or not, is variant 0
            rows.append(row)
    if len(rows) > max_variants:
        raise FactorError(f"factors: {len(rows)} variants (the protocol's included), more than the cap of "
                          f"{max_variants}: list fewer or raise the cap")
    return tuple(Variant(i, tuple((n, factors[n].level(lv)) for n, lv in zip(used, row)))
                 for i, row in enumerate(rows))


def _close(name: str, known: Collection[str]) -> str:
    """` (did you mean 'x'?)` for a near miss, else nothing."""
    match = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


# --- the built-in factors: data, each level checked by the tests -----------------------------

BUILTIN_FACTORS: Mapping[str, Factor] = MappingProxyType({f.name: f for f in (
    Factor("labels", takes="labels", description="the option labels", levels=(
        Level(PROTOCOL),  # the bench's own: A B C …
        Level("lower", labels=tuple("abcdefghijklmnopqrstuvwxyz")),
        Level("digits", labels=tuple(str(i) for i in range(1, 27))),
    )),
    Factor("layout", takes="template", placeholders=("label", "text"), description="how each option line is written",
           levels=(
               Level(PROTOCOL),  # the bench's own option lines (`A. text`)
               Level("paren", text="({label}) {text}"),
           )),
    Factor("cue", takes="text", description="what the answer turn starts with, pre-filled", levels=(
        Level(PROTOCOL),  # the bench's own cue
        Level("answer", text="Answer:"),
        Level("bare", text=""),  # nothing pre-filled: the chat template's bare generation prompt
    )),
    Factor("instruction", takes="template", placeholders=("labels",), description="the line asking for one option",
           levels=(
               Level(PROTOCOL),  # the bench's own instruction line
               Level("pick", text="Pick one of the given options and answer with its label only, one of {labels}, "
                                  "without any explanation."),
               Level("select", text="Select a single option from those given. Reply with nothing but its label "
                                    "({labels})."),
               Level("which", text="Which one of the given options do you choose? Give just the label of that "
                                   "option ({labels}) and no explanation."),
           )),
    Factor("system", takes="text", description="a system message", levels=(
        Level("none"),  # no system message beyond the model config's
        Level("neutral", text="You are a helpful assistant."),
    )),
)})
"""The factors every forced-choice bench may admit, in this order; level 0 of each is the protocol's."""
