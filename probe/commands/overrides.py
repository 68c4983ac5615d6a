"""The `key=value` overrides of `python -m probe`, checked against the config tree before Hydra
reads them.

Hydra answers a misspelt key (`bench.limt=3`) with a multi-line "not in struct" and exit
status 1, advising `+bench.limt=3`, which would only move the error to the typed config. Here
every key is looked up in the blocks the command line selects (every entry of a `-m` sweep
over `bench=a,b`), and an unknown one stops with one line naming the nearest valid key, exit 2.

A key the block's spec reads but its YAML entry does not set (`model.quantization=4bit` on a
model entry that leaves it at the default) is valid: it is passed on as `++key=value`, which
Hydra adds or overwrites. `+`/`++`/`~` overrides and Hydra's own `hydra.*` keys are Hydra's.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hydra._internal.utils import get_args_parser
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Glob, Override, OverrideType
from hydra.errors import OverrideParseException

from probe.config import nearest
from probe.commands.conftree import GROUPS, Composed, compose_tree, groups, options, spec_keys
from probe.benches.registry import get_task
from probe.errors import ProbeInputError
from probe.judges.registry import judge_choices, judge_names


@dataclass(frozen=True)
class Selection:
    """One combination of group entries a command line runs (a `-m` sweep runs several)."""

    overrides: tuple[str, ...]
    """`group=entry` for each group the command line names."""
    composed: Composed


@dataclass(frozen=True)
class Checked:
    """A command line whose keys all exist."""

    argv: list[str]
    """The command line to hand to Hydra (spec keys an entry leaves unset as `++key=value`)."""
    first: Composed | None
    """The config of its first selection (of a sweep's), group entries only; None when the
    command line is not checked (another config tree, or a line Hydra's grammar rejects)."""


RENAMED_KEYS: Mapping[str, str] = {"intervention.culture": "intervention.group"}
"""Keys a release renamed: the old name is still read, as the new one, with a one-line notice."""


def renamed(argv: Sequence[str]) -> list[str]:
    """`argv` with each renamed key (`RENAMED_KEYS`) written under its new name, saying so once per key."""
    out = []
    for arg in argv:
        sign = arg[:len(arg) - len(arg.lstrip("+~"))]
        key, eq, value = arg[len(sign):].partition("=")
        if key in RENAMED_KEYS:
            print(f"probe: note: {key} is now {RENAMED_KEYS[key]}; read as {RENAMED_KEYS[key]}{eq}{value}",
                  file=sys.stderr)
            arg = f"{sign}{RENAMED_KEYS[key]}{eq}{value}"
        out.append(arg)
    return out


def check(argv: Sequence[str]) -> Checked:
    """`argv` with renamed keys under their new names and every override of a key its spec reads
    but its entry leaves unset turned into `++key=value`; raises `ProbeInputError` for a key no
    selected block has."""
    argv = renamed(argv)
    args = get_args_parser().parse_args(list(argv))
    if args.config_name or args.config_dir or args.config_path or args.experimental_rerun:
        return Checked(list(argv), None)  # another config tree than probe's: nothing here describes it
    try:
        parsed = OverridesParser.create().parse_overrides(list(args.overrides))
    except OverrideParseException:
        raise ProbeInputError(_unreadable(list(args.overrides))) from None
    searchpath = [o.input_line for o in parsed if o.key_or_group == "hydra.searchpath" and o.input_line]
    names = set(groups())
    chosen = [o for o in parsed if _plain(o) and o.key_or_group in names]
    keys = [o for o in parsed if _plain(o) and o.key_or_group not in names
            and o.key_or_group.replace("/", ".").split(".")[0] != "hydra"]  # hydra.run.dir, hydra/launcher
    added: set[str] = set()
    _judge_entries(chosen, searchpath)
    selections = _selections(chosen, searchpath)
    for selection in selections:
        added |= {o.input_line for o in keys if _needs_adding(o, selection, searchpath)}
    return Checked([f"++{a}" if a in added else a for a in argv], selections[0].composed if selections else None)


def _unreadable(overrides: Sequence[str]) -> str:
    """The one line for a command line Hydra's override grammar rejects: the first argument it
    cannot read, and `key=value` where it was written YAML's way (`bench.limit: 2`)."""
    parser = OverridesParser.create()
    for arg in overrides:
        try:
            parser.parse_overrides([arg])
        except OverrideParseException as e:
            key, colon, value = arg.partition(":")
            fix = (f"did you mean `{key.strip()}={value.strip()}`?" if colon and "=" not in arg
                   else f"{str(e).splitlines()[0]}")
            return f"{arg!r}: not an override of the form key=value; {fix} (see probe --help)"
    return f"cannot read the overrides {list(overrides)} (see probe --help)"


def _plain(o: Override) -> bool:
    """A `key=value` (or `group=entry`) override, not `+`, `++`, `~` nor `group@package=`."""
    return o.type == OverrideType.CHANGE and o.package is None


def _selections(chosen: Sequence[Override], searchpath: Sequence[str]) -> list[Selection]:
    """Every combination of the entries the group overrides name (sweeps expanded)."""
    per_group = [[f"{o.key_or_group}={e}" for e in _entries(o)] for o in chosen]
    out = []
    for combo in itertools.product(*per_group):
        out.append(Selection(tuple(combo), compose_tree(combo, searchpath)))
    return out


def _judge_entries(chosen: Sequence[Override], searchpath: Sequence[str]) -> None:
    """A `judge=` entry the tree lacks is refused with the options that select the judges of the
    bench it would judge (a bench's own judge has no entry: `judge.name=<name>` selects it)."""
    for o in (c for c in chosen if c.key_or_group == "judge"):
        missing = [e for e in _entries(o) if e != "null" and e not in options("judge")]
        if not missing or missing[0] in judge_names():
            continue  # a registered judge's name: the tree's own message says how to select it
        others = [f"{c.key_or_group}={_entries(c)[0]}" for c in chosen if c is not o]
        bench = compose_tree(others, searchpath).values.get("bench") or {}
        if "kind" not in bench:
            continue
        task = get_task(str(bench["kind"]), bench.get("module"))
        task = task.for_mode(bench.get("mode"))
        if task.judging.judges:
            raise ProbeInputError(f"judge={missing[0]}: no such judge; {task.title}'s judges: "
                                  f"{judge_choices(task.judging.judges)} (probe ls judges)")


def _entries(o: Override) -> list[Any]:
    if not o.is_sweep_override():
        return ["null" if o.value() is None else o.value()]
    value = o.value()
    if isinstance(value, Glob):
        return list(value.filter(options(o.key_or_group)))
    return list(o.sweep_string_iterator())


def _needs_adding(o: Override, selection: Selection, searchpath: Sequence[str]) -> bool:
    """Whether `o`'s key is one its block's spec reads but the composed entry lacks (→ `++`);
    False when the key is there (or under a value Hydra will judge); an unknown key raises."""
    path = o.key_or_group.split(".")
    node: Any = selection.composed.values
    for depth, part in enumerate(path):
        if not isinstance(node, Mapping):
            return False  # below a null or a scalar: Hydra's own message says what is there
        if part not in node:
            break
        node = node[part]
    else:
        return False
    if depth == 1 and path[0] in selection.composed.values and part in spec_keys(path[0], node):
        return True
    raise ProbeInputError(_unknown(o, path[:depth + 1], node, selection, searchpath))


def _unknown(o: Override, path: list[str], node: Mapping[str, Any], selection: Selection,
             searchpath: Sequence[str]) -> str:
    """The one line for a key no selected block has: the nearest valid key, or the entry of the
    same group that has it."""
    *parent, key = path
    prefix = ".".join(parent)
    valid = [*node, *(spec_keys(prefix, node) if len(parent) == 1 else ())]
    if not parent:
        valid += [g for g in groups() if g not in valid]
    where = f"{prefix} ({selection.composed.choices[prefix]})" if prefix in selection.composed.choices else (
        prefix or "the config")
    close = nearest(key, sorted(set(valid)))
    owners = [] if parent else _groups_with(key, selection)
    if owners:  # a bare key that lives in a block: `limit` → `bench.limit`
        fix = f"did you mean {' or '.join(f'`{g}.{key}`' for g in owners)}?"
    elif close:
        fix = f"did you mean `{'.'.join([*parent, close])}`?"
    else:
        other = _entry_with(prefix, key, selection, searchpath) if len(parent) == 1 else None
        fix = (f"it is a key of {prefix}={other}, not of {prefix}={selection.composed.choices[prefix]}" if other
               else f"valid keys: {sorted(set(valid))}")
    group = path[0] if len(path) > 1 else ""
    listing = f"probe ls {group}={selection.composed.choices[group]}" if group in GROUPS else "probe --help"
    return f"{o.input_line}: {where} has no key {key!r}; {fix} (every key: {listing})"


def _groups_with(key: str, selection: Selection) -> list[str]:
    """The selected blocks that have `key` (set by their entry, or read by their spec)."""
    values = selection.composed.values
    return [g for g, block in values.items() if isinstance(block, Mapping)
            and (key in block or (g in GROUPS and key in spec_keys(g, block)))]


def _entry_with(group: str, key: str, selection: Selection, searchpath: Sequence[str]) -> str | None:
    """Another entry of `group` whose block has `key` (`backend.gpu_memory_utilization` → vllm)."""
    if group not in GROUPS:
        return None
    others = [s for s in selection.overrides if not s.startswith(f"{group}=")]
    for entry in options(group):
        block = compose_tree([*others, f"{group}={entry}"], searchpath).values.get(group) or {}
        if key in block or key in spec_keys(group, block):
            return entry
    return None
