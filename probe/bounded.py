"""JSON and YAML read with bounds: every reader of a file or cell the user or a run supplies (a
levels file, `manifest.json`, a run key, `.hydra/overrides.yaml`, a stored `human` cell) parses
through here, so a 200,000-deep nesting or a huge file is one line naming it, never a
`RecursionError` from the parser or from the code that walks the value afterwards.

Bounds: `MAX_DEPTH` levels of nesting (probe's own files nest fewer than 12) and, for files,
a size the caller names.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from probe.errors import ProbeInputError

MAX_DEPTH = 100
"""Most levels of nesting a JSON or YAML value may have (lists and mappings inside each other)."""


def too_deep(where: str) -> ProbeInputError:
    """The one-line error for a value nested past `MAX_DEPTH`."""
    return ProbeInputError(f"{where}: nested more than {MAX_DEPTH} levels deep; not a file or value probe wrote or "
                           "reads (check it, or restore it from a copy)")


def check_depth(value: Any, where: str) -> Any:
    """`value` if it nests at most `MAX_DEPTH` lists and mappings deep (walked without recursion),
    else `too_deep`.

    Each container is walked once, at the greatest depth it was met at so far: YAML aliases share
    one object, so an alias bomb (nine aliases of nine aliases, ten levels: 9**10 leaves in 1 KB)
    costs its few distinct nodes, not its billions of paths."""
    deepest: dict[int, int] = {}
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (list, tuple, dict)):
            if depth >= MAX_DEPTH:
                raise too_deep(where)
            if deepest.get(id(node), -1) >= depth:
                continue  # seen at this depth or deeper: its children are already bounded
            deepest[id(node)] = depth
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return value


def loads_json(text: str | bytes, where: str,
               object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:
    """`json.loads(text)` bounded to `MAX_DEPTH` (the C parser's own recursion guard first, then
    the value's depth); a `json.JSONDecodeError` is the caller's to word."""
    try:
        value = json.loads(text, object_pairs_hook=object_pairs_hook)
    except RecursionError:
        raise too_deep(where) from None
    return check_depth(value, where)


@functools.cache
def depth_limited_loader() -> type[Any]:
    """PyYAML's safe loader composing at most `MAX_DEPTH` nested nodes (its composer recurses once
    per level: unbounded, a deep flow sequence is a `RecursionError`). Built on first use: only a
    reader of YAML imports PyYAML."""
    import yaml

    class DepthLimitedLoader(yaml.SafeLoader):
        where = "YAML"
        _depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self._depth += 1
            try:
                if self._depth > MAX_DEPTH:
                    raise too_deep(self.where)
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    return DepthLimitedLoader


def loads_yaml(text: str, where: str, loader: type[Any] | None = None) -> Any:
    """`yaml.load(text)` with `loader` (a subclass of `depth_limited_loader()`; default that one),
    bounded to `MAX_DEPTH` and naming `where` in its error; a `yaml.YAMLError` is the caller's to word."""
    import yaml

    bounded = type("Bounded", (loader or depth_limited_loader(),), {"where": where})
    try:
        return check_depth(yaml.load(text, Loader=bounded), where)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:  # a constructor's own recursion (aliases nesting deeply)
        raise too_deep(where) from None


def read_text_bounded(path: Path, limit: int) -> str:
    """The UTF-8 text of `path`, refused (one line) above `limit` bytes, read no further than that."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ProbeInputError(f"{path}: more than the {limit} bytes such a file may hold; not a file probe wrote")
    return data.decode("utf-8")
