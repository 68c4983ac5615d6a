"""Plain mappings (from Hydra, JSON or Python) → typed frozen dataclasses, strictly.

Configs may contain only keys the code reads: an unknown key is a typo until proven
otherwise, so it stops the run with the list of valid keys. Every scalar is type-checked
(`batch_tokens=abc` is an error, not a TypeError after the model loads) and range-checked
where the field is annotated with a bound, e.g. `batch_tokens: Annotated[int, Ge(1)]`.
Two bounds hold everywhere without an annotation: a float is finite (`inf` or `nan` as a
temperature or a timeout only fails hours later, inside numpy) and an int fits in 64 bits (what
numpy and torch hold). Seeds are `Seed` (what every RNG accepts); a sequence the code needs
entries in is annotated `NonEmpty()`. Messages are one line: the key, the value, what is allowed.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import math
import sys
import textwrap
import types
import typing
from collections.abc import Mapping, Sequence, Sized
from functools import cache
from pathlib import Path
from typing import Annotated, Any, TypeVar

from probe.errors import ProbeInputError

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Ge:
    """A lower bound (inclusive) on a numeric field."""

    bound: float

    def check(self, value: float) -> bool:
        return value >= self.bound

    def __str__(self) -> str:
        return f"≥ {_number(self.bound)}"


@dataclasses.dataclass(frozen=True)
class Gt:
    """A lower bound (exclusive) on a numeric field."""

    bound: float

    def check(self, value: float) -> bool:
        return value > self.bound

    def __str__(self) -> str:
        return f"> {_number(self.bound)}"


@dataclasses.dataclass(frozen=True)
class Le:
    """An upper bound (inclusive) on a numeric field."""

    bound: float

    def check(self, value: float) -> bool:
        return value <= self.bound

    def __str__(self) -> str:
        return f"≤ {_number(self.bound)}"


@dataclasses.dataclass(frozen=True)
class Lt:
    """An upper bound (exclusive) on a numeric field."""

    bound: float

    def check(self, value: float) -> bool:
        return value < self.bound

    def __str__(self) -> str:
        return f"< {_number(self.bound)}"


@dataclasses.dataclass(frozen=True)
class ZeroOrGe:
    """A count that is 0 (the feature off) or at least `bound`."""

    bound: float

    def check(self, value: float) -> bool:
        return value == 0 or value >= self.bound

    def __str__(self) -> str:
        return f"0 or ≥ {_number(self.bound)}"


@dataclasses.dataclass(frozen=True)
class NonEmpty:
    """A sequence field that needs at least one entry (an empty list would leave nothing to do)."""

    def check(self, value: Sized) -> bool:
        return len(value) > 0


Seed = Annotated[int, Ge(0), Lt(2**32)]
"""A random seed: numpy's legacy and torch's seeding take 0 ≤ seed < 2^32."""

INT64 = 2**63
"""Every integer option lies in [-2^63, 2^63): what numpy and torch hold without overflow."""


def nearest(word: str, candidates: Sequence[str]) -> str | None:
    """The candidate closest to a misspelt `word`, if one is close (difflib's ratio ≥ 0.6)."""
    found = difflib.get_close_matches(word, list(candidates), n=1)
    return found[0] if found else None


def _number(bound: float) -> str:
    """A bound as written in a message: integers in full (1000000, 4294967296), others `%g`."""
    return str(int(bound)) if float(bound).is_integer() and abs(bound) < 1e16 else f"{bound:g}"


def build(cls: type[T], values: Mapping[str, Any] | None, where: str) -> T:
    """Construct dataclass `cls` from `values`, recursing into nested dataclass fields.

    Lists become tuples where the field is a tuple; `where` names the config block in errors
    (empty for the top level).
    """
    if values is not None and not isinstance(values, Mapping):
        raise ProbeInputError(f"{where}: expected a mapping of keys to values, got {values!r}")
    values = dict(values or {})
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]  # not init: derived
    unknown = sorted(set(values) - set(fields))
    if unknown:
        close = nearest(unknown[0], list(fields))
        hint = f"did you mean {close!r}? " if close else ""
        raise ProbeInputError(f"{where or 'config'}: unknown key(s) {unknown}; {hint}valid keys: {sorted(fields)}")
    hints = _hints(cls)
    kwargs = {name: coerce(hints[name], value, f"{where}.{name}" if where else name) for name, value in values.items()}
    missing = [n for n, f in fields.items() if n not in kwargs and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ProbeInputError(f"{where or 'config'}: missing required key(s) {missing}")
    return cls(**kwargs)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def coerce(hint: Any, value: Any, where: str) -> Any:
    """`value` checked against the type `hint` (and its `Annotated` bounds); tuples from lists."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        try:
            out = coerce(args[0], value, where)
        except ProbeInputError:
            if typing.get_origin(args[0]) is tuple:  # the element's own message names the element
                raise
            raise ProbeInputError(f"{where}: expected {_describe(hint)}, got {value!r}") from None
        for bound in args[1:]:
            if out is not None and hasattr(bound, "check") and not bound.check(out):
                if isinstance(bound, NonEmpty):
                    raise ProbeInputError(f"{where}: expected a non-empty list, got {value!r}")
                raise ProbeInputError(f"{where}: {value!r} is out of range; expected a value {bound}")
        return out
    if hint is Any:
        return value
    if value is None:
        if origin in (typing.Union, types.UnionType) and type(None) in args:
            return None
        raise ProbeInputError(f"{where}: null is not allowed; expected {_describe(hint)}")
    if origin in (typing.Union, types.UnionType):
        for a in (a for a in args if a is not type(None)):
            try:
                return coerce(a, value, where)
            except ProbeInputError:
                continue
        raise ProbeInputError(f"{where}: {value!r} is not {_describe(hint)}")
    if origin is typing.Literal:
        if value not in args:
            raise ProbeInputError(f"{where}: {value!r} is not one of {list(args)}")
        return value
    if dataclasses.is_dataclass(hint):
        if isinstance(value, hint):  # type: ignore[arg-type]  # already built (from Python, not a config file)
            return value
        if not isinstance(value, Mapping):
            raise ProbeInputError(f"{where}: expected a mapping, got {value!r}")
        return build(hint, value, where)  # type: ignore[arg-type]
    if origin is tuple:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise ProbeInputError(f"{where}: expected a list, got {value!r}")
        elem = args[0] if args else Any
        return tuple(coerce(elem, v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict or hint is dict:
        if not isinstance(value, Mapping):
            raise ProbeInputError(f"{where}: expected a mapping, got {value!r}")
        return dict(value)
    return _scalar(hint, value, where)


def _scalar(hint: Any, value: Any, where: str) -> Any:
    # bool is a subclass of int, so `True` must not pass as a batch size, nor 1 as a flag.
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            if -INT64 <= value < INT64:
                return value
            raise ProbeInputError(f"{where}: {value!r} does not fit in 64 bits; expected an integer from -2^63 "
                                  "to 2^63 - 1")
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and _finite(value):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif isinstance(hint, type):
        if isinstance(value, hint):
            return value
    else:
        return value
    raise ProbeInputError(f"{where}: expected {_describe(hint)}, got {value!r}")


def _finite(value: float) -> bool:
    """`value` is a finite float, or an int that converts to one (float(10**400) would overflow)."""
    return abs(value) <= sys.float_info.max if isinstance(value, int) else math.isfinite(value)


def _describe(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        bounds = [b for b in args[1:] if not isinstance(b, NonEmpty)]
        base = "a non-empty list" if len(bounds) < len(args) - 1 else _describe(args[0])
        return " ".join([base, " and ".join(str(b) for b in bounds)]).strip()
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if origin is typing.Literal:
        return f"one of {list(args)}"
    if origin is tuple:
        return "a list"
    names = {bool: "true or false", int: "an integer", float: "a finite number", str: "a string",
             type(None): "null"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))


def field_docs(cls: type) -> dict[str, str]:
    """Each field's attribute docstring (the string literal right below it in the class body),
    for `--help` and the generated config files. A field redeclared without one (a subclass
    changing only its default) keeps the docstring of the nearest base class that has one."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__[:-1]):  # base first, so a subclass's own docstring wins
        docs.update(_own_field_docs(klass))
    return docs


def _own_field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings written in `cls`'s own body."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, after in zip(body, body[1:] + [None]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def describe_fields(cls: type) -> list[tuple[str, str, Any, str]]:
    """`(name, type description, default, doc)` for every field of a config dataclass."""
    hints, docs, out = _hints(cls), field_docs(cls), []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else "(required)")
        out.append((f.name, _describe(hints[f.name]), default, docs.get(f.name, "")))
    return out


def package_conf_dir() -> Path:
    """The Hydra config tree: `conf/` at the top of a checkout, which the wheel ships inside the
    package as `probe/conf` (pyproject's package-dir mapping), so an installed probe finds it too."""
    here = Path(__file__).resolve().parent
    for tree in (here / "conf", here.parent / "conf"):
        if (tree / "config.yaml").is_file():
            return tree
    raise FileNotFoundError(f"probe's config tree is missing: neither {here / 'conf'} (installed) nor "
                            f"{here.parent / 'conf'} (checkout) holds config.yaml; reinstall probe")
