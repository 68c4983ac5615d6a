"""Plain mappings (from Hydra, JSON or Python) → typed frozen dataclasses, strictly.

Configs may contain only keys the code reads: an unknown key is a typo until proven
otherwise, so it stops the run with the list of valid keys.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from probe.errors import ProbeInputError

T = TypeVar("T")


def build(cls: type[T], values: Mapping[str, Any] | None, where: str) -> T:
    """Construct dataclass `cls` from `values`, recursing into nested dataclass fields.

    Lists become tuples where the field is a tuple; `where` names the config block in errors.
    """
    values = dict(values or {})
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ProbeInputError(f"{where}: unknown key(s) {unknown}; valid keys: {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for name, value in values.items():
        kwargs[name] = _coerce(hints[name], value, f"{where}.{name}")
    missing = [n for n, f in fields.items() if n not in kwargs and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ProbeInputError(f"{where}: missing required key(s) {missing}")
    return cls(**kwargs)


def _coerce(hint: Any, value: Any, where: str) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _coerce(inner[0], value, where) if len(inner) == 1 else value
    if origin is typing.Literal:
        if value not in args:
            raise ProbeInputError(f"{where}: {value!r} is not one of {list(args)}")
        return value
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, Mapping):
            raise ProbeInputError(f"{where}: expected a mapping, got {value!r}")
        return build(hint, value, where)
    if origin is tuple:
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise ProbeInputError(f"{where}: expected a list, got {value!r}")
        return tuple(value)
    if origin is dict:
        return dict(value)
    if hint is float and isinstance(value, int):
        return float(value)
    return value
