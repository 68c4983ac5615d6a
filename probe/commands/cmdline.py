"""The shape every probe command line shares: positional paths, then `key=value` overrides (values
read as YAML, as Hydra reads them: `0.5`, `true`, `[10,-1]`, `null`), `--help` on every command,
and one-line errors with exit status 2.

    python -m probe model=tiny bench=demo analysis.n_boot=200      # Hydra (the run itself)
    python -m probe analyze RUN_DIR analysis.temperature=0.5
    python -m probe report MULTIRUN_DIR [RUN_DIR …] out=reports/x
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from probe.config import describe_fields
from probe.errors import ProbeInputError, no_room, printable


@dataclass(frozen=True)
class Command:
    """A parsed command line."""

    paths: tuple[Path, ...]
    overrides: dict[str, Any]
    """`key=value` arguments, the key without its prefix (`analysis.temperature` → `temperature`)."""


def parse(argv: Sequence[str], prefix: str, flags: dict[str, str] | None = None) -> Command:
    """Split `argv` into paths and `prefix.key=value` overrides; `--flag VALUE` forms listed in
    `flags` (flag → key) are accepted as `key=VALUE`."""
    paths, overrides, args = [], {}, list(argv)
    while args:
        arg = args.pop(0)
        if arg in (flags or {}):
            if not args:
                raise ProbeInputError(f"{arg} needs a value")
            overrides[(flags or {})[arg]] = args.pop(0)
        elif "=" in arg and not arg.startswith(("/", ".")):
            key, _, value = arg.partition("=")
            if not key.startswith(prefix):
                raise ProbeInputError(f"expected overrides like {prefix}KEY=VALUE, got {arg!r}")
            try:
                overrides[key.removeprefix(prefix)] = yaml.safe_load(value) if value else ""
            except yaml.YAMLError as e:
                raise ProbeInputError(f"{key}: cannot read value {value!r} ({e.__class__.__name__})") from None
        elif arg.startswith("-"):
            raise ProbeInputError(f"unknown option {arg!r} (see --help)")
        else:
            paths.append(Path(arg))
    return Command(tuple(paths), overrides)


def options_help(cls: type, prefix: str) -> str:
    """One line per option of a config dataclass: key, type, default, meaning."""
    lines = []
    for name, typ, default, doc in describe_fields(cls):
        value = yaml.safe_dump(list(default) if isinstance(default, tuple) else default,
                               default_flow_style=True).strip().removesuffix("...").strip()
        lines.append(f"  {f'{prefix}{name}={value}':<28} {typ}. {doc}".rstrip())
    return "\n".join(lines)


def main(prog: str, usage: str, body: Callable[[list[str]], int], argv: Sequence[str] | None = None,
         allow_empty: bool = False) -> int:
    """Run `body(argv)` of the subcommand `prog`; `--help` (and no argument at all, unless
    `allow_empty`) prints `usage`; input errors print one line, `probe: error: …` whichever
    subcommand raised it, and return 2."""
    args = list(sys.argv[1:] if argv is None else argv)
    if (not args and not allow_empty) or "-h" in args or "--help" in args:
        print(usage)
        return 0 if args else 2
    try:
        return body(args)
    except ProbeInputError as e:
        print(f"probe: error: {printable(str(e))}", file=sys.stderr)  # one prefix for every subcommand
        return 2
    except OSError as e:
        if (short := no_room(e)) is None:
            raise
        print(f"probe: error: {printable(str(short))}", file=sys.stderr)
        return 2
